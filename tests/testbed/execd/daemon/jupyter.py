"""A small client of a Jupyter server: its REST API (kernelspecs, sessions, interrupts) and a
kernel's WebSocket (`/api/kernels/{id}/channels`, Jupyter's JSON message protocol), standard
library only. The code interpreter routes (interpreter.py) drive kernels through it, as execd
drives them through the Jupyter server its image starts (`JUPYTER_HOST`, `JUPYTER_TOKEN`).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.client
import json
import os
import socket
import struct
import threading
import uuid
from typing import Any
from urllib.parse import quote, urlsplit

WS_TEXT, WS_BINARY, WS_CLOSE, WS_PING, WS_PONG = 1, 2, 8, 9, 10


class JupyterError(Exception):
    """The Jupyter server could not be reached or answered with an error."""


class Jupyter:
    """The Jupyter server at `base` (e.g. ``http://127.0.0.1:44771``), token auth."""

    def __init__(self, base: str, token: str) -> None:
        url = urlsplit(base if "://" in base else "http://" + base)
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 80
        self.prefix = url.path.rstrip("/")
        self.token = token

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def call(self, method: str, path: str, body: object = None, timeout: float = 60.0) -> Any:
        """One REST call; the decoded JSON answer (None for an empty one). JupyterError for
        a connection failure or an error status."""
        headers = self._headers()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, self.prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except OSError as e:
            raise JupyterError(f"{method} {path}: {e}") from None
        finally:
            conn.close()
        if resp.status >= 400:
            raise JupyterError(f"{method} {path}: {resp.status} {raw[:200]!r}")
        return json.loads(raw) if raw.strip() else None

    def kernelspecs(self) -> dict[str, dict[str, Any]]:
        """name -> spec (`language`, `argv`, ...)."""
        got = self.call("GET", "/api/kernelspecs") or {}
        specs = got.get("kernelspecs") or {}
        return {str(name): dict(v.get("spec") or {}) for name, v in specs.items()}

    def start_session(self, kernel_name: str) -> tuple[str, str]:
        """A new Jupyter session with a kernel of its own: (session id, kernel id). The path is
        unique (a shared path would give the same session back) and at the server's root, so
        the kernel runs in the server's root directory."""
        name = uuid.uuid4().hex
        got = self.call(
            "POST",
            "/api/sessions",
            {
                "path": f"{name}.ipynb",
                "name": name,
                "type": "notebook",
                "kernel": {"name": kernel_name},
            },
        )
        try:
            return str(got["id"]), str(got["kernel"]["id"])
        except (KeyError, TypeError):
            raise JupyterError(f"POST /api/sessions: unexpected answer {got!r}") from None

    def delete_session(self, session_id: str) -> None:
        self.call("DELETE", f"/api/sessions/{quote(session_id)}")

    def interrupt(self, kernel_id: str) -> None:
        self.call("POST", f"/api/kernels/{quote(kernel_id)}/interrupt")

    def channels(self, kernel_id: str, session: str) -> KernelSocket:
        return KernelSocket(self, kernel_id, session)


def _now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def message(msg_type: str, content: dict[str, Any], session: str, channel: str) -> dict[str, Any]:
    """A Jupyter message (protocol 5.3) as the JSON WebSocket protocol carries it."""
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "username": "execd",
            "session": session,
            "msg_type": msg_type,
            "version": "5.3",
            "date": _now_iso(),
        },
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": channel,
        "buffers": [],
    }


def execute_request(code: str, session: str) -> dict[str, Any]:
    """What execd sends to run code: no stdin (input() fails at once), history kept."""
    return message(
        "execute_request",
        {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        session,
        "shell",
    )


class KernelSocket:
    """The client side of one kernel WebSocket: masked frames out, JSON messages in."""

    def __init__(self, jupyter: Jupyter, kernel_id: str, session: str) -> None:
        self.lock = threading.Lock()
        try:
            self.sock = socket.create_connection((jupyter.host, jupyter.port), timeout=30)
        except OSError as e:
            raise JupyterError(f"kernel channels: {e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        path = (
            f"{jupyter.prefix}/api/kernels/{quote(kernel_id)}/channels?session_id={quote(session)}"
        )
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {jupyter.host}:{jupyter.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{k}: {v}" for k, v in jupyter._headers().items()),
        ]
        self.buf = b""
        try:
            self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            while b"\r\n\r\n" not in self.buf:
                data = self.sock.recv(4096)
                if not data:
                    raise JupyterError("kernel channels: the server closed the connection")
                self.buf += data
        except OSError as e:
            self.sock.close()
            raise JupyterError(f"kernel channels: {e}") from None
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status + b" ":
            self.sock.close()
            raise JupyterError(f"kernel channels: {status.decode('latin-1')}")
        self.sock.settimeout(None)
        self.closed = False

    def _frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        masked = bytes(b ^ mask[k & 3] for k, b in enumerate(payload))
        with self.lock:
            self.sock.sendall(head + mask + masked)

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self._frame(WS_TEXT, json.dumps(msg).encode())
        except OSError as e:
            raise JupyterError(f"kernel channels: {e}") from None

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> dict[str, Any] | None:
        """The next JSON message; None once the connection is closed. Binary messages (ones
        with buffers) are skipped; pings are answered."""
        parts: list[bytes] = []
        kind = 0
        try:
            while True:
                b0, b1 = self._read(2)
                opcode, final, n = b0 & 0x0F, bool(b0 & 0x80), b1 & 0x7F
                if n == 126:
                    (n,) = struct.unpack("!H", self._read(2))
                elif n == 127:
                    (n,) = struct.unpack("!Q", self._read(8))
                mask = self._read(4) if b1 & 0x80 else b""
                payload = self._read(n)
                if mask:
                    payload = bytes(b ^ mask[k & 3] for k, b in enumerate(payload))
                if opcode == WS_PING:
                    self._frame(WS_PONG, payload)
                    continue
                if opcode == WS_CLOSE:
                    with contextlib.suppress(OSError):
                        self._frame(WS_CLOSE, payload[:2])
                    return None
                if opcode == WS_PONG:
                    continue
                if opcode != 0:
                    kind = opcode
                parts.append(payload)
                if not final:
                    continue
                data, parts = b"".join(parts), []
                if kind != WS_TEXT:
                    continue
                msg = json.loads(data)
                if isinstance(msg, dict):
                    return msg
        except (EOFError, OSError, ValueError):
            return None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self._frame(WS_CLOSE, struct.pack("!H", 1000))
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
