"""Starting a command as execd does: the request checked in execd's order with its texts, then
`bash -c` (`sh -c` without bash; profile 1.1 also `argv`) with `envs` over the daemon's
environment and the EXECD_ENVS file, `uid`/`gid`, its own process group and stdin /dev/null.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import tempfile

from . import config
from .goenc import ApiError, go_quote, path_error
from .gopath import go_expand_path, load_extra_env


def shell() -> str:
    """bash when the daemon's PATH has it, else sh (as execd chooses)."""
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        if d and os.access(os.path.join(d, "bash"), os.X_OK):
            return "bash"
    return "sh"


def credentials(uid: int | None, gid: int | None) -> dict:
    if uid is None and gid is None:
        return {}
    kw: dict = {}
    if uid is not None:
        kw["user"] = uid
        try:
            pw = pwd.getpwuid(uid)
            if gid is None:
                kw["group"] = pw.pw_gid
            kw["extra_groups"] = os.getgrouplist(pw.pw_name, pw.pw_gid)
        except (KeyError, OSError):
            pass
    if gid is not None:
        kw["group"] = gid
    return kw


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
    argv = req.get("argv") if config.ACCEPTS_ARGV else None
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
                ""
                if config.PROFILE in ("1.0.18", "1.0.16")
                else ": " + path_error("stat", resolved, e)
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


def content(req: dict) -> str:
    """What status reports as the command's `content`."""
    return str(req.get("command") or " ".join(req.get("argv") or []))
