#!/usr/bin/env python3
"""Stand-in for OpenSandbox's ``execd`` daemon (the in-sandbox HTTP API on port 44772).

Python 3.11 standard library only, one file, so it can be copied into a Debian bookworm image
as ``/execd`` and started by ``bootstrap.sh``; ``python3 execd.py --port N --access-token T``
runs it anywhere. It speaks the HTTP API of upstream execd (``execd-api.yaml``) as the real
daemons answer it.

Generation profiles
-------------------
Env ``OSB_EXECD_PROFILE`` chooses which execd generation the daemon behaves as (``PROFILE``;
``FRAMING``, ``LEGACY_FILE_API`` and ``ACCEPTS_ARGV`` follow from it; anything else is refused
at start):

* ``1.0.19`` (default) -- *recorded*: behaves as the recorded exchanges with the real v1.0.19
  (``tests/data/execd-recordings/``) show. ``tests/testbed/replay.py`` sends every recorded
  request again and compares the answers (status, reason, header names/order/values, transfer,
  body bytes, one event per chunk, and the timing that is behaviour); the few deliberate
  differences are listed in ``replay.DELIBERATE_DIFFERENCES``.
* ``1.0.18`` -- *recorded* the same way (v1.0.18): as 1.0.19 plus the older file API
  (``LEGACY_FILE_API``) and its shorter missing-``cwd`` message.
* ``1.1`` -- *modelled*, no source or binary public: events keep their line endings ("modern"
  framing below) and ``argv`` is accepted, as SDK 1.1.1 documents; all else as 1.0.19.
* ``1.0.16`` -- *modelled* "ancient" framing of v1.0.16 and older (blank lines dropped, so
  output cannot be rebuilt); only for tests that check a client refuses it. Else as 1.0.18.

Commands, as recorded
---------------------
* ``POST /command``: the body is decoded like Go's ``encoding/json`` into execd's struct (first
  JSON value only, Go's ``UnmarshalTypeError`` texts, unknown fields ignored), then validated in
  execd's order with its texts (``Command`` required, ``TimeoutMs`` gte 0, gid needs uid, cwd
  resolved, must exist and be a directory). ``cwd`` is expanded against the daemon's own
  environment like execd's pathutil: every ``$NAME``/``${NAME}`` must be defined (``p$$q`` asks
  for ``q``), then Go's ``os.Expand`` (``$1``, ``$$`` ... become empty, ``${}`` is removed, a
  final ``$`` stays) and a leading ``~``. ``bash -c`` (``sh -c`` without bash), ``envs`` over
  the daemon's env and the ``EXECD_ENVS`` file, ``uid``/``gid``, own process group, stdin
  ``/dev/null``.
* Raw output goes to ``<tmp>/<id>.stdout`` / ``.stderr``, never deleted; a command is complete
  when its main process exits (children that keep the files open do not hold it). The files are
  read every 100 ms and once more at exit at once; line framing: split on ``\n`` or ``\r``
  (``\r\n`` once, also across reads), terminator stripped, a blank line is ``"\n"``, the
  unterminated last line is sent bare at exit; stdout and stderr are tailed independently.
* Events: ``JSON\n\n``, one per HTTP chunk, Go 1.25's encoding (``<>&``, U+2028/9 escaped,
  U+0085 raw, each invalid UTF-8 byte written as the escape ``\\ufffd``, zero fields omitted); ``ping`` right after ``init``
  and every 3 s; ``execution_complete`` or ``error`` (``exit status N``; ``-1`` with ``signal:
  killed`` on timeout -- SIGKILL to the group -- or ``signal: terminated`` when interrupted);
  then the stream is held ``EXECD_API_GRACE_SHUTDOWN`` (default ``1s``), background runs too.
* Background: ``init`` and ``ping`` are sent before the process starts and the command is
  registered only after it started (status/logs/interrupt right after ``init`` can miss it:
  404/400/500 as recorded); both streams go to ``<tmp>/<id>.output``; when the main process
  exits its whole process group is SIGKILLed (``cmd &``, ``nohup``; a ``setsid`` child
  survives). ``/command/status/{id}``, ``/command/{id}/logs`` (``cursor`` a byte offset, echoed
  past the end, negative 400, unparsable 0; ``Execd-Commands-Tail-Cursor``).
* ``DELETE /command?id=``: SIGTERM to the group, checked every 50 ms, SIGKILL after 3 s, answered
  once the group is gone (zombies count as gone); 500 texts for unknown/finished ids.
* Sessions (``/session``, ``/session/{id}/run``, ``DELETE /session/{id}``): UUID ids; each run
  is ``bash --noprofile --norc /tmp/execd_bash_<n>.sh`` (the script stays, as upstream's do)
  whose exports and cwd carry over; stdout and stderr in one pipe, every non-blank line (a
  trailing ``\r`` stripped) a ``stdout`` event; no hold; a timeout kills the shell only and
  the 200 stream ends, once the pipe closes, with a bare ``{"code":"RUNTIME_ERROR",...}``.
* HTTP as Go's net/http writes it: headers sorted, then Date and the server-added
  Content-Length/Transfer-Encoding, no Server header; gin's ``404 page not found``.
* ``EXECD_ACCESS_TOKEN`` / ``--access-token``: every route requires header
  ``X-EXECD-ACCESS-TOKEN`` (401 ``{"error": ...}``). ``/proxy/<port>/<path>`` reverse proxy.
* ``/metrics`` (CPU sampled over 1 s before the answer) and ``/metrics/watch`` (labelled
  text/event-stream, bare ``JSON\n`` lines every 2 s, the first after 2 s), from /proc.

Modelled, not recorded
----------------------
* "modern" framing (profile 1.1): each event's text is exactly the bytes read since the
  previous poll (10 ms poll), line endings included; a read that stops inside a multi-byte
  UTF-8 character keeps its first bytes for the next event. Its chunking, the ``argv`` error
  texts (a missing ``argv[0]`` ends with exit code 127 and a Go ``exec`` error) are inferred.
* "ancient" framing (profile 1.0.16): as line framing, blank lines dropped.

Files
-----
*Recorded* (``files_*``, ``dirs_*``; replay-checked for 1.0.19 and 1.0.18): every file route
answers with execd's statuses, ``{"code","message"}`` texts (Go ``*PathError`` wording) and Go's
header sets. Paths: ``$NAME``/``${NAME}`` must be defined (else 500), ``$1`` ``$$`` ``${}`` ...
vanish, a ``$`` before anything else stays, a leading ``~`` is HOME, relative paths are
against the daemon's cwd, ``..`` is resolved lexically (an upload's parent dirs are made for the
cleaned path, the file is opened by the raw one). Modes: decimal digits read as octal (8/9 ->
500 after the file or directory was made), only the 0777 bits applied, no mode -> 0777 &
~umask, an overwrite keeps the mode; v1.0.19 chowns only when an owner/group is given (an
unknown one is a 500 after writing), v1.0.18 always (unknown -> root) and re-applies a
directory's mode. Uploads read the whole multipart form first (32 MiB in memory, the rest in
the temp dir), pair metadata and file parts by order, stop at the first failing pair. Download:
one byte range (206; of several only the first), a malformed Range is 416 with the file's
Content-Length and no body (then the connection closes), ranges past the end Go's plain-text
416, conditional requests as Go's ServeContent (no ETag), a directory 200 with Content-Length
2^63-1 and no body (ext4), v1.0.19 ``offset``/``limit`` lines (v1.0.18 ignores them); JSON
bodies over 2048 bytes are chunked as Go sends them. v1.0.18: no ``/directories/list``,
``/files/info`` follows symlinks, has no ``type`` and answers a missing path with 500;
``mv`` of a missing source 500; ``/files/replace`` has no ``verbose`` and an empty ``old``
inserts ``new`` around every character. ``/files/search`` walks without following links and
matches base names with doublestar-style globs (``*``, ``**``, ``?``, ``[!x]``, ``{a,b}``,
backslash escapes, ``!(p)``); a bad pattern (a bare ``!``, ``[``) is a 500. Request bodies give
Go's ``encoding/json`` errors (syntax, type mismatch with the Go 1.25 field path: map keys not
named, an embedded struct named: ``FileMetadata.Permission.mode``).
*Not reproduced*: upstream's exact lazy glob validation (a malformed part of a pattern that the
matcher never reaches is still an error here) and the race of Go's random map order when one
request names several paths that fail differently (here: the order sent).

Interactive terminal (``/pty``), as recorded
--------------------------------------------
*Recorded* (``pty_*``, every profile; the code is the block between ``# ==== PTY BEGIN ====``
and ``# ==== PTY END ====``): ``POST /pty`` (body optional; ``cwd``, expanded like other paths
and created at once; ``command`` on 1.0.19 and 1.1 only, elsewhere an unknown field: a plain
shell) answers 201 ``{"session_id"}``; a cwd that cannot be expanded or made answers 500 with
the error object followed by ``{"session_id"}`` of a session that does not exist. ``GET
/pty/{id}`` (``running``, ``output_offset``), ``DELETE /pty/{id}`` (SIGKILL to the shell's
group; a connected client gets ``exit`` -1, close 1000); unknown or deleted ids are 404
``CONTEXT_NOT_FOUND`` on every route. ``GET /pty/{id}/ws`` upgrades (gorilla's checks: a plain
GET or ``Sec-WebSocket-Version: 8`` is 400 "Bad Request"; 409 ``ALREADY_CONNECTED`` first when
a client holds the session) and starts ``bash --norc --noprofile`` (``-c <command>``) in the
session's cwd with the daemon's environment: on a real pty (``os.forkpty``, 80x24, the line
discipline's echo and ``\r\n``) or, with ``?pty=0``, on pipes (stdout type 1, stderr type 2);
the mode is fixed while that shell runs, an exited shell starts again at the next connection.
Frames: server JSON text frames end with ``\n`` (``connected``, ``exit``, ``pong``, ``error``
``INVALID_FRAME`` for an unknown type); output in binary frames (type byte 1/2); on a
reconnection one replay frame (type 3, 8-byte offset; the last 1 MiB, from ``?since=``) before
``connected``. Client frames: stdin (binary 0x00 + bytes, or JSON), ``resize``, ``signal``
(SIGINT, SIGTERM, SIGKILL, SIGQUIT, SIGHUP to the shell's process group), ``ping``; JSON Go
cannot decode, other type bytes, empty frames, a zero size, unknown signals are ignored; a
WebSocket ping gets its pong, fragments are joined, an unmasked frame gets close 1002 "bad
MASK". One client at a time; 1.0.19 and 1.1: ``?takeover=1`` answers 101 at once, the holder
gets close 4001 ``TAKEN_OVER`` and a TCP close, the newcomer retries the lock every 10 ms (1.0.18
and 1.0.16 ignore it: 409). After ``exit``: close 1000 "process exited", then TCP is closed;
after a client's close (echoed with its code) or a protocol error TCP is left open (until the
client closes it, or ``OSB_EXECD_PTY_IDLE_S``) and the session is free at once. The server
pings every ``OSB_EXECD_PTY_PING_S`` (30 s) and ends a connection that sent no frame for
``OSB_EXECD_PTY_IDLE_S`` (60 s; pongs count) by closing TCP. Output lost at exit, the real
daemon's bug, by ``OSB_EXECD_PTY_EXIT_LOSS``: ``race`` (default: the exit is handled at once
and output still on its way is dropped, from the client and the replay buffer alike; about one
exit in three here), ``always`` (output is held ``OSB_EXECD_PTY_EXIT_LOSS_MS``, 50 ms, before
it is passed on, and what is held at the exit is dropped: deterministic), ``never``.
``/proxy/<port>`` relays an upgrade (a WebSocket: the sandbox's endpoints on the testbed reach
execd's own port through it) as Go's ReverseProxy does: the backend's 101, then bytes both ways.
*Modelled*: the idle rule ends TCP without a close frame; origins are not checked; no read size
limit; a write to a gone client forwards SIGPIPE as the command routes do.

Real-daemon behaviours NOT reproduced
-------------------------------------
* The Jupyter code-interpreting API (``/code*``), OpenTelemetry, log levels, the ``--jupyter-*`` flags; signals received by the daemon are not
  forwarded to running command groups.
* Session output lines longer than 16 MiB are not an error here; session and command ids are
  random (UUIDs, 32 hex digits), not upstream's generators.
* The race upstream has in ``readFromPos`` (cursor -1 on lock contention) and execd's own log
  lines.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import os
import re
import signal
import socketserver
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_PORT = 44772
# The execd generation this daemon behaves as (see the module docstring): env OSB_EXECD_PROFILE.
PROFILES = ("1.0.19", "1.0.18", "1.1", "1.0.16")
PROFILE = os.environ.get("OSB_EXECD_PROFILE", "").strip() or "1.0.19"
# Output framing of command events: "lines" (v1.0.17+ as recorded: one event per line, the
# terminator stripped, a blank line is "\n"), "lines-drop-blank" (the modelled v1.0.16 and
# older: blank lines dropped) or "modern" (the modelled 1.1: events keep their line endings).
FRAMING = {"1.1": "modern", "1.0.16": "lines-drop-blank"}.get(PROFILE, "lines")
# A fault knob of the testbed only: keep-alive pings every 0.1 s during the hold after the last
# event (the real daemon's ping goroutine can land there), so that a stream whose client left
# early always gets written to again after the connection is gone (through a proxy too): EPIPE.
TAIL_PING = os.environ.get("OSB_EXECD_TAIL_PING", "").strip() in ("1", "true", "yes")
# v1.0.18 and older: no /directories/list, /files/info follows symlinks and has no "type", a
# missing path is a 500 (the file handlers read this).
LEGACY_FILE_API = PROFILE in ("1.0.18", "1.0.16")
# Only the modelled 1.1 accepts "argv" (older daemons ignore the unknown field).
ACCEPTS_ARGV = PROFILE == "1.1"
ACCESS_TOKEN = os.environ.get("EXECD_ACCESS_TOKEN", "")
TOKEN_HEADER = "X-EXECD-ACCESS-TOKEN"
PING_INTERVAL = 3.0
# Upstream's time per output event (encode, write, flush): the recorded `seq 1 20000` sends its
# 20,000 events, read at exit, over ~280 ms (v1.0.19) and ~320 ms (v1.0.18), Go 1.25.5 builds.
EVENT_WRITE_S = 15.0e-6


# ---------------------------------------------------------------------------------------------
# Go-compatible encoding helpers


def _go_duration(text: str) -> float:
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


GRACE = _go_duration(os.environ.get("EXECD_API_GRACE_SHUTDOWN", "1s"))


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


# ---------------------------------------------------------------------------------------------
# Paths as execd resolves them (pathutil, Go's os.Expand and filepath): one implementation for a
# command's `cwd`, the file routes and the daemon's own EXECD_ENVS file.

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _go_env_ref_names(path: str) -> list[str]:
    """Names of `$NAME` / `${NAME}` references (identifiers only), as execd validates them: an
    unclosed `${NAME` is no reference (os.Expand then eats the `${`)."""
    return [m.group(1) or m.group(2) for m in _ENV_REFERENCE.finditer(path)]


SHELL_SPECIAL = set("*#$@!?-0123456789")


def go_os_expand(text: str, getenv: Callable[[str], str]) -> str:
    """Go's os.Expand: ``$NAME``/``${NAME}`` and the shell's special names; bad ``${`` eaten."""
    out: list[str] = []
    i = j = 0
    while j < len(text):
        if text[j] == "$" and j + 1 < len(text):
            out.append(text[i:j])
            rest = text[j + 1 :]
            name, width = "", 0
            if rest[0] == "{":
                if len(rest) > 2 and rest[1] in SHELL_SPECIAL and rest[2] == "}":
                    name, width = rest[1], 3
                else:
                    close = rest.find("}", 1)
                    if close == 1:
                        width = 2  # "${}": bad syntax, eaten
                    elif close > 1:
                        name, width = rest[1:close], close + 1
                    else:
                        width = 1  # "${" without "}": eaten
            elif rest[0] in SHELL_SPECIAL:
                name, width = rest[0], 1
            else:
                while width < len(rest) and (
                    rest[width].isascii() and (rest[width].isalnum() or rest[width] == "_")
                ):
                    width += 1
                name = rest[:width]
            if name:
                out.append(getenv(name))
            elif width == 0:
                out.append("$")  # "$" not followed by a name stays
            j += width
            i = j + 1
        j += 1
    out.append(text[i:])
    return "".join(out)


def go_clean(path: str) -> str:
    """Go's filepath.Clean (lexical: no symlinks resolved)."""
    if not path:
        return "."
    rooted = path.startswith("/")
    parts: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(seg)
    joined = "/".join(parts)
    if rooted:
        return "/" + joined
    return joined or "."


def go_dir(path: str) -> str:
    """Go's filepath.Dir: everything before the last slash, cleaned."""
    return go_clean(path[: path.rfind("/") + 1])


def go_base(path: str) -> str:
    """Go's filepath.Base: the last element, trailing slashes ignored."""
    if not path:
        return "."
    path = path.rstrip("/")
    if not path:
        return "/"
    return path[path.rfind("/") + 1 :] or "/"


def go_expand_path(path: str, env: dict[str, str] | None = None) -> str:
    """execd's pathutil.ExpandPathWithEnv: `$NAME`/`${NAME}` must be defined, then os.Expand
    (positional/special names and `${}` vanish, a `$` before anything else stays) and a leading
    `~` becomes HOME. Raises ValueError with execd's text."""
    if not path:
        return ""
    merged = dict(os.environ)
    merged.update(env or {})
    missing = sorted({name for name in _go_env_ref_names(path) if name not in merged})
    if missing:
        raise ValueError("path references undefined environment variables: " + ",".join(missing))
    expanded = go_os_expand(path, lambda name: merged.get(name, ""))
    if expanded == "~" or expanded.startswith(("~/", "~\\")):
        home = os.environ.get("HOME", "")
        if not home:
            raise ValueError("$HOME is not defined")
        return home if expanded == "~" else go_clean(home + "/" + expanded[2:])
    return expanded


def go_abs(path: str) -> str:
    """Go's filepath.Abs: joined to the daemon's working directory and cleaned."""
    if path.startswith("/"):
        return go_clean(path)
    return go_clean(os.getcwd() + "/" + path)


def go_expand_abs(path: str) -> str:
    """execd's pathutil.ExpandAbsPath."""
    return go_abs(go_expand_path(path))


def load_extra_env() -> dict[str, str]:
    path = os.environ.get("EXECD_ENVS", "")
    if not path:
        return {}
    try:
        with open(go_expand_path(path), encoding="utf-8", errors="replace") as fh:
            data = fh.read()
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for line in data.split("\n"):
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# ---------------------------------------------------------------------------------------------
# Request bodies decoded like Go's encoding/json (json.Decoder / json.Unmarshal) into execd's
# request types: one implementation for the command, session and file routes.


class GoJSONError(ValueError):
    """A JSON body Go's encoding/json would reject; the message is Go's error text."""


def _go_quote_char(b: int) -> str:
    """Go's encoding/json quoteChar for the offending byte of a syntax error."""
    if b == 0x27:
        return "'\\''"
    if b == 0x22:
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 92: "\\\\"}
    if b in named:
        text = named[b]
    elif b < 0x20 or b == 0x7F:
        text = f"\\x{b:02x}"
    elif 0x80 <= b < 0xA0 or b == 0xAD:
        text = f"\\u{b:04x}"
    else:
        text = chr(b)
    return "'" + text + "'"


class _GoJSONScanner:
    """Checks one JSON value the way Go's scanner does and finds where it ends."""

    _SPACE = b" \t\r\n"

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _bad(self, context: str) -> GoJSONError:
        return GoJSONError(f"invalid character {_go_quote_char(self.data[self.pos])} {context}")

    def _peek(self) -> int:
        if self.pos >= len(self.data):
            raise EOFError
        return self.data[self.pos]

    def _skip_space(self) -> int:
        while True:
            c = self._peek()
            if c not in self._SPACE:
                return c
            self.pos += 1

    def value(self) -> None:
        c = self._skip_space()
        if c == 0x7B:  # {
            self.pos += 1
            c = self._skip_space()
            if c == 0x7D:
                self.pos += 1
                return
            while True:
                if c != 0x22:
                    raise self._bad("looking for beginning of object key string")
                self.string()
                c = self._skip_space()
                if c != 0x3A:
                    raise self._bad("after object key")
                self.pos += 1
                self.value()
                c = self._skip_space()
                if c == 0x7D:
                    self.pos += 1
                    return
                if c != 0x2C:
                    raise self._bad("after object key:value pair")
                self.pos += 1
                c = self._skip_space()
        if c == 0x5B:  # [
            self.pos += 1
            c = self._skip_space()
            if c == 0x5D:
                self.pos += 1
                return
            while True:
                self.value()
                c = self._skip_space()
                if c == 0x5D:
                    self.pos += 1
                    return
                if c != 0x2C:
                    raise self._bad("after array element")
                self.pos += 1
        if c == 0x22:
            self.string()
            return
        if c == 0x2D or 0x30 <= c <= 0x39:
            self.number()
            return
        for word in (b"true", b"false", b"null"):
            if c == word[0]:
                self.pos += 1
                for expect in word[1:]:
                    if self._peek() != expect:
                        raise self._bad(
                            f"in literal {word.decode()} (expecting {_go_quote_char(expect)})"
                        )
                    self.pos += 1
                return
        raise self._bad("looking for beginning of value")

    def string(self) -> None:
        self.pos += 1  # the opening quote
        while True:
            c = self._peek()
            if c == 0x22:
                self.pos += 1
                return
            if c == 0x5C:
                self.pos += 1
                c = self._peek()
                if c == 0x75:  # \u
                    self.pos += 1
                    for _ in range(4):
                        h = self._peek()
                        if not (0x30 <= h <= 0x39 or 0x41 <= h <= 0x46 or 0x61 <= h <= 0x66):
                            raise self._bad("in \\u hexadecimal character escape")
                        self.pos += 1
                    continue
                if c not in b'"\\/bfnrt':
                    raise self._bad("in string escape code")
                self.pos += 1
                continue
            if c < 0x20:
                raise self._bad("in string literal")
            self.pos += 1

    def _digits(self) -> None:
        while self.pos < len(self.data) and 0x30 <= self.data[self.pos] <= 0x39:
            self.pos += 1

    def number(self) -> None:
        # The number may end the input (a complete top-level value), so EOF is checked by hand.
        if self.data[self.pos] == 0x2D:
            self.pos += 1
            c = self._peek()
            if not 0x30 <= c <= 0x39:
                raise self._bad("in numeric literal")
        if self.data[self.pos] == 0x30:
            self.pos += 1
        else:
            self._digits()
        if self.pos < len(self.data) and self.data[self.pos] == 0x2E:
            self.pos += 1
            c = self._peek()
            if not 0x30 <= c <= 0x39:
                raise self._bad("after decimal point in numeric literal")
            self._digits()
        if self.pos < len(self.data) and self.data[self.pos] in b"eE":
            self.pos += 1
            c = self._peek()
            if c in b"+-":
                self.pos += 1
                c = self._peek()
            if not 0x30 <= c <= 0x39:
                raise self._bad("in exponent of numeric literal")
            self._digits()


class _GoNumber(str):
    """A JSON number kept as its literal text (Go's errors quote it)."""


# Go types the routes decode into: "string", "bool", "int", "int64", "uint32", "any"
# (interface{}), or ("map", elem, go_type), ("slice", elem, go_type),
# ("struct", name, {json_name: type}, go_type).
_GO_INT_RANGES = {
    "int": (-(1 << 63), (1 << 63) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_PERMISSION_FIELDS = {"owner": "string", "group": "string", "mode": "int"}
GO_PERMISSION = ("struct", "Permission", _PERMISSION_FIELDS, "model.Permission")
GO_PERMISSION_MAP = ("map", GO_PERMISSION, "map[string]model.Permission")
# FileMetadata embeds Permission: Go 1.24+ names the embedded struct in a field's error path
# (``FileMetadata.Permission.mode``); a field key "Embedded.name" says so.
GO_FILE_METADATA = (
    "struct",
    "FileMetadata",
    {"path": "string", **{f"Permission.{k}": v for k, v in _PERMISSION_FIELDS.items()}},
    "model.FileMetadata",
)
GO_RENAME_LIST = (
    "slice",
    ("struct", "RenameFileItem", {"src": "string", "dest": "string"}, "model.RenameFileItem"),
    "[]model.RenameFileItem",
)
GO_REPLACE_MAP = (
    "map",
    (
        "struct",
        "ReplaceFileContentItem",
        {"old": "string", "new": "string"},
        "model.ReplaceFileContentItem",
    ),
    "map[string]model.ReplaceFileContentItem",
)


def _go_type_name(schema: object) -> str:
    return schema if isinstance(schema, str) else schema[-1]  # type: ignore[index,return-value]


def _go_kind(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _GoNumber):
        return "number"
    return "string"


class _GoUnmarshal:
    """Go's encoding/json Unmarshal of an already valid value into one of the schemas above:
    case-insensitive field names, unknown fields ignored, null leaves the zero value, the first
    type mismatch reported with Go's text (decoding goes on, as Go's does)."""

    def __init__(self) -> None:
        self.error: str | None = None
        self.struct = ""
        self.fields: list[str] = []

    def _mismatch(self, value_text: str, schema: object) -> None:
        if self.error is not None:
            return
        target = _go_type_name(schema)
        if self.struct or self.fields:
            where = f"Go struct field {self.struct}.{'.'.join(self.fields)}"
        else:
            where = "Go value"
        self.error = f"json: cannot unmarshal {value_text} into {where} of type {target}"

    def run(self, value: object, schema: object) -> object:
        if value is None:
            return None
        if schema == "string":
            if isinstance(value, str) and not isinstance(value, _GoNumber):
                return value
            self._mismatch(_go_kind(value), schema)
            return None
        if schema == "bool":
            if isinstance(value, bool):
                return value
            self._mismatch(_go_kind(value), schema)
            return None
        if isinstance(schema, str) and schema in _GO_INT_RANGES:
            if isinstance(value, _GoNumber):
                lo, hi = _GO_INT_RANGES[schema]
                number = int(value) if value.lstrip("-").isdigit() else None
                if number is not None and lo <= number <= hi:
                    return number
                self._mismatch(f"number {value}", schema)
                return None
            self._mismatch(_go_kind(value), schema)
            return None
        if schema == "any":  # interface{}: the value as decoded
            return value
        assert isinstance(schema, tuple)
        kind = schema[0]
        if kind == "map":
            if not isinstance(value, dict):
                self._mismatch(_go_kind(value), schema)
                return None
            out = {}
            for key, item in value.items():
                # Go 1.25 does not name map keys in an error's field path (``envs``, not
                # ``envs.A``)
                decoded = self.run(item, schema[1])
                # null stores the element's zero value (a struct's: None, read as empty)
                out[key] = "" if decoded is None and schema[1] == "string" else decoded
            return out
        if kind == "slice":
            if not isinstance(value, list):
                self._mismatch(_go_kind(value), schema)
                return None
            return [self.run(item, schema[1]) for item in value]
        _, struct_name, fields, _go = schema
        if not isinstance(value, dict):
            self._mismatch(_go_kind(value), schema)
            return None
        result: dict[str, object] = {}
        by_json = {f.rpartition(".")[2]: f for f in fields}  # "Permission.mode" -> json "mode"
        for key, item in value.items():
            name = (
                key
                if key in by_json
                else next((f for f in by_json if f.lower() == key.lower()), None)
            )
            if name is None:
                continue
            saved, depth = self.struct, len(self.fields)
            self.struct = struct_name
            self.fields += by_json[name].split(".")
            decoded = self.run(item, fields[by_json[name]])
            del self.fields[depth:]
            self.struct = saved
            if decoded is not None:
                result[name] = decoded
        return result


def go_json_decode(data: bytes, schema: object, whole: bool = False) -> object:
    """Decode `data` into `schema` as Go does; GoJSONError carries Go's message.

    whole=False is json.NewDecoder(body).Decode (execd's request bodies): the first value only,
    "EOF" for an empty body, "unexpected EOF" for a cut one. whole=True is json.Unmarshal
    (upload metadata): nothing but space may follow, a cut value is "unexpected end of JSON
    input"."""
    scanner = _GoJSONScanner(data)
    try:
        scanner._skip_space()
    except EOFError:
        raise GoJSONError("unexpected end of JSON input" if whole else "EOF") from None
    start = scanner.pos
    try:
        scanner.value()
    except EOFError:
        raise GoJSONError("unexpected end of JSON input" if whole else "unexpected EOF") from None
    end = scanner.pos
    if whole:
        while scanner.pos < len(data):
            if data[scanner.pos] not in _GoJSONScanner._SPACE:
                raise scanner._bad("after top-level value")
            scanner.pos += 1
    value = json.loads(
        go_decode(data[start:end]),
        parse_int=_GoNumber,
        parse_float=_GoNumber,
        object_pairs_hook=lambda pairs: {
            re.sub("[\ud800-\udfff]", "\ufffd", k): v for k, v in pairs
        },
    )

    def fix(v: object) -> object:
        if isinstance(v, str) and not isinstance(v, _GoNumber):
            return re.sub("[\ud800-\udfff]", "\ufffd", v)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    decoder = _GoUnmarshal()
    result = decoder.run(fix(value), schema)
    if decoder.error is not None:
        raise GoJSONError(decoder.error)
    return result


def bind_json(raw: bytes, schema: object) -> object:
    """execd's bindJSON (json.Decoder) of a request body into `schema`; a failure is its 400."""
    try:
        return go_json_decode(raw, schema)
    except GoJSONError as e:
        raise ApiError(
            400, "INVALID_REQUEST_BODY", f"error parsing request, MAYBE invalid body format. {e}"
        ) from None


# field name -> Go type of execd's command request structs (Go matches names case-insensitively)
RUN_COMMAND_FIELDS = {
    "command": "string",
    "cwd": "string",
    "background": "bool",
    "timeout": "int64",
    "uid": "uint32",
    "gid": "uint32",
    "envs": ("map", "string", "map[string]string"),
}
RUN_IN_SESSION_FIELDS = {"command": "string", "cwd": "string", "timeout": "int64"}


def decode_go_request(raw: bytes, struct: str, fields: Mapping[str, object]) -> dict[str, object]:
    """Body -> {field: value} as Go's json.Decoder fills execd's `model.<struct>`; ApiError
    otherwise. Profile 1.1 also takes `argv` (any JSON value; validate_command checks it)."""
    if ACCEPTS_ARGV and "command" in fields:
        fields = {**fields, "argv": "any"}
    value = bind_json(raw, ("struct", struct, fields, f"model.{struct}"))
    assert value is None or isinstance(value, dict)
    return value or {}


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


# ---------------------------------------------------------------------------------------------
# Commands


class Kernel:
    def __init__(self, cid: str, content: str, background: bool, out_paths: list[str]) -> None:
        self.id = cid
        self.content = content
        self.background = background
        self.out_paths = out_paths
        self.pid = -1
        self.running = True
        self.exit_code: int | None = None
        self.error = ""
        self.started_at = time.time_ns()
        self.finished_at: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def finish(self, code: int, err: str) -> None:
        self.exit_code, self.error = code, err
        self.running = False
        self.finished_at = time.time_ns()
        self.pid = 0


KERNELS: dict[str, Kernel] = {}
SESSIONS: dict[str, dict] = {}
REG_LOCK = threading.Lock()


def forward_sigpipe() -> None:
    """What the real daemon does with the SIGPIPE of a write to a connection its client closed.

    Every running command subscribes to every signal the Go process receives (`signal.Notify`
    without a list, in runCommand and runBackgroundCommand) and forwards each one to its own
    process group; Go delivers SIGPIPE to those subscribers whatever the file descriptor. So every
    command and background process running at that moment gets SIGPIPE.
    """
    with REG_LOCK:
        pids = [k.pid for k in KERNELS.values() if k.running and k.pid > 0]
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGPIPE)


def new_id() -> str:
    return os.urandom(16).hex()


def shell() -> str:
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        if d and os.access(os.path.join(d, "bash"), os.X_OK):
            return "bash"
    return "sh"


def _group_alive(pid: int) -> bool:
    """Whether process group `pid` has a member that is not a zombie.

    Orphans of a killed group are reaped by whoever is PID 1, which may take its time; a group
    of zombies is gone for every purpose here.
    """
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def kill_group(pid: int, grace: float = 3.0) -> None:
    """execd's stop: SIGTERM to the group, checked every 50 ms; SIGKILL after `grace`."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except OSError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if not _group_alive(pid):
            return
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for _ in range(40):
        time.sleep(0.05)
        if not _group_alive(pid):
            return


def credentials(uid: int | None, gid: int | None) -> dict:
    if uid is None and gid is None:
        return {}
    kw: dict = {}
    if uid is not None:
        kw["user"] = uid
        try:
            import pwd

            pw = pwd.getpwuid(uid)
            if gid is None:
                kw["group"] = pw.pw_gid
            kw["extra_groups"] = os.getgrouplist(pw.pw_name, pw.pw_gid)
        except (KeyError, OSError):
            pass
    if gid is not None:
        kw["group"] = gid
    return kw


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
        self.splitter = None if FRAMING == "modern" else LineSplitter(FRAMING == "lines")
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
                ahead = began + (k + 1) * EVENT_WRITE_S - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        if frames:
            self._write(b"".join(frames))

    def start_pings(self, first: bool = True) -> None:
        """execd's keep-alive: one ping right away (it follows init), then one every 3 s."""
        if first:
            self.send({"type": "ping", "text": "pong", "timestamp": now_ms()})

        def loop() -> None:
            while not self.closed.wait(PING_INTERVAL):
                self.send({"type": "ping", "text": "pong", "timestamp": now_ms()})

        threading.Thread(target=loop, daemon=True).start()

    def finish(self, grace: float = 0.0) -> None:
        if grace > 0 and TAIL_PING:
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


def resolve_argv0(name: str, env: dict[str, str], cwd: str | None) -> str | None:
    if "/" in name:
        full = name if os.path.isabs(name) else os.path.join(cwd or os.getcwd(), name)
        return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
    for d in env.get("PATH", "").split(":"):
        if not d or not os.path.isabs(d):
            continue
        full = os.path.join(d, name)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return None


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_REQUEST_BODY", "invalid request, validation error " + message)


def validate_command(req: dict[str, object]) -> dict[str, object]:
    """execd's checks of a decoded RunCommandRequest, in its order and with its texts."""
    argv = req.get("argv") if ACCEPTS_ARGV else None
    if argv is not None:
        if req.get("command"):
            raise _invalid("command and argv are mutually exclusive")
        if (
            not isinstance(argv, list)
            or not argv
            or not all(type(a) is str and "\0" not in a for a in argv)
            or not argv[0]
        ):
            raise _invalid("argv[0] must be non-empty")
    problems = []
    if not req.get("command") and argv is None:
        problems.append(
            "Key: 'RunCommandRequest.Command' Error:Field validation for 'Command' failed on "
            "the 'required' tag"
        )
    timeout = req.get("timeout")
    if isinstance(timeout, int) and timeout < 0:
        problems.append(
            "Key: 'RunCommandRequest.TimeoutMs' Error:Field validation for 'TimeoutMs' failed "
            "on the 'gte' tag"
        )
    if problems:
        raise _invalid("\n".join(problems))
    if req.get("gid") is not None and req.get("uid") is None:
        raise _invalid("uid is required when gid is provided")
    cwd = str(req.get("cwd") or "")
    if cwd:
        try:
            resolved = go_expand_path(cwd)
        except ValueError as e:
            raise _invalid(f"cannot resolve working directory {go_quote(cwd)}: {e}") from None
        try:
            st = os.stat(resolved)
        except FileNotFoundError as e:
            detail = (
                "" if PROFILE in ("1.0.18", "1.0.16") else ": " + path_error("stat", resolved, e)
            )
            raise _invalid(f"working directory does not exist: {cwd}{detail}") from None
        except OSError as e:
            raise _invalid(
                f"cannot access working directory {go_quote(cwd)}: {path_error('stat', resolved, e)}"
            ) from None
        if not stat.S_ISDIR(st.st_mode):
            raise _invalid(f"working directory path is not a directory: {cwd}")
        req["cwd"] = resolved
    return req


def tmp_dir() -> str:
    import tempfile

    d = tempfile.gettempdir()
    os.makedirs(d, exist_ok=True)
    return d


def start_process(
    req: dict, cid: str, stdout_fd: int, stderr_fd: int
) -> tuple[subprocess.Popen[bytes] | None, str | None]:
    """Spawn; returns (proc, None) or (None, Go-style start error text)."""
    extra = load_extra_env()
    extra.update({str(k): str(v) for k, v in (req.get("envs") or {}).items()})
    env = dict(os.environ)
    env.update(extra)
    cwd = req.get("cwd") or None
    if req.get("argv"):
        argv = list(req["argv"])
        if resolve_argv0(argv[0], env, cwd) is None:
            if "/" in argv[0]:
                return None, f"fork/exec {argv[0]}: no such file or directory"
            return None, f'exec: "{argv[0]}": executable file not found in $PATH'
    else:
        argv = [shell(), "-c", req["command"]]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout_fd,
            stderr=stderr_fd,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
            **credentials(req.get("uid"), req.get("gid")),
        )
    except OSError as e:
        return None, path_error("fork/exec", argv[0], e)
    return proc, None


def _content(req: dict) -> str:
    return str(req.get("command") or " ".join(req.get("argv") or []))


def _reaper(proc: subprocess.Popen[bytes]) -> threading.Event:
    """An event set the moment the process has exited (and been reaped)."""
    exited = threading.Event()

    def wait() -> None:
        proc.wait()
        exited.set()

    threading.Thread(target=wait, daemon=True).start()
    return exited


def run_foreground(h: Handler, req: dict) -> None:
    cid = new_id()
    base = os.path.join(tmp_dir(), cid)
    out_path, err_path = base + ".stdout", base + ".stderr"
    # execd's raw output files: written by the process, tailed, and never deleted
    fo = os.open(out_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o777)
    fe = os.open(err_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o777)
    stream = EventStream(h)
    started = time.monotonic()
    try:
        proc, start_err = start_process(req, cid, fo, fe)
    finally:
        os.close(fo)
        os.close(fe)
    if proc is None:
        stream.send(init_event(cid))
        stream.start_pings()
        code = "127" if req.get("argv") else start_err
        stream.send(error_event(str(code), [start_err or ""]))
        stream.finish(GRACE)
        return
    kernel = Kernel(cid, _content(req), False, [out_path, err_path])
    kernel.pid, kernel.proc = proc.pid, proc
    with REG_LOCK:
        KERNELS[cid] = kernel
    exited = _reaper(proc)
    stream.send(init_event(cid))
    stream.start_pings()
    timeout = req.get("timeout") or 0
    deadline = started + timeout / 1000.0 if timeout else None
    tailers = [Tailer(out_path, "stdout"), Tailer(err_path, "stderr")]
    interval = 0.01 if FRAMING == "modern" else 0.1
    tick = started
    while True:
        tick += interval
        wake = tick if deadline is None else min(tick, deadline)
        exited.wait(max(0.0, wake - time.monotonic()))
        if not exited.is_set() and deadline is not None and time.monotonic() >= deadline:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            exited.wait()
        final = exited.is_set()
        for t in tailers:
            texts = [text for text in t.poll(final) if text]
            if texts:
                stream.send_texts(t.kind, texts)
        if final:
            break
        if time.monotonic() > tick + interval:
            tick = time.monotonic() - interval  # fell behind (a long read): no burst of polls
    code, err = exit_error(proc.returncode)
    kernel.finish(code, "" if code == 0 else err)
    if code == 0:
        stream.send(complete_event(time.monotonic() - started))
    else:
        stream.send(error_event(str(code), [err]))
    stream.finish(GRACE)


def run_background(h: Handler, req: dict) -> None:
    """execd's background run: init, then start; registered only once the process started.

    A status/logs/interrupt call made right after ``init`` can therefore miss the command, as
    on the real daemon. When the main process exits, its whole process group is SIGKILLed.
    """
    cid = new_id()
    stream = EventStream(h)
    started = time.monotonic()
    stream.send(init_event(cid))
    stream.send({"type": "ping", "text": "pong", "timestamp": now_ms()})
    out_path = os.path.join(tmp_dir(), cid + ".output")
    fd = os.open(out_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o777)
    try:
        proc, start_err = start_process(req, cid, fd, fd)
    finally:
        os.close(fd)
    kernel = Kernel(cid, _content(req), True, [out_path])
    if proc is None:
        kernel.finish(127 if req.get("argv") else 255, start_err or "")
        with REG_LOCK:
            KERNELS[cid] = kernel
        stream.send(complete_event(time.monotonic() - started))
        stream.finish(GRACE)
        return
    kernel.pid, kernel.proc = proc.pid, proc
    with REG_LOCK:
        KERNELS[cid] = kernel
    stream.start_pings(first=False)
    timeout = req.get("timeout") or 0

    def waiter() -> None:
        try:
            proc.wait(timeout / 1000.0 if timeout else None)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # the main process is gone: what is left of its process group goes with it
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        code, err = exit_error(proc.returncode)
        kernel.finish(code, "" if code == 0 else err)

    threading.Thread(target=waiter, daemon=True).start()
    stream.send(complete_event(time.monotonic() - started))
    stream.finish(GRACE)


def interrupt(cid: str) -> None:
    with REG_LOCK:
        kernel = KERNELS.get(cid)
        session = SESSIONS.get(cid)
    if kernel is not None:
        if not kernel.running or kernel.pid <= 0:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error interruptting code context. command session {cid} is not running",
            )
        kill_group(kernel.pid)
        return
    if session is not None:
        close_session(cid)
        return
    raise ApiError(500, "RUNTIME_ERROR", "error interruptting code context. no such session")


# ---------------------------------------------------------------------------------------------
# Sessions
#
# Each run is a fresh ``bash --noprofile --norc /tmp/execd_bash_<n>.sh`` (the script stays in
# /tmp, as upstream's do) whose exported variables and final cwd are carried to the next run.
# Output as upstream: stdout and stderr in one pipe, read line by line (bufio.Scanner: a
# trailing \r stripped, blank lines dropped), every line a "stdout" event; no hold at the end.

ENV_START = "__EXECD_ENV_DUMP_START__"
ENV_END = "__EXECD_ENV_DUMP_END__"
PWD_PREFIX = "__EXECD_PWD__:"
EXIT_PREFIX = "__EXIT_CODE__:"
NOT_PERSISTED = {"PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV", "ENV", "BASHOPTS", "SHELLOPTS"}
SCRIPT_SEQ = itertools.count(time.time_ns() // 1000)


def sh_quote(v: str) -> str:
    return "'" + v.replace("'", "'\"'\"'") + "'"


def close_session(sid: str) -> None:
    with REG_LOCK:
        s = SESSIONS.pop(sid, None)
    if s and s.get("pid"):
        kill_group(s["pid"], 1.0)


def _session_script(s: dict, cwd: str, cmd: str) -> str:
    lines = []
    for k in sorted(s["env"]):
        if k.isidentifier() and k not in NOT_PERSISTED:
            lines.append(f"export {k}={sh_quote(s['env'][k])}")
    if cwd:
        lines.append("cd " + sh_quote(cwd))
    script = "\n".join(lines) + "\n" + cmd + ("" if cmd.endswith("\n") else "\n")
    script += (
        "__USER_EXIT_CODE__=$?\n"
        f'printf "\\n%s\\n" "{ENV_START}"\nexport -p\nprintf "%s\\n" "{ENV_END}"\n'
        f'printf "{PWD_PREFIX}%s\\n" "$(pwd)"\nprintf "{EXIT_PREFIX}%s\\n" "$__USER_EXIT_CODE__"\n'
        'exit "$__USER_EXIT_CODE__"\n'
    )
    return script


def _parse_env_dump(env_lines: list[str]) -> dict[str, str]:
    new_env = {}
    for ln in env_lines:
        if ln.startswith("declare -x "):
            body = ln[len("declare -x ") :]
            if "=" in body:
                k, v = body.split("=", 1)
                if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
                    v = (
                        v[1:-1]
                        .replace('\\"', '"')
                        .replace("\\$", "$")
                        .replace("\\`", "`")
                        .replace("\\\\", "\\")
                    )
                new_env[k] = v
    return new_env


def run_session(h: Handler, sid: str, raw: bytes) -> None:
    req = decode_go_request(raw, "RunInSessionRequest", RUN_IN_SESSION_FIELDS)
    if not req.get("command"):
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request. Key: 'RunInSessionRequest.Command' Error:Field validation for "
            "'Command' failed on the 'required' tag",
        )
    with REG_LOCK:
        s = SESSIONS.get(sid)
    if s is None:
        raise ApiError(500, "RUNTIME_ERROR", "error running in session. context not found")
    cwd = str(req.get("cwd") or "") or s["cwd"]
    path = os.path.join(tmp_dir(), f"execd_bash_{next(SCRIPT_SEQ)}.sh")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(_session_script(s, cwd, str(req["command"])))
    stream = EventStream(h)
    started = time.monotonic()
    stream.send(init_event(sid))
    stream.start_pings()
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    s["pid"] = proc.pid
    timeout = int(req.get("timeout") or 0)
    timer = None
    timed_out = threading.Event()
    if timeout:

        def on_timeout() -> None:
            timed_out.set()
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)  # the shell only: its children live on

        timer = threading.Timer(timeout / 1000.0, on_timeout)
        timer.start()
    env_lines: list[str] = []
    in_env = False
    exit_code = None
    pwd = ""
    assert proc.stdout is not None
    for raw_line in proc.stdout:
        line = go_output_text(raw_line.rstrip(b"\n").removesuffix(b"\r"))
        if line == ENV_START:
            in_env = True
        elif line == ENV_END:
            in_env = False
        elif line.startswith(EXIT_PREFIX):
            with contextlib.suppress(ValueError):
                exit_code = int(line[len(EXIT_PREFIX) :])
        elif line.startswith(PWD_PREFIX):
            pwd = line[len(PWD_PREFIX) :]
        elif in_env:
            env_lines.append(line)
        elif line:
            stream.send_texts("stdout", [line])
    proc.wait()
    if timer:
        timer.cancel()
    s["pid"] = 0
    if timed_out.is_set():
        # upstream answers the timeout with its JSON error inside the 200 stream, unframed
        stream.send_raw(
            go_json(
                {
                    "code": "RUNTIME_ERROR",
                    "message": f"error running in session. timeout after {timeout}ms",
                }
            )
        )
        stream.finish()
        return
    new_env = _parse_env_dump(env_lines)
    if new_env:
        s["env"] = new_env
    if pwd:
        s["cwd"] = pwd
    if exit_code is None:
        exit_code = exit_error(proc.returncode)[0]
    if exit_code != 0:
        stream.send(error_event(str(exit_code), [f"exit status {exit_code}"]))
    else:
        stream.send(complete_event(time.monotonic() - started))
    stream.finish()


# ---------------------------------------------------------------------------------------------
# Filesystem
#
# The file routes answer like execd v1.0.19 (profile 1.0.19, also 1.1) or v1.0.18 (profiles
# 1.0.18 and 1.0.16, LEGACY_FILE_API), as recorded in tests/data/execd-recordings/: Go's path
# rules (os.Expand, filepath.Clean/Abs/Dir/Base, os.MkdirAll), Go's encoding/json error texts,
# Go's net/http response shapes (ServeContent, http.Error, buffered-or-chunked bodies).


def go_parse_int(text: str, bits: int = 64) -> int:
    """Go's strconv.ParseInt(text, 10, bits) / Atoi: optional sign, ASCII digits only."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def parse_mode(mode: int) -> int:
    """execd's mode: the decimal digits read as octal (strconv.ParseUint(Itoa(mode), 8, 32))."""
    text = str(mode)
    if not text.isdigit() or any(c in "89" for c in text):
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    value = int(text, 8)
    if value >= 1 << 32:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def set_ownership(path: str, owner: str, group: str) -> None:
    """SetFileOwnership. v1.0.19: only when an owner or group is given, an unknown name is an
    error. v1.0.18: always chowns; unknown names are ignored and nothing known means root."""
    import grp
    import pwd

    uid = gid = -1
    if LEGACY_FILE_API:
        if owner:
            with contextlib.suppress(KeyError):
                uid = pwd.getpwnam(owner).pw_uid
        if group:
            with contextlib.suppress(KeyError):
                gid = grp.getgrnam(group).gr_gid
        if uid == -1 and gid == -1:
            uid, gid = os.getuid(), os.getgid()
    else:
        if not owner and not group:
            return
        if owner:
            try:
                uid = pwd.getpwnam(owner).pw_uid
            except KeyError:
                raise ValueError(
                    f"failed to lookup user {owner}: user: unknown user {owner}"
                ) from None
        if group:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise ValueError(
                    f"failed to lookup group {group}: group: unknown group {group}"
                ) from None
    try:
        os.chown(path, uid, gid)
    except OSError as e:
        raise ValueError(
            f"failed to set owner/group for {path}: {path_error('chown', path, e)}"
        ) from None


def chmod_file(path: str, perm: dict) -> None:
    """ChmodFile: only the 0777 bits of the mode (Go's os.Chmod drops 04000/02000/01000 given
    as plain numbers), then the ownership. Raises ValueError with Go's texts."""
    abs_path = go_expand_abs(path)
    mode = perm.get("mode") or 0
    if mode != 0:
        bits = parse_mode(mode) & 0o777
        try:
            os.chmod(abs_path, bits)
        except OSError as e:
            raise ValueError(path_error("chmod", abs_path, e)) from None
    set_ownership(abs_path, perm.get("owner") or "", perm.get("group") or "")


def file_type(st: os.stat_result) -> str:
    import stat as s

    if s.S_ISLNK(st.st_mode):
        return "symlink"
    if s.S_ISDIR(st.st_mode):
        return "directory"
    if s.S_ISREG(st.st_mode):
        return "file"
    return "other"


def go_text(value: str) -> str:
    """A str that may carry undecodable bytes (surrogateescape) as Go's JSON encoder sends it:
    unchanged, since :func:`go_json` writes each such byte as the escape ``\\ufffd``."""
    return value


def _go_text_tree(obj: object) -> object:
    if isinstance(obj, str):
        return go_text(obj)
    if isinstance(obj, dict):
        return {go_text(k): _go_text_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_go_text_tree(v) for v in obj]
    return obj


def go_sorted_map(items: dict[str, object]) -> dict[str, object]:
    """A dict in the order Go's encoding/json writes a map: keys sorted bytewise."""
    return {k: items[k] for k in sorted(items, key=lambda k: k.encode("utf-8", "surrogateescape"))}


def file_info(path: str, st: os.stat_result, strict_owner: bool = False) -> dict:
    """model.FileInfo of `path` from `st` (v1.0.18: no `type`). An owner or group without a
    name is its number, or with strict_owner (v1.0.18's search) an error."""
    import grp
    import pwd

    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        if strict_owner:
            raise ValueError(
                f"error lookup owner for file {path}: user: unknown userid {st.st_uid}"
            ) from None
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        if strict_owner:
            raise ValueError(
                f"error lookup group for file {path}: group: unknown groupid {st.st_gid}"
            ) from None
        group = str(st.st_gid)
    info: dict = {}
    if path:
        info["path"] = path
    if not LEGACY_FILE_API:
        info["type"] = file_type(st)
    info["size"] = st.st_size
    info["modified_at"] = go_time(ns=st.st_mtime_ns)
    info["created_at"] = go_time(ns=st.st_ctime_ns)
    info["owner"] = owner
    info["group"] = group
    info["mode"] = int(oct(st.st_mode & 0o777)[2:])
    return info


def go_parse_query(raw: str) -> dict[str, list[str]]:
    """Go's url.ParseQuery as gin's c.Query sees it: pairs split on "&", "+" is a space, a pair
    with a bad %-escape or a ";" in its key is dropped; values keep their raw bytes
    (surrogateescape), so a file name that is not UTF-8 reaches the file system unchanged."""
    import re
    from urllib.parse import unquote_to_bytes

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


def file_route(method: Callable[[Handler, dict], None]) -> Callable[[Handler, dict], None]:
    """Wraps a file route: the query parsed like Go's, error texts with undecodable bytes sent
    the way Go's JSON encoder sends them (U+FFFD)."""

    import functools

    @functools.wraps(method)
    def route(self: Handler, q: dict) -> None:
        try:
            method(self, go_parse_query(urlsplit(self.path).query))
        except ApiError as e:
            e.message = go_text(e.message)
            raise

    return route


# -- /files/search globs ----------------------------------------------------------------------


class GlobSyntaxError(ValueError):
    """A /files/search pattern execd's glob package rejects ("syntax error in pattern")."""

    def __init__(self) -> None:
        super().__init__("syntax error in pattern")


def _glob_closing(pattern: str, i: int, left: str, right: str) -> int:
    """Index of the `right` that closes the `left` at pattern[i], backslash escapes skipped."""
    depth = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == left:
            depth += 1
        elif c == right:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _glob_split_alternatives(body: str) -> list[str]:
    out, depth, cur, i = [], 0, [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _glob_regex(pattern: str) -> str:
    """Translate a doublestar-style glob on one base name to a regex; GlobSyntaxError if bad.

    `*` and `**` match any run of characters of the name (a name has no `/`; `**/` may match
    nothing), `?` one character, `[...]` a class (`!`/`^` negates, `a-z` ranges, `\\`
    escapes), `{a,b}` alternatives (nested), `\\x` the character x, `!(p)` a name whose rest
    does not match p followed by the rest of the pattern.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_segment_start = i == 0 or pattern[i - 1] == "/"
            if j - i >= 2 and at_segment_start and j < n and pattern[j] == "/":
                out.append("(?:.*/)?")
                i = j + 1
                continue
            out.append(".*" if j - i >= 2 and at_segment_start and j == n else "[^/]*")
            i = j
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            k = i + 1
            negate = k < n and pattern[k] in "!^"
            if negate:
                k += 1
            if k >= n or pattern[k] == "]":
                raise GlobSyntaxError
            items: list[str] = []
            while k < n and pattern[k] != "]":
                ch = pattern[k]
                if ch == "\\":
                    k += 1
                    if k >= n:
                        raise GlobSyntaxError
                    ch = pattern[k]
                k += 1
                if k + 1 < n and pattern[k] == "-" and pattern[k + 1] != "]":
                    k += 1
                    hi = pattern[k]
                    if hi == "\\":
                        k += 1
                        if k >= n:
                            raise GlobSyntaxError
                        hi = pattern[k]
                    k += 1
                    items.append(re.escape(ch) + "-" + re.escape(hi))
                else:
                    items.append(re.escape(ch))
            if k >= n:
                raise GlobSyntaxError
            out.append("[" + ("^" if negate else "") + "".join(items) + "]")
            i = k
        elif c == "{":
            close = _glob_closing(pattern, i, "{", "}")
            if close < 0:
                raise GlobSyntaxError
            alts = _glob_split_alternatives(pattern[i + 1 : close])
            out.append("(?:" + "|".join(_glob_regex(a) for a in alts) + ")")
            i = close
        elif c == "}":
            raise GlobSyntaxError
        elif c == "!":
            if i + 1 >= n or pattern[i + 1] != "(":
                raise GlobSyntaxError
            close = _glob_closing(pattern, i + 1, "(", ")")
            if close < 0:
                raise GlobSyntaxError
            inner = _glob_regex(pattern[i + 2 : close] + pattern[close + 1 :])
            out.append("(?!(?:" + inner + r")\Z).*")
            return "".join(out)
        elif c == "\\":
            i += 1
            if i >= n:
                raise GlobSyntaxError
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_match(pattern: str, name: str) -> bool:
    """Does the base name match the /files/search pattern? GlobSyntaxError for a bad one."""
    return re.fullmatch(_glob_regex(pattern), name, re.DOTALL) is not None


def _utf8_boundaries(data: bytes) -> list[int]:
    """Offsets where Go's strings.ReplaceAll(s, "", x) inserts: the start, and after each UTF-8
    sequence (each byte of an invalid one counts alone)."""
    out = [0]
    i = 0
    while i < len(data):
        b = data[i]
        size = 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 1
        if size > 1:
            try:
                data[i : i + size].decode("utf-8")
            except UnicodeDecodeError:
                size = 1
        i += size
        out.append(i)
    return out


# -- Go's net/http response shapes for the file routes ------------------------------------------


class GoBody:
    """A Go handler's response body as net/http sends it: up to 2048 bytes are buffered and
    get a Content-Length when the handler ends; more is sent chunked, in the pieces Go's bufio
    writer produces (a write larger than the free buffer goes out as its own chunk)."""

    LIMIT = 2048

    def __init__(self, handler: Handler, status: int, headers: list[tuple[str, str]]) -> None:
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
    import calendar

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


def query_path(query: dict[str, list[str]]) -> str:
    """The required `path` query parameter; execd's 400 without it."""
    p = q1(query, "path")
    if not p:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter 'path'")
    return p


def query_abs(p: str) -> str:
    """pathutil.ExpandAbsPath of a listing's or search's `path`; execd's 500 when it fails. The
    message names the variable execd had just overwritten with "" (Go's `path, err := ...`)."""
    try:
        return go_expand_abs(p)
    except ValueError as e:
        raise ApiError(500, "RUNTIME_ERROR", f"error converting path  to absolute. {e}") from None


def query_int(raw: str, name: str, default: int, minimum: int) -> int:
    """An optional integer query parameter (strconv.Atoi, at least `minimum`); else execd's 400."""
    if not raw:
        return default
    try:
        value = go_parse_int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ApiError(400, "INVALID_REQUEST_BODY", f"invalid query parameter '{name}': {raw}")
    return value


def q1(query: dict[str, list[str]], key: str) -> str:
    vals = query.get(key)
    return vals[0] if vals else ""


# ---------------------------------------------------------------------------------------------
# multipart


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


class MultipartParser:
    """Incremental multipart/form-data parser yielding (headers, body-chunk-iterator)."""

    def __init__(self, reader: BodyReader, boundary: bytes) -> None:
        self.r = reader
        self.delim = b"\r\n--" + boundary
        self.buf = bytearray(b"\r\n")  # lets the first boundary match the same delimiter
        self.done = False

    def _fill(self) -> bool:
        data = self.r.read(262144)
        if not data:
            return False
        self.buf.extend(data)
        return True

    def parts(self):
        # skip preamble up to first delimiter
        while True:
            i = self.buf.find(self.delim)
            if i >= 0:
                del self.buf[: i + len(self.delim)]
                break
            keep = len(self.delim)
            if len(self.buf) > keep:
                del self.buf[: len(self.buf) - keep]
            if not self._fill():
                raise ValueError("multipart: NextPart: EOF")
        while True:
            while len(self.buf) < 2:
                if not self._fill():
                    raise ValueError("multipart: NextPart: EOF")
            if self.buf[:2] == b"--":
                return
            # headers
            while True:
                j = self.buf.find(b"\r\n\r\n")
                if j >= 0:
                    break
                if len(self.buf) > 65536 or not self._fill():
                    raise ValueError("multipart: NextPart: EOF")
            head = bytes(self.buf[:j]).decode("utf-8", "replace")
            del self.buf[: j + 4]
            headers: dict[str, str] = {}
            for line in head.split("\r\n"):
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            yield headers, self._body()
            if not self.done_part:
                for _ in self._body():
                    pass

    def _body(self):
        self.done_part = False
        dl = len(self.delim)
        while True:
            i = self.buf.find(self.delim)
            if i >= 0:
                chunk = bytes(self.buf[:i])
                del self.buf[: i + dl]
                self.done_part = True
                if chunk:
                    yield chunk
                return
            if len(self.buf) > dl:
                cut = len(self.buf) - dl
                chunk = bytes(self.buf[:cut])
                del self.buf[:cut]
                yield chunk
            if not self._fill():
                raise ValueError("multipart: NextPart: unexpected EOF")


def disposition(value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in value.split(";")[1:]:
        if "=" in item:
            k, v = item.strip().split("=", 1)
            out[k.strip().lower()] = (
                unquote(v.strip().strip('"'))
                if k.strip().lower() == "filename*"
                else v.strip().strip('"')
            )
    return out


# ---------------------------------------------------------------------------------------------
# metrics


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as fh:
        parts = [int(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return sum(parts), idle


METRICS_SAMPLE_S = 1.0  # /metrics measures the CPU over 1 s before it answers
METRICS_WATCH_S = 2.0  # /metrics/watch: a sample every 2 s, the first after 2 s


def _go_float(value: float) -> float | int:
    """A float64 as Go's encoding/json writes it: a whole number without ``.0``."""
    return int(value) if value.is_integer() else value


def metrics(since: tuple[int, int] | None = None) -> dict:
    """execd's metrics from /proc (the machine's figures, not a container's limits): CPU use
    since `since` (a :func:`_cpu_times` reading), or over METRICS_SAMPLE_S when not given."""
    try:
        if since is None:
            since = _cpu_times()
            time.sleep(METRICS_SAMPLE_S)
        t1, i1 = since
        t2, i2 = _cpu_times()
        pct = 100.0 * (1 - (i2 - i1) / (t2 - t1)) if t2 > t1 else 0.0
    except OSError:
        pct = 0.0
    mem = {}
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                k, v = line.split(":", 1)
                mem[k] = int(v.split()[0])
    except OSError:
        pass
    total = mem.get("MemTotal", 0) / 1024.0
    avail = mem.get("MemAvailable", mem.get("MemFree", 0)) / 1024.0
    try:
        cpus = len(os.sched_getaffinity(0))  # GOMAXPROCS
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return {
        "cpu_count": cpus,
        "cpu_used_pct": _go_float(pct),
        "mem_total_mib": _go_float(total),
        "mem_used_mib": _go_float(total - avail),
        "timestamp": now_ms(),
    }


# ---------------------------------------------------------------------------------------------
# HTTP


class Handler(BaseHTTPRequestHandler):
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
        body.write(go_json(_go_text_tree(obj)))
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

    # -- dispatch -------------------------------------------------------------------------
    def do_GET(self) -> None:
        self.dispatch("GET")

    def do_POST(self) -> None:
        self.dispatch("POST")

    def do_DELETE(self) -> None:
        self.dispatch("DELETE")

    def do_PUT(self) -> None:
        self.dispatch("PUT")

    def do_PATCH(self) -> None:
        self.dispatch("PATCH")

    def do_HEAD(self) -> None:
        self.dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self.dispatch("OPTIONS")

    def dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        path = url.path
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if ACCESS_TOKEN:
                tok = self.headers.get(TOKEN_HEADER) or ""
                if tok != ACCESS_TOKEN:
                    self.send_json(
                        401, {"error": "Unauthorized: invalid or missing header " + TOKEN_HEADER}
                    )
                    return
            if path.startswith("/proxy/"):
                self.proxy(method, path, url.query)
                return
            route = ROUTES.get((method, path))
            if route is None:
                route = self.dynamic_route(method, path)
            if route is None:
                self.send_text(404, "404 page not found", ctype="text/plain")
                return
            route(self, query)
        except ApiError as e:
            self.error_json(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def dynamic_route(self, method: str, path: str):
        if path.startswith("/pty/"):  # PTY hook
            return pty_route(method, path)
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 3 and parts[:2] == ["command", "status"]:
            return lambda h, q: h.command_status(parts[2])
        if method == "GET" and len(parts) == 3 and parts[0] == "command" and parts[2] == "logs":
            return lambda h, q: h.command_logs(parts[1], q)
        if method == "POST" and len(parts) == 3 and parts[0] == "session" and parts[2] == "run":
            return lambda h, q: run_session(h, parts[1], h.read_body())
        if method == "DELETE" and len(parts) == 2 and parts[0] == "session":
            return lambda h, q: h.delete_session(parts[1])
        return None

    # -- command routes -------------------------------------------------------------------
    def ping(self, q: dict) -> None:
        self.send_ok()

    def run_command(self, q: dict) -> None:
        raw = self.read_body()
        req = validate_command(decode_go_request(raw, "RunCommandRequest", RUN_COMMAND_FIELDS))
        if req.get("background"):
            run_background(self, req)
        else:
            run_foreground(self, req)

    def interrupt_command(self, q: dict) -> None:
        cid = q1(q, "id")
        if not cid:
            raise ApiError(400, "MISSING_QUERY", "missing query parameter 'id'")
        interrupt(cid)
        self.send_ok()

    def command_status(self, cid: str) -> None:
        with REG_LOCK:
            k = KERNELS.get(cid)
        if k is None:
            raise ApiError(404, "INVALID_REQUEST_BODY", f"command not found: {cid}")
        resp: dict = {"id": cid}
        if k.content:
            resp["content"] = k.content
        resp["running"] = k.running
        if k.exit_code is not None:
            resp["exit_code"] = k.exit_code
        if k.error:
            resp["error"] = k.error
        resp["started_at"] = go_time(ns=k.started_at)
        if k.finished_at is not None:
            resp["finished_at"] = go_time(ns=k.finished_at)
        self.send_json(200, resp)

    def command_logs(self, cid: str, q: dict) -> None:
        with REG_LOCK:
            k = KERNELS.get(cid)
        if k is None:
            raise ApiError(400, "INVALID_REQUEST_BODY", f"command not found: {cid}")
        if not k.background:
            raise ApiError(
                400, "INVALID_REQUEST_BODY", f"command {cid} is not running in background"
            )
        try:
            cursor = int(q1(q, "cursor"))  # a byte offset; what does not parse counts as 0
        except ValueError:
            cursor = 0
        if cursor < 0:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                f"error seek file: seek {k.out_paths[0]}: invalid argument",
            )
        try:
            with open(k.out_paths[0], "rb") as fh:
                fh.seek(cursor)
                data = fh.read()
                pos = fh.tell()
        except OSError as e:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                f"error open combined output file for command {cid}: "
                + path_error("open", k.out_paths[0], e),
            ) from None
        self.send_response(200)
        self.send_header("EXECD-COMMANDS-TAIL-CURSOR", str(pos))
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def create_session(self, q: dict) -> None:
        raw = self.read_body()
        req = decode_go_request(raw, "CreateContextRequest", {"cwd": "string"}) if raw else {}
        sid = str(uuid.uuid4())
        cwd = str(req.get("cwd") or "")
        with REG_LOCK:
            SESSIONS[sid] = {"cwd": cwd, "env": dict(os.environ) | load_extra_env(), "pid": 0}
        self.send_json(200, {"session_id": sid})

    def delete_session(self, sid: str) -> None:
        with REG_LOCK:
            exists = sid in SESSIONS
        if not exists:
            raise ApiError(404, "CONTEXT_NOT_FOUND", f"session {sid} not found")
        close_session(sid)
        self.send_ok()

    # -- filesystem routes ----------------------------------------------------------------
    # Statuses, texts and header sets as execd v1.0.19 / v1.0.18 answer (see the recordings).

    def file_error(self, err_text: str, not_found: bool) -> ApiError:
        """execd's handleFileError: a not-exist error is 404, anything else 500."""
        if not_found:
            return ApiError(404, "FILE_NOT_FOUND", f"file not found. {err_text}")
        return ApiError(500, "RUNTIME_ERROR", f"error accessing file: {err_text}")

    def read_go_json(self, schema: object) -> object:
        """execd's bindJSON (json.Decoder) of the request body into `schema`."""
        return bind_json(self.read_body(), schema)

    @file_route
    def files_info(self, q: dict) -> None:
        resp: dict[str, object] = {}
        for p in q.get("path", []):
            try:
                ap = go_expand_abs(p)
            except ValueError as e:
                raise self.file_error(f"invalid path {p}: {e}", False) from None
            if LEGACY_FILE_API:
                # v1.0.18: os.Stat (follows symlinks); "not found" lost its cause, so 500.
                try:
                    st = os.stat(ap)
                except FileNotFoundError:
                    raise self.file_error(f"file not found: {p}", False) from None
                except OSError as e:
                    raise self.file_error(
                        f"error accessing file {p}: {path_error('stat', ap, e)}", False
                    ) from None
            else:
                try:
                    st = os.lstat(ap)
                except FileNotFoundError as e:
                    raise self.file_error(
                        f"file not found: {p}: {path_error('lstat', ap, e)}", True
                    ) from None
                except OSError as e:
                    raise self.file_error(
                        f"error accessing file {p}: {path_error('lstat', ap, e)}", False
                    ) from None
            resp[p] = file_info(ap, st)
        self.send_json(200, go_sorted_map(resp))

    @file_route
    def remove_files(self, q: dict) -> None:
        import stat as s

        for p in q.get("path", []):
            try:
                try:
                    ap = go_expand_abs(p)
                except ValueError as e:
                    raise ValueError(f"invalid path: {e}") from None
                try:
                    st = os.stat(ap)  # follows: a dangling link "does not exist" and stays
                except FileNotFoundError:
                    continue
                except OSError as e:
                    raise ValueError(path_error("stat", ap, e)) from None
                if s.S_ISDIR(st.st_mode):
                    raise ValueError(f"path is a directory: {p}")
                try:
                    os.remove(ap)
                except OSError as e:
                    raise ValueError(
                        f"failed to remove file: {path_error('remove', ap, e)}"
                    ) from None
            except ValueError as e:
                raise ApiError(500, "RUNTIME_ERROR", f"error removing file {p}. {e}") from None
        self.send_ok()

    @file_route
    def chmod_files(self, q: dict) -> None:
        req = self.read_go_json(GO_PERMISSION_MAP) or {}
        assert isinstance(req, dict)
        for p, perm in req.items():
            try:
                chmod_file(p, perm or {})
            except ValueError as e:
                raise ApiError(
                    500, "RUNTIME_ERROR", f"error changing permissions for {p}. {e}"
                ) from None
        self.send_ok()

    @file_route
    def rename_files(self, q: dict) -> None:
        req = self.read_go_json(GO_RENAME_LIST) or []
        assert isinstance(req, list)
        for item in req:
            item = item or {}
            src_req, dst_req = item.get("src") or "", item.get("dest") or ""
            try:
                src = go_expand_abs(src_req)
            except ValueError as e:
                raise self.file_error(f"invalid source path: {e}", False) from None
            try:
                dst = go_expand_abs(dst_req)
            except ValueError as e:
                raise self.file_error(f"invalid destination path: {e}", False) from None
            try:
                os.stat(src)
            except FileNotFoundError as e:
                if LEGACY_FILE_API:
                    raise self.file_error(f"source path not found: {src_req}", False) from None
                raise self.file_error(
                    f"source path not found: {src_req}: {path_error('stat', src, e)}", True
                ) from None
            except OSError:
                pass
            try:
                _mkdir_all(go_dir(dst), 0o755)
            except OSError as e:
                raise self.file_error(
                    f"failed to create destination directory: {path_error('mkdir', e.filename, e)}",
                    isinstance(e, FileNotFoundError),
                ) from None
            if os.path.exists(dst):
                raise self.file_error(f"destination path already exists: {dst_req}", False)
            try:
                os.rename(src, dst)
            except OSError as e:
                raise self.file_error(
                    f"failed to rename file: rename {src} {dst}: {go_errno(e)}",
                    isinstance(e, FileNotFoundError),
                ) from None
        self.send_ok()

    @file_route
    def make_dirs(self, q: dict) -> None:
        req = self.read_go_json(GO_PERMISSION_MAP) or {}
        assert isinstance(req, dict)
        for d, perm in req.items():
            try:
                ap = go_expand_abs(d)
            except ValueError as e:
                raise self.file_error(str(e), False) from None
            existed = os.path.exists(ap)
            try:
                _mkdir_all(ap, 0o777)
            except OSError as e:
                raise self.file_error(
                    path_error("mkdir", e.filename, e), isinstance(e, FileNotFoundError)
                ) from None
            # v1.0.19 sets the mode and owner of a new directory only; v1.0.18 of every one.
            if LEGACY_FILE_API or not existed:
                try:
                    chmod_file(ap, perm or {})
                except ValueError as e:
                    raise self.file_error(str(e), False) from None
        self.send_ok()

    @file_route
    def remove_dirs(self, q: dict) -> None:
        for d in q.get("path", []):
            try:
                resolved = go_expand_path(d)
            except ValueError as e:
                raise ApiError(
                    500, "RUNTIME_ERROR", f"error resolving directory {d}. {e}"
                ) from None
            err = _remove_all(resolved)
            if err:
                raise ApiError(500, "RUNTIME_ERROR", f"error removing directory {d}. {err}")
        self.send_ok()

    @file_route
    def list_directory(self, q: dict) -> None:
        import stat as s

        if LEGACY_FILE_API:  # the route came with v1.0.19
            self.send_text(404, "404 page not found", ctype="text/plain")
            return
        p = query_path(q)
        depth = query_int(q1(q, "depth"), "depth", 1, minimum=0)
        ap = query_abs(p)
        try:
            st = os.lstat(ap)
        except OSError as e:
            raise self.file_error(
                path_error("lstat", ap, e), isinstance(e, FileNotFoundError)
            ) from None
        if s.S_ISLNK(st.st_mode):
            raise ApiError(
                400, "INVALID_REQUEST_BODY", f"path is a symbolic link, refusing to traverse: {ap}"
            )
        if not s.S_ISDIR(st.st_mode):
            raise ApiError(400, "INVALID_REQUEST_BODY", f"path is not a directory: {ap}")
        out: list[dict] = []

        def walk(d: str, level: int) -> None:
            try:
                names = sorted(os.listdir(d), key=os.fsencode)
            except OSError as e:
                raise ValueError(path_error("open", d, e)) from None
            for name in names:
                full = d.rstrip("/") + "/" + name
                try:
                    est = os.lstat(full)
                except OSError as e:
                    raise ValueError(path_error("lstat", full, e)) from None
                out.append(file_info(full, est))
                if s.S_ISDIR(est.st_mode) and level + 1 < depth:
                    walk(full, level + 1)

        if depth > 0:
            try:
                walk(ap, 0)
            except ValueError as e:
                raise ApiError(500, "RUNTIME_ERROR", f"error listing directory {ap}. {e}") from None
        self.send_json(200, out)

    @file_route
    def search_files(self, q: dict) -> None:
        import stat as s

        ap = query_abs(query_path(q))
        try:
            os.stat(ap)
        except OSError as e:
            raise self.file_error(
                path_error("stat", ap, e), isinstance(e, FileNotFoundError)
            ) from None
        pattern = q1(q, "pattern") or "**"
        out: list[dict] = []

        def visit(path: str, st: os.stat_result) -> None:
            # filepath.Walk: lstat info, directories entered in name order, links not followed.
            if not s.S_ISDIR(st.st_mode):
                try:
                    hit = glob_match(pattern, go_base(path))
                except GlobSyntaxError as e:
                    raise ValueError(f"invalid pattern {pattern}: {e}") from None
                if hit:
                    out.append(file_info(path, st, strict_owner=LEGACY_FILE_API))
                return
            try:
                names = sorted(os.listdir(path), key=os.fsencode)
            except FileNotFoundError:
                return
            except OSError as e:
                raise ValueError(
                    f"error accessing path {path}: {path_error('open', path, e)}"
                ) from None
            for name in names:
                full = path.rstrip("/") + "/" + name
                try:
                    est = os.lstat(full)
                except FileNotFoundError:
                    continue
                except OSError as e:
                    raise ValueError(
                        f"error accessing path {full}: {path_error('lstat', full, e)}"
                    ) from None
                visit(full, est)

        try:
            with contextlib.suppress(FileNotFoundError):
                visit(ap, os.lstat(ap))
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error searching files. {e}") from None
        self.send_json(200, out)

    @file_route
    def replace_content(self, q: dict) -> None:
        verbose = q1(q, "verbose") == "true" and not LEGACY_FILE_API
        req = self.read_go_json(GO_REPLACE_MAP) or {}
        assert isinstance(req, dict)
        results: dict[str, object] = {}
        for p, item in req.items():
            item = item or {}
            try:
                ap = go_expand_abs(p)
            except ValueError as e:
                raise self.file_error(str(e), False) from None
            try:
                st = os.stat(ap)
            except OSError as e:
                raise self.file_error(
                    path_error("stat", ap, e), isinstance(e, FileNotFoundError)
                ) from None
            try:
                with open(ap, "rb") as fh:
                    content = fh.read()
            except IsADirectoryError as e:
                raise self.file_error(path_error("read", ap, e), False) from None
            except OSError as e:
                raise self.file_error(
                    path_error("open", ap, e), isinstance(e, FileNotFoundError)
                ) from None
            old = (item.get("old") or "").encode()
            new = (item.get("new") or "").encode()
            if not old:
                if not LEGACY_FILE_API:
                    raise ApiError(400, "INVALID_REQUEST_BODY", "old content must not be empty")
                # v1.0.18: Go's ReplaceAll with "" inserts `new` around every character.
                cuts = _utf8_boundaries(content)
                import itertools

                pieces = [content[a:b] for a, b in itertools.pairwise(cuts)]
                replaced = new + b"".join(piece + new for piece in pieces)
            else:
                replaced = content.replace(old, new)
            try:
                fd = os.open(ap, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, st.st_mode & 0o777)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(replaced)
            except OSError as e:
                raise self.file_error(
                    path_error("open", ap, e), isinstance(e, FileNotFoundError)
                ) from None
            if verbose:
                results[p] = {"replacedCount": content.count(old)}
        if verbose:
            self.send_json(200, go_sorted_map(results))
        else:
            self.send_ok()

    @file_route
    def upload(self, q: dict) -> None:
        form = self._read_upload_form()
        metas, files = form.get("metadata", []), form.get("file", [])
        try:
            if not metas:
                raise ApiError(400, "INVALID_FILE_METADATA", "metadata file is missing")
            if not files:
                raise ApiError(400, "INVALID_FILE_CONTENT", "file is missing")
            if len(metas) != len(files):
                raise ApiError(
                    400,
                    "INVALID_FILE",
                    f"metadata and file count mismatch: {len(metas)} vs {len(files)}",
                )
            for meta_part, file_part in zip(metas, files, strict=False):
                meta_part.seek(0)
                try:
                    meta = go_json_decode(meta_part.read(), GO_FILE_METADATA, whole=True)
                except GoJSONError as e:
                    raise ApiError(
                        400, "INVALID_FILE_METADATA", f"invalid metadata format. {e}"
                    ) from None
                assert isinstance(meta, dict)
                if not meta.get("path"):
                    raise ApiError(400, "INVALID_FILE_METADATA", "metadata path is empty")
                file_part.seek(0)
                self._write_upload(meta, file_part)
        finally:
            for part in metas + files:
                part.close()
        self.send_ok()

    def _read_upload_form(self) -> dict[str, list]:
        """Go's ParseMultipartForm(32 MiB) as gin calls it: the whole form is read before any
        file is written; file parts (those with a filename) stay in memory up to 32 MiB in all,
        the rest is spilled to the temp dir. Any failure is execd's 400."""
        import tempfile

        ctype = self.headers.get("Content-Type") or ""
        reader = BodyReader(self.rfile, self.headers)
        boundary = ""
        media = ctype.split(";", 1)[0].strip().lower()
        for item in ctype.split(";")[1:]:
            key, _, value = item.strip().partition("=")
            if key.strip().lower() == "boundary":
                boundary = value.strip().strip('"')
        if media != "multipart/form-data" or not boundary:
            reader.drain()
            raise ApiError(400, "INVALID_FILE", "multipart form is empty")
        budget = 32 << 20
        form: dict[str, list] = {}
        try:
            for headers, body in MultipartParser(reader, boundary.encode()).parts():
                disp = disposition(headers.get("content-disposition", ""))
                name = disp.get("name", "")
                filename = disp.get("filename*") or disp.get("filename") or ""
                if not name or not filename:
                    for _ in body:  # a plain form value: not a file part
                        pass
                    continue
                spool = (
                    tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed by upload()
                        max_size=budget, dir=tmp_dir(), prefix="multipart-"
                    )
                    if budget > 0
                    else tempfile.TemporaryFile(dir=tmp_dir(), prefix="multipart-")  # noqa: SIM115
                )
                size = 0
                for chunk in body:
                    spool.write(chunk)
                    size += len(chunk)
                budget -= size
                form.setdefault(name, []).append(spool)
        except ValueError:
            for parts in form.values():
                for part in parts:
                    part.close()
            reader.drain()
            raise ApiError(400, "INVALID_FILE", "multipart form is empty") from None
        reader.drain()
        return form

    def _write_upload(self, meta: dict, body) -> None:
        target = meta["path"]
        try:
            resolved = go_expand_path(target)
        except ValueError as e:
            raise ApiError(
                500, "RUNTIME_ERROR", f"error resolving target path {target}. {e}"
            ) from None
        parent = go_dir(resolved)
        try:
            _mkdir_all(parent, 0o777)
        except OSError as e:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error creating target directory {parent}. {path_error('mkdir', e.filename, e)}",
            ) from None
        try:
            fd = os.open(resolved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o777)
        except OSError as e:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error opening destination file {resolved}. {path_error('open', resolved, e)}",
            ) from None
        try:
            while True:
                chunk = body.read(1 << 20)
                if not chunk:
                    break
                mv = memoryview(chunk)
                while mv:
                    n = os.write(fd, mv)
                    mv = mv[n:]
            with contextlib.suppress(OSError):
                os.fsync(fd)
        except OSError as e:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error copying file {resolved}. {path_error('write', resolved, e)}",
            ) from None
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            dfd = os.open(parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        perm = {
            "mode": meta.get("mode") or 0,
            "owner": meta.get("owner") or "",
            "group": meta.get("group") or "",
        }
        try:
            chmod_file(resolved, perm)
        except ValueError:
            time.sleep(0.02)
            try:
                chmod_file(resolved, perm)
            except ValueError as e:
                raise ApiError(
                    500, "RUNTIME_ERROR", f"error chmoding file {resolved}. {e}"
                ) from None

    @file_route
    def download(self, q: dict) -> None:
        p = query_path(q)
        try:
            resolved = go_expand_path(p)
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error resolving file path: {p}. {e}") from None
        raw_offset, raw_limit = q1(q, "offset"), q1(q, "limit")
        line_mode = not LEGACY_FILE_API and bool(raw_offset or raw_limit)  # v1.0.18 ignores them
        rng = self.headers.get("Range") or ""
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
            raise self.file_error(
                path_error("open", resolved, e), isinstance(e, FileNotFoundError)
            ) from None
        try:
            if line_mode:
                self._serve_lines(fd, raw_offset, raw_limit)
                return
            st = os.fstat(fd)
            # execd declares and parses ranges against the stat size; Go's ServeContent then
            # takes its own size by seeking (see seek_size).
            size = st.st_size
            base = [
                ("Content-Type", "application/octet-stream"),
                ("Content-Disposition", self._content_disposition(go_base(resolved))),
            ]
            if rng:
                ranges = parse_range(rng, size)
                if ranges is None:
                    # execd's RespondError after it declared the file's length: Go refuses a
                    # body longer than that, and closes a connection whose body fell short.
                    body = go_json({"code": "UNKNOWN"})
                    self._declared(416, base, size, body if len(body) <= size else b"")
                    return
                if ranges:
                    start, length = ranges[0]
                    self.send_response(206)
                    for k, v in base:
                        self.send_header(k, v)
                    self.send_header("Content-Range", f"bytes {start}-{start + length - 1}/{size}")
                    self.handler_header("Content-Length", str(length))
                    self.end_headers()
                    os.lseek(fd, start, os.SEEK_SET)
                    self._copy(fd, length)
                    return
            self._serve_content(fd, st, base, rng)
        finally:
            os.close(fd)

    def _declared(
        self, status: int, headers: list[tuple[str, str]], length: int, body: bytes
    ) -> None:
        """A response whose handler set Content-Length itself and wrote `body` (maybe less)."""
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.handler_header("Content-Length", str(length))
        self.end_headers()
        if body:
            self.wfile.write(body)
        if len(body) < length:
            self.close_connection = True

    def _serve_content(
        self, fd: int, st: os.stat_result, base: list[tuple[str, str]], rng: str
    ) -> None:
        """Go's http.ServeContent after execd set Content-Type/-Disposition/-Length (the last
        from the stat size): preconditions, then the size by seeking, then the body."""
        import stat as s

        headers = list(base)
        mtime_s = st.st_mtime_ns // 1_000_000_000
        if st.st_mtime_ns != 0:
            headers.append(("Last-Modified", _http_date(mtime_s)))
        cond = _go_preconditions(self.command, self.headers, mtime_s, st.st_mtime_ns == 0)
        if cond == 412:
            self._declared(412, headers, st.st_size, b"")
            return
        if cond == 304:
            self.send_response(304)
            for k, v in headers:
                if k != "Content-Type":
                    self.send_header(k, v)
            self.end_headers()
            return
        if rng and not _go_if_range(self.command, self.headers, mtime_s, st.st_mtime_ns == 0):
            rng = ""
        size = seek_size(fd)
        if size is None:
            # serveError: Last-Modified dropped, then http.Error (Content-Length dropped).
            self.send_response(500)
            self.send_header("Content-Disposition", dict(base)["Content-Disposition"])
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("X-Content-Type-Options", "nosniff")
            text = b"seeker can't seek\n"
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
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
            self.send_response(416)
            self.send_header("Content-Disposition", dict(base)["Content-Disposition"])
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("X-Content-Type-Options", "nosniff")
            text = b"invalid range: failed to overlap\n"
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        self.send_response(200)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.handler_header("Content-Length", str(size))
        self.end_headers()
        if s.S_ISREG(st.st_mode):
            self._copy(fd, size)
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
            self.wfile.write(data)
            sent += len(data)
        if sent < size:
            self.close_connection = True

    def _serve_lines(self, fd: int, raw_offset: str, raw_limit: str) -> None:
        """v1.0.19 line mode: lines (terminators stripped) offset.. (1-based), at most limit,
        joined with "\\n"; text/plain, chunked once beyond 2048 bytes."""
        offset = query_int(raw_offset, "offset", 1, minimum=1)
        limit = query_int(raw_limit, "limit", -1, minimum=1)
        body = GoBody(self, 200, [("Content-Type", "text/plain; charset=utf-8")])
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

    def _copy(self, fd: int, length: int) -> None:
        sent = 0
        sock = self.connection
        self.wfile.flush()
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
                self.wfile.write(data)
                n = len(data)
            if n == 0:
                break
            sent += n
        if sent < length:
            self.close_connection = True

    @staticmethod
    def _content_disposition(name: str) -> str:
        """execd's formatContentDisposition: an ASCII name raw (quotes and controls included),
        anything else as url.PathEscape in both parameters. Go's net/http turns CR/LF in a
        header value into spaces."""
        from urllib.parse import quote

        if all(ord(c) <= 127 for c in name):
            return 'attachment; filename="' + name.replace("\r", " ").replace("\n", " ") + '"'
        enc = quote(os.fsencode(name), safe="$&+:=@")
        return f"attachment; filename=\"{enc}\"; filename*=UTF-8''{enc}"

    def get_metrics(self, q: dict) -> None:
        self.send_json(200, metrics())

    def watch_metrics(self, q: dict) -> None:
        """Labelled text/event-stream, but bare ``JSON\\n`` lines (no blank line), one HTTP
        chunk each, every METRICS_WATCH_S seconds (the first after one interval)."""
        stream = EventStream(self)
        stream._write(b"")  # the headers at once
        due = time.monotonic()
        while not stream.broken:
            since = _cpu_times()
            due += METRICS_WATCH_S
            time.sleep(max(0.0, due - time.monotonic()))
            stream.send_raw(go_json(metrics(since)) + b"\n")

    # -- proxy ----------------------------------------------------------------------------
    def proxy(self, method: str, path: str, raw_query: str) -> None:
        import http.client

        rest = path[len("/proxy/") :]
        port, _, sub = rest.partition("/")
        if not port:
            self.send_text(400, "port is required\n")
            return
        target = "/" + sub + (("?" + raw_query) if raw_query else "")
        if is_upgrade(self) and port.isdigit():  # PTY hook: WebSocket upgrades relayed
            proxy_upgrade(self, int(port), target)
            return
        reader = BodyReader(self.rfile, self.headers)
        has_body = "Content-Length" in self.headers or reader.chunked
        body = self.read_body() if has_body else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        headers["X-Forwarded-For"] = (
            (self.headers.get("X-Forwarded-For") or "").split(",")[0]
            or self.headers.get("X-Real-IP")
            or f"{self.client_address[0]}:{self.client_address[1]}"
        )
        headers["X-Forwarded-Proto"] = "http"
        headers.pop("X-Forwarded-Host", None)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=600)
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, ValueError, http.client.HTTPException):
            self.send_text(502, "Bad Gateway\n")
            return
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP_HEADERS and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while True:
            data = resp.read1(65536)
            if not data:
                break
            self.wfile.write(http_chunk(data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        conn.close()


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


def _mkdir_all(path: str, mode: int) -> None:
    """Go's os.MkdirAll: OSError(errno, text, path) as Go's *PathError("mkdir", path)."""
    import errno
    import stat as s

    try:
        st = os.stat(path)
    except OSError:
        pass
    else:
        if s.S_ISDIR(st.st_mode):
            return
        raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    i = len(path) - 1
    while i >= 0 and path[i] == "/":
        i -= 1
    while i >= 0 and path[i] != "/":
        i -= 1
    parent = path[: max(i, 0)]
    if parent:
        _mkdir_all(parent, mode)
    try:
        os.mkdir(path, mode)
    except OSError as e:
        with contextlib.suppress(OSError):
            if s.S_ISDIR(os.lstat(path).st_mode):
                return
        raise OSError(e.errno, e.strerror, path) from None


def _remove_all(path: str) -> str:
    """Go's os.RemoveAll; "" on success, else Go's error text (paths as Go names them)."""
    import stat as s

    if not path:
        return ""
    if path == "." or path.endswith("/."):
        return f"RemoveAll {path}: invalid argument"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except NotADirectoryError as e:
        # A file in the middle: Go opens that as the parent and unlinkat fails in it.
        if not os.path.lexists(go_dir(path)):
            return ""
        return f"unlinkat {go_base(path)}: {go_errno(e)}"
    except OSError as e:
        return path_error("lstat", path, e)

    def remove_tree(p: str, name: str, pst: os.stat_result) -> str:
        if not s.S_ISDIR(pst.st_mode):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                return f"unlinkat {name}: {go_errno(e)}"
            return ""
        try:
            names = os.listdir(p)
        except OSError as e:
            return path_error("open", p, e)
        for child in names:
            full = p.rstrip("/") + "/" + child
            try:
                cst = os.lstat(full)
            except FileNotFoundError:
                continue
            err = remove_tree(full, child, cst)
            if err:
                return err
        try:
            os.rmdir(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            return f"unlinkat {name}: {go_errno(e)}"
        return ""

    return remove_tree(path, go_base(path), st)


# ==== PTY BEGIN ====
# The interactive terminal, ``/pty`` (module docstring, "Interactive terminal"): sessions, the
# shell each one runs (on a real pty, or on pipes), and the WebSocket that drives it. The
# WebSocket server side is written here with the standard library, as gorilla/websocket (the
# real daemon's library) behaves on the wire: its handshake errors, its close frames ("bad MASK",
# the echo of a client's close code) and the TCP connection it leaves open after them.

import base64  # noqa: E402
import fcntl  # noqa: E402
import hashlib  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import termios  # noqa: E402


def _pty_seconds(name: str, default: float) -> float:
    """A positive number of seconds from env `name`; NaN when it is not one (refused at start
    by :func:`pty_config_problem`)."""
    text = os.environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        return float("nan")
    return value if value > 0 else float("nan")


PTY_PING_S = _pty_seconds("OSB_EXECD_PTY_PING_S", 30.0)
"""The server pings each connection this often (WebSocket ping, empty payload)."""
PTY_IDLE_S = _pty_seconds("OSB_EXECD_PTY_IDLE_S", 60.0)
"""A connection that sent no frame (pongs count) for this long is ended (TCP closed)."""
PTY_EXIT_LOSS = os.environ.get("OSB_EXECD_PTY_EXIT_LOSS", "").strip() or "race"
"""What happens to the output a shell writes just before it exits: ``race`` (the real daemon's
bug: the exit is handled without waiting for the output still on its way, which is then dropped
when it loses the race), ``always`` (output is held for PTY_EXIT_LOSS_MS before it is passed on,
and what is held when the shell exits is dropped: the last moments' output never reaches a
client nor the replay buffer) or ``never`` (every byte is read before `exit` is sent)."""
PTY_EXIT_LOSS_MS = _pty_seconds("OSB_EXECD_PTY_EXIT_LOSS_MS", 50.0)
PTY_REPLAY_MAX = 1 << 20  # the replay buffer keeps the last 1 MiB of output
PTY_TAKEOVER = PROFILE in ("1.0.19", "1.1")  # v1.0.18 ignores ?takeover=1
PTY_COMMAND = PROFILE in ("1.0.19", "1.1")  # v1.0.18 has no `command` field
PTY_RETRY_S = 0.01  # a takeover retries the session's lock this often
PTY_SIGNALS = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
    "SIGKILL": signal.SIGKILL,
    "SIGQUIT": signal.SIGQUIT,
    "SIGHUP": signal.SIGHUP,
}
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WS_CONT, WS_TEXT, WS_BINARY, WS_CLOSE, WS_PING, WS_PONG = 0, 1, 2, 8, 9, 10
# close codes a peer may send (gorilla's isValidReceivedCloseCode)
WS_VALID_CLOSE = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013}


def pty_config_problem() -> str | None:
    """Why the /pty settings from the environment cannot be used (the daemon refuses to start)."""
    if PTY_EXIT_LOSS not in ("race", "always", "never"):
        return (
            f"OSB_EXECD_PTY_EXIT_LOSS={PTY_EXIT_LOSS!r} is not one of race, always, never "
            "(leave it unset for race, as the real daemon)"
        )
    for name, value in (
        ("OSB_EXECD_PTY_PING_S", PTY_PING_S),
        ("OSB_EXECD_PTY_IDLE_S", PTY_IDLE_S),
        ("OSB_EXECD_PTY_EXIT_LOSS_MS", PTY_EXIT_LOSS_MS),
    ):
        if value != value:  # NaN
            return f"{name}={os.environ.get(name)!r} is not a positive number"
    return None


PTY_SESSIONS: dict[str, PtySession] = {}
PTY_LOCK = threading.Lock()


class WsProtocolError(Exception):
    """A frame gorilla/websocket refuses: answered with close 1002 and this text."""


class WsCloseReceived(Exception):
    def __init__(self, payload: bytes) -> None:
        super().__init__("close")
        self.payload = payload


class PtyConn:
    """One upgraded connection: frames out (thread-safe), frames in (the handler's thread)."""

    def __init__(self, h: Handler, session: PtySession) -> None:
        self.h = h
        self.sock: socket.socket = h.connection
        self.rfile = h.rfile
        self.session = session
        self.wlock = threading.Lock()
        self.close_sent = False
        self.broken = False
        self.ready = False  # replay and `connected` sent: output may go out live
        self.ended = threading.Event()  # the connection is over (for its keep-alive thread)
        self.last_frame = time.monotonic()

    # -- writing ---------------------------------------------------------------------------
    def _send(self, opcode: int, payload: bytes) -> bool:
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
        return self._send(WS_TEXT, go_json(obj) + b"\n")

    def send_output(self, channel: int, data: bytes) -> bool:
        return self._send(WS_BINARY, bytes((channel,)) + data)

    def send_close(self, code: int | None, reason: str = "") -> bool:
        payload = b"" if code is None else struct.pack("!H", code) + reason.encode()
        return self._send(WS_CLOSE, payload[:125])

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
                self._send(WS_PONG, data)
                continue
            if opcode == WS_PONG:
                continue
            if opcode == WS_CLOSE:
                if len(data) >= 2:
                    code = struct.unpack("!H", data[:2])[0]
                    if code not in WS_VALID_CLOSE and not 3000 <= code <= 4999:
                        raise WsProtocolError(f"bad close code {code}")
                    try:
                        data[2:].decode("utf-8")
                    except UnicodeDecodeError:
                        raise WsProtocolError("invalid utf8 payload in close frame") from None
                raise WsCloseReceived(data)
            if opcode != WS_CONT:
                kind = opcode
            parts.append(data)
            if final:
                yield kind, b"".join(parts)
                parts, kind = [], 0

    def keepalive(self) -> None:
        """Pings every PTY_PING_S; ends the connection when no frame came for PTY_IDLE_S."""
        next_ping = time.monotonic() + PTY_PING_S
        while True:
            deadline = self.last_frame + PTY_IDLE_S
            now = time.monotonic()
            if self.ended.wait(max(0.0, min(next_ping, deadline) - now)):
                return
            now = time.monotonic()
            if now >= self.last_frame + PTY_IDLE_S:
                self.session.release(self)
                self.drop_tcp()
                return
            if now >= next_ping:
                self._send(WS_PING, b"")
                next_ping = now + PTY_PING_S

    def linger(self) -> None:
        """After a close answered (or a protocol error) the real daemon leaves TCP open: read and
        drop whatever comes until the client closes it, or PTY_IDLE_S without a byte."""
        with contextlib.suppress(OSError, ValueError):
            self.sock.settimeout(PTY_IDLE_S)
            while self.rfile.read1(65536):
                pass


class PtyRun:
    """One start of a session's shell: its process, its output readers, its exit."""

    def __init__(self, session: PtySession, mode: str) -> None:
        self.session = session
        self.mode = mode
        self.pid = 0
        self.master = -1  # pty mode: the terminal's master side (the stdin too)
        self.stdin: int = -1  # pipe mode
        self.exited = threading.Event()  # the process has exited (reaped)
        self.ended = False  # exit handled: later output is dropped
        self.readers: list[threading.Thread] = []
        self.pending: list[tuple[float, int, bytes]] = []  # `always`: output held back

    def start(self, cwd: str, command: str | None) -> None:
        argv = [shell(), "--norc", "--noprofile"] if shell() == "bash" else [shell()]
        if command is not None:
            argv += ["-c", command]
        env = dict(os.environ)
        env.update(load_extra_env())
        if self.mode == "pty":
            self._start_pty(argv, env, cwd)
        else:
            self._start_pipes(argv, env, cwd)
        threading.Thread(target=self._wait, daemon=True).start()
        if PTY_EXIT_LOSS == "always":
            threading.Thread(target=self._release_held, daemon=True).start()

    def _start_pty(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        winsize = struct.pack("HHHH", 24, 80, 0, 0)
        pid, master = os.forkpty()  # the child: a new session, the terminal as its ctty
        if pid == 0:  # pragma: no cover - the child, until exec
            try:
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                os.closerange(3, 65536)  # the daemon's sockets and other terminals
                fcntl.ioctl(0, termios.TIOCSWINSZ, winsize)
                if cwd:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, env)  # noqa: S606 - execd runs bash itself
            finally:
                os._exit(127)
        self.pid, self.master = pid, master
        self._reader(master, 1)

    def _start_pipes(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd or None,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdin and proc.stdout and proc.stderr
        self.pid = proc.pid
        self.stdin = os.dup(proc.stdin.fileno())
        out, err = os.dup(proc.stdout.fileno()), os.dup(proc.stderr.fileno())
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
        proc.returncode = 0  # reaped by _wait, not by Popen
        self._reader(out, 1)
        self._reader(err, 2)

    def _reader(self, fd: int, channel: int) -> None:
        t = threading.Thread(target=self._read_loop, args=(fd, channel), daemon=True)
        self.readers.append(t)
        t.start()

    def _read_loop(self, fd: int, channel: int) -> None:
        try:
            while not self.ended:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if not ready:
                    if self.exited.is_set():
                        return  # nothing more on its way (`never` waits for this)
                    continue
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: no process holds the terminal open (now)
                    data = b""
                if not data:
                    return
                if PTY_EXIT_LOSS == "always":
                    with self.session.lock:
                        self.pending.append((time.monotonic(), channel, data))
                else:
                    self.session.output(self, channel, data)
        finally:
            # closing a pty's master hangs its terminal up: a process between closing its last
            # descriptor and exiting (coreutils `cat` closes 0, 1 and 2 itself) would die of
            # SIGHUP. So the master is closed once the process has exited.
            self.exited.wait()
            with contextlib.suppress(OSError):
                os.close(fd)

    def _release_held(self) -> None:
        """`always`: pass output on once it is PTY_EXIT_LOSS_MS old; what the exit finds held is
        dropped with it."""
        hold = PTY_EXIT_LOSS_MS / 1000.0
        while not self.ended:
            time.sleep(min(0.01, hold))
            with self.session.lock:
                now = time.monotonic()
                while self.pending and now - self.pending[0][0] >= hold and not self.ended:
                    _t, channel, data = self.pending.pop(0)
                    self.session.deliver(self, channel, data)

    def _wait(self) -> None:
        _pid, status = os.waitpid(self.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self.exited.set()
        if PTY_EXIT_LOSS == "never":
            for t in self.readers:
                t.join(5.0)
        self.session.exited(self, -1 if code < 0 else code)

    def write(self, data: bytes) -> None:
        fd = self.master if self.mode == "pty" else self.stdin
        with contextlib.suppress(OSError):
            while data and not self.exited.is_set():
                data = data[os.write(fd, data) :]

    def resize(self, cols: int, rows: int) -> None:
        if self.mode == "pty" and not self.exited.is_set():
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def signal(self, sig: int) -> None:
        if not self.exited.is_set():
            with contextlib.suppress(OSError):
                os.killpg(self.pid, sig)

    def close_stdin(self) -> None:
        if self.stdin >= 0:
            with contextlib.suppress(OSError):
                os.close(self.stdin)
            self.stdin = -1


class PtySession:
    """A /pty session: its settings, replay buffer, current shell and the client holding it."""

    def __init__(self, sid: str, cwd: str, command: str | None) -> None:
        self.id = sid
        self.cwd = cwd
        self.command = command
        self.lock = threading.RLock()
        self.buffer = bytearray()  # the last PTY_REPLAY_MAX bytes of output
        self.total = 0  # output_offset: every byte ever passed on
        self.run: PtyRun | None = None
        self.holder: PtyConn | None = None
        self.deleted = False

    @property
    def running(self) -> bool:
        return self.run is not None and not self.run.ended

    def output(self, run: PtyRun, channel: int, data: bytes) -> None:
        with self.lock:
            self.deliver(run, channel, data)

    def deliver(self, run: PtyRun, channel: int, data: bytes) -> None:
        """Into the replay buffer and to the client, if any (the lock held)."""
        if run.ended or run is not self.run:
            return  # lost at exit (PTY_EXIT_LOSS)
        self.total += len(data)
        self.buffer += data
        if len(self.buffer) > PTY_REPLAY_MAX:
            del self.buffer[: len(self.buffer) - PTY_REPLAY_MAX]
        conn = self.holder
        if conn is not None and conn.ready:
            conn.send_output(channel, data)

    def exited(self, run: PtyRun, code: int) -> None:
        with self.lock:
            run.ended = True
            run.pending.clear()
            conn = self.holder if self.run is run else None
            if conn is not None:
                self.holder = None
        run.close_stdin()
        if conn is not None:
            conn.send_json({"type": "exit", "exit_code": code})
            conn.send_close(1000, "process exited")
            conn.drop_tcp()

    def release(self, conn: PtyConn) -> None:
        with self.lock:
            if self.holder is conn:
                self.holder = None

    def replay(self, since: int | None) -> tuple[int, bytes]:
        start = self.total - len(self.buffer)
        offset = start if since is None or since < start else since
        return offset, bytes(self.buffer[offset - start :])

    def attach(self, conn: PtyConn, mode: str, since: int | None) -> None:
        """Replay frame (if any), `connected`, then the shell (started if it is not running)."""
        with self.lock:
            offset, data = self.replay(since)
            if data:
                conn._send(WS_BINARY, b"\x03" + struct.pack("!Q", offset) + data)
            if self.running:
                assert self.run is not None
                mode = self.run.mode  # fixed while that shell runs
            conn.send_json({"type": "connected", "session_id": self.id, "mode": mode})
            conn.ready = True
            if not self.running and not self.deleted:
                self.run = PtyRun(self, mode)
                self.run.start(self.cwd, self.command)


def _pty_get(sid: str) -> PtySession:
    with PTY_LOCK:
        s = PTY_SESSIONS.get(sid)
    if s is None or s.deleted:
        raise ApiError(404, "CONTEXT_NOT_FOUND", f"pty session {sid} not found")
    return s


def pty_create(h: Handler, q: dict) -> None:
    """POST /pty: 201 {"session_id"}; nothing starts. A cwd that cannot be made answers 500
    with the error object and then, in the same body, a session id that does not exist."""
    raw = h.read_body()
    fields: dict[str, object] = {"cwd": "string"}
    if PTY_COMMAND:
        fields["command"] = "string"
    req: dict = {}
    if raw.strip(b" \t\r\n"):
        try:
            value = go_json_decode(
                raw, ("struct", "CreatePTYSessionRequest", fields, "model.CreatePTYSessionRequest")
            )
        except GoJSONError as e:
            raise ApiError(400, "INVALID_REQUEST_BODY", f"error parsing request: {e}") from None
        req = value if isinstance(value, dict) else {}
    sid = str(uuid.uuid4())
    cwd = str(req.get("cwd") or "")
    error = ""
    if cwd:
        try:
            cwd = go_expand_path(cwd)
        except ValueError as e:
            error = f"error resolving PTY session work directory: {e}"
        else:
            try:
                _mkdir_all(cwd, 0o755)
            except OSError as e:
                err = path_error("mkdir", e.filename or cwd, e)
                error = f"error creating PTY session work directory: {err}"
    if error:
        message = {"code": "RUNTIME_ERROR", "message": f"error creating pty session: {error}"}
        body = go_json(message) + go_json({"session_id": sid})
        h.send_response(500)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        return
    command = req.get("command") if PTY_COMMAND else None
    with PTY_LOCK:
        PTY_SESSIONS[sid] = PtySession(sid, cwd, str(command) if command else None)
    h.send_json(201, {"session_id": sid})


def pty_status(h: Handler, sid: str) -> None:
    s = _pty_get(sid)
    with s.lock:
        body = {"session_id": sid, "running": s.running, "output_offset": s.total}
    h.send_json(200, body)


def pty_delete(h: Handler, sid: str) -> None:
    """DELETE /pty/{id}: SIGKILL to the shell's group; a connected client then gets exit -1."""
    s = _pty_get(sid)
    with PTY_LOCK:
        PTY_SESSIONS.pop(sid, None)
    with s.lock:
        s.deleted = True
        run = s.run if s.running else None
    if run is not None:
        run.signal(signal.SIGKILL)
    h.send_ok()


def _ws_bad_request(h: Handler) -> None:
    """gorilla's handshake refusal: http.Error's text, with the version it speaks."""
    h.send_text(
        400,
        "Bad Request\n",
        headers={"Sec-Websocket-Version": "13", "X-Content-Type-Options": "nosniff"},
    )


def _ws_accept_key(h: Handler) -> str | None:
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


def _go_parse_bool(text: str) -> bool:
    return text in ("1", "t", "T", "TRUE", "true", "True")


def _since(q: dict) -> int | None:
    text = q1(q, "since")
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if value >= 0 else None


def pty_ws(h: Handler, sid: str, q: dict) -> None:
    """GET /pty/{id}/ws: one client at a time (409 ALREADY_CONNECTED), v1.0.19's takeover."""
    s = _pty_get(sid)
    accept = _ws_accept_key(h)
    conn = PtyConn(h, s)
    evict: PtyConn | None = None
    with s.lock:
        if s.holder is None:
            s.holder = conn
        elif PTY_TAKEOVER and accept and _go_parse_bool(q1(q, "takeover")):
            evict = s.holder
        else:
            raise ApiError(
                409,
                "ALREADY_CONNECTED",
                f"another client is already connected to pty session {sid}",
            )
    if accept is None:
        s.release(conn)
        _ws_bad_request(h)
        return
    h.close_connection = True
    h.log_request(101)
    handshake = (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    try:
        h.connection.sendall(handshake.encode())
    except OSError:
        s.release(conn)
        return
    if evict is not None and not _pty_take_over(s, evict, conn):
        conn.drop_tcp()
        return
    threading.Thread(target=conn.keepalive, daemon=True).start()
    s.attach(conn, "pipe" if q1(q, "pty") == "0" else "pty", _since(q))
    _pty_serve(s, conn)


def _pty_take_over(s: PtySession, holder: PtyConn, conn: PtyConn) -> bool:
    """The holder gets close 4001 TAKEN_OVER and a TCP close; the newcomer retries the lock
    every PTY_RETRY_S (the gap in which another request can get it first, as upstream's)."""
    s.release(holder)
    holder.send_close(4001, "TAKEN_OVER")
    holder.drop_tcp()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        time.sleep(PTY_RETRY_S)
        with s.lock:
            if s.deleted:
                return False
            if s.holder is None:
                s.holder = conn
                return True
    return False


def _pty_serve(s: PtySession, conn: PtyConn) -> None:
    """The connection's frames until it ends; the session is free again at once."""
    try:
        for kind, data in conn.messages():
            run = s.run
            if run is None:
                continue
            if kind == WS_BINARY:
                if data[:1] == b"\x00" and len(data) > 1:
                    run.write(data[1:])
            else:
                _pty_text_frame(conn, run, data)
    except WsProtocolError as e:
        s.release(conn)
        conn.send_close(1002, str(e))
        conn.linger()
    except WsCloseReceived as e:
        s.release(conn)
        code = struct.unpack("!H", e.payload[:2])[0] if len(e.payload) >= 2 else None
        conn.send_close(code)
        conn.linger()
    except (EOFError, OSError, ValueError):
        s.release(conn)
    finally:
        conn.ended.set()


def _pty_text_frame(conn: PtyConn, run: PtyRun, data: bytes) -> None:
    """A JSON text frame; what Go's json.Unmarshal refuses is ignored without a word."""
    fields = {"type": "string", "data": "string", "cols": "uint32", "rows": "uint32"}
    fields["signal"] = "string"
    try:
        frame = go_json_decode(data, ("struct", "ptyFrame", fields, "pty.frame"), whole=True)
    except GoJSONError:
        return
    if not isinstance(frame, dict) or max(frame.get("cols", 0), frame.get("rows", 0)) > 0xFFFF:
        return  # not an object, or a size Go's uint16 cannot hold
    kind = str(frame.get("type") or "")
    if kind == "stdin":
        if frame.get("data"):
            run.write(str(frame["data"]).encode("utf-8"))
    elif kind == "resize":
        cols, rows = int(frame.get("cols") or 0), int(frame.get("rows") or 0)
        if cols > 0 and rows > 0:
            run.resize(cols, rows)
    elif kind == "signal":
        sig = PTY_SIGNALS.get(str(frame.get("signal") or ""))
        if sig is not None:
            run.signal(sig)
    elif kind == "ping":
        conn.send_json({"type": "pong"})
    else:
        conn.send_json(
            {
                "type": "error",
                "error": f"unknown frame type {go_quote(kind)}",
                "code": "INVALID_FRAME",
            }
        )


def pty_route(method: str, path: str) -> Callable[[Handler, dict], None] | None:
    """The /pty/{id} and /pty/{id}/ws routes (POST /pty is in ROUTES)."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "pty" and parts[1]:
        if method == "GET":
            return lambda h, q: pty_status(h, parts[1])
        if method == "DELETE":
            return lambda h, q: pty_delete(h, parts[1])
    if len(parts) == 3 and parts[0] == "pty" and parts[2] == "ws" and method == "GET":
        return lambda h, q: pty_ws(h, parts[1], q)
    return None


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


# ==== PTY END ====


ROUTES = {
    ("GET", "/ping"): Handler.ping,
    ("POST", "/command"): Handler.run_command,
    ("DELETE", "/command"): Handler.interrupt_command,
    ("POST", "/session"): Handler.create_session,
    ("GET", "/files/info"): Handler.files_info,
    ("DELETE", "/files"): Handler.remove_files,
    ("POST", "/files/permissions"): Handler.chmod_files,
    ("POST", "/files/mv"): Handler.rename_files,
    ("GET", "/files/search"): Handler.search_files,
    ("POST", "/files/replace"): Handler.replace_content,
    ("POST", "/files/upload"): Handler.upload,
    ("GET", "/files/download"): Handler.download,
    ("GET", "/directories/list"): Handler.list_directory,
    ("POST", "/directories"): Handler.make_dirs,
    ("DELETE", "/directories"): Handler.remove_dirs,
    ("GET", "/metrics"): Handler.get_metrics,
    ("GET", "/metrics/watch"): Handler.watch_metrics,
    ("POST", "/pty"): pty_create,  # PTY hook
}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


def main(argv: list[str]) -> int:
    global ACCESS_TOKEN, GRACE
    import argparse

    ap = argparse.ArgumentParser(description="execd-compatible daemon (stdlib only)")
    ap.add_argument("--host", default=os.environ.get("EXECD_HOST", "0.0.0.0"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("EXECD_PORT") or DEFAULT_PORT))
    ap.add_argument("--access-token", default=ACCESS_TOKEN)
    ap.add_argument("--graceful-shutdown-timeout", default=None)
    ap.add_argument("--log-level", default=None)
    args, _unknown = ap.parse_known_args(argv)
    ACCESS_TOKEN = args.access_token or ""
    if args.graceful_shutdown_timeout is not None:
        GRACE = _go_duration(args.graceful_shutdown_timeout)
    if PROFILE not in PROFILES:
        sys.stderr.write(
            f"execd.py: unknown OSB_EXECD_PROFILE {PROFILE!r}; "
            f"set it to one of {', '.join(PROFILES)} (or leave it unset for 1.0.19).\n"
        )
        return 2
    problem = pty_config_problem()  # PTY hook
    if problem:
        sys.stderr.write(f"execd.py: {problem}.\n")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # hand the GIL over sooner (default 5 ms): a background command is registered within a few
    # ms of its init event, as upstream's is, also while other requests keep threads busy
    sys.setswitchinterval(0.001)
    srv = Server((args.host, args.port), Handler)
    sys.stderr.write(
        f"execd.py listening on {args.host}:{srv.server_address[1]} profile={PROFILE}\n"
    )
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        srv.serve_forever(poll_interval=0.5)
    return 0


socketserver.TCPServer.allow_reuse_address = True

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
