"""Machine details for the report, and per-process CPU accounting from /proc."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = (
    "opensandbox-core",
    "deepagents-opensandbox-backend",
    "pydantic-ai-opensandbox",
    "opensandbox",
    "opensandbox-server",
    "deepagents",
    "pydantic-ai-slim",
    "httpx",
)
_TICK = os.sysconf("SC_CLK_TCK")


def _first(path: str, prefix: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    return None


def _command(*args: str) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({type(exc).__name__})"
    return out.stdout.strip() or f"unavailable (exit {out.returncode})"


def machine_info(root: Path) -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    mem_kib = _first("/proc/meminfo", "MemTotal")
    return {
        "cpu_model": _first("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem_kib.split()[0]) / 1024 / 1024, 1) if mem_kib else None,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": versions,
        "docker": _command("docker", "version", "--format", "{{.Server.Version}}"),
        "git_commit": _command("git", "-C", str(root), "rev-parse", "--short", "HEAD"),
        "load_average_at_start": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


# -- CPU accounting -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    comm: str
    ticks: int  # utime + stime + cutime + cstime


def _read_procs() -> dict[int, _Proc]:
    procs: dict[int, _Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        # fields[0] is state; utime is field 14 of stat, i.e. index 11 here.
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        procs[int(entry)] = _Proc(int(entry), int(fields[1]), comm, ticks)
    return procs


def _classify(procs: dict[int, _Proc], server_pid: int | None) -> dict[int, str]:
    """pid -> class: bench client, server, docker engine, sandboxes (container trees), other."""
    me = os.getpid()
    classes: dict[int, str] = {}

    def klass(pid: int) -> str:
        if pid in classes:
            return classes[pid]
        proc = procs.get(pid)
        if proc is None or pid <= 1:
            return "other"
        if pid == me:
            result = "bench client"
        elif server_pid is not None and pid == server_pid:
            result = "opensandbox-server"
        elif proc.comm in ("dockerd", "containerd", "docker-proxy"):
            result = "docker engine"
        elif proc.comm.startswith("containerd-shim"):
            result = "sandbox containers"
        else:
            parent = klass(proc.ppid)
            result = parent if parent != "docker engine" else "docker engine"
        classes[pid] = result
        return result

    for pid in procs:
        klass(pid)
    return classes


class CpuMeter:
    """CPU seconds used per class of process between `start()` and `stop()`.

    Reads /proc/<pid>/stat (utime, stime and reaped children's time), so short-lived sandbox
    commands are counted through the daemon that waited for them. Processes that start and
    exit entirely inside the interval without being reaped by a tracked parent are missed.
    """

    def __init__(self, server_pid: int | None) -> None:
        self._server_pid = server_pid
        self._before: dict[int, _Proc] = {}
        self._started = 0.0

    def start(self) -> None:
        self._before = _read_procs()
        self._started = time.perf_counter()

    def stop(self) -> dict[str, float]:
        """Percent of one core per class over the interval (200 % = both cores of 2)."""
        after = _read_procs()
        wall = time.perf_counter() - self._started
        classes = _classify(after, self._server_pid)
        used: dict[str, float] = {}
        for pid, proc in after.items():
            before = self._before.get(pid)
            delta = proc.ticks - (before.ticks if before and before.comm == proc.comm else 0)
            if delta > 0:
                name = classes.get(pid, "other")
                used[name] = used.get(name, 0.0) + delta / _TICK
        return {k: round(100.0 * v / wall, 1) for k, v in sorted(used.items()) if wall > 0}
