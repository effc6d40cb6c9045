#!/usr/bin/env python3
"""Stand-in for OpenSandbox's ``execd`` daemon (the in-sandbox HTTP API on port 44772).

Python 3.11 standard library only, one file, so it can be copied into a Debian bookworm image
as ``/execd`` and started by ``bootstrap.sh``. It speaks the HTTP API of upstream execd as
described by ``execd-api.yaml`` and as the ``opensandbox`` Python SDK 1.1.1 uses it.

Checked on 2026-11-29 against the upstream Go source of ``components/execd`` in
alibaba/OpenSandbox at commit 4db3a993 (2026-06-12; tags docker/execd/v1.0.12 .. v1.0.18), plus
the SDK 1.1.1 request models for the newer ``argv`` field.

What it reproduces
------------------
* ``GET /ping``; ``POST /command`` (``command`` via ``bash -c``, ``sh -c`` without bash;
  ``argv`` exec'd directly), ``cwd`` (validated first: missing cwd is a 400), ``envs`` layered
  over the daemon environment and the ``EXECD_ENVS`` file, ``timeout`` ms (SIGKILL of the process
  group, exit code -1, traceback ``signal: killed``), ``uid``/``gid``, own process group per
  command, stdin ``/dev/null``. Events are bare JSON + ``\\n\\n`` encoded like Go's
  ``encoding/json`` (compact, ``<>&`` escaped, invalid UTF-8 replaced by U+FFFD *per byte*),
  zero-valued fields omitted (``execution_time`` is absent when 0 ms), a ``ping`` event every 3 s,
  and the stream stays open ``EXECD_API_GRACE_SHUTDOWN`` (Go duration, default ``1s``) after the
  last event, as upstream's controller sleeps before returning.
* Output is captured into files under the temp dir (as upstream does), so a command is complete
  when its main process exits even if background children keep the descriptors open.
* Framing, chosen by ``OSB_EXECD_FRAMING``:
  - ``legacy`` (execd <= 1.0.x, after PR #902): upstream's ``readFromPos``: output files are
    polled every 100 ms, split on ``\\n`` *or* ``\\r`` (a ``\\r\\n`` pair counts once, also when
    split across polls), terminator stripped, a blank line is the text ``"\\n"``, an incomplete
    last line is emitted without newline at exit, no line length limit (bufio.Reader, not
    Scanner). stdout and stderr are tailed independently, so their interleaving is lost.
  - ``ancient`` (before PR #902): the same, but blank lines are dropped.
  - ``modern`` (default): each event's text is exactly the bytes read since the previous poll
    (10 ms poll), line endings included, boundaries anywhere -- also inside a line; a read that
    stops inside a multi-byte UTF-8 character keeps that character's first bytes for the next
    event (JSON text cannot carry half a character), while bytes that are not UTF-8 at all
    become U+FFFD per byte, as Go's ``encoding/json`` does. (The modern execd source was not in the mirror available on
    2026-11-29; this framing follows the project's facts note and the SDK's ``argv`` docs.)
* Background commands (combined output file, ``/command/status/{id}``, ``/command/{id}/logs``
  where ``cursor`` is a *byte* offset and ``EXECD-COMMANDS-TAIL-CURSOR`` the new offset),
  ``DELETE /command?id=`` (SIGTERM to the group, up to 3 s, then SIGKILL) for background and
  foreground commands and sessions.
* Sessions: each run is a fresh ``bash --noprofile --norc script`` whose exported variables and
  final cwd are carried to the next run; stdout+stderr combined, one event per line (Scanner).
* Files: the upload/download/info/search/mv/permissions/replace/directories endpoints with
  upstream's quirks: ``mode`` is decimal digits read as octal (8/9 rejected with Go's
  ``strconv.ParseUint`` error), mode 0/absent means no chmod (new files get 0777 & ~umask),
  always chown (owner/group names; unknown names ignored; none -> daemon's uid/gid), uploads
  create parent dirs, truncate, follow symlinks, are not atomic, and a multi-file upload stops at
  the first error. Errors are ``{"code","message"}`` with Go ``os.PathError`` texts. Missing
  download -> 404; download of a directory -> 500 ``seeker can't seek`` (overlayfs behaviour);
  reading a FIFO blocks; ``DELETE /files`` refuses directories and ignores missing paths;
  ``DELETE /directories`` is RemoveAll. Upload bodies are parsed incrementally and streamed to
  disk (chunked or Content-Length).
* ``EXECD_ACCESS_TOKEN`` / ``--access-token``: every route requires header
  ``X-EXECD-ACCESS-TOKEN`` (401 ``{"error": ...}``). ``/proxy/<port>/<path>`` reverse proxy.
* ``/metrics``, ``/metrics/watch`` from /proc.

Real-daemon behaviours NOT reproduced
-------------------------------------
* The Jupyter code-interpreting API (``/code*``), PTY sessions (``/pty*``), websocket proxying,
  OpenTelemetry, log levels, the ``--jupyter-*`` flags.
* Upstream parses the whole multipart form (Go memory/temp files) *before* writing any file, so
  a malformed form or a metadata/file count mismatch fails before anything is written; here
  pairs are written as they stream in and such errors surface after earlier files were written.
  Upstream fsyncs each upload; this daemon does not.
* ``/files/download`` ``offset``/``limit`` line mode (spec'd, absent from the checked source).
* Modern framing's exact chunking and the modern daemon's ``argv`` error texts are inferred,
  not checked; a missing ``argv[0]`` ends with exit code 127 and a Go ``exec`` error text.
* Session runs that time out end with an error event (evalue ``-1``) instead of upstream's
  late JSON error; session output lines longer than 16 MiB are not an error here.
* Signals received by the daemon are not forwarded to running command groups.
* The race upstream has in ``readFromPos`` (cursor -1 on lock contention) and any exact
  timestamp/log-line format; command/session ids are random hex, not upstream's format.
* Glob semantics of ``/files/search`` are fnmatch-based (``*``, ``**``, ``?``, ``[]``, ``{a,b}``
  on the base name), not upstream's own glob package.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import signal
import socketserver
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

DEFAULT_PORT = 44772
FRAMING = os.environ.get("OSB_EXECD_FRAMING", "modern").strip().lower() or "modern"
ACCESS_TOKEN = os.environ.get("EXECD_ACCESS_TOKEN", "")
TOKEN_HEADER = "X-EXECD-ACCESS-TOKEN"
PING_INTERVAL = 3.0


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


def _go_replace(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError)
    return "\ufffd", exc.start + 1


codecs.register_error("execd-go-replace", _go_replace)


def go_json(obj: object) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    text = (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return text.encode("utf-8")


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


def now_ms() -> int:
    return int(time.time() * 1000)


def expand_path(path: str, env: dict[str, str] | None = None) -> str:
    """pathutil.ExpandPathWithEnv: $VAR/${VAR} (must be defined) and leading ~."""
    if not path:
        return ""
    import re

    merged = dict(os.environ)
    merged.update(env or {})
    pattern = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
    missing = sorted({m.group(1) or m.group(2) for m in pattern.finditer(path)} - set(merged))
    if missing:
        raise ValueError("path references undefined environment variables: " + ",".join(missing))
    expanded = pattern.sub(lambda m: merged[m.group(1) or m.group(2)], path)
    if expanded == "~" or expanded.startswith("~/"):
        home = os.path.expanduser("~")
        return home if expanded == "~" else os.path.join(home, expanded[2:])
    return expanded


def expand_abs(path: str) -> str:
    return os.path.abspath(expand_path(path))


def load_extra_env() -> dict[str, str]:
    path = os.environ.get("EXECD_ENVS", "")
    if not path:
        return {}
    try:
        with open(expand_path(path), encoding="utf-8", errors="replace") as fh:
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


def new_id() -> str:
    return os.urandom(16).hex()


def shell() -> str:
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        if d and os.access(os.path.join(d, "bash"), os.X_OK):
            return "bash"
    return "sh"


def kill_group(pid: int, grace: float = 3.0) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except OSError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


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


class LineSplitter:
    """Upstream readFromPos: split on \\n or \\r, CRLF once, blank lines -> "\\n"."""

    def __init__(self, keep_blank: bool) -> None:
        self.buf = bytearray()
        self.cr = False
        self.keep_blank = keep_blank

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        for b in data:
            if b in (10, 13):
                if self.buf:
                    out.append(bytes(self.buf))
                    self.buf.clear()
                elif b == 10 and self.cr:
                    pass
                elif self.keep_blank:
                    out.append(b"\n")
                self.cr = b == 13
                continue
            self.cr = False
            self.buf.append(b)
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
    """Follow one output file and turn new bytes into event texts per the framing mode."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        self.pos = 0
        self.splitter = None if FRAMING == "modern" else LineSplitter(FRAMING == "legacy")
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
            return [go_decode(data)] if data else []
        if len(data) > 1 << 20:
            # fast path for very long lines: avoid the per-byte loop when there is no terminator
            if b"\n" not in data and b"\r" not in data:
                self.splitter.buf.extend(data)
                if self.splitter.buf:
                    self.splitter.cr = False
                chunks: list[bytes] = []
            else:
                chunks = self.splitter.feed(data)
        else:
            chunks = self.splitter.feed(data)
        if final:
            chunks += self.splitter.flush()
        return [go_decode(c) for c in chunks]


class EventStream:
    """Writes bare-JSON SSE frames on a chunked HTTP/1.1 response, thread-safe, with pings."""

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

    def send(self, event: dict) -> None:
        payload = go_json(event) + b"\n\n"
        with self.lock:
            if self.broken:
                return
            try:
                self._start()
                self.h.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
                self.h.wfile.flush()
            except OSError:
                self.broken = True

    def start_pings(self) -> None:
        def loop() -> None:
            while not self.closed.wait(PING_INTERVAL):
                self.send({"type": "ping", "text": "pong", "timestamp": now_ms()})

        threading.Thread(target=loop, daemon=True).start()

    def finish(self, grace: float = 0.0) -> None:
        if grace > 0:
            time.sleep(grace)
        self.closed.set()
        with self.lock:
            if self.broken:
                return
            try:
                self._start()
                self.h.wfile.write(b"0\r\n\r\n")
                self.h.wfile.flush()
            except OSError:
                self.broken = True


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
        "error": {"ename": "CommandExecError", "evalue": evalue, "traceback": traceback},
        "timestamp": now_ms(),
    }


def text_event(kind: str, text: str) -> dict | None:
    if not text:
        return None
    return {"type": kind, "text": text, "timestamp": now_ms()}


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


def validate_command(req: object) -> dict:
    if not isinstance(req, dict):
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "error parsing request, MAYBE invalid body format. invalid JSON",
        )
    command = req.get("command")
    argv = req.get("argv") if FRAMING == "modern" else None
    if not command and not argv:
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request, validation error Key: 'RunCommandRequest.Command' Error:"
            "Field validation for 'Command' failed on the 'required' tag",
        )
    if command and argv:
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request, validation error command and argv are mutually exclusive",
        )
    if argv is not None and (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(a, str) and "\0" not in a for a in argv)
        or not argv[0]
    ):
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request, validation error argv[0] must be non-empty",
        )
    timeout = req.get("timeout")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 0):
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request, validation error Key: 'RunCommandRequest.TimeoutMs' Error:"
            "Field validation for 'TimeoutMs' failed on the 'gte' tag",
        )
    if req.get("gid") is not None and req.get("uid") is None:
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "invalid request, validation error uid is required when gid is provided",
        )
    envs = req.get("envs") or {}
    if not isinstance(envs, dict):
        raise ApiError(
            400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. envs"
        )
    cwd = req.get("cwd") or ""
    if cwd:
        try:
            resolved = expand_path(cwd)
        except ValueError as e:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                f"invalid request, validation error cannot resolve working directory {cwd!r}: {e}",
            ) from None
        try:
            st = os.stat(resolved)
        except FileNotFoundError as e:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "invalid request, validation error working directory does not exist: "
                f"{cwd}: {path_error('stat', resolved, e)}",
            ) from None
        except OSError as e:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "invalid request, validation error cannot access working directory "
                f"{cwd!r}: {path_error('stat', resolved, e)}",
            ) from None
        import stat as stat_mod

        if not stat_mod.S_ISDIR(st.st_mode):
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "invalid request, validation error working directory path is not a directory: "
                f"{cwd}",
            )
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
    cwd = expand_path(req.get("cwd") or "", extra) or None
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


def run_foreground(h: Handler, req: dict) -> None:
    cid = new_id()
    base = os.path.join(tmp_dir(), cid)
    out_path, err_path = base + ".stdout", base + ".stderr"
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
        stream.send({"type": "init", "text": cid, "timestamp": now_ms()})
        code = "127" if req.get("argv") else start_err
        stream.send(error_event(str(code), [start_err or ""]))
        stream.finish(GRACE)
        _unlink(out_path, err_path)
        return
    kernel = Kernel(
        cid, req.get("command") or " ".join(req.get("argv") or []), False, [out_path, err_path]
    )
    kernel.pid, kernel.proc = proc.pid, proc
    with REG_LOCK:
        KERNELS[cid] = kernel
    stream.send({"type": "init", "text": cid, "timestamp": now_ms()})
    stream.start_pings()
    timeout = req.get("timeout") or 0
    deadline = started + timeout / 1000.0 if timeout else None
    tailers = [Tailer(out_path, "stdout"), Tailer(err_path, "stderr")]
    interval = 0.01 if FRAMING == "modern" else 0.1
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(interval)
        if proc.returncode is None and deadline is not None and time.monotonic() >= deadline:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        final = proc.returncode is not None
        for t in tailers:
            for text in t.poll(final):
                ev = text_event(t.kind, text)
                if ev:
                    stream.send(ev)
        if final:
            break
    code, err = exit_error(proc.returncode)
    kernel.finish(code, "" if code == 0 else err)
    if code == 0:
        stream.send(complete_event(time.monotonic() - started))
    else:
        stream.send(error_event(str(code), [err]))
    _unlink(out_path, err_path)
    stream.finish(GRACE)


def _unlink(*paths: str) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            os.unlink(p)


def run_background(h: Handler, req: dict) -> None:
    cid = new_id()
    stream = EventStream(h)
    started = time.monotonic()
    stream.send({"type": "init", "text": cid, "timestamp": now_ms()})
    out_path = os.path.join(tmp_dir(), cid + ".output")
    fd = os.open(out_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o777)
    kernel = Kernel(cid, req.get("command") or " ".join(req.get("argv") or []), True, [out_path])
    with REG_LOCK:
        KERNELS[cid] = kernel
    try:
        proc, start_err = start_process(req, cid, fd, fd)
    finally:
        os.close(fd)
    if proc is None:
        kernel.finish(127 if req.get("argv") else 255, start_err or "")
        stream.send(complete_event(time.monotonic() - started))
        stream.finish(GRACE)
        return
    kernel.pid, kernel.proc = proc.pid, proc
    timeout = req.get("timeout") or 0

    def waiter() -> None:
        try:
            proc.wait(timeout / 1000.0 if timeout else None)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
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

ENV_START = "__EXECD_ENV_DUMP_START__"
ENV_END = "__EXECD_ENV_DUMP_END__"
PWD_PREFIX = "__EXECD_PWD__:"
EXIT_PREFIX = "__EXIT_CODE__:"
NOT_PERSISTED = {"PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV", "ENV", "BASHOPTS", "SHELLOPTS"}


def sh_quote(v: str) -> str:
    return "'" + v.replace("'", "'\"'\"'") + "'"


def close_session(sid: str) -> None:
    with REG_LOCK:
        s = SESSIONS.pop(sid, None)
    if s and s.get("pid"):
        kill_group(s["pid"], 1.0)


def run_session(h: Handler, sid: str, req: dict) -> None:
    with REG_LOCK:
        s = SESSIONS.get(sid)
    if s is None:
        raise ApiError(404, "CONTEXT_NOT_FOUND", f"session {sid} not found")
    if not isinstance(req, dict) or not req.get("command"):
        raise ApiError(
            400,
            "INVALID_REQUEST_BODY",
            "error parsing request, MAYBE invalid body format. command is required",
        )
    cwd = expand_path(req.get("cwd") or "") or s["cwd"]
    lines = []
    for k in sorted(s["env"]):
        if k.isidentifier() and k not in NOT_PERSISTED:
            lines.append(f"export {k}={sh_quote(s['env'][k])}")
    if cwd:
        lines.append("cd " + sh_quote(cwd))
    cmd = req["command"]
    script = "\n".join(lines) + "\n" + cmd + ("" if cmd.endswith("\n") else "\n")
    script += (
        "__USER_EXIT_CODE__=$?\n"
        f'printf "\\n%s\\n" "{ENV_START}"\nexport -p\nprintf "%s\\n" "{ENV_END}"\n'
        f'printf "{PWD_PREFIX}%s\\n" "$(pwd)"\nprintf "{EXIT_PREFIX}%s\\n" "$__USER_EXIT_CODE__"\n'
        'exit "$__USER_EXIT_CODE__"\n'
    )
    import tempfile

    fd, path = tempfile.mkstemp(prefix="execd_bash_", suffix=".sh")
    with os.fdopen(fd, "w") as fh:
        fh.write(script)
    stream = EventStream(h)
    started = time.monotonic()
    stream.send({"type": "init", "text": sid, "timestamp": now_ms()})
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    s["pid"] = proc.pid
    timeout = req.get("timeout") or 0
    timer = None
    timed_out = threading.Event()
    if timeout:

        def on_timeout() -> None:
            timed_out.set()
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout / 1000.0, on_timeout)
        timer.start()
    env_lines: list[str] = []
    in_env = False
    exit_code = None
    pwd = ""
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = go_decode(raw.rstrip(b"\n").removesuffix(b"\r"))
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
        else:
            ev = text_event("stdout", line)
            if ev:
                stream.send(ev)
    proc.wait()
    if timer:
        timer.cancel()
    s["pid"] = 0
    _unlink(path)
    if timed_out.is_set():
        stream.send(error_event("-1", [f"timeout after {timeout}ms"]))
        stream.finish(GRACE)
        return
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
    if new_env:
        s["env"] = new_env
    if pwd:
        s["cwd"] = pwd
    if exit_code is None:
        exit_code = exit_error(proc.returncode)[0]
    if exit_code != 0:
        stream.send(error_event(str(exit_code), [f"command exited with code {exit_code}"]))
    else:
        stream.send(complete_event(time.monotonic() - started))
    stream.finish(GRACE)


# ---------------------------------------------------------------------------------------------
# Filesystem


def parse_mode(mode: int) -> int:
    text = str(mode)
    try:
        if text.startswith(("-", "+")):
            raise ValueError
        return int(text, 8)
    except ValueError:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax') from None


def set_ownership(path: str, owner: str, group: str) -> None:
    import grp
    import pwd

    uid = gid = -1
    if owner:
        with contextlib.suppress(KeyError):
            uid = pwd.getpwnam(owner).pw_uid
    if group:
        with contextlib.suppress(KeyError):
            gid = grp.getgrnam(group).gr_gid
    if uid == -1 and gid == -1:
        uid, gid = os.getuid(), os.getgid()
    try:
        os.chown(path, uid, gid)
    except OSError as e:
        raise ValueError(
            f"failed to set owner/group for {path}: {path_error('chown', path, e)}"
        ) from None


def chmod_file(path: str, perm: dict) -> None:
    """ChmodFile: returns Go-style error text via ValueError."""
    try:
        abs_path = expand_abs(path)
    except ValueError:
        raise
    mode = perm.get("mode") or 0
    if not isinstance(mode, int):
        raise ValueError("json: cannot unmarshal into Go struct field Permission.mode of type int")
    if mode != 0:
        m = parse_mode(mode)
        try:
            os.chmod(abs_path, m)
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


def file_info(path: str, st: os.stat_result) -> dict:
    import grp
    import pwd

    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    size = st.st_size
    info: dict = {"path": path, "type": file_type(st), "size": size}
    info["modified_at"] = go_time(ns=st.st_mtime_ns)
    info["created_at"] = go_time(ns=st.st_ctime_ns)
    info["owner"] = owner
    info["group"] = group
    info["mode"] = int(oct(st.st_mode & 0o777)[2:])
    return info


def brace_expand(pattern: str) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    end = pattern.find("}", start)
    if end < 0:
        return [pattern]
    out = []
    for alt in pattern[start + 1 : end].split(","):
        out.extend(brace_expand(pattern[:start] + alt + pattern[end + 1 :]))
    return out


def glob_match(pattern: str, name: str) -> bool:
    import fnmatch

    return any(fnmatch.fnmatchcase(name, p.replace("**", "*")) for p in brace_expand(pattern))


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


def metrics() -> dict:
    try:
        t1, i1 = _cpu_times()
        time.sleep(0.1)
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
    return {
        "cpu_count": float(os.cpu_count() or 1),
        "cpu_used_pct": round(pct, 2),
        "mem_total_mib": total,
        "mem_used_mib": total - avail,
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

    # -- helpers --------------------------------------------------------------------------
    def send_json(self, status: int, obj: object) -> None:
        body = go_json(obj)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

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

    def read_json(self, allow_empty: bool = False) -> object:
        raw = self.read_body()
        if not raw.strip():
            if allow_empty:
                return None
            raise ApiError(
                400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. EOF"
            )
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                f"error parsing request, MAYBE invalid body format. {e}",
            ) from None

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
                self.send_text(404, "404 page not found")
                return
            route(self, query)
        except ApiError as e:
            self.error_json(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def dynamic_route(self, method: str, path: str):
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 3 and parts[:2] == ["command", "status"]:
            return lambda h, q: h.command_status(parts[2])
        if method == "GET" and len(parts) == 3 and parts[0] == "command" and parts[2] == "logs":
            return lambda h, q: h.command_logs(parts[1], q)
        if method == "POST" and len(parts) == 3 and parts[0] == "session" and parts[2] == "run":
            return lambda h, q: run_session(h, parts[1], h.read_json())
        if method == "DELETE" and len(parts) == 2 and parts[0] == "session":
            return lambda h, q: h.delete_session(parts[1])
        return None

    # -- command routes -------------------------------------------------------------------
    def ping(self, q: dict) -> None:
        self.send_ok()

    def run_command(self, q: dict) -> None:
        req = validate_command(self.read_json())
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
            cursor = int(q1(q, "cursor"))
        except ValueError:
            cursor = 0
        try:
            with open(k.out_paths[0], "rb") as fh:
                fh.seek(max(cursor, 0))
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
        req = self.read_json(allow_empty=True) or {}
        if not isinstance(req, dict):
            raise ApiError(400, "INVALID_REQUEST_BODY", "error parsing request. invalid body")
        sid = "session-" + new_id()
        cwd = req.get("cwd") or ""
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
    def file_error(self, err_text: str, not_found: bool) -> ApiError:
        if not_found:
            return ApiError(404, "FILE_NOT_FOUND", f"file not found. {err_text}")
        return ApiError(500, "RUNTIME_ERROR", f"error accessing file: {err_text}")

    def files_info(self, q: dict) -> None:
        resp = {}
        for p in q.get("path", []):
            try:
                ap = expand_abs(p)
            except ValueError as e:
                raise self.file_error(f"invalid path {p}: {e}", False) from None
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
        self.send_json(200, resp)

    def remove_files(self, q: dict) -> None:
        import stat as s

        for p in q.get("path", []):
            try:
                ap = expand_abs(p)
                try:
                    st = os.stat(ap)
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

    def chmod_files(self, q: dict) -> None:
        req = self.read_json()
        if not isinstance(req, dict):
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "error parsing request, MAYBE invalid body format. json: cannot unmarshal",
            )
        for p, perm in req.items():
            try:
                chmod_file(p, perm if isinstance(perm, dict) else {})
            except ValueError as e:
                raise ApiError(
                    500, "RUNTIME_ERROR", f"error changing permissions for {p}. {e}"
                ) from None
        self.send_ok()

    def rename_files(self, q: dict) -> None:
        req = self.read_json()
        if not isinstance(req, list):
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "error parsing request, MAYBE invalid body format. json: cannot unmarshal",
            )
        for item in req:
            src = expand_abs((item or {}).get("src") or "")
            dst = expand_abs((item or {}).get("dest") or "")
            try:
                os.stat(src)
            except FileNotFoundError as e:
                raise self.file_error(
                    f"source path not found: {item.get('src')}: {path_error('stat', src, e)}", True
                ) from None
            except OSError:
                pass
            try:
                _mkdir_all(os.path.dirname(dst), 0o755)
            except ValueError as e:
                raise self.file_error(
                    f"failed to create destination directory: {e}", False
                ) from None
            if os.path.lexists(dst) and os.path.exists(dst):
                raise self.file_error(f"destination path already exists: {item.get('dest')}", False)
            try:
                os.rename(src, dst)
            except OSError as e:
                raise self.file_error(
                    f"failed to rename file: rename {src} {dst}: {go_errno(e)}",
                    isinstance(e, FileNotFoundError),
                ) from None
        self.send_ok()

    def make_dirs(self, q: dict) -> None:
        req = self.read_json()
        if not isinstance(req, dict):
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "error parsing request, MAYBE invalid body format. json: cannot unmarshal",
            )
        for d, perm in req.items():
            try:
                ap = expand_abs(d)
                _mkdir_all(ap, 0o777)
                chmod_file(ap, perm if isinstance(perm, dict) else {})
            except ValueError as e:
                raise self.file_error(str(e), "no such file or directory" in str(e)) from None
        self.send_ok()

    def remove_dirs(self, q: dict) -> None:
        import shutil

        for d in q.get("path", []):
            try:
                ap = expand_path(d)
            except ValueError as e:
                raise ApiError(
                    500, "RUNTIME_ERROR", f"error resolving directory {d}. {e}"
                ) from None
            errs: list[str] = []

            def onerr(func, path, exc_info, errs=errs) -> None:
                e = exc_info[1]
                if not isinstance(e, FileNotFoundError):
                    errs.append(path_error("unlinkat", path, e))

            try:
                if os.path.isdir(ap) and not os.path.islink(ap):
                    shutil.rmtree(ap, onerror=onerr)
                else:
                    os.remove(ap)
            except FileNotFoundError:
                pass
            except OSError as e:
                errs.append(path_error("unlinkat", ap, e))
            if errs:
                raise ApiError(500, "RUNTIME_ERROR", f"error removing directory {d}. {errs[0]}")
        self.send_ok()

    def list_directory(self, q: dict) -> None:
        import stat as s

        p = q1(q, "path")
        if not p:
            raise ApiError(400, "MISSING_QUERY", "missing query parameter 'path'")
        depth = 1
        raw = q1(q, "depth")
        if raw:
            try:
                depth = int(raw)
                if depth < 0:
                    raise ValueError
            except ValueError:
                raise ApiError(
                    400, "INVALID_REQUEST_BODY", f"invalid query parameter 'depth': {raw}"
                ) from None
        ap = expand_abs(p)
        try:
            st = os.lstat(ap)
        except FileNotFoundError as e:
            raise self.file_error(path_error("lstat", ap, e), True) from None
        except OSError as e:
            raise self.file_error(path_error("lstat", ap, e), False) from None
        if s.S_ISLNK(st.st_mode):
            raise ApiError(
                400, "INVALID_REQUEST_BODY", f"path is a symbolic link, refusing to traverse: {ap}"
            )
        if not s.S_ISDIR(st.st_mode):
            raise ApiError(400, "INVALID_REQUEST_BODY", f"path is not a directory: {ap}")
        out: list[dict] = []

        def walk(d: str, level: int) -> None:
            for name in sorted(os.listdir(d)):
                full = os.path.join(d, name)
                est = os.lstat(full)
                out.append(file_info(full, est))
                if s.S_ISDIR(est.st_mode) and level + 1 < depth:
                    walk(full, level + 1)

        if depth > 0:
            try:
                walk(ap, 0)
            except OSError as e:
                raise ApiError(
                    500,
                    "RUNTIME_ERROR",
                    f"error listing directory {ap}. {path_error('open', e.filename or ap, e)}",
                ) from None
        self.send_json(200, out)

    def search_files(self, q: dict) -> None:
        import stat as s

        p = q1(q, "path")
        if not p:
            raise ApiError(400, "MISSING_QUERY", "missing query parameter 'path'")
        ap = expand_abs(p)
        try:
            os.stat(ap)
        except FileNotFoundError as e:
            raise self.file_error(path_error("stat", ap, e), True) from None
        except OSError as e:
            raise self.file_error(path_error("stat", ap, e), False) from None
        pattern = q1(q, "pattern") or "**"
        out: list[dict] = []

        def walk(d: str) -> None:
            try:
                names = sorted(os.listdir(d))
            except OSError as e:
                raise ApiError(
                    500,
                    "RUNTIME_ERROR",
                    f"error searching files. error accessing path {d}: {path_error('open', d, e)}",
                ) from None
            for name in names:
                full = os.path.join(d, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                if s.S_ISDIR(st.st_mode):
                    walk(full)
                elif glob_match(pattern, name):
                    out.append(file_info(full, st))

        st0 = os.lstat(ap)
        if s.S_ISDIR(st0.st_mode):
            walk(ap)
        elif glob_match(pattern, os.path.basename(ap)):
            out.append(file_info(ap, st0))
        self.send_json(200, out)

    def replace_content(self, q: dict) -> None:
        verbose = q1(q, "verbose") == "true"
        req = self.read_json()
        if not isinstance(req, dict):
            raise ApiError(
                400,
                "INVALID_REQUEST_BODY",
                "error parsing request, MAYBE invalid body format. json: cannot unmarshal",
            )
        results = {}
        for p, item in req.items():
            ap = expand_abs(p)
            try:
                st = os.stat(ap)
                with open(ap, "rb") as fh:
                    content = fh.read()
            except OSError as e:
                op = "stat" if not os.path.exists(ap) else "open"
                raise self.file_error(
                    path_error(op, ap, e), isinstance(e, FileNotFoundError)
                ) from None
            old = (item or {}).get("old") or ""
            new = (item or {}).get("new") or ""
            if not old:
                raise ApiError(400, "INVALID_REQUEST_BODY", "old content must not be empty")
            old_b, new_b = old.encode(), new.encode()
            count = content.count(old_b)
            try:
                fd = os.open(ap, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, st.st_mode & 0o7777)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content.replace(old_b, new_b))
            except OSError as e:
                raise self.file_error(path_error("open", ap, e), False) from None
            results[p] = {"replacedCount": count}
        if verbose:
            self.send_json(200, results)
        else:
            self.send_ok()

    def upload(self, q: dict) -> None:
        ctype = self.headers.get("Content-Type") or ""
        reader = BodyReader(self.rfile, self.headers)
        boundary = ""
        for item in ctype.split(";")[1:]:
            if item.strip().lower().startswith("boundary="):
                boundary = item.strip()[9:].strip('"')
        if not ctype.lower().startswith("multipart/form-data") or not boundary:
            reader.drain()
            raise ApiError(400, "INVALID_FILE", "multipart form is empty")
        parser = MultipartParser(reader, boundary.encode())
        metas = files = 0
        pending: dict | None = None
        try:
            for headers, body in parser.parts():
                disp = disposition(headers.get("content-disposition", ""))
                name = disp.get("name", "")
                if "filename" not in disp and "filename*" not in disp:
                    for _ in body:
                        pass
                    continue
                if name == "metadata":
                    metas += 1
                    raw = b"".join(body)
                    try:
                        meta = json.loads(raw)
                        if not isinstance(meta, dict):
                            raise ValueError(
                                "json: cannot unmarshal into Go value of type model.FileMetadata"
                            )
                    except ValueError as e:
                        raise ApiError(
                            400, "INVALID_FILE_METADATA", f"invalid metadata format. {e}"
                        ) from None
                    if not meta.get("path"):
                        raise ApiError(400, "INVALID_FILE_METADATA", "metadata path is empty")
                    pending = meta
                elif name == "file":
                    files += 1
                    if pending is None:
                        for _ in body:
                            pass
                        continue
                    self._write_upload(pending, body)
                    pending = None
                else:
                    for _ in body:
                        pass
        except ValueError as e:
            reader.drain()
            if metas == 0 and files == 0:
                raise ApiError(400, "INVALID_FILE", "multipart form is empty") from None
            raise ApiError(400, "INVALID_FILE", f"multipart form is empty. {e}") from None
        except ApiError:
            self.close_connection = True
            raise
        reader.drain()
        if metas == 0:
            raise ApiError(400, "INVALID_FILE_METADATA", "metadata file is missing")
        if files == 0:
            raise ApiError(400, "INVALID_FILE_CONTENT", "file is missing")
        if metas != files:
            raise ApiError(
                400, "INVALID_FILE", f"metadata and file count mismatch: {metas} vs {files}"
            )
        self.send_ok()

    def _write_upload(self, meta: dict, body) -> None:
        target = meta["path"]
        try:
            resolved = expand_path(target)
        except ValueError as e:
            raise ApiError(
                500, "RUNTIME_ERROR", f"error resolving target path {target}. {e}"
            ) from None
        parent = os.path.dirname(resolved) or "."
        try:
            _mkdir_all(parent, 0o777)
        except ValueError as e:
            raise ApiError(
                500, "RUNTIME_ERROR", f"error creating target directory {parent}. {e}"
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
            for chunk in body:
                mv = memoryview(chunk)
                while mv:
                    n = os.write(fd, mv)
                    mv = mv[n:]
        except OSError as e:
            raise ApiError(
                500,
                "RUNTIME_ERROR",
                f"error copying file {resolved}. {path_error('write', resolved, e)}",
            ) from None
        finally:
            os.close(fd)
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

    def download(self, q: dict) -> None:
        p = q1(q, "path")
        if not p:
            raise ApiError(400, "MISSING_QUERY", "missing query parameter 'path'")
        try:
            resolved = expand_path(p)
        except ValueError as e:
            raise ApiError(500, "RUNTIME_ERROR", f"error resolving file path: {p}. {e}") from None
        try:
            fd = os.open(resolved, os.O_RDONLY)  # blocks on a FIFO, like Go's os.Open
        except OSError as e:
            raise self.file_error(
                path_error("open", resolved, e), isinstance(e, FileNotFoundError)
            ) from None
        try:
            st = os.fstat(fd)
            size = st.st_size
            import stat as s

            name = os.path.basename(resolved)
            disp = self._content_disposition(name)
            rng = self.headers.get("Range")
            if rng:
                ranges = parse_range(rng, size)
                if ranges is None:
                    self.send_json(416, {"code": "UNKNOWN"})
                    return
                if ranges:
                    start, length = ranges[0]
                    self.send_response(206)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Disposition", disp)
                    self.send_header("Content-Range", f"bytes {start}-{start + length - 1}/{size}")
                    self.send_header("Content-Length", str(length))
                    self.end_headers()
                    os.lseek(fd, start, os.SEEK_SET)
                    self._copy(fd, length)
                    return
                self.send_text(
                    416,
                    "invalid range: failed to overlap\n",
                    headers={
                        "Content-Range": f"bytes */{size}",
                        "Content-Disposition": disp,
                        "X-Content-Type-Options": "nosniff",
                    },
                )
                return
            if s.S_ISDIR(st.st_mode):
                self.send_text(
                    500,
                    "seeker can't seek\n",
                    headers={"Content-Disposition": disp, "X-Content-Type-Options": "nosniff"},
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Disposition", disp)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header(
                "Last-Modified",
                time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(st.st_mtime)),
            )
            if s.S_ISREG(st.st_mode):
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self._copy(fd, size)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while True:
                    data = os.read(fd, 65536)
                    if not data:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.write(b"0\r\n\r\n")
        finally:
            os.close(fd)

    def _copy(self, fd: int, length: int) -> None:
        sent = 0
        sock = self.connection
        self.wfile.flush()
        while sent < length:
            try:
                n = os.sendfile(sock.fileno(), fd, None, min(length - sent, 1 << 20))
            except (OSError, AttributeError):
                data = os.read(fd, min(length - sent, 1 << 20))
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
        # Go's net/http replaces CR and LF in header values with spaces.
        name = name.replace("\r", " ").replace("\n", " ")
        if all(ord(c) <= 127 for c in name):
            return f'attachment; filename="{name}"'
        from urllib.parse import quote

        enc = quote(name, safe="!$&'()*+,;=:@")
        return f"attachment; filename=\"{enc}\"; filename*=UTF-8''{enc}"

    def get_metrics(self, q: dict) -> None:
        self.send_json(200, metrics())

    def watch_metrics(self, q: dict) -> None:
        stream = EventStream(self)
        while not stream.broken:
            stream.send(metrics())
            time.sleep(0.9)

    # -- proxy ----------------------------------------------------------------------------
    def proxy(self, method: str, path: str, raw_query: str) -> None:
        import http.client

        rest = path[len("/proxy/") :]
        port, _, sub = rest.partition("/")
        if not port:
            self.send_text(400, "port is required\n")
            return
        target = "/" + sub + (("?" + raw_query) if raw_query else "")
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
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
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


def parse_range(s: str, size: int) -> list[tuple[int, int]] | None:
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
                n = int(b)
                if n < 0:
                    return None
                n = min(n, size)
                start, length = size - n, n
            else:
                i = int(a)
                if i < 0:
                    return None
                if b == "":
                    start, length = i, size - i
                else:
                    j = int(b)
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
    """os.MkdirAll with Go error texts (raised as ValueError)."""
    try:
        st = os.stat(path)
        import stat as s

        if s.S_ISDIR(st.st_mode):
            return
        raise ValueError(f"mkdir {path}: not a directory")
    except FileNotFoundError:
        pass
    except NotADirectoryError as e:
        raise ValueError(path_error("mkdir", path, e)) from None
    parent = os.path.dirname(path.rstrip("/"))
    if parent and parent != path:
        _mkdir_all(parent, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise ValueError(f"mkdir {path}: not a directory") from None
    except OSError as e:
        raise ValueError(path_error("mkdir", path, e)) from None


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
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv = Server((args.host, args.port), Handler)
    sys.stderr.write(
        f"execd.py listening on {args.host}:{srv.server_address[1]} framing={FRAMING}\n"
    )
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt, SystemExit):
        srv.serve_forever(poll_interval=0.5)
    return 0


socketserver.TCPServer.allow_reuse_address = True

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
