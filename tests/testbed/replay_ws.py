"""The WebSocket half of the replay (`kind: "websocket"` exchanges, `/pty/{id}/ws`).

:mod:`testbed.replay` sends a recorded upgrade request like any other; when the daemon answers
101 it hands the connection to :class:`WsClient`, which acts as the recorder did: it sends the
recorded client frames (masked with the recorded key ``37fa213d``, or unmasked where the
recording says ``masked: false``), each once the daemon has sent what the recorder had read
before it and the recorded time since then has passed; it answers a ping with its pong and a
close with a close (the recorder's ``auto`` frames), and ends the connection as the recorder did:
after its own close frame, up to 2 s for the daemon's close and then 0.3 s (1 s after a close
1002) for the daemon to close TCP, before it closes TCP itself.

:func:`compare_frames` compares the frames with the recording after the README's normalisation:
server text frames, close frames, pongs and replay frames exactly, in order (session ids
normalised); output per channel as one byte string (how it is cut into frames varies), where the
last bytes before an `exit` may be missing on either side (the daemon's exit-loss bug); and how
the connection ended: closed by the daemon, or left open until the recorder closed it.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EXIT_TAIL_MS",
    "Frame",
    "Progress",
    "WsClient",
    "compare_frames",
    "recorded_frames",
    "recorded_progress",
    "scripted",
]

MASK_KEY = bytes.fromhex("37fa213d")
OPCODES = {"continuation": 0, "text": 1, "binary": 2, "close": 8, "ping": 9, "pong": 10}
NAMES = {v: k for k, v in OPCODES.items()}
CLOSE_WAIT_S = 2.0  # the recorder waits this long for the daemon's close frame
EOF_WAIT_S = 0.3  # ... then this long for the daemon to close TCP
EOF_WAIT_PROTOCOL_S = 1.0  # ... or this long after a close 1002
EXIT_TAIL_MS = 60.0
"""Output that arrived this close before an `exit` frame may be missing on the other side."""
PROGRESS_TIMEOUT_S = 10.0

Progress = tuple[int, int, int]
"""What the daemon had sent: (frames other than output, stdout bytes, stderr bytes)."""


@dataclass
class Frame:
    """One frame (or TCP event) of a connection, recorded or live."""

    ms: float
    side: str  # "server" or "client"
    opcode: str = ""  # "" for an event
    payload: bytes | None = b""  # None: only its digest is known (the 1 MiB replay)
    fin: bool = True
    auto: bool = False
    masked: bool = True
    event: str = ""  # "eof", "tcp_close", an error text
    note: str = ""
    sha256: str = ""
    length: int = 0
    head: bytes = b""  # the first bytes of a payload known by its digest only

    @property
    def channel(self) -> int:
        """The pty type byte of a binary frame (-1 when none)."""
        if self.opcode != "binary" or not self.payload:
            return -1
        return self.payload[0]

    @property
    def is_output(self) -> bool:
        return self.side == "server" and self.channel in (1, 2)


def recorded_frames(ex: dict[str, Any]) -> list[Frame]:
    out: list[Frame] = []
    for f in ex.get("frames") or []:
        if "event" in f:
            out.append(
                Frame(float(f["ms"]), f["from"], event=str(f["event"]), note=f.get("note", ""))
            )
            continue
        payload: bytes | None = base64.b64decode(f["b64"]) if "b64" in f else None
        if payload is None and "sha256" not in f:
            payload = b""
        out.append(
            Frame(
                float(f["ms"]),
                f["from"],
                f["opcode"],
                payload,
                fin=bool(f.get("fin", True)),
                auto=bool(f.get("auto", False)),
                masked=bool(f.get("masked", True)),
                note=str(f.get("note", "")),
                sha256=str(f.get("sha256", "")),
                length=int(f.get("length", 0)),
                head=base64.b64decode(f.get("head_b64", "")),
            )
        )
    return out


def _step(p: Progress, f: Frame) -> Progress:
    if f.side != "server" or f.event:
        return p
    if f.is_output:
        assert f.payload is not None
        n = len(f.payload) - 1
        return (p[0], p[1] + n, p[2]) if f.channel == 1 else (p[0], p[1], p[2] + n)
    return (p[0] + 1, p[1], p[2])


def recorded_progress(
    frames: list[Frame], upto: int | None = None, ms: float | None = None
) -> tuple[Progress, float]:
    """What the daemon had sent before frame `upto` (or by `ms`), and when its last frame came
    (0.0: none yet)."""
    p: Progress = (0, 0, 0)
    last = 0.0
    for k, f in enumerate(frames):
        if upto is not None and k >= upto:
            break
        if ms is not None and f.ms > ms:
            break
        if f.side == "server" and not f.event:
            p, last = _step(p, f), f.ms
    return p, last


def scripted(frames: list[Frame]) -> list[tuple[int, Frame]]:
    """The recorder's own actions: client frames it was told to send, and a TCP drop that no
    close frame preceded (the later `tcp_close` is how it ends every connection)."""
    out: list[tuple[int, Frame]] = []
    closing = False
    for k, f in enumerate(frames):
        if f.opcode == "close":
            closing = True
        if f.side != "client" or f.auto:
            continue
        if f.event == "tcp_close" and closing:
            continue
        if f.event and f.event != "tcp_close":
            continue
        out.append((k, f))
    return out


class WsClient:
    """Replays one recorded WebSocket connection over an upgraded socket."""

    def __init__(self, sock: socket.socket, reader: Any, frames: list[Frame]) -> None:
        self.sock = sock
        self.rd = reader  # replay._Reader: the bytes after the 101, with their arrival times
        self.recorded = frames
        self.frames: list[Frame] = []
        self.cond = threading.Condition()
        self.progress: Progress = (0, 0, 0)
        self.reached_at = time.monotonic()  # when progress last grew
        self.server_close: int | None = None  # close code the daemon sent (0: no code)
        self.eof = False
        self.sent_close = False
        self.send_lock = threading.Lock()
        self.dropped = False

    # -- the daemon's frames ------------------------------------------------------------------
    def _read_frames(self) -> None:
        try:
            while True:
                b0, b1 = self.rd.exact(2)
                n = b1 & 0x7F
                if n == 126:
                    (n,) = struct.unpack("!H", self.rd.exact(2))
                elif n == 127:
                    (n,) = struct.unpack("!Q", self.rd.exact(8))
                if b1 & 0x80:
                    self.rd.exact(4)  # a server must not mask; keep reading anyway
                payload = self.rd.exact(n)
                f = Frame(
                    self.rd.arrived(),
                    "server",
                    NAMES.get(b0 & 0x0F, str(b0 & 0x0F)),
                    payload,
                    fin=bool(b0 & 0x80),
                )
                self._got(f)
                if f.opcode == "ping":
                    self._send(Frame(self.rd.ms(), "client", "pong", payload, auto=True))
                elif f.opcode == "close":
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 0
                    with self.cond:
                        self.server_close = code
                        self.cond.notify_all()
                    if not self.sent_close:
                        echo = payload[:2] if len(payload) >= 2 else b""
                        self._send(Frame(self.rd.ms(), "client", "close", echo, auto=True))
        except (EOFError, OSError) as exc:
            if not self.dropped:
                event = "eof" if isinstance(exc, EOFError) else f"{type(exc).__name__}: {exc}"
                self._got(Frame(self.rd.ms(), "server", event=event))
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def _got(self, f: Frame) -> None:
        with self.cond:
            self.frames.append(f)
            grown = _step(self.progress, f)
            if grown != self.progress:
                self.progress = grown
                self.reached_at = time.monotonic()
            self.cond.notify_all()

    def wait_progress(self, target: Progress, timeout: float = PROGRESS_TIMEOUT_S) -> float:
        """Waits until the daemon has sent `target`; returns when it had (monotonic)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not all(a >= b for a, b in zip(self.progress, target, strict=True)):
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    return time.monotonic()
                self.cond.wait(left)
            return self.reached_at

    # -- the recorder's frames ----------------------------------------------------------------
    def _send(self, f: Frame) -> None:
        payload = f.payload or b""
        b0 = (0x80 if f.fin else 0) | OPCODES[f.opcode]
        n = len(payload)
        mask = 0x80 if f.masked else 0
        if n < 126:
            head = struct.pack("!BB", b0, mask | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", b0, mask | 126, n)
        else:
            head = struct.pack("!BBQ", b0, mask | 127, n)
        if f.masked:
            keyed = (MASK_KEY * (n // 4 + 1))[:n]
            body = (
                (int.from_bytes(payload, "big") ^ int.from_bytes(keyed, "big")).to_bytes(n, "big")
                if n
                else b""
            )
            data = head + MASK_KEY + body
        else:
            data = head + payload
        with self.send_lock:
            if f.opcode == "close":
                if self.sent_close:
                    return
                self.sent_close = True
            try:
                self.sock.sendall(data)
            except OSError as exc:
                f = Frame(
                    f.ms,
                    f.side,
                    f.opcode,
                    f.payload,
                    f.fin,
                    f.auto,
                    f.masked,
                    event=f"send_error: {exc}",
                )
        with self.cond:
            self.frames.append(
                Frame(self.rd.ms(), "client", f.opcode, f.payload, f.fin, f.auto, f.masked, f.event)
            )

    def run(self, before_action: Callable[[int, Frame], None], close_timeout: float) -> None:
        """Every scripted action, each after `before_action` (the replay's waits), then the end."""
        threading.Thread(target=self._read_frames, daemon=True).start()
        for k, f in scripted(self.recorded):
            before_action(k, f)
            if f.event == "tcp_close":
                self.dropped = True
                with self.cond:
                    self.frames.append(Frame(self.rd.ms(), "client", event="tcp_close"))
                with _quiet():
                    self.sock.shutdown(socket.SHUT_RDWR)
                return
            self._send(f)
        self._end(close_timeout)

    def _end(self, close_timeout: float) -> None:
        with self.cond:
            limit = time.monotonic() + (CLOSE_WAIT_S if self.sent_close else close_timeout)
            while self.server_close is None and not self.eof and time.monotonic() < limit:
                self.cond.wait(limit - time.monotonic())
            wait = EOF_WAIT_PROTOCOL_S if self.server_close == 1002 else EOF_WAIT_S
            limit = time.monotonic() + wait
            while not self.eof and time.monotonic() < limit:
                self.cond.wait(limit - time.monotonic())
            if self.eof:
                return
            self.dropped = True
            self.frames.append(Frame(self.rd.ms(), "client", event="tcp_close"))
        with _quiet():
            self.sock.shutdown(socket.SHUT_RDWR)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Comparing


_SID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PTS = re.compile(rb"/dev/pts/[0-9]+")


def _norm(data: bytes) -> bytes:
    """Session ids and the terminal's `/dev/pts/<n>` vary (README)."""
    return _PTS.sub(b"/dev/pts/N", _SID.sub(b"<SID>", data))


@dataclass
class _Summary:
    events: list[str] = field(default_factory=list)
    output: dict[int, list[tuple[float, bytes]]] = field(default_factory=lambda: {1: [], 2: []})
    exit_ms: float | None = None
    last_input_ms: float = 0.0  # the recorder's last frame before `exit`
    before_connected: int = 0  # output bytes before the first text frame
    ending: str = ""


BIG = 256 * 1024  # the recordings keep only a digest of a payload over this


def _describe(f: Frame) -> str:
    """A server frame other than output, normalised (session ids), for an exact comparison."""
    payload = f.payload
    if f.opcode == "binary" and (payload is None or f.channel == 3):
        head = payload[:9] if payload is not None else f.head
        offset = struct.unpack("!Q", head[1:9])[0] if len(head) >= 9 else -1
        if payload is None or len(payload) > BIG:
            digest = f.sha256 if payload is None else hashlib.sha256(payload).hexdigest()
            size = (f.length if payload is None else len(payload)) - 9
            return f"replay {size} bytes at {offset}, sha256 {digest}"
        return f"replay at {offset}: {_norm(payload[9:])!r}"
    if f.opcode == "close":
        assert payload is not None
        if len(payload) < 2:
            return "close (no code)"
        reason = payload[2:].decode("utf-8", "replace")
        return f"close {struct.unpack('!H', payload[:2])[0]} {reason!r}"
    return f"{f.opcode} {_norm(payload or b'')!r}"


def _summary(frames: list[Frame]) -> _Summary:
    s = _Summary()
    seen_text = False
    for f in frames:
        if f.side == "server" and f.event:
            s.ending = "closed by the daemon"
        elif f.side == "client" and f.event == "tcp_close":
            s.ending = s.ending or "left open (the client closed TCP)"
        elif f.side != "server":
            if f.opcode and not f.auto and s.exit_ms is None:
                s.last_input_ms = f.ms
        elif f.is_output:
            assert f.payload is not None
            s.output[f.channel].append((f.ms, f.payload[1:]))
            if not seen_text:
                s.before_connected += len(f.payload) - 1
        else:
            if f.opcode == "text":
                seen_text = True
                if (f.payload or b"").startswith(b'{"type":"exit"'):
                    s.exit_ms = f.ms
            s.events.append(_describe(f))
    return s


def _output_matches(rec: _Summary, got: _Summary, channel: int) -> bool:
    """The output of one channel, equal, or but for the last bytes before `exit`: those that
    came after the recorder's last frame and within EXIT_TAIL_MS of the exit frame (on the side
    that has them), which the daemon loses at times (the README's exit-loss bytes)."""
    r = b"".join(_norm(d) for _, d in rec.output[channel])
    g = b"".join(_norm(d) for _, d in got.output[channel])
    if r == g:
        return True
    if rec.exit_ms is None or got.exit_ms is None:
        return False
    if len(r) == len(g):
        return False
    longer, shorter = (rec, g) if len(r) > len(g) else (got, r)
    assert longer.exit_ms is not None
    if not max(r, g, key=len).startswith(shorter):
        return False
    pos = 0
    for ms, data in longer.output[channel]:
        pos += len(_norm(data))
        if pos > len(shorter) and (ms < longer.exit_ms - EXIT_TAIL_MS or ms < longer.last_input_ms):
            return False
    return True


def _sighup_at_idle_prompt(rec_frames: list[Frame], live_frames: list[Frame]) -> list[Frame]:
    """The recording as it would be had bash not ended on the recorded SIGHUP frame.

    Interactive bash at an idle prompt ends on SIGHUP at once or only at the next key: a race in
    bash itself (notes, "Signal frames"). When the recording has a SIGHUP signal frame and an
    `exit` after it, and the live connection has no `exit`, the live one is compared with the
    recording up to the SIGHUP, then left open until the recorder closed it."""
    hup = next(
        (
            k
            for k, f in enumerate(rec_frames)
            if f.side == "client" and f.opcode == "text" and b'"SIGHUP"' in (f.payload or b"")
        ),
        None,
    )
    exit_live = any(
        (f.payload or b"").startswith(b'{"type":"exit"') for f in live_frames if f.side == "server"
    )
    if hup is None or exit_live:
        return rec_frames
    return [*rec_frames[: hup + 1], Frame(rec_frames[-1].ms, "client", event="tcp_close")]


def compare_frames(rec_frames: list[Frame], live_frames: list[Frame]) -> list[tuple[str, str, str]]:
    """Differences as (what, recorded, live)."""
    rec_frames = _sighup_at_idle_prompt(rec_frames, live_frames)
    rec, got = _summary(rec_frames), _summary(live_frames)
    out: list[tuple[str, str, str]] = []
    if rec.events != got.events:
        out.append(("ws frames", " | ".join(rec.events), " | ".join(got.events)))
    for channel, name in ((1, "stdout"), (2, "stderr")):
        if not _output_matches(rec, got, channel):
            r = b"".join(d for _, d in rec.output[channel])
            g = b"".join(d for _, d in got.output[channel])
            k = next((i for i in range(min(len(r), len(g))) if r[i] != g[i]), min(len(r), len(g)))
            out.append(
                (
                    f"ws output {name}",
                    f"{len(r)} bytes, from {k}: {r[k : k + 120]!r}",
                    f"{len(g)} bytes, from {k}: {g[k : k + 120]!r}",
                )
            )
    if rec.before_connected != got.before_connected:
        out.append(
            ("ws output before connected", str(rec.before_connected), str(got.before_connected))
        )
    if rec.ending != got.ending:
        out.append(("ws ending", rec.ending, got.ending))
    return out
