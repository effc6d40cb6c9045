"""Fixtures of the durable tests: Temporal and Prefect servers on loopback, sandbox bookkeeping."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from opensandbox_core.fleet import destroy_sandbox, list_sandboxes

if TYPE_CHECKING:
    from _prefect_support import PrefectServer


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A Temporal dev server on loopback ports, with its state in a SQLite file."""
    from _temporal_support import free_port, temporal_cli  # needs temporalio

    home = tmp_path_factory.mktemp("temporal")
    port = free_port()
    log = (home / "server.log").open("w")
    proc = subprocess.Popen(
        [
            temporal_cli(),
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--http-port",
            str(free_port()),
            "--metrics-port",
            str(free_port()),
            "--db-filename",
            str(home / "temporal.sqlite"),
            "--log-level",
            "warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the Temporal dev server did not start: {(home / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        yield address, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """A Prefect server on a loopback port, SQLite database and home in a temp dir, no UI,
    no background services, analytics off; its process group is ended at the end."""
    from _prefect_support import start_prefect_server, stop_process_group

    server = start_prefect_server(tmp_path_factory.mktemp("prefect"))
    try:
        yield server
    finally:
        stop_process_group(server.proc)


@pytest.fixture
async def created_here() -> AsyncIterator[set[str]]:
    """Ids of the sandboxes this test's workers created; any still present are deleted at the end."""
    ids: set[str] = set()
    yield ids
    alive = {s.id for s in await list_sandboxes()}
    for sandbox_id in ids & alive:
        await destroy_sandbox(sandbox_id)
