"""A sandbox that expires or is deleted by another client: every package's next operation fails
with its framework's unavailable error naming the sandbox, fast, and never creates a replacement."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _drivers import PACKAGES, open_driver

from opensandbox_core._metadata import OWNER_KEY
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes
from testbed.fault_tools import expire_soon, wait_gone

GONE_HOW = ["deleted", "expired"]


async def _make_gone(how: str, sandbox_id: str, env: dict[str, str]) -> None:
    if how == "deleted":
        await destroy_sandbox(sandbox_id)  # another client
    else:
        domain, key = env["OPEN_SANDBOX_DOMAIN"], env["OPEN_SANDBOX_API_KEY"]
        await asyncio.to_thread(expire_soon, domain, key, sandbox_id, 1.0)
        await asyncio.to_thread(wait_gone, domain, key, sandbox_id)


async def _fails_fast(
    call: Callable[[], Awaitable[Any]], error: type[BaseException], sid: str
) -> None:
    started = time.monotonic()
    with pytest.raises(error) as info:
        async with asyncio.timeout(60):
            await call()
    assert sid in str(info.value), str(info.value)
    assert time.monotonic() - started < 30


async def _owned_count(token: str) -> int:
    return len(await list_sandboxes(metadata={OWNER_KEY: token}))


@pytest.mark.parametrize("how", GONE_HOW)
@pytest.mark.parametrize("package", PACKAGES)
async def test_every_call_fails_fast_naming_the_sandbox(
    package: str, how: str, sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    """One body for the core and each adapter (drivers in tests/live/_drivers.py)."""
    async with open_driver(package, sandbox_image, lifetime=120) as driver:
        sid = driver.sandbox_id
        token = driver.session.owner_token
        await driver.write("a.txt", b"a")
        await _make_gone(how, sid, testbed_env)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "run": lambda: driver.run("echo hi", 10),
            "read": lambda: driver.read("a.txt"),
            "write": lambda: driver.write("b.txt", b"b"),
            "attach": driver.attach_and_run,
            **driver.extra,
        }
        for name, call in calls.items():
            try:
                await _fails_fast(call, driver.unavailable, sid)
            except BaseException as exc:
                raise AssertionError(f"{package} {name}: {exc}") from exc
        if package == "pydantic_ai":
            assert driver.backend.ref.id == sid  # the ref never changes
        assert await _owned_count(token) == 0  # nothing was created in its place
