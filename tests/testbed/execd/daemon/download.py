"""`GET /files/download`: a file as execd serves it, through Go's http.ServeContent.

One byte range (206; of several only the first); a malformed Range is 416 with the file's
Content-Length and no body (then the connection closes); ranges past the end Go's plain-text
416; conditional requests as ServeContent (no ETag). The size is the one a seek to the end
gives (`seek_size`): /proc files and fifos answer 500 "seeker can't seek", devices an empty 200,
a directory 200 with Content-Length 2^63-1 and no body (ext4). v1.0.19 also serves lines
(`offset`/`limit`; v1.0.18 ignores them).
"""

from __future__ import annotations

import calendar
import os
import stat
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import quote

from . import config
from .fileinfo import file_error, file_route, query_int, query_path
from .goenc import ApiError, go_json, go_parse_int, path_error
from .gopath import go_base, go_expand_path
from .handler import GoBody, q1

if TYPE_CHECKING:
    from .handler import Handler


@file_route
def download(h: Handler, q: dict) -> None:
    p = query_path(q)
    try:
        resolved = go_expand_path(p)
    except ValueError as e:
        raise ApiError(500, "RUNTIME_ERROR", f"error resolving file path: {p}. {e}") from None
    raw_offset, raw_limit = q1(q, "offset"), q1(q, "limit")
    line_mode = not config.LEGACY_FILE_API and bool(raw_offset or raw_limit)  # v1.0.18 ignores them
    rng = h.headers.get("Range") or ""
    if line_mode and rng:
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "line-based reading (offset/limit) and byte range (Range header) are mutually "
            "exclusive",
        )
    try:
        fd = os.open(resolved, os.O_RDONLY)  # blocks on a FIFO, like Go's os.Open
    except OSError as e:
        raise file_error(
            path_error("open", resolved, e), isinstance(e, FileNotFoundError)
        ) from None
    try:
        if line_mode:
            _serve_lines(h, fd, raw_offset, raw_limit)
            return
        st = os.fstat(fd)
        # execd declares and parses ranges against the stat size; Go's ServeContent then
        # takes its own size by seeking (see seek_size).
        size = st.st_size
        base = [
            ("Content-Type", "application/octet-stream"),
            ("Content-Disposition", content_disposition(go_base(resolved))),
        ]
        if rng:
            ranges = parse_range(rng, size)
            if ranges is None:
                # execd's RespondError after it declared the file's length: Go refuses a
                # body longer than that, and closes a connection whose body fell short.
                body = go_json({"code": "UNKNOWN"})
                _declared(h, 416, base, size, body if len(body) <= size else b"")
                return
            if ranges:
                start, length = ranges[0]
                h.send_response(206)
                for k, v in base:
                    h.send_header(k, v)
                h.send_header("Content-Range", f"bytes {start}-{start + length - 1}/{size}")
                h.handler_header("Content-Length", str(length))
                h.end_headers()
                os.lseek(fd, start, os.SEEK_SET)
                _copy(h, fd, length)
                return
        _serve_content(h, fd, st, base, rng)
    finally:
        os.close(fd)


def _declared(
    h: Handler, status: int, headers: list[tuple[str, str]], length: int, body: bytes
) -> None:
    """A response whose handler set Content-Length itself and wrote `body` (maybe less)."""
    h.send_response(status)
    for k, v in headers:
        h.send_header(k, v)
    h.handler_header("Content-Length", str(length))
    h.end_headers()
    if body:
        h.wfile.write(body)
    if len(body) < length:
        h.close_connection = True


def _serve_content(
    h: Handler, fd: int, st: os.stat_result, base: list[tuple[str, str]], rng: str
) -> None:
    """Go's http.ServeContent after execd set Content-Type/-Disposition/-Length (the last
    from the stat size): preconditions, then the size by seeking, then the body."""
    headers = list(base)
    mtime_s = st.st_mtime_ns // 1_000_000_000
    if st.st_mtime_ns != 0:
        headers.append(("Last-Modified", _http_date(mtime_s)))
    cond = _go_preconditions(h.command, h.headers, mtime_s, st.st_mtime_ns == 0)
    if cond == 412:
        _declared(h, 412, headers, st.st_size, b"")
        return
    if cond == 304:
        h.send_response(304)
        for k, v in headers:
            if k != "Content-Type":
                h.send_header(k, v)
        h.end_headers()
        return
    if rng and not _go_if_range(h.command, h.headers, mtime_s, st.st_mtime_ns == 0):
        rng = ""
    size = seek_size(fd)
    if size is None:
        # serveError: Last-Modified dropped, then http.Error (Content-Length dropped).
        _http_error(h, base, 500, b"seeker can't seek\n")
        return
    # Only ranges wholly past the end (or none at all) get here: execd took the others.
    if (
        rng
        and size > 0
        and any(
            part.strip() and not part.strip().startswith("-")
            for part in rng[len("bytes=") :].split(",")
        )
    ):
        _http_error(
            h,
            base,
            416,
            b"invalid range: failed to overlap\n",
            ("Content-Range", f"bytes */{size}"),
        )
        return
    h.send_response(200)
    for k, v in headers:
        h.send_header(k, v)
    h.send_header("Accept-Ranges", "bytes")
    h.handler_header("Content-Length", str(size))
    h.end_headers()
    _send_file(h, fd, st, size)


def _send_file(h: Handler, fd: int, st: os.stat_result, size: int) -> None:
    """The body of a 200: `size` bytes of the file (the connection closes if it falls short)."""
    if stat.S_ISREG(st.st_mode):
        _copy(h, fd, size)
        return
    # Not a regular file: a directory fails its first read (Go then drops the connection);
    # a device that seeks (a block device) is copied until EOF or the declared length.
    sent = 0
    while sent < size:
        try:
            data = os.read(fd, min(65536, size - sent))
        except OSError:
            break
        if not data:
            break
        h.wfile.write(data)
        sent += len(data)
    if sent < size:
        h.close_connection = True


def _http_error(
    h: Handler,
    base: list[tuple[str, str]],
    status: int,
    text: bytes,
    *extra: tuple[str, str],
) -> None:
    """Go's http.Error after ServeContent's serveError: the Content-Disposition execd set
    stays, Content-Type and Content-Length become those of the text."""
    h.send_response(status)
    h.send_header("Content-Disposition", dict(base)["Content-Disposition"])
    for k, v in extra:
        h.send_header(k, v)
    h.send_header("Content-Type", "text/plain; charset=utf-8")
    h.send_header("X-Content-Type-Options", "nosniff")
    h.send_header("Content-Length", str(len(text)))
    h.end_headers()
    h.wfile.write(text)


def _serve_lines(h: Handler, fd: int, raw_offset: str, raw_limit: str) -> None:
    """v1.0.19 line mode: lines (terminators stripped) offset.. (1-based), at most limit,
    joined with "\\n"; text/plain, chunked once beyond 2048 bytes."""
    offset = query_int(raw_offset, "offset", 1, minimum=1)
    limit = query_int(raw_limit, "limit", -1, minimum=1)
    body = GoBody(h, 200, [("Content-Type", "text/plain; charset=utf-8")])
    written = line_no = 0
    for line in _read_lines(fd):
        line_no += 1
        if line_no < offset:
            continue
        if written:
            body.write(b"\n")
        body.write(line.rstrip(b"\r\n"))
        written += 1
        if 0 <= limit <= written:
            break
    body.finish()


def _copy(h: Handler, fd: int, length: int) -> None:
    sent = 0
    sock = h.connection
    h.wfile.flush()
    while sent < length:
        try:
            n = os.sendfile(sock.fileno(), fd, None, min(length - sent, 1 << 20))
        except (OSError, AttributeError):
            try:
                data = os.read(fd, min(length - sent, 1 << 20))
            except OSError:
                break
            if not data:
                break
            h.wfile.write(data)
            n = len(data)
        if n == 0:
            break
        sent += n
    if sent < length:
        h.close_connection = True


def content_disposition(name: str) -> str:
    """execd's formatContentDisposition: an ASCII name raw (quotes and controls included),
    anything else as url.PathEscape in both parameters. Go's net/http turns CR/LF in a
    header value into spaces."""
    if all(ord(c) <= 127 for c in name):
        return 'attachment; filename="' + name.replace("\r", " ").replace("\n", " ") + '"'
    enc = quote(os.fsencode(name), safe="$&+:=@")
    return f"attachment; filename=\"{enc}\"; filename*=UTF-8''{enc}"


def seek_size(fd: int) -> int | None:
    """The size Go's http.ServeContent serves: where a seek to the end lands (then back to the
    start); None where the file refuses either seek, Go's "seeker can't seek".

    The kernel decides, so the rule holds for any path: a pipe refuses (ESPIPE); procfs files
    refuse SEEK_END (EINVAL) though stat calls them regular files of size 0; character devices
    such as /dev/null and /dev/zero land on 0; sysfs attributes on their stat size (4096, more
    than they hold: the body then falls short and the connection closes); an ext4 directory on
    the htree end (2**63 - 1); a tmpfs or merged-overlay directory refuses. Sockets never get
    here: opening one fails (ENXIO).
    """
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        return None
    return size


def parse_range(s: str, size: int) -> list[tuple[int, int]] | None:
    """execd's ParseRange: (start, length) pairs, None for a malformed header; ranges that
    start at or past the end are dropped (an all-dropped header is left to ServeContent)."""
    if not s.startswith("bytes="):
        return None
    out = []
    for ra in s[6:].split(","):
        ra = ra.strip()
        if not ra:
            continue
        if "-" not in ra:
            return None
        a, b = (x.strip() for x in ra.split("-", 1))
        try:
            if a == "":
                n = go_parse_int(b)
                if n < 0:
                    return None
                n = min(n, size)
                start, length = size - n, n
            else:
                i = go_parse_int(a)
                if i < 0:
                    return None
                if b == "":
                    start, length = i, size - i
                else:
                    j = go_parse_int(b)
                    if j < i:
                        return None
                    start, length = i, j - i + 1
        except ValueError:
            return None
        if start >= size:
            continue
        length = min(length, size - start)
        out.append((start, length))
    return out


def _read_lines(fd: int) -> Iterator[bytes]:
    """The lines of an open file, each with its "\n" (the last maybe without); a read error (a
    directory) ends them, as Go's bufio loop in execd stops on any error."""
    pending = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            if pending:
                yield pending
            return
        pending += data
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line + b"\n"


def _http_date(seconds: int) -> str:
    """Go's http.TimeFormat of a Unix time."""
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(seconds))


def _http_parse_time(text: str) -> int | None:
    """Go's http.ParseTime (RFC 1123 with GMT, RFC 850, ANSI C) as a Unix time, or None."""
    for fmt in ("%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %d %H:%M:%S %Y"):
        try:
            return calendar.timegm(time.strptime(text, fmt))
        except ValueError:
            continue
    return None


def _go_preconditions(method: str, headers, mtime_s: int, zero_mtime: bool) -> int | None:
    """Go's ServeContent checkPreconditions for a file without an ETag: 412, 304 or None."""
    if_match = (headers.get("If-Match") or "").strip()
    if if_match:
        if not any(tok.strip() == "*" for tok in if_match.split(",")):
            return 412
    else:
        ius = headers.get("If-Unmodified-Since") or ""
        if ius and not zero_mtime:
            t = _http_parse_time(ius)
            if t is not None and mtime_s > t:
                return 412
    inm = (headers.get("If-None-Match") or "").strip()
    if inm:
        if any(tok.strip() == "*" for tok in inm.split(",")):
            return 304 if method in ("GET", "HEAD") else 412
        return None
    ims = headers.get("If-Modified-Since") or ""
    if method in ("GET", "HEAD") and ims and not zero_mtime:
        t = _http_parse_time(ims)
        if t is not None and mtime_s <= t:
            return 304
    return None


def _go_if_range(method: str, headers, mtime_s: int, zero_mtime: bool) -> bool:
    """Go's checkIfRange: may the Range header be honoured? (No ETag here.)"""
    if_range = headers.get("If-Range") or ""
    if method not in ("GET", "HEAD") or not if_range:
        return True
    if if_range.startswith(('"', 'W/"')) or zero_mtime:
        return False
    return _http_parse_time(if_range) == mtime_s
