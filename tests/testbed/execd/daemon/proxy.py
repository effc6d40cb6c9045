"""`/proxy/<port>/<path>`: a reverse proxy to a port inside the sandbox (any method), as execd's
(hop-by-hop headers dropped, X-Forwarded-For/-Proto set, the answer relayed chunked). An upgrade
(a WebSocket: on the testbed a sandbox's endpoints reach execd's own port through it, /pty too)
is relayed as Go's ReverseProxy does: the backend's 101, then bytes both ways.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .goenc import http_chunk
from .handler import BodyReader

if TYPE_CHECKING:
    from .handler import Handler

HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "proxy-authorization",
    "proxy-authenticate",
}


def proxy(h: Handler, q: dict) -> None:
    url = urlsplit(h.path)
    method, path, raw_query = h.command, url.path, url.query
    rest = path[len("/proxy/") :]
    port, _, sub = rest.partition("/")
    if not port:
        h.send_text(400, "port is required\n")
        return
    target = "/" + sub + (("?" + raw_query) if raw_query else "")
    if is_upgrade(h) and port.isdigit():  # a WebSocket (the testbed's /pty through it)
        proxy_upgrade(h, int(port), target)
        return
    reader = BodyReader(h.rfile, h.headers)
    has_body = "Content-Length" in h.headers or reader.chunked
    body = h.read_body() if has_body else None
    headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_HEADERS}
    headers["X-Forwarded-For"] = (
        (h.headers.get("X-Forwarded-For") or "").split(",")[0]
        or h.headers.get("X-Real-IP")
        or f"{h.client_address[0]}:{h.client_address[1]}"
    )
    headers["X-Forwarded-Proto"] = "http"
    headers.pop("X-Forwarded-Host", None)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=600)
        conn.request(method, target, body=body, headers=headers)
        resp = conn.getresponse()
    except (OSError, ValueError, http.client.HTTPException):
        h.send_text(502, "Bad Gateway\n")
        return
    h.send_response(resp.status, resp.reason)
    for k, v in resp.getheaders():
        if k.lower() not in HOP_HEADERS and k.lower() != "content-length":
            h.send_header(k, v)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    while True:
        data = resp.read1(65536)
        if not data:
            break
        h.wfile.write(http_chunk(data))
        h.wfile.flush()
    h.wfile.write(b"0\r\n\r\n")
    conn.close()


def is_upgrade(h: Handler) -> bool:
    """A request to switch protocols (`Connection: upgrade` with an `Upgrade` header)."""
    tokens = [
        t.strip().lower() for v in h.headers.get_all("Connection") or [] for t in v.split(",")
    ]
    return "upgrade" in tokens and bool(h.headers.get("Upgrade"))


def proxy_upgrade(h: Handler, port: int, target: str) -> None:
    """`/proxy/<port>` for an upgrade (a WebSocket), as Go's httputil.ReverseProxy relays one:
    the request goes on with `Connection: Upgrade`; a 101 whose `Upgrade` matches is written back
    and bytes are copied both ways until either side ends, then both connections are closed;
    any other answer is relayed as an ordinary response."""
    kind = str(h.headers.get("Upgrade"))
    lines = [f"{h.command} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    for k, v in h.headers.items():
        if k.lower() not in HOP_HEADERS:
            lines.append(f"{k}: {v}")
    lines += ["Connection: Upgrade", f"Upgrade: {kind}"]
    lines.append(f"X-Forwarded-For: {h.client_address[0]}")
    try:
        back = socket.create_connection(("127.0.0.1", port), timeout=30)
        back.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = back.recv(65536)
            if not chunk:
                raise OSError("the backend closed the connection")
            head += chunk
    except (OSError, UnicodeEncodeError):
        h.send_text(502, "Bad Gateway\n")
        return
    head, _, early = head.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    got = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in header_lines)}
    h.close_connection = True
    if status_line.split(" ")[1:2] != ["101"] or got.get("upgrade", "").lower() != kind.lower():
        # an ordinary answer (the daemon's own have a Content-Length), relayed as it came
        want = int(got.get("content-length", "0") or 0)
        with contextlib.suppress(OSError):
            while len(early) < want and (chunk := back.recv(65536)):
                early += chunk
            h.connection.sendall(head + b"\r\n\r\n" + early[:want])
        back.close()
        return
    h.log_request(101)
    h.connection.sendall(head + b"\r\n\r\n" + early)
    back.settimeout(None)

    def to_backend() -> None:
        with contextlib.suppress(OSError, ValueError):
            while data := h.rfile.read1(65536):
                back.sendall(data)
        with contextlib.suppress(OSError):
            back.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            h.connection.shutdown(socket.SHUT_RDWR)

    threading.Thread(target=to_backend, daemon=True).start()
    with contextlib.suppress(OSError):
        while data := back.recv(65536):
            h.connection.sendall(data)
    for sock in (h.connection, back):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    back.close()
