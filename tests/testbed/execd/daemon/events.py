"""Command output as execd streams it: tailing the output files, line framing, and the event
stream (bare JSON events, one per HTTP chunk, with keep-alive pings).
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler

from . import config
from .goenc import go_json, go_output_text, http_chunk, now_ms
from .registry import forward_sigpipe

_LINE_END = re.compile(rb"[\r\n]")


class LineSplitter:
    """Upstream readFromPos: split on \\n or \\r, CRLF once, blank lines -> "\\n" (or dropped)."""

    def __init__(self, keep_blank: bool) -> None:
        self.buf = bytearray()
        self.cr = False
        self.keep_blank = keep_blank

    def feed(self, data: bytes) -> list[bytes]:
        if b"\r" not in data:
            return self._feed_lf(data)
        out: list[bytes] = []
        pos = 0
        for m in _LINE_END.finditer(data):
            end = m.start()
            if end > pos:
                self.buf += data[pos:end]
                self.cr = False
            b = data[end]
            if self.buf:
                out.append(bytes(self.buf))
                self.buf.clear()
            elif b == 10 and self.cr:
                pass
            elif self.keep_blank:
                out.append(b"\n")
            self.cr = b == 13
            pos = end + 1
        if pos < len(data):
            self.buf += data[pos:]
            self.cr = False
        return out

    def _feed_lf(self, data: bytes) -> list[bytes]:
        """feed() for data without \\r, with bytes.split doing the work (seq 20000 at once)."""
        parts = data.split(b"\n")
        tail = parts.pop()
        out: list[bytes] = []
        if parts:
            first = parts[0]
            if self.buf or first:
                out.append(bytes(self.buf) + first)
                self.buf.clear()
            elif not self.cr and self.keep_blank:
                out.append(b"\n")  # (after a \r, this \n completes the CRLF pair)
            self.cr = False
            if self.keep_blank:
                out.extend(p or b"\n" for p in parts[1:])
            else:
                out.extend(p for p in parts[1:] if p)
        if tail:
            self.buf += tail
            self.cr = False
        return out

    def flush(self) -> list[bytes]:
        if self.buf:
            data = bytes(self.buf)
            self.buf.clear()
            return [data]
        return []


def _complete_prefix(data: bytes) -> int:
    """Length of `data` without an incomplete UTF-8 sequence at its end (kept for the next read).

    A read may stop inside a multi-byte character; JSON text cannot carry half a character, so
    the bytes read so far of that character wait for the rest instead of becoming U+FFFD.
    """
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # the lead byte of the last character (or ASCII)
            need = (
                2
                if byte >> 5 == 0b110
                else 3
                if byte >> 4 == 0b1110
                else 4
                if byte >> 3 == 0b11110
                else 1
            )
            return len(data) - back if back < need else len(data)
    return len(data)


class Tailer:
    """Follow one output file and turn new bytes into event texts per the framing."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        self.pos = 0
        self.splitter = (
            None if config.FRAMING == "modern" else LineSplitter(config.FRAMING == "lines")
        )
        self.pending = b""  # modern: the start of a character whose other bytes are not read yet

    def poll(self, final: bool) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except OSError:
            data = b""
        self.pos += len(data)
        if self.splitter is None:
            data = self.pending + data
            cut = len(data) if final else _complete_prefix(data)
            data, self.pending = data[:cut], data[cut:]
            return [go_output_text(data)] if data else []
        chunks = self.splitter.feed(data)
        if final:
            chunks += self.splitter.flush()
        return [go_output_text(c) for c in chunks]


class EventStream:
    """Writes bare-JSON event frames on a chunked HTTP/1.1 response, thread-safe, with pings."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self.h = handler
        self.lock = threading.Lock()
        self.started = False
        self.broken = False
        self.closed = threading.Event()

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        h = self.h
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Connection", "keep-alive")
        h.send_header("X-Accel-Buffering", "no")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()

    def _write(self, data: bytes) -> None:
        """Writes `data` (whole HTTP chunks) after the headers; a gone client ends the stream."""
        with self.lock:
            if self.broken:
                return
            try:
                self._start()
                self.h.wfile.write(data)
                self.h.wfile.flush()
            except BrokenPipeError:  # EPIPE: where Go receives SIGPIPE
                self.broken = True
                forward_sigpipe()
            except OSError:
                self.broken = True

    def begin(self) -> None:
        """Sends the response's headers now, before any event."""
        self._write(b"")

    def send_raw(self, payload: bytes) -> None:
        self._write(http_chunk(payload))

    def send(self, event: dict) -> None:
        self.send_raw(go_json(event) + b"\n\n")

    def send_texts(self, kind: str, texts: list[str]) -> None:
        """stdout/stderr events, one HTTP chunk each, written in few system calls.

        ``seq 20000`` gives 20,000 events in one read; upstream writes them in about 0.2 s.
        """
        head = b'{"type":"%s","text":' % kind.encode()
        frames = []
        size = 0
        began = time.monotonic()
        stamp = b',"timestamp":%d}\n\n' % now_ms()
        for k, text in enumerate(texts):
            if k & 255 == 255:
                stamp = b',"timestamp":%d}\n\n' % now_ms()
            frames.append(http_chunk(head + go_json(text) + stamp))
            size += len(frames[-1])
            if size >= 1 << 16:
                self._write(b"".join(frames))
                frames, size = [], 0
                # upstream writes and flushes each event on its own: no faster than it
                ahead = began + (k + 1) * config.EVENT_WRITE_S - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        if frames:
            self._write(b"".join(frames))

    def start_pings(self, first: bool = True) -> None:
        """execd's keep-alive: one ping right away (it follows init), then one every 3 s."""
        if first:
            self.send({"type": "ping", "text": "pong", "timestamp": now_ms()})

        def loop() -> None:
            while not self.closed.wait(config.PING_INTERVAL):
                self.send({"type": "ping", "text": "pong", "timestamp": now_ms()})

        threading.Thread(target=loop, daemon=True).start()

    def finish(self, grace: float = 0.0) -> None:
        if grace > 0 and config.TAIL_PING:
            end = time.monotonic() + grace
            while (left := end - time.monotonic()) > 0:
                time.sleep(min(0.1, left))
                self.send({"type": "ping", "text": "pong", "timestamp": now_ms()})
        elif grace > 0:
            time.sleep(grace)
        self.closed.set()
        self._write(b"0\r\n\r\n")


def init_event(cid: str) -> dict:
    return {"type": "init", "text": cid, "timestamp": now_ms()}


def complete_event(elapsed_s: float) -> dict:
    ev: dict = {"type": "execution_complete"}
    ms = int(elapsed_s * 1000)
    if ms:
        ev["execution_time"] = ms
    ev["timestamp"] = now_ms()
    return ev


def error_event(evalue: str, traceback: list[str]) -> dict:
    return {
        "type": "error",
        "timestamp": now_ms(),
        "error": {"ename": "CommandExecError", "evalue": evalue, "traceback": traceback},
    }
