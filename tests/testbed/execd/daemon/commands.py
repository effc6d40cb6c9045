"""`POST /command` run in the foreground, `DELETE /command` (interrupt) and `GET /ping`.

A foreground run writes its raw output to `<tmp>/<id>.stdout` / `.stderr` (never deleted) and
streams it as events until its main process exits (children that keep the files open do not
hold it): the files are read every 100 ms (10 ms in the modern framing) and once more at exit;
then `execution_complete` or `error`, and the stream is held for `config.GRACE`. A background
run (`"background": true`) is background.py's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from . import config
from .background import run_background
from .events import EventStream, Tailer, complete_event, error_event, init_event
from .goenc import ApiError, exit_error
from .gojson import RUN_COMMAND_FIELDS, decode_go_request
from .launch import content, start_process, tmp_dir, validate_command
from .registry import KERNELS, REG_LOCK, SESSIONS, Kernel, kill_group, new_id
from .sessions import close_session

if TYPE_CHECKING:
    from .handler import Handler


def ping(h: Handler, q: dict) -> None:
    h.send_ok()


def run_command(h: Handler, q: dict) -> None:
    raw = h.read_body()
    req = validate_command(decode_go_request(raw, "RunCommandRequest", RUN_COMMAND_FIELDS))
    if req.get("background"):
        run_background(h, req)
    else:
        run_foreground(h, req)


def interrupt_command(h: Handler, q: dict) -> None:
    vals = q.get("id")
    cid = vals[0] if vals else ""
    if not cid:
        raise ApiError(400, "MISSING_QUERY", "missing query parameter 'id'")
    interrupt(cid)
    h.send_ok()


def interrupt(cid: str) -> None:
    """A running command's group is stopped (kill_group); a session id closes the session."""
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


def _reaper(proc: subprocess.Popen[bytes]) -> threading.Event:
    """An event set the moment the process has exited (and been reaped)."""
    exited = threading.Event()

    def wait() -> None:
        proc.wait()
        exited.set()

    threading.Thread(target=wait, daemon=True).start()
    return exited


def run_foreground(h: Handler, req: dict, grace: float | None = None) -> None:
    """`grace`: the hold after the last event (config.GRACE; /code's shell runs have none)."""
    hold = config.GRACE if grace is None else grace
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
        stream.finish(hold)
        return
    kernel = Kernel(cid, content(req), False, [out_path, err_path])
    kernel.pid, kernel.proc = proc.pid, proc
    with REG_LOCK:
        KERNELS[cid] = kernel
    exited = _reaper(proc)
    stream.send(init_event(cid))
    stream.start_pings()
    timeout = req.get("timeout") or 0
    deadline = started + timeout / 1000.0 if timeout else None
    tailers = [Tailer(out_path, "stdout"), Tailer(err_path, "stderr")]
    _stream_output(stream, proc, exited, tailers, started, deadline)
    code, err = exit_error(proc.returncode)
    kernel.finish(code, "" if code == 0 else err)
    if code == 0:
        stream.send(complete_event(time.monotonic() - started))
    else:
        stream.send(error_event(str(code), [err]))
    stream.finish(hold)


def _stream_output(
    stream: EventStream,
    proc: subprocess.Popen[bytes],
    exited: threading.Event,
    tailers: list[Tailer],
    started: float,
    deadline: float | None,
) -> None:
    """Polls the output files into events until the process has exited (SIGKILL to its group
    at the deadline), then reads them once more."""
    interval = 0.01 if config.FRAMING == "modern" else 0.1
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
