"""Background commands: `POST /command` with `"background": true`, `GET /command/status/{id}`
and `GET /command/{id}/logs`.

`init` and `ping` are sent before the process starts and the command is registered only after
it started, so status, logs or an interrupt right after `init` can miss it (404/400/500 as
recorded). Both streams go to `<tmp>/<id>.output`; when the main process exits its whole
process group is SIGKILLed (`cmd &`, `nohup`; a `setsid` child survives). The logs `cursor` is
a byte offset: echoed past the end, negative a 400, unparsable 0
(`Execd-Commands-Tail-Cursor`).
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
from .events import EventStream, complete_event, init_event
from .goenc import ApiError, exit_error, go_time, now_ms, path_error
from .handler import q1
from .launch import content, start_process, tmp_dir
from .registry import KERNELS, REG_LOCK, Kernel, new_id

if TYPE_CHECKING:
    from .handler import Handler


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
    kernel = Kernel(cid, content(req), True, [out_path])
    if proc is None:
        kernel.finish(127 if req.get("argv") else 255, start_err or "")
        with REG_LOCK:
            KERNELS[cid] = kernel
        stream.send(complete_event(time.monotonic() - started))
        stream.finish(config.GRACE)
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
    stream.finish(config.GRACE)


def command_status(h: Handler, q: dict, cid: str) -> None:
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
    h.send_json(200, resp)


def command_logs(h: Handler, q: dict, cid: str) -> None:
    with REG_LOCK:
        k = KERNELS.get(cid)
    if k is None:
        raise ApiError(400, "INVALID_REQUEST_BODY", f"command not found: {cid}")
    if not k.background:
        raise ApiError(400, "INVALID_REQUEST_BODY", f"command {cid} is not running in background")
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
    h.send_response(200)
    h.send_header("EXECD-COMMANDS-TAIL-CURSOR", str(pos))
    h.send_header("Content-Type", "text/plain; charset=utf-8")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)
