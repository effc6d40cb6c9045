"""Server restarts and network stalls, live: nothing hangs, errors are clear, work resumes."""

from __future__ import annotations

import asyncio
import time

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    Connection,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)
from testbed.fault_tools import RestartableServer, StallingProxy

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


@pytest.mark.long
@pytest.mark.parametrize("use_server_proxy", [True, False], ids=["server-proxy", "direct"])
async def test_server_restart_mid_session(
    restartable_server: RestartableServer, sandbox_image: str, use_server_proxy: bool
) -> None:
    connection = Connection(
        domain=restartable_server.domain,
        api_key=restartable_server.api_key,
        use_server_proxy=use_server_proxy,
        request_timeout=10,
    )
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image), connection=connection)
    try:
        await session.files.write_bytes("keep.bin", b"\x00kept\xff" * 1000)
        in_flight = asyncio.create_task(session.commands.run("sleep 8; echo finished", timeout=60))
        await asyncio.sleep(1.5)
        restartable_server.stop()
        started = time.monotonic()
        if use_server_proxy:
            # The command's stream went through the server that died: a clear error, no hang.
            with pytest.raises((ServerError, SandboxUnavailableError)) as info:
                async with asyncio.timeout(45):
                    await in_flight
            assert not isinstance(info.value, CommandTimeoutError)
            assert time.monotonic() - started < 30
            assert "sandbox" in str(info.value).lower()
        else:
            # Direct to execd: the server is not on the path; the command completes.
            async with asyncio.timeout(45):
                assert (await in_flight).stdout == "finished\n"
        restartable_server.start()
        # The next operation reattaches (same session, and a new one by id) and the data is there.
        assert await session.files.read_bytes("keep.bin") == b"\x00kept\xff" * 1000
        assert (await session.commands.run("echo back")).stdout == "back\n"
        async with AsyncSandboxSession.attach(session.id or "", connection=connection) as other:
            assert (await other.commands.run(["cat", "keep.bin"])).exit_code == 0
    finally:
        if restartable_server.pid is None:
            restartable_server.start()
        await session.destroy()


@pytest.mark.long
async def test_operation_while_server_down_fails_fast_then_recovers(
    restartable_server: RestartableServer, sandbox_image: str
) -> None:
    connection = Connection(
        domain=restartable_server.domain,
        api_key=restartable_server.api_key,
        use_server_proxy=True,
        request_timeout=5,
    )
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image), connection=connection)
    try:
        await session.start()
        restartable_server.stop()
        started = time.monotonic()
        with pytest.raises(ServerError) as info:
            await session.commands.run("echo nope", timeout=10)
        assert info.value.retryable
        assert time.monotonic() - started < 20
        restartable_server.start()
        assert (await session.commands.run("echo yes")).stdout == "yes\n"
    finally:
        if restartable_server.pid is None:
            restartable_server.start()
        await session.destroy()


async def test_network_stall_ends_at_timeouts_and_recovers(
    stalling_proxy: StallingProxy, testbed_env: dict[str, str], sandbox_image: str
) -> None:
    connection = Connection(
        domain=stalling_proxy.domain,
        api_key=testbed_env["OPEN_SANDBOX_API_KEY"],
        use_server_proxy=True,  # every byte goes through the proxy
        request_timeout=3,
    )
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image), connection=connection)
    try:
        await session.files.write_bytes("before.txt", b"before")
        stalling_proxy.stall()
        # A file call ends at the request timeout.
        started = time.monotonic()
        with pytest.raises((ServerError, SandboxUnavailableError)):
            await session.files.read_bytes("before.txt")
        assert time.monotonic() - started < 3 * 3 + 3  # read timeout + one probe, not SDK retries
        # A command ends at its own timeout (plus the bounded grace), never hangs.
        started = time.monotonic()
        with pytest.raises((CommandTimeoutError, ServerError, SandboxUnavailableError)):
            await session.commands.run("echo stalled", timeout=3)
        assert time.monotonic() - started < 3 + 5 + 10 + 5
        stalling_proxy.resume()
        # A retry after recovery works, and nothing was lost.
        assert await session.files.read_bytes("before.txt") == b"before"
        assert (await session.commands.run("echo recovered", timeout=30)).stdout == "recovered\n"
    finally:
        stalling_proxy.resume()
        await session.destroy()
