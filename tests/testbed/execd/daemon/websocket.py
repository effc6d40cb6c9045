"""The server side of a WebSocket, written with the standard library as gorilla/websocket (the
real daemon's library) behaves on the wire: its handshake checks and refusals, its frame checks
(close 1002 with its texts, "bad MASK" for an unmasked frame), the echo of a client's close code
and the TCP connection it leaves open after a close or a protocol error. Used by pty.py.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from . import config
from .goenc import go_json
from .registry import forward_sigpipe

if TYPE_CHECKING:
    from .handler import Handler

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WS_CONT, WS_TEXT, WS_BINARY, WS_CLOSE, WS_PING, WS_PONG = 0, 1, 2, 8, 9, 10
# close codes a peer may send (gorilla's isValidReceivedCloseCode)
WS_VALID_CLOSE = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013}


class WsProtocolError(Exception):
    """A frame gorilla/websocket refuses: answered with close 1002 and this text."""


class WsCloseReceived(Exception):
    def __init__(self, payload: bytes) -> None:
        super().__init__("close")
        self.payload = payload


# -- the handshake -------------------------------------------------------------------------------


def bad_request(h: Handler) -> None:
    """gorilla's handshake refusal: http.Error's text, with the version it speaks."""
    h.send_text(
        400,
        "Bad Request\n",
        headers={"Sec-Websocket-Version": "13", "X-Content-Type-Options": "nosniff"},
    )


def accept_key(h: Handler) -> str | None:
    """The Sec-WebSocket-Accept of a valid upgrade request (gorilla's checks), else None."""

    def tokens(name: str) -> list[str]:
        return [t.strip().lower() for v in h.headers.get_all(name) or [] for t in v.split(",")]

    if "upgrade" not in tokens("Connection") or "websocket" not in tokens("Upgrade"):
        return None
    if h.headers.get("Sec-WebSocket-Version", "") != "13":
        return None
    key = h.headers.get("Sec-WebSocket-Key", "")
    try:
        if len(base64.b64decode(key, validate=True)) != 16:
            return None
    except ValueError:
        return None
    digest = hashlib.sha1(key.encode() + WS_GUID).digest()  # noqa: S324 - RFC 6455 asks SHA-1
    return base64.b64encode(digest).decode()


def switch_protocols(h: Handler, accept: str) -> bool:
    """The 101 answer; False when the client is gone. The connection is the WebSocket's now."""
    h.close_connection = True
    h.log_request(101)
    handshake = (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    try:
        h.connection.sendall(handshake.encode())
    except OSError:
        return False
    return True


# -- a connection --------------------------------------------------------------------------------


class WsConn:
    """One upgraded connection: frames out (thread-safe), frames in (the handler's thread)."""

    def __init__(self, h: Handler) -> None:
        self.h = h
        self.sock: socket.socket = h.connection
        self.rfile = h.rfile
        self.wlock = threading.Lock()
        self.close_sent = False
        self.broken = False
        self.ended = threading.Event()  # the connection is over (for its keep-alive thread)
        self.last_frame = time.monotonic()

    # -- writing ---------------------------------------------------------------------------
    def send_frame(self, opcode: int, payload: bytes) -> bool:
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        with self.wlock:
            if self.close_sent or self.broken:
                return False
            if opcode == WS_CLOSE:
                self.close_sent = True
            try:
                self.sock.sendall(head + payload)
            except BrokenPipeError:  # EPIPE: where Go receives SIGPIPE
                self.broken = True
                forward_sigpipe()
                return False
            except OSError:
                self.broken = True
                return False
        return True

    def send_json(self, obj: dict) -> bool:
        return self.send_frame(WS_TEXT, go_json(obj) + b"\n")

    def send_close(self, code: int | None, reason: str = "") -> bool:
        payload = b"" if code is None else struct.pack("!H", code) + reason.encode()
        return self.send_frame(WS_CLOSE, payload[:125])

    def drop_tcp(self) -> None:
        """Closes the TCP connection (FIN): the handler's read ends, its thread returns."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.ended.set()

    # -- reading ---------------------------------------------------------------------------
    def _read(self, n: int) -> bytes:
        data = self.rfile.read(n) if n else b""
        if len(data) < n:
            raise EOFError
        return data

    def read_frame(self, fragmented: bool) -> tuple[bool, int, bytes]:
        """One frame, checked in gorilla's order; control frames' payloads included."""
        b0, b1 = self._read(2)
        final, opcode, masked, n = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
        self.last_frame = time.monotonic()
        if b0 & 0x70:
            raise WsProtocolError(f"unexpected reserved bits 0x{(b0 & 0x70) >> 4:x}")
        _check_opcode(opcode, final, n, fragmented)
        if n == 126:
            (n,) = struct.unpack("!H", self._read(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read(8))
        if not masked:
            raise WsProtocolError("bad MASK")
        key = self._read(4)
        data = self._read(n)
        if data:
            mask = (key * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big")
        self.last_frame = time.monotonic()
        return final, opcode, data

    def messages(self) -> Iterator[tuple[int, bytes]]:
        """Whole messages (fragments joined); pings answered, closes raised, in between."""
        parts: list[bytes] = []
        kind = 0
        while True:
            final, opcode, data = self.read_frame(bool(parts) or kind != 0)
            if opcode == WS_PING:
                self.send_frame(WS_PONG, data)
                continue
            if opcode == WS_PONG:
                continue
            if opcode == WS_CLOSE:
                _check_close(data)
                raise WsCloseReceived(data)
            if opcode != WS_CONT:
                kind = opcode
            parts.append(data)
            if final:
                yield kind, b"".join(parts)
                parts, kind = [], 0

    def linger(self) -> None:
        """After a close answered (or a protocol error) the real daemon leaves TCP open: read and
        drop whatever comes until the client closes it, or PTY_IDLE_S without a byte."""
        with contextlib.suppress(OSError, ValueError):
            self.sock.settimeout(config.PTY_IDLE_S)
            while self.rfile.read1(65536):
                pass


def _check_opcode(opcode: int, final: bool, n: int, fragmented: bool) -> None:
    if opcode in (WS_CLOSE, WS_PING, WS_PONG):
        if n > 125:
            raise WsProtocolError("control frame length > 125")
        if not final:
            raise WsProtocolError("control frame not final")
    elif opcode in (WS_TEXT, WS_BINARY):
        if fragmented:
            raise WsProtocolError("message start before final message frame")
    elif opcode == WS_CONT:
        if not fragmented:
            raise WsProtocolError("continuation after final message frame")
    else:
        raise WsProtocolError(f"unknown opcode {opcode}")


def _check_close(data: bytes) -> None:
    """A close frame's code and text as gorilla checks them."""
    if len(data) >= 2:
        code = struct.unpack("!H", data[:2])[0]
        if code not in WS_VALID_CLOSE and not 3000 <= code <= 4999:
            raise WsProtocolError(f"bad close code {code}")
        try:
            data[2:].decode("utf-8")
        except UnicodeDecodeError:
            raise WsProtocolError("invalid utf8 payload in close frame") from None
