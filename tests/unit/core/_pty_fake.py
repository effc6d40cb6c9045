"""A fake of execd's `/pty` for offline tests: a real WebSocket server and a real `bash` in a
real pseudo-terminal, answering as the recorded daemons do (`tests/data/execd-recordings/`,
cases `pty_*`; docs in the notes' "Interactive terminal (`/pty`)").

- REST (`POST /pty`, `GET /pty/{id}`, `DELETE /pty/{id}`) is served in memory through
  `transport` (an `httpx.MockTransport` for the core's `ExecdClient`), the WebSocket
  (`GET /pty/{id}/ws`) by `websockets`' server on 127.0.0.1: one state behind both.
- The shell starts at the first connection, and again at a connection after it ended. Its end
  is its own exit (as execd's wait for its shell), not the terminal's last descriptor closing:
  what the terminal holds then is read, the terminal is closed (hanging up whatever still has it
  open, such as an interactive shell a killed session leader left behind), and `exit` is sent. A
  reconnection gets one replay frame (type 3, offset) before `connected`; `exit` is followed
  by close 1000 "process exited"; one client at a time (409 `ALREADY_CONNECTED`, or with
  `?takeover=1` on `generation="1.0.19"` the holder gets close 4001); unknown ids 404
  `CONTEXT_NOT_FOUND`; a `cwd` below a regular file is the daemon's 500 with a phantom id.
- `behind_proxy=True`: refusals (404, 409) as opensandbox-server's proxy relays them: the
  upgrade is accepted, then closed with 1008 and no reason.
- Faults: `exit_loss` ("late": output of the last 60 ms before an exit goes to the replay
  buffer only; "lost": nowhere), `silence` (seconds without a client text or binary frame
  before the server drops the connection), `drop()` (cut the holder's TCP connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import httpx
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint

TOKEN = "fake-execd-token-1234"
REPLAY_LIMIT = 1 << 20
LOSS_WINDOW = 0.06


class Outbox:
    """Frames for the holder, each sent at its due time (in order); None closes with 1000."""

    def __init__(self) -> None:
        self.frames: deque[tuple[float, bytes | str | None]] = deque()
        self.ready = asyncio.Event()

    def put(self, due: float, frame: bytes | str | None) -> None:
        self.frames.append((due, frame))
        self.ready.set()


@dataclass
class PtySession:
    id: str
    cwd: str | None
    replay: bytearray = field(default_factory=bytearray)
    offset: int = 0  # bytes produced so far (all runs)
    process: subprocess.Popen[bytes] | None = None
    master: int | None = None
    exit_watch: int | None = None  # a pidfd of `process`: readable once it has exited
    holder: ServerConnection | None = None
    queue: Outbox | None = None
    exits: list[int] = field(default_factory=list)
    kept_at_exit: list[bytes] = field(default_factory=list)  # the replay buffer at each exit

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None and self.master is not None


class FakePtyDaemon:
    def __init__(
        self,
        *,
        generation: Literal["1.0.19", "1.0.18"] = "1.0.19",
        exit_loss: Literal["never", "late", "lost"] = "never",
        silence: float = 60.0,
        behind_proxy: bool = False,
    ) -> None:
        self.generation = generation
        self.behind_proxy = behind_proxy  # refusals as opensandbox-server's proxy relays them
        self._refused: set[int] = set()
        self.exit_loss = exit_loss
        self.silence = silence
        self.sessions: dict[str, PtySession] = {}
        self.connections = 0
        self.takeovers = 0
        self.status_calls = 0
        self.server: Server | None = None
        self.transport = httpx.MockTransport(self._rest)
        self.port = 0

    async def __aenter__(self) -> FakePtyDaemon:
        self.server = await serve(
            self._handler, "127.0.0.1", 0, process_request=self._gate, compression=None
        )
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for session in self.sessions.values():
            self._kill(session)
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def endpoint(self) -> ExecdEndpoint:
        return ExecdEndpoint(f"http://127.0.0.1:{self.port}", {"X-EXECD-ACCESS-TOKEN": TOKEN})

    def client(self) -> ExecdClient:
        return ExecdClient(self.endpoint, transport=self.transport, request_timeout=5.0)

    # -- REST -------------------------------------------------------------------------------
    def _rest(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("X-EXECD-ACCESS-TOKEN") != TOKEN:
            return httpx.Response(401, json={"error": "Unauthorized"})
        parts = [p for p in request.url.path.split("/") if p]
        if parts == ["pty"] and request.method == "POST":
            body = json.loads(request.content or b"{}")
            return self._create(body.get("cwd") or None)
        session = self.sessions.get(parts[1]) if len(parts) == 2 else None
        if session is None:
            return _not_found(parts[1] if len(parts) > 1 else "")
        if request.method == "GET":
            self.status_calls += 1
            status = {"session_id": session.id, "running": session.running}
            return httpx.Response(200, json={**status, "output_offset": session.offset})
        self._kill(session)
        del self.sessions[session.id]
        return httpx.Response(200)

    def _create(self, cwd: str | None) -> httpx.Response:
        session_id = str(uuid.uuid4())
        if cwd is not None:
            try:
                os.makedirs(cwd, exist_ok=True)
            except OSError as exc:
                error = {
                    "code": "RUNTIME_ERROR",
                    "message": "error creating pty session: error creating PTY session work "
                    f"directory: mkdir {cwd}: {exc.strerror.lower()}",
                }
                phantom = json.dumps({"session_id": session_id})
                return httpx.Response(500, content=json.dumps(error) + phantom)
        self.sessions[session_id] = PtySession(session_id, cwd)
        return httpx.Response(201, json={"session_id": session_id})

    # -- the upgrade ------------------------------------------------------------------------
    def _gate(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.headers.get("X-EXECD-ACCESS-TOKEN") != TOKEN:
            return connection.respond(401, '{"error":"Unauthorized"}')
        parts = [p for p in urlsplit(request.path).path.split("/") if p]
        session = self.sessions.get(parts[1]) if len(parts) == 3 else None
        if session is None:
            return self._refuse(connection, _not_found(parts[1] if len(parts) > 1 else ""))
        query = parse_qs(urlsplit(request.path).query)
        if session.holder is not None:
            if self.generation == "1.0.19" and query.get("takeover") == ["1"]:
                self.takeovers += 1
                holder, session.holder = session.holder, None
                asyncio.get_running_loop().create_task(holder.close(4001, "TAKEN_OVER"))
                return None
            body = {
                "code": "ALREADY_CONNECTED",
                "message": f"another client is already connected to pty session {session.id}",
            }
            return self._refuse(connection, httpx.Response(409, json=body))
        return None

    def _refuse(self, connection: ServerConnection, answer: httpx.Response) -> Response | None:
        """The daemon's refusal; behind the server's proxy: 101, then close 1008, no reason."""
        if not self.behind_proxy:
            return connection.respond(answer.status_code, answer.text)
        self._refused.add(id(connection))
        return None

    async def _handler(self, connection: ServerConnection) -> None:
        assert connection.request is not None
        if id(connection) in self._refused:
            self._refused.discard(id(connection))
            await connection.close(1008)
            return
        url = urlsplit(connection.request.path)
        session = self.sessions[url.path.split("/")[2]]
        while session.holder is not None:  # a takeover: the holder is being closed
            await asyncio.sleep(0.01)
        self.connections += 1
        session.holder = connection
        since = parse_qs(url.query).get("since", [""])[0]
        if not session.running:
            self._start(session)
        start = session.offset - len(session.replay)
        first = int(since) if since.isdigit() else 0
        if first < session.offset and session.replay:
            first = max(first, start)
            data = bytes(session.replay[first - start :])
            await connection.send(b"\x03" + first.to_bytes(8, "big") + data)
        connected = {"type": "connected", "session_id": session.id, "mode": "pty"}
        await connection.send(json.dumps(connected) + "\n")
        queue = session.queue = Outbox()
        sender = asyncio.get_running_loop().create_task(self._sender(connection, queue))
        try:
            await self._receive(connection, session)
        finally:
            if session.holder is connection:
                session.holder = None
                session.queue = None
            sender.cancel()

    async def _receive(self, connection: ServerConnection, session: PtySession) -> None:
        while True:
            try:
                async with asyncio.timeout(self.silence):
                    message = await connection.recv()
            except TimeoutError:  # the daemon's silence rule: no frame from the client
                connection.transport.abort()
                return
            except Exception:
                return
            if session.master is None:
                continue
            if isinstance(message, bytes):
                if message[:1] == b"\x00":
                    os.write(session.master, message[1:])
                continue
            frame = json.loads(message)
            if frame.get("type") == "resize":
                size = struct.pack("HHHH", frame["rows"], frame["cols"], 0, 0)
                fcntl.ioctl(session.master, termios.TIOCSWINSZ, size)
            elif frame.get("type") == "ping":
                await connection.send('{"type":"pong"}\n')
            elif frame.get("type") == "stdin":
                os.write(session.master, frame["data"].encode())

    async def _sender(self, connection: ServerConnection, queue: Outbox) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            while True:
                await queue.ready.wait()
                if not queue.frames:
                    queue.ready.clear()
                    continue
                due, frame = queue.frames[0]
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not queue.frames or queue.frames[0][1] is not frame:
                    continue  # the exit dropped what was still waiting
                queue.frames.popleft()
                if frame is None:
                    await connection.close(1000, "process exited")
                    return
                await connection.send(frame)

    # -- the shell ---------------------------------------------------------------------------
    def _start(self, session: PtySession) -> None:
        master, slave = os.openpty()

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        session.process = subprocess.Popen(
            ["bash", "--norc", "--noprofile"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=session.cwd,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"},
            preexec_fn=controlling_tty,
        )
        os.close(slave)
        session.master = master
        loop = asyncio.get_running_loop()
        loop.add_reader(master, self._output, session)
        session.exit_watch = os.pidfd_open(session.process.pid)
        loop.add_reader(session.exit_watch, self._exited, session)

    def _output(self, session: PtySession) -> None:
        assert session.master is not None
        try:
            data = os.read(session.master, 65536)
        except OSError:
            data = b""
        if not data:  # no process holds the terminal: the end comes with the shell's exit
            asyncio.get_running_loop().remove_reader(session.master)
            return
        self._produced(session, data)

    def _exited(self, session: PtySession) -> None:
        """The shell has exited: what the terminal holds now is its last output; then the end."""
        master = session.master
        while master is not None and select.select([master], [], [], 0)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            self._produced(session, data)
        self._ended(session)

    def _produced(self, session: PtySession, data: bytes) -> None:
        session.offset += len(data)
        session.replay += data
        del session.replay[: max(0, len(session.replay) - REPLAY_LIMIT)]
        if session.queue is not None:
            delay = LOSS_WINDOW if self.exit_loss != "never" else 0.0
            session.queue.put(asyncio.get_running_loop().time() + delay, b"\x01" + data)

    def _ended(self, session: PtySession, *, code: int | None = None) -> None:
        loop = asyncio.get_running_loop()
        if session.exit_watch is not None:
            loop.remove_reader(session.exit_watch)
            os.close(session.exit_watch)
            session.exit_watch = None
        if session.master is not None:
            loop.remove_reader(session.master)
            os.close(session.master)
            session.master = None
        process = session.process
        if code is None and process is not None:
            status = process.wait()
            code = -1 if status < 0 else status
        session.exits.append(-1 if code is None else code)
        queue = session.queue
        if queue is not None and self.exit_loss != "never":  # the daemon's bug at an exit:
            late = [frame for _, frame in queue.frames if isinstance(frame, bytes)]
            queue.frames.clear()  # what still waits is not sent ...
            if self.exit_loss == "lost":  # ... nor kept
                lost = sum(len(frame) - 1 for frame in late)
                session.offset -= lost
                del session.replay[len(session.replay) - lost :]
        session.kept_at_exit.append(bytes(session.replay))
        if queue is None:
            return
        now = loop.time()
        exit_frame = json.dumps({"type": "exit", "exit_code": session.exits[-1]}) + "\n"
        queue.put(now, exit_frame)
        queue.put(now, None)

    def _kill(self, session: PtySession) -> None:
        process = session.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if session.master is not None:
            self._ended(session, code=-1)

    def drop(self, session_id: str) -> None:
        """Cut the holder's TCP connection (no close frame), as a network failure would."""
        holder = self.sessions[session_id].holder
        assert holder is not None
        holder.transport.abort()


def _not_found(session_id: str) -> httpx.Response:
    message = f"pty session {session_id} not found"
    return httpx.Response(404, json={"code": "CONTEXT_NOT_FOUND", "message": message})
