"""`SandboxPool` against the in-process fake server: warm acquire, bounded retries when creates
keep failing (with the last cause), recovery after transient failures, clean shutdown."""

from __future__ import annotations

import asyncio
import time

import pytest

from opensandbox_core import ConfigurationError, SandboxSpec, SandboxUnavailableError, ServerError
from opensandbox_core._fleet import _pool
from opensandbox_core.fleet import SandboxPool
from opensandbox_core.testing import FakeOpenSandbox

SPEC = SandboxSpec(image="img")


async def test_warm_pool_hands_out_ready_sessions() -> None:
    fake = FakeOpenSandbox()
    async with SandboxPool(SPEC, size=2, connection=fake.connection()) as pool:
        await pool.start()
        assert pool.ready_count == 2
        session = await pool.acquire(timeout=10)
        async with session:
            assert (await session.commands.run("echo hi")).stdout == "hi\n"
        assert session.id in fake.deleted
    assert sorted(fake.deleted) == sorted(fake.created)  # the waiting ones too


async def test_acquire_without_timeout_gives_up_with_the_last_cause() -> None:
    fake = FakeOpenSandbox()
    fake.fail_next("create", status=500, times=100)
    pool = SandboxPool(SPEC, size=1, connection=fake.connection(), max_create_attempts=3)
    started = time.monotonic()
    with pytest.raises(SandboxUnavailableError) as info:
        await asyncio.wait_for(pool.acquire(), timeout=30)  # the guard: never loop forever
    elapsed = time.monotonic() - started
    assert fake.count("create") == 3
    assert pool.failures == 3
    assert isinstance(info.value.__cause__, ServerError)
    assert "3 create attempt(s)" in str(info.value)
    assert "ServerError" in str(info.value)
    assert 1.5 - 0.2 <= elapsed < 10  # backoff 0.5 s then 1 s between the three attempts
    assert fake.created == []
    await pool.aclose()


async def test_acquire_recovers_after_transient_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pool, "_BACKOFF_FIRST", 0.05)  # the pauses' length is not the point here
    fake = FakeOpenSandbox()
    fake.fail_next("create", status=500, times=2)
    async with SandboxPool(SPEC, size=1, connection=fake.connection()) as pool:
        session = await asyncio.wait_for(pool.acquire(), timeout=30)
        async with session:
            assert session.id in fake.created
    assert fake.count("create") >= 3


async def test_a_wrong_key_fails_at_once() -> None:
    fake = FakeOpenSandbox()
    fake.fail_next("create", status=401, times=100)
    pool = SandboxPool(SPEC, size=1, connection=fake.connection(), max_create_attempts=5)
    with pytest.raises(SandboxUnavailableError) as info:
        await asyncio.wait_for(pool.acquire(), timeout=30)
    assert isinstance(info.value.__cause__, ConfigurationError)
    assert fake.count("create") == 1
    await pool.aclose()


async def test_acquire_with_a_timeout_still_times_out() -> None:
    fake = FakeOpenSandbox()
    fake.hang_next("create", times=10)
    pool = SandboxPool(SPEC, size=1, connection=fake.connection())
    with pytest.raises(TimeoutError):
        await pool.acquire(timeout=0.3)
    await pool.aclose()
    assert fake.created == []


@pytest.mark.parametrize("value", [0, -1, True, 2.5])
def test_bad_max_create_attempts(value: object) -> None:
    with pytest.raises(ConfigurationError):
        SandboxPool(SPEC, max_create_attempts=value)  # type: ignore[arg-type]
