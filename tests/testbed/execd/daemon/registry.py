"""What runs: the registry of commands (`Kernel`) and sessions, and stopping process groups.

Shared by the command, background and session routes, and by the event stream (a write to a
client that left forwards SIGPIPE to every running command, as the Go daemon does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import Any


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


# command id -> Kernel: foreground and background commands, kept after they finish
KERNELS: dict[str, Kernel] = {}
# session id -> {"cwd", "env", "pid"} (sessions.py)
SESSIONS: dict[str, dict[str, Any]] = {}
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
