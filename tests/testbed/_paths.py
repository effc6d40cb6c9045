"""Where the testbed keeps its files, and how to read `.testbed/env`."""

from __future__ import annotations

import os
import shlex
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
