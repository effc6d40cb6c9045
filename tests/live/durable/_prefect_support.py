"""Helpers of the Prefect test: a local Prefect server (the `prefect` CLI, not Prefect Cloud) and
the PREFECT_* settings that point its clients at it. Nothing here imports prefect: the settings
must be in a process's environment before prefect is imported there."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PrefectServer:
    api_url: str  # http://127.0.0.1:<port>/api
    proc: subprocess.Popen[bytes]
    log: Path
    client_env: dict[str, str]  # what a worker or the test needs to talk to this server only


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _settings(home: Path) -> dict[str, str]:
    """Settings shared by the server and its clients: everything under `home`, nothing sent out."""
    return {
        "PREFECT_HOME": str(home / "home"),
        "PREFECT_PROFILES_PATH": str(home / "home" / "profiles.toml"),
        # Task results (the cache a resumed flow run reads) on a disk every worker here shares.
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_TELEMETRY_ENABLE_RESOURCE_METRICS": "false",
        "PREFECT_CLOUD_ENABLE_ORCHESTRATION_TELEMETRY": "false",
        "DO_NOT_TRACK": "1",  # the SDK's own analytics
        "PREFECT_SERVER_UI_ENABLED": "false",
    }


def start_prefect_server(home: Path, timeout: float = 120) -> PrefectServer:
    """`prefect server start` on 127.0.0.1 (API only, SQLite in `home`), in a process group of
    its own; returns once `/api/health` answers, or raises with the log's tail."""
    port = _free_port()
    settings = _settings(home)
    server_env = {
        **os.environ,
        **settings,
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    }
    server_env.pop("PREFECT_API_URL", None)
    log = home / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"),
                *("--port", str(port), "--no-services", "--no-ui", "--analytics-off"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env,
            start_new_session=True,
        )
    api_url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as resp:  # noqa: S310
                if resp.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc)
            raise RuntimeError(
                f"the Prefect server did not start within {timeout:g} s: {log.read_text()[-2000:]}"
            )
        time.sleep(0.3)
    return PrefectServer(api_url, proc, log, {**settings, "PREFECT_API_URL": api_url})


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process's group, SIGKILL it after 20 s; nothing of the group is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def wait_group_gone(pgid: int, timeout: float = 10) -> list[int]:
    """Wait until process group `pgid` has no live process; returns what is left at the deadline."""
    deadline = time.monotonic() + timeout
    while (left := group_pids(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def group_pids(pgid: int) -> list[int]:
    """The live processes in process group `pgid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            found.append(int(stat.parent.name))
    return found
