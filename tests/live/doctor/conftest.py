"""A second, deliberately insecure opensandbox-server next to the testbed's (module-scoped)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed._extra import ExtraServer, extra_server

TOO_BROAD = ["/etc", "/run", "/var/run"]


@pytest.fixture(scope="module")
def insecure_server(testbed_env: dict[str, str]) -> Iterator[ExtraServer]:
    """No API key, default (allow-all) CORS, and host paths allowed far too broadly.

    opensandbox-server 1.1.1 refuses every host path when `allowed_host_paths = []`, and a "/"
    prefix matches no path but "/" itself (both checked in test_allow_list_edge_cases), so the
    too-broad allow list names the probed folders: /etc and the Docker socket's /var/run (/run).
    Stopping it removes the sandbox containers it created (by its instance marker).
    """
    with extra_server(api_key=None, allowed_host_paths=TOO_BROAD) as server:
        yield server


@pytest.fixture
def no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the testbed's key (loaded into the environment) away from the other servers."""
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
