"""Replay the recorded exchanges with the real execd against the testbed daemon and compare.

`python -m testbed.replay --version v1.0.19 [--case GLOB] [--verbose]` (PYTHONPATH=tests).

The recordings (`tests/data/execd-recordings/`, see its README) hold every request a recorder
sent to the real execd and every response, byte for byte, with the arrival time of each chunk.
This module starts the daemon (`tests/testbed/execd/daemon`, as the zip application that the
execd image carries) in the matching profile, in the daemon context the recordings were made in
(env PATH and HOME only, cwd = HOME, uid 0, umask 022, the recorded access token, a private
`/tmp` that holds only the daemon's files and the `execd-rec` folder), sends each recorded
request again and compares the answers after normalising only what the README lists as varying
from run to run.

WebSocket exchanges (`kind: "websocket"`, the interactive terminal's `/pty/{id}/ws`) are sent the
same way; after a 101 the recorder's side of the connection is played by
:class:`testbed.replay_ws.WsClient` (the recorded client frames, masked with the recorded key,
each once the daemon has sent what the recorder had read before it) and compared by
:func:`testbed.replay_ws.compare_frames`. Anything recorded while a connection was open (a status
request, another connection, a client frame) waits until that connection has received what the
recorder had read of it by then: the recorded order of events is kept, not only their times.

One daemon serves a whole version, the cases in recorded order: later cases see what earlier ones
left behind (`tmp_dir_pileup` counts every earlier command's output files), so a run restricted
with `--case` reports differences in such cases that a full run does not have.

Timings are compared with a lopsided tolerance (see `EARLY_ABS_MS` below). A run whose only
differences are late timings replays those cases once more (:func:`replay_version` says why
that stays a real check) and prints that it did. Versions share nothing (each has its own
daemon, port and private `/tmp`), so they can be replayed at the same time in separate processes.

The private `/tmp` is a fresh directory bind-mounted over `/tmp` in a mount namespace of its own
(`unshare -m`, needs root or CAP_SYS_ADMIN); it lies on the same file system as the host's temp
dir (ext4 here and when recorded). Where that is impossible the replay is refused with the reason
(:class:`ReplayUnavailable`), never run against the shared `/tmp`.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import contextlib
import dataclasses
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed import _daemon, replay_ws

__all__ = [
    "DELIBERATE_DIFFERENCES",
    "PTY_EXIT_LOSS",
    "RECORDINGS",
    "VERSIONS",
    "Deliberate",
    "Difference",
    "Live",
    "ReplayUnavailable",
    "compare_case",
    "excused",
    "load",
    "main",
    "replay_version",
]

RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "execd-recordings"
DAEMON = Path(__file__).resolve().parent / "execd" / "daemon"
"""The daemon package replayed by default (a single-file daemon may be given instead)."""
VERSIONS = {"v1.0.19": "1.0.19", "v1.0.18": "1.0.18"}
"""Recorded daemon version -> the testbed daemon's profile that must answer like it."""

PTY_EXIT_LOSS = "never"
"""The daemon's OSB_EXECD_PTY_EXIT_LOSS in the replay. Whether the real daemon lost the last
bytes before a shell's exit varies from run to run (README); the replay runs the daemon with the
loss off, so that each run compares the same thing, and the comparison accepts a recording that
lost them (:func:`replay_ws.compare_frames`). The default (`race`) and `always` are tested by
tests/unit/test_execd_daemon.py."""

# Timing tolerance, lopsided: a busy host only ever delays the daemon, so being early (faster,
# kinder than the recording) is held tight, being late less so. A time t differs from the
# recorded r when t < r - (EARLY_ABS_MS + EARLY_REL * r) or t > r + (LATE_ABS_MS + LATE_REL * r).
EARLY_ABS_MS = 25.0
EARLY_REL = 0.10
LATE_ABS_MS = 150.0
LATE_REL = 0.25
# Recorded output events closer than this belong to one poll of the daemon's output files.
POLL_GAP_MS = 40.0
SEND_TIMEOUT_S = 30.0


def default_signals() -> None:
    """Run in a daemon's child before exec: SIGINT and SIGQUIT back to their defaults.

    A shell without job control starts background commands with both ignored, and an ignored
    signal stays ignored through exec: the daemon, and every bash it starts, would inherit that
    from whoever ran the tests (`cmd &` in a script), and Ctrl-C in a terminal would kill
    nothing. The real daemons were recorded with the defaults (Ctrl-C ends `sleep` with 130).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class ReplayUnavailable(RuntimeError):
    """The replay cannot run here (no private /tmp possible); the message says why."""


@dataclass(frozen=True)
class Deliberate:
    """A difference from the recording that is known and kept on purpose."""

    version: str  # "v1.0.19", "v1.0.18" or "*"
    case: str
    exchange: int  # -1: any exchange of the case
    what: str  # prefix of Difference.what
    why: str


@dataclass(frozen=True)
class Difference:
    case: str
    exchange: int
    what: str  # e.g. "status", "header Content-Type", "event 3", "timing elapsed"
    recorded: str
    live: str
    late: bool = False  # the daemon was slower than recorded: a late timing or registration

    def __str__(self) -> str:
        return (
            f"{self.case}[{self.exchange}] {self.what}: recorded {self.recorded} / live {self.live}"
        )


DELIBERATE_DIFFERENCES: list[Deliberate] = []
"""Differences the testbed daemon keeps on purpose; never one that makes it kinder than the
recording (more successful, more exact, faster or more permissive). Each must still match."""


def excused(version: str, diff: Difference) -> Deliberate | None:
    for entry in DELIBERATE_DIFFERENCES:
        if (
            entry.version in ("*", version)
            and entry.case == diff.case
            and entry.exchange in (-1, diff.exchange)
            and diff.what.startswith(entry.what)
        ):
            return entry
    return None


# ---------------------------------------------------------------------------------------------
# Recordings


def load(version: str) -> dict[str, Any]:
    path = RECORDINGS / f"{version}.json"
    with path.open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _body(message: dict[str, Any]) -> bytes:
    """A recorded request's or response's body: `body_b64` when present, else `body_text`."""
    if "body_b64" in message:
        return base64.b64decode(message["body_b64"])
    return str(message.get("body_text", "")).encode("utf-8")


_request_body = _response_body = _body


def _recorded_chunks(resp: dict[str, Any]) -> list[tuple[float, bytes]]:
    if "chunks" in resp:
        return [(float(ms), base64.b64decode(b)) for ms, b in resp["chunks"]]
    if "chunk_spans" in resp:
        body = _response_body(resp)
        out: list[tuple[float, bytes]] = []
        pos = 0
        for ms, length in resp["chunk_spans"]:
            out.append((float(ms), body[pos : pos + int(length)]))
            pos += int(length)
        return out
    return []


# ---------------------------------------------------------------------------------------------
# What the live daemon answered


@dataclass
class Live:
    """One live exchange, in the recordings' terms."""

    status: int = 0
    reason: str = ""
    http_version: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    transfer: str = ""
    headers_ms: float = 0.0
    body: bytes = b""
    chunks: list[tuple[float, bytes]] | None = None
    elapsed_ms: float = 0.0
    at_ms: float = 0.0
    closed_by_client: bool = False
    error: str = ""
    frames: list[replay_ws.Frame] | None = None
    """A WebSocket exchange answered 101: every frame both ways, as the recordings list them."""
    gave_up: bool = False
    """The replay stopped waiting after the recording's `client_gave_up_s` (as the recorder)."""


class _Reader:
    """One response's bytes, received by a thread of its own that notes when each recv() came.

    A chunk's time is when its last byte arrived, however long parsing the ones before it takes
    (20,000 events arrive within ~0.2 s).
    """

    def __init__(self, sock: socket.socket, t0: float) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0
        self.t0 = t0
        self.eof = False
        self.cond = threading.Condition()
        self.marks: list[tuple[int, float]] = []  # (buffer length after a recv, ms)
        self._seen = 0
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 18)
            except OSError:
                data = b""
            now = self.ms()
            with self.cond:
                if not data:
                    self.eof = True
                    self.cond.notify_all()
                    return
                self.buf += data
                self.marks.append((len(self.buf), now))
                self.cond.notify_all()

    def _fill(self) -> bool:
        with self.cond:
            while len(self.buf) == self._seen and not self.eof:
                self.cond.wait()
            grew = len(self.buf) > self._seen
            self._seen = len(self.buf)
            return grew

    def arrived(self) -> float:
        """When the byte before `pos` arrived, ms since the request was written."""
        with self.cond:
            k = bisect.bisect_left(self.marks, self.pos, key=lambda m: m[0])
            return self.marks[min(k, len(self.marks) - 1)][1] if self.marks else self.ms()

    def line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                out = bytes(self.buf[self.pos : i])
                self.pos = i + 2
                return out
            if not self._fill():
                raise EOFError("connection closed inside a line")

    def exact(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n:
            if not self._fill():
                raise EOFError(f"connection closed after {len(self.buf) - self.pos} of {n} bytes")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def pending(self) -> bytes:
        return bytes(self.buf[self.pos :])

    def rest(self) -> bytes:
        while self._fill():
            pass
        out = self.pending()
        self.buf.clear()
        self.pos = 0
        return out

    def ms(self) -> float:
        return (time.monotonic() - self.t0) * 1000.0


def _exchange(
    port: int,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    *,
    close_after_chunks: int,
    on_chunk: Any,
    upgrade: Any = None,
    give_up_s: float = 0.0,
    count_chunk: Any = None,
) -> Live:
    live = Live()
    sock = socket.create_connection(("127.0.0.1", port), timeout=SEND_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    timer: threading.Timer | None = None
    if give_up_s:
        # as the recorder: stop waiting after that long and close the connection

        def give_up() -> None:
            live.gave_up = True
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(give_up_s, give_up)
        timer.daemon = True
    try:
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1")
        for name, value in headers:
            head += f"{name}: {value}\r\n".encode("latin-1")
        t0 = time.monotonic()
        sock.sendall(head + b"\r\n" + body)
        if timer is not None:
            timer.start()
        rd = _Reader(sock, t0)
        try:
            status_line = rd.line().decode("latin-1")
        except EOFError as exc:
            live.error = f"no response: {exc}"
            live.elapsed_ms = rd.ms()
            return live
        version, _, rest = status_line.partition(" ")
        code, _, reason = rest.partition(" ")
        live.http_version, live.status, live.reason = version, int(code), reason
        while True:
            line = rd.line()
            if not line:
                break
            name, _, value = line.decode("latin-1").partition(":")
            live.headers.append((name, value.strip()))
        live.headers_ms = rd.ms()
        lower = {k.lower(): v for k, v in live.headers}
        no_body = method == "HEAD" or live.status in (204, 304) or 100 <= live.status < 200
        try:
            if live.status == 101 and upgrade is not None:
                live.transfer = "upgrade"
                live.frames = upgrade(sock, rd)
            elif no_body:
                live.transfer = "none"
            elif lower.get("transfer-encoding", "").lower() == "chunked":
                live.transfer = "chunked"
                live.chunks = []
                counted = 0
                while True:
                    size = int(rd.line().split(b";")[0], 16)
                    if size == 0:
                        with contextlib.suppress(EOFError):
                            while rd.line():
                                pass
                        break
                    data = rd.exact(size)
                    rd.exact(2)
                    live.chunks.append((rd.arrived(), data))
                    on_chunk(data)
                    if count_chunk is None or count_chunk(data):
                        counted += 1
                    if close_after_chunks and counted >= close_after_chunks:
                        live.closed_by_client = True
                        break
                live.body = b"".join(c for _, c in live.chunks)
            elif "content-length" in lower:
                live.transfer = "content-length"
                n = int(lower["content-length"])
                try:
                    live.body = rd.exact(n)
                except EOFError as exc:
                    live.body = rd.pending()
                    live.error = str(exc)
            else:
                live.transfer = "until-close"
                live.body = rd.rest()
        except (EOFError, OSError) as exc:
            live.error = live.error or str(exc)
        live.elapsed_ms = rd.ms()
        return live
    finally:
        if timer is not None:
            timer.cancel()
        sock.close()


# ---------------------------------------------------------------------------------------------
# The daemon in its recorded context


class _Daemon:
    def __init__(
        self,
        recording: dict[str, Any],
        profile: str,
        log_path: Path,
        daemon: Path,
        ctx: dict[str, Any] | None = None,
        jupyter: _JupyterSetup | None = None,
    ) -> None:
        """The daemon in the daemon context `ctx` (default: the recording's `daemon`). With
        `jupyter`, a Jupyter server started as the code interpreter run's (`code_run.jupyter`)
        beside it, in the same private `/tmp` and in a PID namespace of their own (the cases
        count kernel processes with `ps`)."""
        if shutil.which("unshare") is None:
            raise ReplayUnavailable("`unshare` (util-linux) is not installed; install util-linux.")
        ctx = ctx or recording["daemon"]
        hidden = Path(str(ctx["tmpdir"]))
        # The private /tmp hides the host's: a checkout or a venv under /tmp (a CI clone) would
        # vanish from under the daemon. So it runs from a copy outside /tmp, on the base
        # interpreter (the daemon needs the standard library only, not the venv).
        self.copy_dir = Path(tempfile.mkdtemp(prefix="execd-replay-", dir=_outside(hidden)))
        if daemon.is_dir():
            daemon = _daemon.build(self.copy_dir / "execd.pyz", daemon)
        else:
            copied = self.copy_dir / daemon.name
            shutil.copy2(daemon, copied)
            daemon = copied
        python = Path(getattr(sys, "_base_executable", "") or sys.executable).resolve()
        if hidden in python.parents:
            raise ReplayUnavailable(
                f"the interpreter {python} lies under {hidden}, which the replay hides behind a "
                "private directory; run the tests with a Python installed elsewhere."
            )
        self.token = str(ctx["access_token"])
        self.root = Path(tempfile.mkdtemp(prefix="execd-replay-"))
        os.chmod(self.root, 0o1777)  # noqa: S103 - it stands in for /tmp
        scratch = Path(str(ctx["scratch"]))
        home = Path(str(ctx["env"]["HOME"]))
        for inside in (scratch, home):
            (self.root / inside.relative_to(ctx["tmpdir"])).mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        env = {str(k): str(v) for k, v in ctx["env"].items()}
        env["OSB_EXECD_PROFILE"] = profile
        env["OSB_EXECD_PTY_EXIT_LOSS"] = PTY_EXIT_LOSS
        self.jupyter_port = 0
        unshare = ["unshare", "-m", "--propagation", "private"]
        jupyter_start = ""
        if jupyter is not None:
            # a port of its own (the versions replay at the same time), named in JUPYTER_HOST
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.jupyter_port = int(s.getsockname()[1])
            env["JUPYTER_HOST"] = f"http://127.0.0.1:{self.jupyter_port}"
            env.update(CODE_KNOBS)
            jupyter_start = jupyter.script(self.root, ctx, self.jupyter_port)
            unshare += ["-p", "--fork", "--mount-proc"]
        env_args = [f"{k}={v}" for k, v in env.items()]
        if jupyter_start:
            # sh stays as the namespace's first process: it passes SIGTERM on to both
            script = (
                f'{jupyter_start} mount --rbind "$1" "$2" || exit 97; '
                "(%s) & jpid=$!; "
                % jupyter.start_command(ctx, self.jupyter_port)
                + 'cd "$3" || exit 98; umask 022; shift 3; env -i "$@" & dpid=$!; '
                "trap 'kill -TERM $dpid $jpid 2>/dev/null' TERM INT; "
                "wait $dpid; kill -TERM $jpid 2>/dev/null; wait $jpid"
            )
        else:
            script = (
                'mount --bind "$1" "$2" || exit 97; cd "$3" || exit 98; umask 022; shift 3; '
                'exec env -i "$@"'
            )
        argv = [
            *unshare,
            "sh",
            "-c",
            script,
            "sh",
            str(self.root),
            str(ctx["tmpdir"]),
            str(ctx["cwd"]),
            *env_args,
            str(python),
            str(daemon),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--access-token",
            self.token,
        ]
        self.log = log_path.open("wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
            preexec_fn=default_signals,
        )
        self.listening_ms: float | None = None
        self.refused = 0

    def wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.flush()
                raise ReplayUnavailable(
                    f"the daemon exited with status {self.proc.returncode} before it listened "
                    "(a private /tmp needs root or CAP_SYS_ADMIN for `unshare -m`); "
                    f"its log {self.log.name} says why."
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            except OSError:
                self.refused += 1
                time.sleep(0.002)
                continue
            self.listening_ms = (time.monotonic() - self.started) * 1000.0
            return
        raise ReplayUnavailable(f"the daemon did not listen within {timeout:.0f} s.")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.copy_dir, ignore_errors=True)


CODE_KNOBS = {"OSB_EXECD_CODE_LATE_OUTPUT": "kept"}
"""The daemon's /code knobs in the replay (every other one at the real daemon's behaviour).
Whether the real daemon lost kernel output that came after the run's reply varies from run to
run (README); the replay keeps that output, so that each run compares the same thing, and the
comparison accepts a recording that lost it (:func:`_compare_code_stream`). Where
`execution_complete` falls is a race in the real daemon and in this one alike."""
JUPYTER_WAIT_S = 120.0


@dataclass
class _JupyterSetup:
    """The code interpreter run's Jupyter server (`code_run.jupyter`), from a host venv."""

    venv: Path
    run: dict[str, Any]

    def _inside(self, ctx: dict[str, Any]) -> tuple[Path, Path]:
        """Where the venv was mounted (`/tmp/execd-rec/jupyter`) and the server's directory."""
        return Path(str(self.run["argv"][0])).parents[1], Path(str(self.run["cwd"]))

    def script(self, root: Path, ctx: dict[str, Any], port: int) -> str:
        """Shell run before `/tmp` is replaced: the venv bound at its recorded place inside the
        private `/tmp` (tracebacks name files there), the server's directory made."""
        venv_at, workspace = self._inside(ctx)
        tmp = Path(str(ctx["tmpdir"]))
        (root / workspace.relative_to(tmp)).mkdir(parents=True, exist_ok=True)
        mount_point = root / venv_at.relative_to(tmp)
        mount_point.mkdir(parents=True, exist_ok=True)
        return f"mount --bind {shlex.quote(str(self.venv))} {shlex.quote(str(mount_point))} || exit 96;"

    def start_command(self, ctx: dict[str, Any], port: int) -> str:
        """The server as recorded (argv, directory, environment), on `port`; matplotlib's font
        cache is built first, as it was before the recorded server started."""
        _venv_at, workspace = self._inside(ctx)
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in self.run["env"].items())
        argv = [
            f"--port={port}" if str(a).startswith("--port=") else str(a) for a in self.run["argv"]
        ]
        python = shlex.quote(argv[0])
        return (
            f"cd {shlex.quote(str(workspace))} || exit 95; "
            f"env -i {env} {python} -c 'import matplotlib.pyplot' >/dev/null 2>&1; "
            f"exec env -i {env} {' '.join(shlex.quote(a) for a in argv)}"
        )

    def wait(self, port: int, token: str, proc: subprocess.Popen[bytes]) -> float:
        """Waits until the server answers its REST API; ms it took."""
        t0 = time.monotonic()
        url = f"http://127.0.0.1:{port}/api/kernelspecs"
        while time.monotonic() - t0 < JUPYTER_WAIT_S:
            if proc.poll() is not None:
                raise ReplayUnavailable("the daemon and its Jupyter server exited early")
            try:
                req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
                with urllib.request.urlopen(req, timeout=2) as resp:  # noqa: S310 - http to 127.0.0.1
                    if resp.status == 200:
                        return (time.monotonic() - t0) * 1000.0
            except OSError:
                pass
            time.sleep(0.2)
        raise ReplayUnavailable(f"the Jupyter server did not answer within {JUPYTER_WAIT_S:.0f} s")


def _outside(hidden: Path) -> str:
    """A writable directory for the daemon's copy that the private `hidden` dir does not cover."""
    for candidate in ("/var/tmp", "/dev/shm", str(Path.home()), "/run"):
        path = Path(candidate).resolve()
        covered = path == hidden or hidden in path.parents
        if path.is_dir() and os.access(path, os.W_OK) and not covered:
            return str(path)
    raise ReplayUnavailable(
        f"no writable directory outside {hidden} for a copy of the daemon (tried /var/tmp, "
        "/dev/shm, HOME, /run)."
    )


# ---------------------------------------------------------------------------------------------
# Sending one case


def _ids_in(data: bytes) -> list[str]:
    """Command/session ids a response hands out: `init` texts, `session_id` values and the
    code interpreter's context ids (`"id"` of a UUID)."""
    out: list[str] = []
    for m in re.finditer(rb'"type":"init","text":"([^"]+)"', data):
        out.append(m.group(1).decode())
    for m in re.finditer(rb'"session_id":"([^"]+)"', data):
        out.append(m.group(1).decode())
    for m in re.finditer(
        rb'"id":"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"', data
    ):
        out.append(m.group(1).decode())
    return out


@dataclass
class _Sched:
    index: int
    exchange: dict[str, Any]
    ids: list[tuple[str, int, float]]  # (recorded id, source exchange, recorded delay ms)


def _plan(case: dict[str, Any]) -> list[_Sched]:
    exchanges = case["exchanges"]
    id_source: dict[str, tuple[int, float]] = {}  # recorded id -> (exchange, arrival ms in case)
    plan: list[_Sched] = []
    for i, ex in enumerate(exchanges):
        req = ex["request"]
        text = req["target"].encode() + _request_body(req)
        ids = []
        for rid, (src, arrived) in id_source.items():
            if rid.encode() in text:
                ids.append((rid, src, float(ex["at_ms"]) - arrived))
        plan.append(_Sched(i, ex, ids))
        resp = ex["response"]
        chunks = _recorded_chunks(resp)
        if chunks:
            for ms, data in chunks:
                for rid in _ids_in(data):
                    id_source.setdefault(rid, (i, float(ex["at_ms"]) + ms))
        else:
            for rid in _ids_in(_response_body(resp)):
                id_source.setdefault(rid, (i, float(ex["at_ms"]) + float(ex["elapsed_ms"])))
    return plan


def _is_ping_or_complete(data: bytes) -> bool:
    head = data[:40]
    return b'"type":"ping"' in head or b'"type":"execution_complete"' in head


def _close_after(resp: dict[str, Any], code: bool = False) -> int:
    """How many chunks the recorder read before it hung up on purpose (0: it did not); of a
    code run: how many other than pings and `execution_complete` (whose place is a race)."""
    if not resp.get("closed_by_client"):
        return 0
    chunks = _recorded_chunks(resp)
    if code:
        return max(1, sum(1 for _ms, data in chunks if not _is_ping_or_complete(data)))
    return max(1, len(chunks))


def _run_case(daemon: _Daemon, case: dict[str, Any]) -> list[Live]:
    plan = _plan(case)
    n = len(plan)
    results: list[Live | None] = [None] * n
    done = [threading.Event() for _ in range(n)]
    end_at: list[float] = [0.0] * n
    id_map: dict[str, str] = {}
    id_arrival: dict[str, float] = {}
    id_cond = threading.Condition()
    exchanges = case["exchanges"]
    ws_frames = {
        i: replay_ws.recorded_frames(ex)
        for i, ex in enumerate(exchanges)
        if ex.get("kind") == "websocket"
    }
    ws_live: dict[int, replay_ws.WsClient] = {}
    ws_up = [threading.Event() for _ in range(n)]
    code = str(case["name"]).startswith("code_")
    # code runs: (content events so far, when the last came) of each recorded stream, and live
    stream_marks: dict[int, list[tuple[int, float]]] = {}
    for i, ex in enumerate(exchanges):
        marks: list[tuple[int, float]] = []
        for ms, data in _recorded_chunks(ex["response"]):
            if not _is_ping_or_complete(data):
                marks.append((len(marks) + 1, ms))
        if marks:
            stream_marks[i] = marks
    live_progress: list[tuple[int, float]] = [(0, 0.0)] * n
    progress_cond = threading.Condition()
    t_case = time.monotonic()

    def not_before(t_ms: float, me: int) -> float:
        """When something recorded at case time `t_ms` may happen (monotonic): after every
        exchange that had ended by then (plus the recorded gap), and after each connection that
        was open then has received what the recorder had read of it by then (plus the gap)."""
        start = t_case + t_ms / 1000.0
        for j, other in enumerate(exchanges):
            at_j = float(other["at_ms"])
            end_j = at_j + float(other["elapsed_ms"])
            if j == me or at_j > t_ms:
                continue
            if end_j <= t_ms + 0.05:
                done[j].wait(SEND_TIMEOUT_S * 4)
                start = max(start, end_at[j] + (t_ms - end_j) / 1000.0)
            elif j in ws_frames:
                target, last = replay_ws.recorded_progress(ws_frames[j], ms=t_ms - at_j)
                if target == (0, 0, 0) or not ws_up[j].wait(SEND_TIMEOUT_S) or j not in ws_live:
                    continue
                reached = ws_live[j].wait_progress(target)
                start = max(start, reached + (t_ms - at_j - last) / 1000.0)
            elif code and j in stream_marks:
                # a code run still streaming: wait until it has sent what the recorder had read
                # of it by then (a kernel is slower here or there; an interrupt must find the
                # code running, a busy run the context taken)
                marks = stream_marks[j]
                if not marks:
                    continue
                want, last = marks[-1]
                for k, (_n, ms) in enumerate(marks):
                    if at_j + ms > t_ms:
                        if k == 0:
                            want = 0
                        else:
                            want, last = marks[k - 1]
                        break
                if want == 0:
                    continue
                with progress_cond:
                    deadline = time.monotonic() + SEND_TIMEOUT_S
                    while live_progress[j][0] < want and not done[j].is_set():
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        progress_cond.wait(min(left, 0.1))
                    reached = live_progress[j][1] or time.monotonic()
                start = max(start, reached + (t_ms - at_j - last) / 1000.0)
        return start

    def _note_progress(index: int, data: bytes) -> None:
        if not code or _is_ping_or_complete(data):
            return
        with progress_cond:
            count, _t = live_progress[index]
            live_progress[index] = (count + 1, time.monotonic())
            progress_cond.notify_all()

    def pause_until(start: float) -> None:
        pause = start - time.monotonic()
        if pause > 0:
            time.sleep(pause)

    def websocket(i: int) -> Any:
        """The upgrade hook of exchange i: the recorder's side of the connection."""
        at_i = float(exchanges[i]["at_ms"])

        def run(sock: socket.socket, rd: _Reader) -> list[replay_ws.Frame]:
            client = replay_ws.WsClient(sock, rd, ws_frames[i])
            ws_live[i] = client
            ws_up[i].set()
            last_action = (float(exchanges[i]["response"].get("headers_ms", 0.0)), time.monotonic())

            def before(k: int, f: replay_ws.Frame) -> None:
                nonlocal last_action
                start = not_before(at_i + f.ms, i)
                target, last = replay_ws.recorded_progress(ws_frames[i], upto=k)
                reached = client.wait_progress(target)
                anchor_ms, anchor_t = max(last, last_action[0]), max(reached, last_action[1])
                pause_until(max(start, anchor_t + (f.ms - anchor_ms) / 1000.0))
                last_action = (f.ms, time.monotonic())

            # no close of its own to send: wait for the daemon's as long as the recorder did
            # after its last action, and 2 s more
            last_ms = max([f.ms for _k, f in replay_ws.scripted(ws_frames[i])], default=0.0)
            rest = (float(exchanges[i]["elapsed_ms"]) - last_ms) / 1000.0 + 2.0
            client.run(before, close_timeout=rest)
            return client.frames

        return run

    def worker(s: _Sched) -> None:
        ex = s.exchange
        req = ex["request"]
        start = not_before(float(ex["at_ms"]), s.index)
        subst: dict[str, str] = {}
        with id_cond:
            for rid, _src, delay in s.ids:
                deadline = time.monotonic() + SEND_TIMEOUT_S
                while rid not in id_map and time.monotonic() < deadline:
                    id_cond.wait(deadline - time.monotonic())
                if rid in id_map:
                    subst[rid] = id_map[rid]
                    start = max(start, id_arrival[rid] + delay / 1000.0)
        pause_until(start)
        target = str(req["target"])
        body = _request_body(req)
        headers = [(str(k), str(v)) for k, v in req["headers"]]
        for rid, lid in subst.items():
            target = target.replace(rid, lid)
            body = body.replace(rid.encode(), lid.encode())
            headers = [(k, v.replace(rid, lid)) for k, v in headers]
        seen: list[str] = []
        rec_ids = _ids_in(
            b"".join(c for _, c in _recorded_chunks(ex["response"]))
            or _response_body(ex["response"])
        )

        def on_chunk(data: bytes) -> None:
            _note_progress(s.index, data)
            if b'"init"' not in data[:16] and b'"session_id"' not in data and b'"id":"' not in data:
                return
            got = _ids_in(data)
            if not got:
                return
            now = time.monotonic()
            with id_cond:
                for lid in got:
                    k = len(seen)
                    seen.append(lid)
                    if k < len(rec_ids) and rec_ids[k] not in id_map:
                        id_map[rec_ids[k]] = lid
                        id_arrival[rec_ids[k]] = now
                id_cond.notify_all()

        at = (time.monotonic() - t_case) * 1000.0
        try:
            live = _exchange(
                daemon.port,
                str(req["method"]),
                target,
                headers,
                body,
                close_after_chunks=_close_after(ex["response"], code),
                count_chunk=(lambda data: not _is_ping_or_complete(data)) if code else None,
                on_chunk=on_chunk,
                upgrade=websocket(s.index) if s.index in ws_frames else None,
                give_up_s=float(ex["response"].get("client_gave_up_s") or 0),
            )
        except OSError as exc:
            live = Live(error=f"request failed: {exc}")
        finally:
            ws_up[s.index].set()  # never wait for a connection that did not come
        live.at_ms = at
        if live.chunks is None:
            on_chunk(live.body)
        results[s.index] = live
        end_at[s.index] = time.monotonic()
        done[s.index].set()

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SEND_TIMEOUT_S * 4)
    return [r if r is not None else Live(error="no answer in time") for r in results]


# ---------------------------------------------------------------------------------------------
# Normalising and comparing

# /metrics values (the machine's CPU count, load and memory) vary; their names and order do not
_METRIC = re.compile(r'"(cpu_count|cpu_used_pct|mem_total_mib|mem_used_mib)":-?[0-9][0-9.eE+-]*')
_TIME_FIELD = re.compile(r'"(started_at|finished_at|modified_at|created_at)":"[^"]*"')


def _split_array(text: str) -> list[str] | None:
    """The raw texts of a top-level JSON array's elements (None if the text is not an array)."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    out: list[str] = []
    depth, start, in_str, esc = 0, 1, False, False
    for k, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0 and k == len(text) - 1 and text[start:k]:
                out.append(text[start:k])
        elif ch == "," and depth == 1:
            out.append(text[start:k])
            start = k + 1
    return out


def _norm_raw(data: bytes) -> str:
    """The bytes as text with only the README's varying parts replaced (escaping kept as sent)."""
    text = data.decode("utf-8", "surrogateescape")
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<SID>", text)
    text = re.sub(r"[0-9a-f]{32}", "<ID>", text)
    text = re.sub(r'"timestamp":\d+', '"timestamp":0', text)
    text = _METRIC.sub(lambda m: f'"{m.group(1)}":<N>', text)
    text = re.sub(r'"execution_time":\d+,', "", text)
    text = _TIME_FIELD.sub(lambda m: f'"{m.group(1)}":"<TIME>"', text)
    text = re.sub(r"execd_bash_\d+", "execd_bash_N", text)
    text = re.sub(r"kill: \(\d+\)", "kill: (PID)", text)
    parts = _split_array(text)
    if parts is not None and any("<ID>" in p or "<SID>" in p for p in parts):
        # /tmp listings follow the random ids: order the entries once the ids are replaced
        text = "[" + ",".join(sorted(parts)) + "]"
    return text


def _event_of(data: bytes) -> tuple[str, str] | None:
    """(type, normalised raw text) of one stream chunk; None if it is not one JSON object."""
    bare = data[:-2] if data.endswith(b"\n\n") else data
    try:
        obj = json.loads(bare.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    return str(obj.get("type", "")), _norm_raw(data)


def _poll_groups(events: list[tuple[float, str, Any]]) -> list[tuple[float, str, Any]]:
    """Within one poll (events close in time) order stdout before stderr: tailed independently."""
    out: list[tuple[float, str, Any]] = []
    group: list[tuple[float, str, Any]] = []

    def flush() -> None:
        out.extend(sorted(group, key=lambda e: {"stdout": 0, "stderr": 1}.get(e[1], 2)))
        group.clear()

    last = None
    for ev in events:
        if ev[1] in ("stdout", "stderr"):
            if group and last is not None and ev[0] - last > POLL_GAP_MS:
                flush()
            group.append(ev)
            last = ev[0]
        else:
            flush()
            out.append(ev)
            last = None
    flush()
    return out


def _off(recorded: float, live: float) -> bool:
    """Whether `live` ms is too early or too late for `recorded` ms."""
    if live < recorded:
        return recorded - live > EARLY_ABS_MS + EARLY_REL * abs(recorded)
    return live - recorded > LATE_ABS_MS + LATE_REL * abs(recorded)


def _compare_stream(
    case: str, i: int, rec_chunks: list[tuple[float, bytes]], live: Live, rec_elapsed: float
) -> list[Difference]:
    diffs: list[Difference] = []
    live_chunks = live.chunks or []

    def parse(chunks: list[tuple[float, bytes]], side: str) -> list[tuple[float, str, Any]]:
        out = []
        for k, (ms, data) in enumerate(chunks):
            ev = _event_of(data)
            if ev is None:
                if side == "live":
                    diffs.append(Difference(case, i, f"chunk {k}", "one event", "not one event"))
                out.append((ms, "?", data.decode("utf-8", "replace")))
                continue
            out.append((ms, ev[0], ev[1]))
        return out

    rec = parse(rec_chunks, "recorded")
    got = parse(live_chunks, "live")
    rec_pings = [e for e in rec if e[1] == "ping"]
    got_pings = [e for e in got if e[1] == "ping"]
    # the first ping comes right after init
    if len(rec) > 1 and rec[1][1] == "ping" and not (len(got) > 1 and got[1][1] == "ping"):
        diffs.append(Difference(case, i, "ping after init", "event 1 is ping", "no ping there"))
    if len(rec_pings) != len(got_pings):
        last = rec[-1][0] if rec else 0.0
        near = last > 1000 and min(last % 3000.0, 3000.0 - last % 3000.0) < 150
        if not near or abs(len(rec_pings) - len(got_pings)) > 1:
            diffs.append(
                Difference(case, i, "ping count", str(len(rec_pings)), str(len(got_pings)))
            )
    rec_ev = _poll_groups([e for e in rec if e[1] != "ping"])
    got_ev = _poll_groups([e for e in got if e[1] != "ping"])
    shown = 0
    for k in range(max(len(rec_ev), len(got_ev))):
        r = rec_ev[k] if k < len(rec_ev) else None
        g = got_ev[k] if k < len(got_ev) else None
        if r is None or g is None or r[2] != g[2]:
            if shown < 5:
                diffs.append(
                    Difference(
                        case,
                        i,
                        f"event {k}",
                        "-" if r is None else _short(r[2]),
                        "-" if g is None else _short(g[2]),
                    )
                )
            shown += 1
    if shown > 5:
        diffs.append(Difference(case, i, "events", f"{len(rec_ev)} events", f"{shown} differ"))
    if shown == 0 and rec_ev:
        # poll grouping: when each group of output events (and the last event) arrives
        starts = [0] + [
            k for k in range(1, len(rec_ev)) if rec_ev[k][0] - rec_ev[k - 1][0] > POLL_GAP_MS
        ]
        for k in sorted({*starts, len(rec_ev) - 1}):
            if _off(rec_ev[k][0], got_ev[k][0]):
                diffs.append(
                    Difference(
                        case,
                        i,
                        f"timing event {k}",
                        f"{rec_ev[k][0]:.0f} ms",
                        f"{got_ev[k][0]:.0f} ms",
                        late=got_ev[k][0] > rec_ev[k][0],
                    )
                )
        if rec_chunks and live_chunks and not live.closed_by_client:
            hold_r = rec_elapsed - rec_chunks[-1][0]
            hold_g = live.elapsed_ms - live_chunks[-1][0]
            if _off(hold_r, hold_g):
                diffs.append(
                    Difference(
                        case,
                        i,
                        "timing hold",
                        f"{hold_r:.0f} ms",
                        f"{hold_g:.0f} ms",
                        late=hold_g > hold_r,
                    )
                )
    return diffs


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 300 else text[:300] + "..."


def _ctype(headers: list[tuple[str, str]]) -> str:
    for k, v in headers:
        if k.lower() == "content-type":
            return v
    return ""


def compare_exchange(case: str, i: int, ex: dict[str, Any], live: Live) -> list[Difference]:
    resp = ex["response"]
    if case.startswith("code_") and (
        resp.get("client_gave_up_s") or _code_run_id(_recorded_chunks(resp))
    ):
        return _compare_code_exchange(case, i, ex, live)
    diffs: list[Difference] = []

    def d(what: str, rec: object, got: object, late: bool = False) -> None:
        diffs.append(Difference(case, i, what, str(rec), str(got), late))

    if live.error and not resp.get("error"):
        d("connection", "complete", live.error)
    if live.status != resp["status"]:
        d("status", resp["status"], live.status)
        return diffs
    if live.reason != resp["reason"]:
        d("reason", resp["reason"], live.reason)
    if live.http_version != resp["http_version"]:
        d("http version", resp["http_version"], live.http_version)
    if live.transfer != resp["transfer"]:
        d("transfer", resp["transfer"], live.transfer)
    rec_h = [(str(k), str(v)) for k, v in resp["headers"]]
    got_h = [(k, v) for k, v in live.headers if k.lower() != "date"]
    if [k for k, _ in rec_h] != [k for k, _ in got_h]:
        d("header names", [k for k, _ in rec_h], [k for k, _ in got_h])
    rec_body = _response_body(resp)
    ctype = _ctype(rec_h)
    body_varies = bool(re.search(rb'"(timestamp|execution_time|[a-z]+_at)"', rec_body))
    got_by_name = {k.lower(): v for k, v in got_h}
    for k, v in rec_h:
        g = got_by_name.get(k.lower())
        if g is None:
            continue
        if k.lower() == "last-modified":
            continue
        if k.lower() == "content-length" and body_varies:
            if g != str(len(live.body)):
                d("header Content-Length", "the body's length", f"{g} for {len(live.body)} bytes")
            continue
        if _norm_raw(v.encode()) != _norm_raw(g.encode()):
            d(f"header {k}", v, g)
    if bool(resp.get("closed_by_client")) != live.closed_by_client:
        d("closed by client", bool(resp.get("closed_by_client")), live.closed_by_client)
    if ex.get("kind") == "websocket" and resp["status"] == 101:
        # frame cuts, their times and so the connection's length vary (README); what was sent,
        # in what order, and how the connection ended do not
        rec_frames = replay_ws.recorded_frames(ex)
        for what, rec, got in replay_ws.compare_frames(rec_frames, live.frames or []):
            d(what, rec, got)
    elif "text/event-stream" in ctype and resp["transfer"] == "chunked":
        found = _compare_stream(case, i, _recorded_chunks(resp), live, float(ex["elapsed_ms"]))
        if case.startswith("code_"):
            # a command beside the kernels (`ps`, `find`): when its output comes depends on
            # the kernels' load; its output and the hold after it do not
            found = [f for f in found if not f.what.startswith("timing event")]
        diffs += found
    else:
        rb, gb = _norm_raw(rec_body), _norm_raw(live.body)
        if rb != gb:
            d("body", _clip(rb), _clip(gb))
        rec_ms = float(ex["elapsed_ms"])
        jupyter_bound = case.startswith("code_") and rec_ms > JUPYTER_BOUND_MS
        waited = min(JUPYTER_EARLY_REL * rec_ms, JUPYTER_FLOOR_MS) - EARLY_ABS_MS
        if jupyter_bound and live.elapsed_ms >= waited:
            pass  # the Jupyter server's own time (kernels start and stop): it varies widely
        elif _off(rec_ms, live.elapsed_ms):
            d(
                "timing elapsed",
                f"{rec_ms:.0f} ms",
                f"{live.elapsed_ms:.0f} ms",
                late=live.elapsed_ms > rec_ms,
            )
    if bool(resp.get("error")) != bool(live.error):
        d("body error", resp.get("error") or "none", live.error or "none")
    return diffs


# -- the code interpreter's runs (`code_*` cases) -------------------------------------------------

_UUID = re.compile(
    rb'"type":"init","text":"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"'
)
_KERNEL_OUTPUT = {"stdout", "stderr", "status", "error", "execution_count", "result"}
JUPYTER_BOUND_MS = 10.0
JUPYTER_EARLY_REL = 0.2
JUPYTER_FLOOR_MS = 100.0
"""A code interpreter answer that took the real daemon longer than JUPYTER_BOUND_MS waited for
the Jupyter server (a context made or deleted: 20 ms to 5 s, and deleting bash contexts took
1.3 to 5.2 s in the recorded runs, README): any time from a fifth of the recorded one, or from
JUPYTER_FLOOR_MS when that is less, on is no difference (an answer that does not wait for
Jupyter, a few ms, is). The floor: the Jupyter server on another host stops a bash kernel in
well under a second where the recorded one took 2.8 s (CI, code_bash of v1.0.18). Quicker
answers (404s, lists, refusals) are timed as every other answer."""
CODE_HOLD_SLACK_MS = 500.0
"""How much longer than recorded a code stream may stay open after its last event (the kernel's
reply is polled every 100 ms; a loaded host adds some). A 1 s hold, as /command's, is caught."""


_DRAWS_LATE = {"code_rich_matplotlib"}


def _code_run_id(chunks: list[tuple[float, bytes]]) -> bool:
    """Whether a recorded stream is a run in a kernel (its init names a context, a UUID), not a
    shell command (a command id: framed as /command, compared as one)."""
    return bool(chunks) and bool(_UUID.search(chunks[0][1][:120]))


def _norm_code(data: bytes) -> str:
    """A code run's event with the README's varying parts replaced: besides ids and times, Python
    object addresses and the kernel's process id in its cell file names."""
    text = _norm_raw(data)
    text = re.sub(r"0x[0-9a-f]{6,16}", "0x?", text)
    return re.sub(r"ipykernel_\d+", "ipykernel_N", text)


def _code_events(chunks: list[tuple[float, bytes]]) -> list[tuple[float, str, str]]:
    """(ms, type, normalised text) of each chunk; the bare object of a refused run is `busy`."""
    out: list[tuple[float, str, str]] = []
    for ms, data in chunks:
        ev = _event_of(data)
        if ev is None:
            out.append((ms, "?", data.decode("utf-8", "replace")))
        elif not ev[0] and b'"code":"RUNTIME_ERROR"' in data and not data.endswith(b"\n\n"):
            out.append((ms, "busy", _norm_code(data)))
        else:
            out.append((ms, ev[0], _norm_code(data)))
    return out


_BASH_AFTER_INTERRUPT = re.compile(r"(exit\\n|Restarting Bash\\n|after-interrupt\\n)+")


def _bash_restart_ok(note: str, rec: list[str], got: list[str]) -> bool:
    """code_bash, the run after an interrupt: bash_kernel may restart bash and write its `exit`
    and `Restarting Bash` into that run, instead of (or before) the run's own output (README:
    "bash_kernel's exit and Restarting Bash after the interrupt into the next run")."""
    if "a run afterwards" not in note:
        return False

    def fits(events: list[str]) -> bool:
        texts = [
            m.group(1) if (m := _TEXT.search(e)) and '"type":"stdout"' in e else "" for e in events
        ]
        joined = "".join(texts)
        return (
            all(texts)
            and bool(_BASH_AFTER_INTERRUPT.fullmatch(joined))
            and ("after-interrupt" in joined or "Restarting Bash" in joined)
        )

    return fits(rec) and fits(got)


def _compare_code_exchange(case: str, i: int, ex: dict[str, Any], live: Live) -> list[Difference]:
    """A code run, or a request execd never answered, against the recording (README, "Fields
    that vary"): `execution_complete` anywhere after init (the real daemon's race), kernel
    output the recording lost at the end of a run present here, the output written into a run
    that hangs after a kernel death ignored; everything else as recorded."""
    resp = ex["response"]
    diffs: list[Difference] = []

    def d(what: str, rec: object, got: object) -> None:
        diffs.append(Difference(case, i, what, str(rec), str(got)))

    gave_up = float(resp.get("client_gave_up_s") or 0)
    if gave_up and not live.gave_up:
        d("gave up", f"no end within {gave_up:.0f} s", f"ended after {live.elapsed_ms:.0f} ms")
    if "status" not in resp:  # never answered
        if live.status:
            d("status", "no answer", live.status)
        return diffs
    if live.status != resp["status"]:
        d("status", resp["status"], live.status)
        return diffs
    rec_h = [str(k) for k, _v in resp["headers"]]
    got_h = [k for k, _v in live.headers if k.lower() != "date"]
    if rec_h != got_h:
        d("header names", rec_h, got_h)
    rec = _code_events(_recorded_chunks(resp))
    got = _code_events(live.chunks or [])
    if any(t == "?" for _ms, t, _x in got):
        d("chunks", "one event each", "a chunk that is not one event")
    # init first, the same
    if rec and rec[0][1] == "init" and (not got or got[0][2] != rec[0][2]):
        d("init", rec[0][2], got[0][2] if got else "-")
    busy = any(t == "busy" for _ms, t, _x in rec)
    if busy:
        # refused: init, maybe a ping (a race), the bare error object, nothing else
        want = [(t, x) for _ms, t, x in rec if t != "ping"]
        have = [(t, x) for _ms, t, x in got if t != "ping"]
        if want != have:
            d("busy answer", _short(want), _short(have))
        return diffs
    if len(rec) > 1 and rec[1][1] == "ping" and not (len(got) > 1 and got[1][1] == "ping"):
        d("ping after init", "event 1 is ping", "no ping there")
    # pings every 3 s: as many as the live stream's own length asks for
    pings = sum(1 for _ms, t, _x in got if t == "ping")
    span = live.elapsed_ms if live.gave_up or not got else got[-1][0]
    if got and abs(pings - (1 + int(span // 3000))) > 1:
        d("ping count", f"1 + one per 3 s of {span:.0f} ms", pings)
    completes = [k for k, (_ms, t, _x) in enumerate(got) if t == "execution_complete"]
    rec_completes = sum(1 for _ms, t, _x in rec if t == "execution_complete")
    # (a client that left, or a run that hangs after its kernel died: whether an idle came
    # first, Jupyter's nudge, is a race there)
    if len(completes) != rec_completes and not live.closed_by_client and not gave_up:
        d("execution_complete", f"{rec_completes} event(s)", f"{len(completes)}")
    rec_out = _merge_streams([(t, x) for _ms, t, x in rec if t in _KERNEL_OUTPUT])
    got_out = _merge_streams([(t, x) for _ms, t, x in got if t in _KERNEL_OUTPUT])
    if gave_up:
        # a run that hangs (kernel death): what the dying and the restarted kernel write into
        # it varies (README); no result or error may come
        rec_out = [x for x in rec_out if '"type":"std' not in x]
        got_out = [x for x in got_out if '"type":"std' not in x]
    lost_tail = got_out[len(rec_out) :]
    if got_out[: len(rec_out)] == rec_out and _lost_late(lost_tail):
        pass  # the recording lost output that came after the reply (README): here it is kept
    elif not (case == "code_bash" and _bash_restart_ok(str(ex.get("note", "")), rec_out, got_out)):
        shown = 0
        for k in range(max(len(rec_out), len(got_out))):
            r = rec_out[k] if k < len(rec_out) else "-"
            g = got_out[k] if k < len(got_out) else "-"
            if r != g and shown < 5:
                d(f"event {k}", _clip(r), _clip(g))
                shown += 1
    # no 1 s hold: the stream ends soon after its last event. Not where matplotlib's inline
    # backend draws the cell's figures after the reply (the display the daemon drops; with late
    # output kept the stream waits for the run's idle, after that drawing)
    if not gave_up and live.chunks and not live.closed_by_client and case not in _DRAWS_LATE:
        rec_chunks = _recorded_chunks(resp)
        hold_r = float(ex["elapsed_ms"]) - rec_chunks[-1][0] if rec_chunks else 0.0
        hold_g = live.elapsed_ms - live.chunks[-1][0]
        if hold_g > 2 * max(hold_r, 0.0) + CODE_HOLD_SLACK_MS:
            d("timing hold", f"{hold_r:.0f} ms", f"{hold_g:.0f} ms")
    return diffs


_TEXT = re.compile(r'"text":"((?:[^"\\]|\\.)*)"')


def _merge_streams(events: list[tuple[str, str]]) -> list[str]:
    """Consecutive stdout (or stderr) events as one: how the kernel cuts its output into stream
    messages follows its flush timer (a `print` may come as its text and then its newline on a
    loaded host); the text (as escaped on the wire), its order and its stream do not vary."""
    out: list[str] = []
    last = ""
    for kind, text in events:
        if kind in ("stdout", "stderr") and kind == last:
            m = _TEXT.search(text)
            prev = _TEXT.search(out[-1])
            if m and prev:
                joined = prev.group(1) + m.group(1)
                out[-1] = out[-1][: prev.start(1)] + joined + out[-1][prev.end(1) :]
                continue
        out.append(text)
        last = kind
    return out


def _lost_late(tail: list[str]) -> bool:
    """Whether `tail` is output a run's recording may lack: what came after the reply (stream
    text, and at most one result or one error), never more (README: "Output lost")."""
    if not tail:
        return True
    kinds = [re.match(r'\{"type":"([a-z_]+)"', x) for x in tail]
    names = [m.group(1) if m else "?" for m in kinds]
    rest = [n for n in names if n not in ("stdout", "stderr")]
    return rest in ([], ["execution_count", "result"], ["status", "error"])


def _clip(text: str, n: int = 400) -> str:
    return text if len(text) <= n else text[:n] + f"... ({len(text)} chars)"


def _race_ok(case: str, i: int, ex: dict[str, Any], live: Live) -> bool:
    """Race outcomes the README lists as varying: the other outcome is not a difference."""
    note = str(ex.get("note", ""))
    if case == "bg_registration_race" and "0 ms after init" in note:
        return live.status == 200
    return case == "bg_interrupt_race" and i == 1 and live.status == 200


def compare_case(case: dict[str, Any], lives: list[Live]) -> list[Difference]:
    name = str(case["name"])
    diffs: list[Difference] = []
    raced = False
    for i, (ex, live) in enumerate(zip(case["exchanges"], lives, strict=True)):
        if _race_ok(name, i, ex, live):
            if name == "bg_interrupt_race":
                raced = True  # the command was stopped: what follows differs by design
            continue
        if raced:
            continue
        found = compare_exchange(name, i, ex, live)
        if _registered_late(name, ex, live):
            found = [dataclasses.replace(d, late=True) for d in found]
        diffs += found
    return diffs


def _registered_late(case: str, ex: dict[str, Any], live: Live) -> bool:
    """A background command not yet registered (status 404, logs 400) where the recording found
    it: the daemon started the process later than execd did, which a busy host causes."""
    return (
        case == "bg_registration_race"
        and "ms after init" in str(ex.get("note", ""))
        and ex["response"]["status"] == 200
        and live.status in (404, 400)
    )


# ---------------------------------------------------------------------------------------------
# A whole version


@dataclass
class CaseResult:
    name: str
    exchanges: int
    differences: list[Difference]
    lives: list[Live]
    retried: list[Difference] = field(default_factory=list)
    """The first run's differences when the case was replayed once more (all of them late)."""


def _late_only(version: str, results: list[CaseResult]) -> bool:
    """Whether the run differs, and only by the daemon being late (never early or other)."""
    left = [d for r in results for d in r.differences if excused(version, d) is None]
    return bool(left) and all(d.late for d in left)


def _replay_cases(
    recording: dict[str, Any],
    version: str,
    cases: list[dict[str, Any]],
    log_path: Path,
    daemon: Path,
    info: dict[str, Any],
) -> list[CaseResult]:
    results: list[CaseResult] = []
    for ctx, with_jupyter, group in _groups(recording, cases):
        if not group:
            continue
        jupyter: _JupyterSetup | None = None
        if with_jupyter:
            try:
                jupyter = _JupyterSetup(_host_venv(), recording["code_run"]["jupyter"])
            except Exception as exc:  # no venv: each code case says why, the others still run
                why = f"no Jupyter server for the code cases: {exc}"
                results += [
                    CaseResult(
                        c["name"],
                        len(c["exchanges"]),
                        [Difference(c["name"], 0, "setup", "ran", why)],
                        [],
                    )
                    for c in group
                ]
                continue
        proc = _Daemon(recording, VERSIONS[version], log_path, daemon, ctx, jupyter)
        try:
            proc.wait_listening()
            info.setdefault("listening_after_ms", proc.listening_ms)
            if jupyter is not None:
                token = str(recording["code_run"]["jupyter"]["token"])
                info["jupyter_after_ms"] = jupyter.wait(proc.jupyter_port, token, proc.proc)
            for case in group:
                lives = _run_case(proc, case)
                results.append(
                    CaseResult(
                        case["name"], len(case["exchanges"]), compare_case(case, lives), lives
                    )
                )
        finally:
            proc.stop()
    return results


def _groups(
    recording: dict[str, Any], cases: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], bool, list[dict[str, Any]]]]:
    """Which daemon replays which cases, in recorded order: the cases before the code
    interpreter run in the recording's daemon context; the `code_*` cases, recorded in a run of
    their own, in `code_run`'s with its Jupyter server beside it; a case with a daemon of its own
    (`code_no_jupyter`: no Jupyter) in that one."""
    out: list[tuple[dict[str, Any], bool, list[dict[str, Any]]]] = []
    for case in cases:
        name = str(case["name"])
        if not name.startswith("code_"):
            key: tuple[dict[str, Any], bool] = (recording["daemon"], False)
        elif "daemon" in case:
            key = ({**recording["code_run"]["daemon"], **case["daemon"]}, False)
        else:
            key = (recording["code_run"]["daemon"], True)
        if out and out[-1][0] is key[0] and out[-1][1] == key[1] and "daemon" not in case:
            out[-1][2].append(case)
        else:
            out.append((key[0], key[1], [case]))
    return out


def _host_venv() -> Path:
    from testbed import _jupyter  # only the code cases need it

    return _jupyter.host_venv()


def replay_version(
    version: str,
    case_glob: str = "*",
    log_dir: Path | None = None,
    daemon: Path = DAEMON,
    retry: bool = True,
    code: bool | None = None,
) -> tuple[list[CaseResult], dict[str, Any]]:
    """Replay the cases of one recorded version (in order) against a fresh daemon.

    ``code`` picks a part: True only the ``code_*`` cases, False only the others, None both.
    The two parts were recorded with daemons of their own (see :func:`_groups`), so they can
    be replayed at the same time, in two processes.

    A loaded host (CI runs this on 2 cores, next to other work) can only ever delay the daemon
    and the replay's reading of it, never speed them up. So when the *only* differences of the
    whole run are late ones, the cases that have them are replayed once more and their second
    result is the one that counts; ``info["retried"]`` and :attr:`CaseResult.retried` say so
    and the CLI prints it. Late means a timing in which the daemon was slower than recorded,
    or a background command that `bg_registration_race` finds not yet registered where the
    recording found it (the daemon started the process later). This stays a real check:

    - being early (faster, kinder than the real execd) is never retried, and neither is any
      other difference: a run with one of those anywhere fails at once, so a retry never hides
      a wrong status, header, body or event, nor an early answer;
    - the tolerances are the same on the retry, there is one retry only, and the retried case
      must pass it entirely (every answer and every timing); a daemon that is really slow,
      such as a hold or a sleep longer than execd's, is late both times and fails;
    - the retry runs in the case's own context: a fresh daemon replays every case up to the
      last retried one in recorded order (the earlier ones only rebuild the state on disk and
      in `/tmp` that the recording had; their second results are not used).
    """
    recording = load(version)
    cases = [
        c
        for c in recording["cases"]
        if fnmatch.fnmatchcase(c["name"], case_glob)
        and (code is None or str(c["name"]).startswith("code_") == code)
    ]
    log_dir = log_dir or Path(tempfile.gettempdir())
    log_path = log_dir / f"execd-replay-{version}-{os.getpid()}.log"
    info: dict[str, Any] = {"log": str(log_path), "profile": VERSIONS[version], "retried": []}
    results = _replay_cases(recording, version, cases, log_path, daemon, info)
    logs = [log_path]
    if retry and _late_only(version, results):
        again = {r.name for r in results if any(excused(version, d) is None for d in r.differences)}
        last = max(k for k, c in enumerate(cases) if c["name"] in again)
        retry_log = log_dir / f"execd-replay-{version}-{os.getpid()}-retry.log"
        logs.append(retry_log)
        second = _replay_cases(recording, version, cases[: last + 1], retry_log, daemon, {})
        for k, r in enumerate(second):
            if r.name in again:
                first = results[k]
                results[k] = CaseResult(
                    r.name,
                    r.exchanges,
                    r.differences,
                    r.lives,
                    [d for d in first.differences if excused(version, d) is None],
                )
        info["retried"] = sorted(again)
        info["log"] = f"{log_path} (retry: {retry_log})"
    if not any(r.differences for r in results):
        for path in logs:
            path.unlink(missing_ok=True)  # nothing to look into
        info["log"] = "(removed: no differences)"
    return results, info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.replay", description=__doc__)
    ap.add_argument("--version", choices=sorted(VERSIONS), default="v1.0.19")
    ap.add_argument("--case", default="*", help="fnmatch pattern of case names (default: all)")
    ap.add_argument("--verbose", action="store_true", help="print every difference")
    ap.add_argument("--all", action="store_true", help="also print differences the table excuses")
    ap.add_argument(
        "--daemon",
        type=Path,
        default=DAEMON,
        help="the daemon package (or one file) to replay against",
    )
    args = ap.parse_args(argv)
    try:
        results, info = replay_version(args.version, args.case, daemon=args.daemon)
    except ReplayUnavailable as exc:
        print(f"replay not possible: {exc}", file=sys.stderr)
        return 2
    total_ex = sum(r.exchanges for r in results)
    bad_ex = 0
    bad_cases = 0
    for r in results:
        real = [x for x in r.differences if excused(args.version, x) is None]
        shown = r.differences if args.all else real
        idx = {x.exchange for x in real}
        bad_ex += len(idx)
        bad_cases += bool(real)
        mark = "ok  " if not real else "DIFF"
        again = " (replayed once more: late on the first run)" if r.retried else ""
        print(f"{mark} {r.name}: {len(idx)} of {r.exchanges} exchanges differ{again}")
        for x in r.retried:
            print(f"       first run: {x}")
        if shown and (args.verbose or len(shown) <= 6):
            for x in shown:
                tag = " (deliberate)" if excused(args.version, x) else ""
                print(f"       {x}{tag}")
        elif shown:
            for x in shown[:6]:
                print(f"       {x}")
            print(f"       ... {len(shown) - 6} more (--verbose)")
    retried = info["retried"]
    print(
        f"{args.version} (profile {info['profile']}): {bad_ex} of {total_ex} exchanges differ "
        f"in {bad_cases} of {len(results)} cases"
        + (
            f"; replayed once more (late only on the first run): {', '.join(retried)}"
            if retried
            else ""
        )
        + f"; daemon log {info['log']}"
    )
    return 1 if bad_ex else 0


if __name__ == "__main__":
    sys.exit(main())
