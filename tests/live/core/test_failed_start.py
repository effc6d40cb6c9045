"""A sandbox whose entrypoint does not exist: the create fails fast with the server's reason."""

from __future__ import annotations

import time

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSpec, SandboxUnavailableError
from opensandbox_core.fleet import list_sandboxes

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


async def test_missing_entrypoint_fails_fast_with_the_servers_reason(sandbox_image: str) -> None:
    spec = SandboxSpec(image=sandbox_image, entrypoint=["/no/such/entrypoint"])
    session = AsyncSandboxSession(spec)
    started = time.monotonic()
    with pytest.raises(SandboxUnavailableError, match="failed to start") as caught:
        async with session:
            pass
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"took {elapsed:.1f} s"  # the readiness budget is 60 s
    assert caught.value.sandbox_id == session.id
    print(f"failed start reported after {elapsed:.1f} s: {caught.value}")
    # The session created it, so leaving `async with` removed it.
    assert session.id not in {s.id for s in await list_sandboxes()}
