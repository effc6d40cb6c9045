"""Go-compatible encodings: JSON and text as Go writes them, Go's error texts, the API error.

What the real daemon sends is what Go's standard library produces (encoding/json, time, strconv,
net/textproto, os errors); these helpers give the same bytes from Python.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import signal
import time
from collections.abc import Callable


class ApiError(Exception):
    """An error answer of a route: HTTP `status` and execd's `{"code", "message"}` body."""

    def __init__(self, status: int, code: str, message: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def go_duration(text: str) -> float:
    """Parse a Go duration string (``1s``, ``250ms``, ``0``) into seconds."""
    text = text.strip()
    if text in ("0", ""):
        return 0.0
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, num = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        unit = ""
        while i < len(text) and not (text[i].isdigit() or text[i] == "."):
            unit += text[i]
            i += 1
        if unit not in units or not num:
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(num) * units[unit]
        num = ""
    if num:
        raise ValueError(f"time: missing unit in duration {text!r}")
    return total


def go_decode(data: bytes) -> str:
    """Bytes -> str the way Go's encoding/json sees a string: each invalid byte -> U+FFFD."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "execd-go-replace")


def go_output_text(data: bytes) -> str:
    """Output bytes -> str for an event: each invalid byte kept as a lone surrogate
    (surrogateescape), which :func:`go_json` writes as the escape ``\\ufffd``, as Go's encoder
    writes invalid UTF-8 (a valid U+FFFD in the output stays a raw character)."""
    return data.decode("utf-8", "surrogateescape")


def _go_replace(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError)
    return "\ufffd", exc.start + 1


codecs.register_error("execd-go-replace", _go_replace)


_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_encode_string: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]
_GO_ESCAPES = re.compile("[<>&\u2028\u2029\udc80-\udcff]")
_GO_ESCAPE_TEXT = {c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"}


def _go_escape(m: re.Match[str]) -> str:
    return _GO_ESCAPE_TEXT.get(m.group(0), "\\ufffd")


def go_json(obj: object) -> bytes:
    """Compact JSON as Go's encoding/json writes it: ``<>&`` and U+2028/U+2029 escaped, and an
    invalid byte (a lone surrogate from surrogateescape) as ``\\ufffd``, as Go 1.25 writes it."""
    text = _encode_string(obj) if type(obj) is str else _JSON_ENCODER.encode(obj)
    if _GO_ESCAPES.search(text):
        text = _GO_ESCAPES.sub(_go_escape, text)
    return text.encode("utf-8", "surrogatepass")


def http_chunk(data: bytes) -> bytes:
    """One chunk of an HTTP/1.1 chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def go_time(ts: float | None = None, ns: int | None = None) -> str:
    """RFC3339Nano in local time like Go's time.Time JSON encoding."""
    if ns is None:
        ns = int((time.time() if ts is None else ts) * 1e9)
    sec, frac = divmod(ns, 1_000_000_000)
    lt = time.localtime(sec)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", lt)
    if frac:
        base += "." + f"{frac:09d}".rstrip("0")
    off = lt.tm_gmtoff or 0
    if off == 0:
        return base + "Z"
    sign = "+" if off > 0 else "-"
    off = abs(off)
    return f"{base}{sign}{off // 3600:02d}:{off % 3600 // 60:02d}"


def go_errno(err: OSError) -> str:
    msg = os.strerror(err.errno) if err.errno else str(err)
    return msg[:1].lower() + msg[1:]


def path_error(op: str, path: str, err: OSError) -> str:
    return f"{op} {path}: {go_errno(err)}"


SIGNAL_NAMES = {
    signal.SIGKILL: "killed",
    signal.SIGTERM: "terminated",
    signal.SIGINT: "interrupt",
    signal.SIGHUP: "hangup",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGABRT: "aborted",
    signal.SIGPIPE: "broken pipe",
    signal.SIGQUIT: "quit",
    signal.SIGUSR1: "user defined signal 1",
    signal.SIGUSR2: "user defined signal 2",
}


def exit_error(returncode: int) -> tuple[int, str]:
    """(exit code as Go's ExitCode(), Go's err.Error()) for a finished process."""
    if returncode < 0:
        sig = -returncode
        return -1, "signal: " + SIGNAL_NAMES.get(sig, f"signal {sig}")
    return returncode, f"exit status {returncode}"


def go_header_name(name: str) -> str:
    """Go's textproto.CanonicalMIMEHeaderKey: ``EXECD-COMMANDS-TAIL-CURSOR`` -> ``Execd-Com...``."""
    if not name or any(not (c.isalnum() or c in "-!#$%&'*+.^_`|~") for c in name):
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def now_ms() -> int:
    return int(time.time() * 1000)


def go_quote(text: str) -> str:
    """Go's strconv.Quote (``%q``)."""
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escapes |= {"\v": "\\v", '"': '\\"', "\\": "\\\\"}
    out = []
    for ch in text:
        if ch in escapes:
            out.append(escapes[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_text(value: str) -> str:
    """A str that may carry undecodable bytes (surrogateescape) as Go's JSON encoder sends it:
    unchanged, since :func:`go_json` writes each such byte as the escape ``\\ufffd``."""
    return value


def go_text_tree(obj: object) -> object:
    if isinstance(obj, str):
        return go_text(obj)
    if isinstance(obj, dict):
        return {go_text(k): go_text_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [go_text_tree(v) for v in obj]
    return obj


def go_sorted_map(items: dict[str, object]) -> dict[str, object]:
    """A dict in the order Go's encoding/json writes a map: keys sorted bytewise."""
    return {k: items[k] for k in sorted(items, key=lambda k: k.encode("utf-8", "surrogateescape"))}


def go_parse_int(text: str, bits: int = 64) -> int:
    """Go's strconv.ParseInt(text, 10, bits) / Atoi: optional sign, ASCII digits only."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value
