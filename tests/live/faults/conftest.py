"""Fixtures for fault tests (the tools are in `testbed.fault_tools`). The testbed's shared server is never
stopped: tests that restart a server use their own (`restartable_server`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed._extra import extra_server
from testbed.fault_tools import RestartableServer, StallingProxy


@pytest.fixture
def stalling_proxy(testbed_env: dict[str, str]) -> Iterator[StallingProxy]:
    proxy = StallingProxy(testbed_env["OPEN_SANDBOX_DOMAIN"])
    yield proxy
    proxy.close()


@pytest.fixture
def restartable_server(testbed_env: dict[str, str], tmp_path: Path) -> Iterator[RestartableServer]:
    """A second server (own port, store and instance id); stopped and its sandboxes removed at
    the end, whatever the test did to it."""
    key = "restart-" + os.urandom(12).hex()
    with extra_server(
        api_key=key, allowed_host_paths=[str(tmp_path)], port_range=(42000, 42999)
    ) as server:
        handle = RestartableServer(server)
        try:
            yield handle
        finally:
            if handle.pid != server.pid:
                handle.stop()  # a restarted server: extra_server only knows the first pid
