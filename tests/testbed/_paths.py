"""Where the testbed keeps its files, and how to read `.testbed/env`."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE_DIR = Path(os.environ.get("OSB_TESTBED_DIR", ROOT / ".testbed")).resolve()
CACHE_DIR = STATE_DIR / "cache"
ENV_FILE = STATE_DIR / "env"
STATE_FILE = STATE_DIR / "state.json"
SERVER_CONFIG = STATE_DIR / "sandbox.toml"
SERVER_LOG = STATE_DIR / "server.log"
SERVER_PIDFILE = STATE_DIR / "server.pid"
DOCKERD_LOG = STATE_DIR / "dockerd.log"
DOCKERD_PIDFILE = STATE_DIR / "dockerd.pid"
DOCKERD_CONFIG = STATE_DIR / "daemon.json"
STORE_PATH = STATE_DIR / "opensandbox.db"
HOST_VOLUMES = STATE_DIR / "volumes"

IMAGES_DIR = Path(__file__).resolve().parent / "images"
# The execd-compatible daemon; OSB_TESTBED_EXECD_DIR points elsewhere for development.
EXECD_DIR = Path(os.environ.get("OSB_TESTBED_EXECD_DIR", Path(__file__).resolve().parent / "execd"))


def read_env_file(path: Path = ENV_FILE) -> dict[str, str]:
    """Parse the `export KEY=VALUE` lines that `testbed start` wrote."""
    env: dict[str, str] = {}
    if not path.is_file():
        return env
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith("export ") or "=" not in line:
            continue
        key, _, value = line[len("export ") :].partition("=")
        parts = shlex.split(value) if value else [""]
        env[key.strip()] = parts[0] if parts else ""
    return env


_held = threading.local()


@contextlib.contextmanager
def cache_lock() -> Iterator[None]:
    """Hold the lock on the testbed's caches (images, busybox, the Jupyter venv and wheels).

    `testbed prepare` may fill the caches in the background while a nox session asks for one of
    them (`.ci/run` overlaps it with lint and the unit tests): whoever comes second waits, then
    finds the cache made. Re-entrant within a thread (an image build asks for the wheels)."""
    depth = getattr(_held, "depth", 0)
    if depth:
        _held.depth = depth + 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with (CACHE_DIR / ".lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held.depth = 1
        try:
            yield
        finally:
            _held.depth = 0
            fcntl.flock(fh, fcntl.LOCK_UN)
