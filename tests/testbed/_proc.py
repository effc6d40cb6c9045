"""Subprocess, progress and pidfile helpers shared by the testbed modules."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

_T0 = time.monotonic()


class TestbedError(RuntimeError):
    """A step of the testbed failed; the message says what and where to look."""


def say(message: str) -> None:
    """Print one progress line with the time since the command began."""
    print(f"[testbed {time.monotonic() - _T0:6.1f}s] {message}", flush=True)


def run(
    args: Sequence[str],
    *,
    check: bool = True,
    timeout: float | None = 120,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capture its output as text, and raise TestbedError when it fails."""
    try:
        proc = subprocess.run(
            list(args),
            input=input.decode() if input is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"timed out after {timeout}s: {' '.join(args)}") from exc
    except FileNotFoundError as exc:
        raise TestbedError(f"not found: {args[0]}") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()[-2000:]
        raise TestbedError(f"failed ({proc.returncode}): {' '.join(args)}\n{detail}")
    return proc


def run_logged(args: Sequence[str], log: Path, *, what: str, timeout: float) -> None:
    """Run a long command with its output in `log`, printing a heartbeat every 15 s."""
    start = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(list(args), stdout=fh, stderr=subprocess.STDOUT)
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(15):
            say(f"  ... {what}: {time.monotonic() - start:.0f}s, {_last_line(log)}")

    thread = threading.Thread(target=heartbeat, daemon=True)
    thread.start()
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = -1
    finally:
        stop.set()
        thread.join()
    if rc != 0:
        raise TestbedError(f"{what} failed ({rc}); log {log}:\n{tail(log, 30)}")
    say(f"  {what} done in {time.monotonic() - start:.0f}s")


def _last_line(path: Path) -> str:
    lines = tail(path, 1).strip()
    return lines[-100:] if lines else "(no output yet)"


def tail(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of a log file ('' when it does not exist)."""
    try:
        data = path.read_bytes()[-64 * 1024 :]
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this id exists and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rpartition(")")[2].split()[0] == "Z":
            return False
    return True


def proc_cmdline(pid: int) -> list[str]:
    """The argv of a running process, or [] when it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def read_pidfile(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def terminate(pid: int, *, group: bool, grace: float, name: str) -> None:
    """SIGTERM a process (or its process group), then SIGKILL after `grace` seconds."""
    if not pid_alive(pid):
        return

    def send(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.2)
    say(f"{name} (pid {pid}) ignored SIGTERM for {grace:.0f}s; sending SIGKILL")
    send(signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.1)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def spawn_detached(args: Sequence[str], log: Path, *, env: dict[str, str] | None = None) -> int:
    """Start a process in its own session with stdout+stderr appended to `log`; return its pid."""
    with log.open("ab") as fh, open(os.devnull, "rb") as devnull:
        proc = subprocess.Popen(
            list(args),
            stdin=devnull,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    return proc.pid


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Print `what`, run the block, and print how long it took."""
    start = time.monotonic()
    say(what)
    yield
    say(f"  {what.rstrip('.')}: {time.monotonic() - start:.1f}s")


def python_bin_dir() -> Path:
    return Path(sys.executable).parent
