"""One terminal's WebSocket to execd: the handshake, the frames it reads, keep-alive.

The WebSocket protocol is the `websockets` library's (its asyncio client), not this module's.
Chosen over httpx-ws (a WebSocket on top of the core's httpx) because:

- it brings what a long-lived interactive connection needs and httpx does not: pings that find
  a dead connection, a close handshake with a timeout (execd leaves TCP open after a client's
  close frame), flow control (a client that stops reading stops the daemon's sends instead of
  buffering without end) and a message size limit (execd's replay frame is 1 MiB);
- httpx-ws needs the network stream of the connection it upgrades, which a transport the
  caller passes in (`Connection.transport`: a mock, an ASGI app, a wrapper) need not have;
- it is what opensandbox-server's own proxy relays WebSocket upgrades with.

It is made to behave like the core's httpx client to execd: the same URL and headers (direct or
through the server's proxy, from `ExecdEndpoint`), TLS verified as httpx verifies it
(`httpx.create_ssl_context()`: certifi's roots, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), and no
proxy from the environment (the core's execd client uses its own transport, which reads none).

A `Link` is one connection at a time; the terminal (`_handle`) opens a new one, with `since=`
its byte offset, when one drops. The link counts every output byte it passes on (`offset`, the
position in the terminal's output that execd's `since=` and replay frames use), so a replay
never repeats a byte the terminal already has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote, urlencode

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from opensandbox_core._wire._execd import ExecdEndpoint

from . import _frames

__all__ = ["Link", "Refused", "Target"]

logger = logging.getLogger(__name__)

KEEPALIVE: Final = 20.0
"""Seconds between the client's keep-alive frames (execd drops a client silent for 60 s)."""
_MAX_MESSAGE: Final = 8 << 20  # the replay frame is 1 MiB and 9 bytes
_CLOSE_TIMEOUT: Final = 1.0  # execd keeps TCP open after answering a client's close frame
TAKEN_OVER: Final = 4001  # v1.0.19's close code for the holder evicted by `?takeover=1`


@dataclass(frozen=True)
class Target:
    """Where a terminal's WebSocket is and what the handshake sends. The headers may hold the
    server's API key and execd's access token: `repr()` shows the URL only."""

    url: str
    headers: Mapping[str, str] = field(repr=False)
    secure: bool = False

    @classmethod
    def of(cls, endpoint: ExecdEndpoint, terminal_id: str) -> Target:
        base = endpoint.base_url
        secure = base.startswith("https://")
        rest = base.partition("://")[2]
        url = f"{'wss' if secure else 'ws'}://{rest}/pty/{quote(terminal_id, safe='')}/ws"
        return cls(url, dict(endpoint.headers), secure)


class _NoHandshakeLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """websockets' log for terminal connections without its DEBUG records: they print the
    handshake's headers, which hold execd's access token and the server's API key."""

    def isEnabledFor(self, level: int) -> bool:
        return level > logging.DEBUG and self.logger.isEnabledFor(level)


_WIRE_LOG = _NoHandshakeLog(logging.getLogger("websockets.client"), {})


class Refused(Exception):
    """The daemon (or a proxy) answered the upgrade with an HTTP error (404, 409, 401, ...).

    `status` is None when the connection was closed before `connected` instead: what
    opensandbox-server's proxy does with any refusal of the daemon behind it (it accepts the
    upgrade, then closes with 1008 and no reason), so that only asking the daemon tells why.
    """

    def __init__(self, status: int | None, body: bytes) -> None:
        super().__init__(f"HTTP {status}" if status else "closed before `connected`")
        self.status = status
        self.body = body


class Link:
    """One WebSocket to a terminal. `on_output` gets each new output byte once, in order.

    While `room` is cleared the link reads nothing more (websockets then stops reading the
    socket, and the daemon's sends wait). Ends (`ended` set, `reason` says why): `"exit"` (the process exited: `exit_code`),
    `"taken-over"` (another client took the terminal), `"closed"` (this side closed it) or
    `"dropped"` (anything else: the network, the daemon's silence rule, a proxy).
    """

    def __init__(
        self,
        target: Target,
        on_output: Callable[[bytes], None],
        offset: int,
        room: asyncio.Event,
    ) -> None:
        self.target = target
        self.room = room  # cleared: stop reading (the terminal holds too much unread output)
        self.offset = offset
        self.exit_code: int | None = None
        self.reason = ""
        self.ended = asyncio.Event()
        self.limit: int | None = None  # pass on no byte at or past this offset (a final fetch)
        self.on_end: Callable[[], None] | None = None
        self._on_output = on_output
        self._ws: ClientConnection | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sent = asyncio.get_running_loop().time()

    def __repr__(self) -> str:
        return f"Link({self.target.url!r}, offset={self.offset})"

    async def open(self, *, since: int | None, takeover: bool, timeout: float) -> str:
        """Connect and read up to `connected` (passing on a replay); return the mode (`pty`)."""
        query = {k: v for k, v in (("since", since), ("takeover", 1 if takeover else None)) if v}
        url = self.target.url + (f"?{urlencode(query)}" if query else "")
        try:
            ws = await connect(
                url,
                additional_headers=dict(self.target.headers),
                ssl=httpx.create_ssl_context() if self.target.secure else None,
                proxy=None,
                compression=None,
                open_timeout=timeout,
                close_timeout=_CLOSE_TIMEOUT,
                max_size=_MAX_MESSAGE,
                user_agent_header=None,
                logger=_WIRE_LOG,
            )
        except InvalidStatus as exc:
            response = exc.response
            raise Refused(response.status_code, bytes(response.body or b"")) from None
        self._ws = ws
        try:
            async with asyncio.timeout(timeout):
                mode = await self._until_connected(ws)
        except ConnectionClosed as exc:
            await self._abandon(ws)
            reason = f"close {ws.close_code} {ws.close_reason or ''}".strip()
            raise Refused(None, reason.encode()) from exc
        except BaseException:
            await self._abandon(ws)
            raise
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read(ws)), loop.create_task(self._keepalive(ws))]
        return mode

    async def _until_connected(self, ws: ClientConnection) -> str:
        while True:
            frame = _frames.decode(await ws.recv())
            if isinstance(frame, _frames.Replay):
                self._replay(frame)
            elif isinstance(frame, _frames.Output):
                self._take(frame.data)
            elif isinstance(frame, _frames.Control) and frame.kind == "connected":
                return str(frame.fields.get("mode") or "pty")

    def _replay(self, frame: _frames.Replay) -> None:
        skip = self.offset - frame.offset
        if skip < 0:
            logger.warning(
                "terminal output lost: execd keeps the last 1 MiB, and %d bytes before offset "
                "%d had already left it",
                -skip,
                frame.offset,
            )
            self.offset = frame.offset
            skip = 0
        self._take(frame.data[skip:])

    def _take(self, data: bytes) -> None:
        if self.limit is not None:
            data = data[: max(0, self.limit - self.offset)]
        if data:
            self.offset += len(data)
            self._on_output(data)

    async def _read(self, ws: ClientConnection) -> None:
        reason = "dropped"
        try:
            async for message in ws:
                await self.room.wait()
                frame = _frames.decode(message)
                if isinstance(frame, _frames.Output):
                    self._take(frame.data)
                elif isinstance(frame, _frames.Control) and frame.kind == "exit":
                    self.exit_code = frame.exit_code
                    reason = "exit"
                elif isinstance(frame, _frames.Control) and frame.kind == "error":
                    logger.debug("execd refused a terminal frame: %s", frame.fields.get("code"))
        except ConnectionClosed:
            pass
        except Exception as exc:  # a broken connection: the terminal reconnects
            logger.debug("terminal connection failed: %s", type(exc).__name__)
        if reason != "exit" and ws.close_code == TAKEN_OVER:
            reason = "taken-over"
        self._finish(reason)

    async def _keepalive(self, ws: ClientConnection) -> None:
        """A `ping` frame whenever the client has sent nothing for `KEEPALIVE` seconds: execd
        ends a connection that gets no frame for 60 s (its pings and their pongs do not count
        for that in every generation)."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(ConnectionClosed, OSError):
            while True:
                await asyncio.sleep(max(0.05, self._sent + KEEPALIVE - loop.time()))
                if loop.time() - self._sent >= KEEPALIVE:
                    await self.send(_frames.PING)

    async def send(self, frame: bytes | str) -> None:
        """Send one frame; `ConnectionClosed` when the connection is gone."""
        ws = self._ws
        if ws is None:
            raise ConnectionError("the terminal is not connected")
        await ws.send(frame)
        self._sent = asyncio.get_running_loop().time()

    def _finish(self, reason: str) -> None:
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()
            if self.on_end is not None:
                self.on_end()

    async def close(self) -> None:
        """Close this side (a detach, a close, a finished fetch); the reader ends `closed`."""
        ws = self._ws
        self._finish("closed")
        for task in self._tasks:
            task.cancel()
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _abandon(self, ws: ClientConnection) -> None:
        self._finish("closed")
        with contextlib.suppress(Exception):
            await asyncio.shield(ws.close())
