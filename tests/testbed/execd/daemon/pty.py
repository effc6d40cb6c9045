"""The interactive terminal, `/pty`: sessions, the shell each one runs (on a real pty, or on
pipes), and the WebSocket that drives it (README.md, "Interactive terminal").

`POST /pty` makes a session and starts nothing; `GET /pty/{id}/ws` upgrades (websocket.py), sends
the replay of the last 1 MiB from `?since=` and `connected`, and starts `bash --norc
--noprofile` (`-c <command>` on 1.0.19 and 1.1) when the session's shell is not running. One
client at a time (409 ALREADY_CONNECTED; 1.0.19 and 1.1 take over with `?takeover=1`).
`GET /pty/{id}` and `DELETE /pty/{id}`. The knobs (`config.PTY_*`): the keep-alive, the idle
rule and the real daemon's loss of output at exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
import uuid
from typing import TYPE_CHECKING

from . import config, websocket
from .goenc import ApiError, go_json, go_quote, path_error
from .gojson import GoJSONError, go_json_decode
from .gopath import go_expand_path, load_extra_env, mkdir_all
from .handler import q1
from .launch import shell
from .websocket import WS_BINARY, WS_PING, WsCloseReceived, WsConn, WsProtocolError

if TYPE_CHECKING:
    from .handler import Handler

PTY_SIGNALS = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
    "SIGKILL": signal.SIGKILL,
    "SIGQUIT": signal.SIGQUIT,
    "SIGHUP": signal.SIGHUP,
}
PTY_SESSIONS: dict[str, PtySession] = {}
PTY_LOCK = threading.Lock()


# -- routes ------------------------------------------------------------------------------------


def pty_create(h: Handler, q: dict) -> None:
    """POST /pty: 201 {"session_id"}; nothing starts. A cwd that cannot be made answers 500
    with the error object and then, in the same body, a session id that does not exist."""
    raw = h.read_body()
    fields: dict[str, object] = {"cwd": "string"}
    if config.PTY_COMMAND:
        fields["command"] = "string"
    req: dict = {}
    if raw.strip(b" \t\r\n"):
        try:
            value = go_json_decode(
                raw, ("struct", "CreatePTYSessionRequest", fields, "model.CreatePTYSessionRequest")
            )
        except GoJSONError as e:
            raise ApiError(400, "INVALID_REQUEST_BODY", f"error parsing request: {e}") from None
        req = value if isinstance(value, dict) else {}
    sid = str(uuid.uuid4())
    cwd = str(req.get("cwd") or "")
    error = ""
    if cwd:
        try:
            cwd = go_expand_path(cwd)
        except ValueError as e:
            error = f"error resolving PTY session work directory: {e}"
        else:
            try:
                mkdir_all(cwd, 0o755)
            except OSError as e:
                err = path_error("mkdir", e.filename or cwd, e)
                error = f"error creating PTY session work directory: {err}"
    if error:
        message = {"code": "RUNTIME_ERROR", "message": f"error creating pty session: {error}"}
        body = go_json(message) + go_json({"session_id": sid})
        h.send_response(500)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        return
    command = req.get("command") if config.PTY_COMMAND else None
    with PTY_LOCK:
        PTY_SESSIONS[sid] = PtySession(sid, cwd, str(command) if command else None)
    h.send_json(201, {"session_id": sid})


def pty_status(h: Handler, q: dict, sid: str) -> None:
    s = _pty_get(sid)
    with s.lock:
        body = {"session_id": sid, "running": s.running, "output_offset": s.total}
    h.send_json(200, body)


def pty_delete(h: Handler, q: dict, sid: str) -> None:
    """DELETE /pty/{id}: SIGKILL to the shell's group; a connected client then gets exit -1."""
    s = _pty_get(sid)
    with PTY_LOCK:
        PTY_SESSIONS.pop(sid, None)
    with s.lock:
        s.deleted = True
        run = s.run if s.running else None
    if run is not None:
        run.signal(signal.SIGKILL)
    h.send_ok()


def _go_parse_bool(text: str) -> bool:
    return text in ("1", "t", "T", "TRUE", "true", "True")


def _since(q: dict) -> int | None:
    text = q1(q, "since")
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if value >= 0 else None


def pty_ws(h: Handler, q: dict, sid: str) -> None:
    """GET /pty/{id}/ws: one client at a time (409 ALREADY_CONNECTED), v1.0.19's takeover."""
    s = _pty_get(sid)
    accept = websocket.accept_key(h)
    conn = PtyConn(h, s)
    evict: PtyConn | None = None
    with s.lock:
        if s.holder is None:
            s.holder = conn
        elif config.PTY_TAKEOVER and accept and _go_parse_bool(q1(q, "takeover")):
            evict = s.holder
        else:
            raise ApiError(
                409,
                "ALREADY_CONNECTED",
                f"another client is already connected to pty session {sid}",
            )
    if accept is None:
        s.release(conn)
        websocket.bad_request(h)
        return
    if not websocket.switch_protocols(h, accept):
        s.release(conn)
        return
    if evict is not None and not _pty_take_over(s, evict, conn):
        conn.drop_tcp()
        return
    threading.Thread(target=conn.keepalive, daemon=True).start()
    s.attach(conn, "pipe" if q1(q, "pty") == "0" else "pty", _since(q))
    _pty_serve(s, conn)


def _pty_take_over(s: PtySession, holder: PtyConn, conn: PtyConn) -> bool:
    """The holder gets close 4001 TAKEN_OVER and a TCP close; the newcomer retries the lock
    every PTY_RETRY_S (the gap in which another request can get it first, as upstream's)."""
    s.release(holder)
    holder.send_close(4001, "TAKEN_OVER")
    holder.drop_tcp()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        time.sleep(config.PTY_RETRY_S)
        with s.lock:
            if s.deleted:
                return False
            if s.holder is None:
                s.holder = conn
                return True
    return False


def _pty_serve(s: PtySession, conn: PtyConn) -> None:
    """The connection's frames until it ends; the session is free again at once."""
    try:
        for kind, data in conn.messages():
            run = s.run
            if run is None:
                continue
            if kind == WS_BINARY:
                if data[:1] == b"\x00" and len(data) > 1:
                    run.write(data[1:])
            else:
                _pty_text_frame(conn, run, data)
    except WsProtocolError as e:
        s.release(conn)
        conn.send_close(1002, str(e))
        conn.linger()
    except WsCloseReceived as e:
        s.release(conn)
        code = struct.unpack("!H", e.payload[:2])[0] if len(e.payload) >= 2 else None
        conn.send_close(code)
        conn.linger()
    except (EOFError, OSError, ValueError):
        s.release(conn)
    finally:
        conn.ended.set()


def _pty_text_frame(conn: PtyConn, run: PtyRun, data: bytes) -> None:
    """A JSON text frame; what Go's json.Unmarshal refuses is ignored without a word."""
    fields = {"type": "string", "data": "string", "cols": "uint32", "rows": "uint32"}
    fields["signal"] = "string"
    try:
        frame = go_json_decode(data, ("struct", "ptyFrame", fields, "pty.frame"), whole=True)
    except GoJSONError:
        return
    if not isinstance(frame, dict) or max(frame.get("cols", 0), frame.get("rows", 0)) > 0xFFFF:
        return  # not an object, or a size Go's uint16 cannot hold
    kind = str(frame.get("type") or "")
    if kind == "stdin":
        if frame.get("data"):
            run.write(str(frame["data"]).encode("utf-8"))
    elif kind == "resize":
        cols, rows = int(frame.get("cols") or 0), int(frame.get("rows") or 0)
        if cols > 0 and rows > 0:
            run.resize(cols, rows)
    elif kind == "signal":
        sig = PTY_SIGNALS.get(str(frame.get("signal") or ""))
        if sig is not None:
            run.signal(sig)
    elif kind == "ping":
        conn.send_json({"type": "pong"})
    else:
        conn.send_json(
            {
                "type": "error",
                "error": f"unknown frame type {go_quote(kind)}",
                "code": "INVALID_FRAME",
            }
        )


# -- a session, its shell and its client ---------------------------------------------------------


class PtyConn(WsConn):
    """A client's WebSocket holding (or waiting for) a session."""

    def __init__(self, h: Handler, session: PtySession) -> None:
        super().__init__(h)
        self.session = session
        self.ready = False  # replay and `connected` sent: output may go out live

    def send_output(self, channel: int, data: bytes) -> bool:
        return self.send_frame(WS_BINARY, bytes((channel,)) + data)

    def keepalive(self) -> None:
        """Pings every PTY_PING_S; ends the connection when no frame came for PTY_IDLE_S."""
        next_ping = time.monotonic() + config.PTY_PING_S
        while True:
            deadline = self.last_frame + config.PTY_IDLE_S
            now = time.monotonic()
            if self.ended.wait(max(0.0, min(next_ping, deadline) - now)):
                return
            now = time.monotonic()
            if now >= self.last_frame + config.PTY_IDLE_S:
                self.session.release(self)
                self.drop_tcp()
                return
            if now >= next_ping:
                self.send_frame(WS_PING, b"")
                next_ping = now + config.PTY_PING_S


class PtyRun:
    """One start of a session's shell: its process, its output readers, its exit."""

    def __init__(self, session: PtySession, mode: str) -> None:
        self.session = session
        self.mode = mode
        self.pid = 0
        self.master = -1  # pty mode: the terminal's master side (the stdin too)
        self.stdin: int = -1  # pipe mode
        self.exited = threading.Event()  # the process has exited (reaped)
        self.ended = False  # exit handled: later output is dropped
        self.readers: list[threading.Thread] = []
        self.pending: list[tuple[float, int, bytes]] = []  # `always`: output held back

    def start(self, cwd: str, command: str | None) -> None:
        argv = [shell(), "--norc", "--noprofile"] if shell() == "bash" else [shell()]
        if command is not None:
            argv += ["-c", command]
        env = dict(os.environ)
        env.update(load_extra_env())
        if self.mode == "pty":
            self._start_pty(argv, env, cwd)
        else:
            self._start_pipes(argv, env, cwd)
        threading.Thread(target=self._wait, daemon=True).start()
        if config.PTY_EXIT_LOSS == "always":
            threading.Thread(target=self._release_held, daemon=True).start()

    def _start_pty(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        winsize = struct.pack("HHHH", 24, 80, 0, 0)
        pid, master = os.forkpty()  # the child: a new session, the terminal as its ctty
        if pid == 0:  # pragma: no cover - the child, until exec
            try:
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                os.closerange(3, 65536)  # the daemon's sockets and other terminals
                fcntl.ioctl(0, termios.TIOCSWINSZ, winsize)
                if cwd:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, env)  # noqa: S606 - execd runs bash itself
            finally:
                os._exit(127)
        self.pid, self.master = pid, master
        self._reader(master, 1)

    def _start_pipes(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd or None,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdin and proc.stdout and proc.stderr
        self.pid = proc.pid
        self.stdin = os.dup(proc.stdin.fileno())
        out, err = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
        proc.returncode = 0  # reaped by _wait, not by Popen
        self._reader(out, 1)
        self._reader(err, 2)

    def _reader(self, fd: int, channel: int) -> None:
        t = threading.Thread(target=self._read_loop, args=(fd, channel), daemon=True)
        self.readers.append(t)
        t.start()

    def _read_loop(self, fd: int, channel: int) -> None:
        try:
            while not self.ended:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    if self.exited.is_set():
                        return  # nothing more on its way (`never` waits for this)
                    continue
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: no process holds the terminal open (now)
                    data = b""
                if not data:
                    return
                if config.PTY_EXIT_LOSS == "always":
                    with self.session.lock:
                        self.pending.append((time.monotonic(), channel, data))
                else:
                    self.session.output(self, channel, data)
        finally:
            # closing a pty's master hangs its terminal up: a process between closing its last
            # descriptor and exiting (coreutils `cat` closes 0, 1 and 2 itself) would die of
            # SIGHUP. So the master is closed once the process has exited.
            self.exited.wait()
            with contextlib.suppress(OSError):
                os.close(fd)

    def _release_held(self) -> None:
        """`always`: pass output on once it is PTY_EXIT_LOSS_MS old; what the exit finds held is
        dropped with it."""
        hold = config.PTY_EXIT_LOSS_MS / 1000.0
        while not self.ended:
            time.sleep(min(0.01, hold))
            with self.session.lock:
                now = time.monotonic()
                while self.pending and now - self.pending[0][0] >= hold and not self.ended:
                    _t, channel, data = self.pending.pop(0)
                    self.session.deliver(self, channel, data)

    def _wait(self) -> None:
        _pid, status = os.waitpid(self.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self.exited.set()
        if config.PTY_EXIT_LOSS == "never":
            for t in self.readers:
                t.join(5.0)
        self.session.exited(self, -1 if code < 0 else code)

    def write(self, data: bytes) -> None:
        fd = self.master if self.mode == "pty" else self.stdin
        with contextlib.suppress(OSError):
            while data and not self.exited.is_set():
                data = data[os.write(fd, data) :]

    def resize(self, cols: int, rows: int) -> None:
        if self.mode == "pty" and not self.exited.is_set():
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def signal(self, sig: int) -> None:
        if not self.exited.is_set():
            with contextlib.suppress(OSError):
                os.killpg(self.pid, sig)

    def close_stdin(self) -> None:
        if self.stdin >= 0:
            with contextlib.suppress(OSError):
                os.close(self.stdin)
            self.stdin = -1


class PtySession:
    """A /pty session: its settings, replay buffer, current shell and the client holding it."""

    def __init__(self, sid: str, cwd: str, command: str | None) -> None:
        self.id = sid
        self.cwd = cwd
        self.command = command
        self.lock = threading.RLock()
        self.buffer = bytearray()  # the last PTY_REPLAY_MAX bytes of output
        self.total = 0  # output_offset: every byte ever passed on
        self.run: PtyRun | None = None
        self.holder: PtyConn | None = None
        self.deleted = False

    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.ended

    def output(self, run: PtyRun, channel: int, data: bytes) -> None:
        with self.lock:
            self.deliver(run, channel, data)

    def deliver(self, run: PtyRun, channel: int, data: bytes) -> None:
        """Into the replay buffer and to the client, if any (the lock held)."""
        if run.ended or run is not self.run:
            return  # lost at exit (PTY_EXIT_LOSS)
        self.total += len(data)
        self.buffer += data
        if len(self.buffer) > config.PTY_REPLAY_MAX:
            del self.buffer[: len(self.buffer) - config.PTY_REPLAY_MAX]
        conn = self.holder
        if conn is not None and conn.ready:
            conn.send_output(channel, data)

    def exited(self, run: PtyRun, code: int) -> None:
        with self.lock:
            run.ended = True
            run.pending.clear()
            conn = self.holder if self.run is run else None
            if conn is not None:
                self.holder = None
        run.close_stdin()
        if conn is not None:
            conn.send_json({"type": "exit", "exit_code": code})
            conn.send_close(1000, "process exited")
            conn.drop_tcp()

    def release(self, conn: PtyConn) -> None:
        with self.lock:
            if self.holder is conn:
                self.holder = None

    def replay(self, since: int | None) -> tuple[int, bytes]:
        start = self.total - len(self.buffer)
        offset = start if since is None or since < start else since
        return offset, bytes(self.buffer[offset - start :])

    def attach(self, conn: PtyConn, mode: str, since: int | None) -> None:
        """Replay frame (if any), `connected`, then the shell (started if it is not running)."""
        with self.lock:
            offset, data = self.replay(since)
            if data:
                conn.send_frame(WS_BINARY, b"\x03" + struct.pack("!Q", offset) + data)
            if self.running:
                assert self.run is not None
                mode = self.run.mode  # fixed while that shell runs
            conn.send_json({"type": "connected", "session_id": self.id, "mode": mode})
            conn.ready = True
            if not self.running and not self.deleted:
                self.run = PtyRun(self, mode)
                self.run.start(self.cwd, self.command)


def _pty_get(sid: str) -> PtySession:
    with PTY_LOCK:
        s = PTY_SESSIONS.get(sid)
    if s is None or s.deleted:
        raise ApiError(404, "CONTEXT_NOT_FOUND", f"pty session {sid} not found")
    return s
