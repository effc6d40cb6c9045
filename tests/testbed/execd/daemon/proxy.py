"""`/proxy/<port>/<path>`: a reverse proxy to a port inside the sandbox (any method), as execd's
(hop-by-hop headers dropped, X-Forwarded-For/-Proto set, the answer relayed chunked). WebSocket
upgrades are not relayed here.
"""

from __future__ import annotations

import http.client
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
