"""Sessions: `POST /session`, `POST /session/{id}/run`, `DELETE /session/{id}`.

Each run is a fresh `bash --noprofile --norc /tmp/execd_bash_<n>.sh` (the script stays in
/tmp, as upstream's do) whose exported variables and final cwd are carried to the next run.
Output as upstream: stdout and stderr in one pipe, read line by line (bufio.Scanner: a
trailing \\r stripped, blank lines dropped), every line a "stdout" event; no hold at the end. A
timeout kills the shell only, and the 200 stream ends, once the pipe closes, with a bare
`{"code":"RUNTIME_ERROR",...}`; so does a run where bash cannot start (execd runs sessions with
bash and has no fallback to sh, unlike commands). Session ids are UUIDs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from .events import EventStream, complete_event, error_event, init_event
from .goenc import ApiError, exit_error, go_json, go_output_text, path_error
from .gojson import RUN_IN_SESSION_FIELDS, decode_go_request
from .gopath import load_extra_env
from .launch import tmp_dir
from .registry import REG_LOCK, SESSIONS, kill_group

if TYPE_CHECKING:
    from .handler import Handler

ENV_START = "__EXECD_ENV_DUMP_START__"
ENV_END = "__EXECD_ENV_DUMP_END__"
PWD_PREFIX = "__EXECD_PWD__:"
EXIT_PREFIX = "__EXIT_CODE__:"
NOT_PERSISTED = {"PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV", "ENV", "BASHOPTS", "SHELLOPTS"}
SCRIPT_SEQ = itertools.count(time.time_ns() // 1000)


# -- routes ------------------------------------------------------------------------------------


def create_session(h: Handler, q: dict) -> None:
    raw = h.read_body()
    req = decode_go_request(raw, "CreateContextRequest", {"cwd": "string"}) if raw else {}
    sid = str(uuid.uuid4())
    cwd = str(req.get("cwd") or "")
    with REG_LOCK:
        SESSIONS[sid] = {"cwd": cwd, "env": dict(os.environ) | load_extra_env(), "pid": 0}
    h.send_json(200, {"session_id": sid})


def delete_session(h: Handler, q: dict, sid: str) -> None:
    with REG_LOCK:
        exists = sid in SESSIONS
    if not exists:
        raise ApiError(404, "CONTEXT_NOT_FOUND", f"session {sid} not found")
    close_session(sid)
    h.send_ok()


def run_session(h: Handler, q: dict, sid: str) -> None:
    req = decode_go_request(h.read_body(), "RunInSessionRequest", RUN_IN_SESSION_FIELDS)
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
    try:
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as e:  # no bash (a busybox image): execd has no fallback to sh here
        _end_with_error(stream, f"start bash: {_start_error(e)}")
        return
    s["pid"] = proc.pid
    timeout = int(req.get("timeout") or 0)
    timer, timed_out = _kill_shell_at(proc, timeout)
    env_lines, exit_code, pwd = _read_run(proc, stream)
    proc.wait()
    if timer:
        timer.cancel()
    s["pid"] = 0
    if timed_out.is_set():
        _end_with_error(stream, f"timeout after {timeout}ms")
        return
    _finish_run(s, stream, started, env_lines, exit_code, pwd, proc.returncode)


def close_session(sid: str) -> None:
    with REG_LOCK:
        s = SESSIONS.pop(sid, None)
    if s and s.get("pid"):
        kill_group(s["pid"], 1.0)


# -- a run -------------------------------------------------------------------------------------


def _end_with_error(stream: EventStream, error: str) -> None:
    """execd's RespondError once the stream has begun: its JSON error inside the 200 stream,
    unframed (a timeout, a shell that cannot start), and the stream ends."""
    stream.send_raw(
        go_json({"code": "RUNTIME_ERROR", "message": f"error running in session. {error}"})
    )
    stream.finish()


def _start_error(err: OSError) -> str:
    """Go's error text for an exec.Command("bash") that fails to start."""
    found = shutil.which("bash")
    if found is None:
        return 'exec: "bash": executable file not found in $PATH'
    return path_error("fork/exec", found, err)


def sh_quote(v: str) -> str:
    return "'" + v.replace("'", "'\"'\"'") + "'"


def _session_script(s: dict[str, Any], cwd: str, cmd: str) -> str:
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


def _kill_shell_at(
    proc: subprocess.Popen[bytes], timeout: int
) -> tuple[threading.Timer | None, threading.Event]:
    """A timer that SIGKILLs the shell after `timeout` ms (0: none), and the event it sets."""
    timed_out = threading.Event()
    if not timeout:
        return None, timed_out

    def on_timeout() -> None:
        timed_out.set()
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signal.SIGKILL)  # the shell only: its children live on

    timer = threading.Timer(timeout / 1000.0, on_timeout)
    timer.start()
    return timer, timed_out


def _read_run(
    proc: subprocess.Popen[bytes], stream: EventStream
) -> tuple[list[str], int | None, str]:
    """Streams the run's lines as stdout events until the pipe closes; returns the lines of its
    environment dump, its exit code and its final working directory (as the script printed)."""
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
    return env_lines, exit_code, pwd


def _finish_run(
    s: dict[str, Any],
    stream: EventStream,
    started: float,
    env_lines: list[str],
    exit_code: int | None,
    pwd: str,
    returncode: int,
) -> None:
    """Carries the run's environment and cwd to the session; the last event; the stream ends."""
    new_env = _parse_env_dump(env_lines)
    if new_env:
        s["env"] = new_env
    if pwd:
        s["cwd"] = pwd
    if exit_code is None:
        exit_code = exit_error(returncode)[0]
    if exit_code != 0:
        stream.send(error_event(str(exit_code), [f"exit status {exit_code}"]))
    else:
        stream.send(complete_event(time.monotonic() - started))
    stream.finish()


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
