"""HTTP as Go's net/http and gin write it: the request handler's response helpers (headers
sorted, then Date and the server-added Content-Length or Transfer-Encoding, no Server header),
request bodies (chunked or not), a Go handler's buffered-or-chunked body (`GoBody`) and gin's
query parsing. Requests are routed by routes.py.
"""

from __future__ import annotations

import os
import re
import sys
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote_to_bytes

from .goenc import ApiError, go_header_name, go_json, go_text_tree, http_chunk


class Handler(BaseHTTPRequestHandler):
    """One connection's requests; each is routed by routes.dispatch to a route function."""

    # Headers and body go out in separate writes; with Nagle's algorithm on, the client's delayed
    # ACK stalls every small response by ~40 ms (Go's net/http sets TCP_NODELAY as well).
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server_version = "execd-py"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        if os.environ.get("EXECD_QUIET") != "1":
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    # -- Go-style response headers ----------------------------------------------------------
    # Go's net/http writes the headers a handler set sorted by name, then the ones the server
    # adds itself: Date, then Content-Length (of a body it buffered) or Transfer-Encoding. No
    # Server header. So send_header() buffers; Content-Length and Transfer-Encoding count as
    # server-added (written last) unless given with handler_header(), as Go's ServeContent sets
    # Content-Length itself (downloads: it sorts among the others).
    _go_headers: list[tuple[str, str, bool]] | None = None

    def send_response(self, code: int, message: str | None = None) -> None:
        self.log_request(code)
        self.send_response_only(code, message)
        self._go_headers = []

    def send_header(self, keyword: str, value: str) -> None:
        if self._go_headers is None:
            super().send_header(keyword, value)
            return
        self._go_headers.append((go_header_name(keyword), str(value), False))

    def handler_header(self, keyword: str, value: str) -> None:
        """A header the Go handler set itself, sorted among the others even if Content-Length."""
        if self._go_headers is None:
            super().send_header(keyword, value)
            return
        self._go_headers.append((go_header_name(keyword), str(value), True))

    def end_headers(self) -> None:
        pending, self._go_headers = self._go_headers, None
        if pending is not None:
            extra = {"Content-Length": 0, "Transfer-Encoding": 1}
            own = sorted(
                ((k, v) for k, v, explicit in pending if explicit or k not in extra),
                key=lambda kv: kv[0],
            )
            added = sorted(
                ((k, v) for k, v, explicit in pending if not explicit and k in extra),
                key=lambda kv: extra[kv[0]],
            )
            for k, v in own:
                super().send_header(k, v)
            super().send_header("Date", self.date_time_string())
            for k, v in added:
                super().send_header(k, v)
        super().end_headers()

    # -- helpers --------------------------------------------------------------------------
    def send_json(self, status: int, obj: object) -> None:
        """gin's c.JSON: one write of the encoded body (chunked above 2048 bytes, like Go)."""
        body = GoBody(self, status, [("Content-Type", "application/json; charset=utf-8")])
        body.write(go_json(go_text_tree(obj)))
        body.finish()

    def send_ok(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_text(
        self,
        status: int,
        text: str,
        ctype: str = "text/plain; charset=utf-8",
        headers: dict | None = None,
    ) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error_json(self, e: ApiError) -> None:
        body: dict = {"code": e.code}
        if e.message:
            body["message"] = e.message
        self.send_json(e.status, body)

    def read_body(self) -> bytes:
        reader = BodyReader(self.rfile, self.headers)
        chunks = []
        while True:
            d = reader.read()
            if not d:
                break
            chunks.append(d)
        return b"".join(chunks)

    # -- dispatch (routes.py) -------------------------------------------------------------
    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def do_DELETE(self) -> None:
        self.route("DELETE")

    def do_PUT(self) -> None:
        self.route("PUT")

    def do_PATCH(self) -> None:
        self.route("PATCH")

    def do_HEAD(self) -> None:
        self.route("HEAD")

    def do_OPTIONS(self) -> None:
        self.route("OPTIONS")

    def route(self, method: str) -> None:
        from .routes import dispatch  # routes.py imports every route module, which import this

        dispatch(self, method)


# -- request helpers ---------------------------------------------------------------------------


def q1(query: dict[str, list[str]], key: str) -> str:
    """The first value of a query parameter, or ""."""
    vals = query.get(key)
    return vals[0] if vals else ""


def go_parse_query(raw: str) -> dict[str, list[str]]:
    """Go's url.ParseQuery as gin's c.Query sees it: pairs split on "&", "+" is a space, a pair
    with a bad %-escape or a ";" in its key is dropped; values keep their raw bytes
    (surrogateescape), so a file name that is not UTF-8 reaches the file system unchanged."""
    out: dict[str, list[str]] = {}
    for pair in raw.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        if ";" in key:
            continue
        decoded = []
        for text in (key, value):
            if re.search(r"%(?![0-9A-Fa-f]{2})", text):
                break
            # http.server hands the request line over as latin-1: back to its bytes first.
            raw_bytes = unquote_to_bytes(text.replace("+", " ").encode("latin-1", "replace"))
            decoded.append(raw_bytes.decode("utf-8", "surrogateescape"))
        if len(decoded) == 2:
            out.setdefault(decoded[0], []).append(decoded[1])
    return out


class BodyReader:
    """Reads a request body, chunked or Content-Length, as a byte stream."""

    def __init__(self, rfile, headers) -> None:
        self.rfile = rfile
        self.chunked = "chunked" in (headers.get("Transfer-Encoding") or "").lower()
        self.remaining = int(headers.get("Content-Length") or 0) if not self.chunked else 0
        self.chunk_left = 0
        self.eof = False

    def read(self, n: int = 65536) -> bytes:
        if self.eof:
            return b""
        if not self.chunked:
            if self.remaining <= 0:
                self.eof = True
                return b""
            data = (
                self.rfile.read1(min(n, self.remaining))
                if hasattr(self.rfile, "read1")
                else self.rfile.read(min(n, self.remaining))
            )
            if not data:
                self.eof = True
                return b""
            self.remaining -= len(data)
            return data
        if self.chunk_left == 0:
            line = self.rfile.readline(65537)
            if not line:
                self.eof = True
                return b""
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:
                    trailer = self.rfile.readline(65537)
                    if trailer in (b"\r\n", b"\n", b""):
                        break
                self.eof = True
                return b""
            self.chunk_left = size
        data = self.rfile.read(min(n, self.chunk_left))
        if not data:
            self.eof = True
            return b""
        self.chunk_left -= len(data)
        if self.chunk_left == 0:
            self.rfile.readline(3)
        return data

    def drain(self) -> None:
        while self.read():
            pass


class GoBody:
    """A Go handler's response body as net/http sends it: up to 2048 bytes are buffered and
    get a Content-Length when the handler ends; more is sent chunked, in the pieces Go's bufio
    writer produces (a write larger than the free buffer goes out as its own chunk)."""

    LIMIT = 2048

    def __init__(
        self, handler: BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]]
    ) -> None:
        self.handler = handler
        self.status = status
        self.headers = headers
        self.buf = bytearray()
        self.started = False

    def _start(self, chunked: bool) -> None:
        h = self.handler
        h.send_response(self.status)
        for k, v in self.headers:
            h.send_header(k, v)
        if chunked:
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Content-Length", str(len(self.buf)))
        h.end_headers()
        self.started = True

    def _chunk(self, data: bytes) -> None:
        if not self.started:
            self._start(True)
        self.handler.wfile.write(http_chunk(data))

    def write(self, data: bytes) -> None:
        while len(data) > self.LIMIT - len(self.buf):
            if not self.buf:
                self._chunk(bytes(data))
                return
            free = self.LIMIT - len(self.buf)
            self.buf += data[:free]
            data = data[free:]
            self._chunk(bytes(self.buf))
            self.buf.clear()
        self.buf += data

    def finish(self) -> None:
        if not self.started:
            self._start(False)
            self.handler.wfile.write(bytes(self.buf))
            return
        if self.buf:
            self._chunk(bytes(self.buf))
            self.buf.clear()
        self.handler.wfile.write(b"0\r\n\r\n")
