"""Create, attach, share, destroy, concurrent first use and lost-create recovery, live."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    Connection,
    SandboxSession,
    SandboxSpec,
    SandboxUnavailableError,
)
from opensandbox_core._metadata import LIBRARY_KEY, OWNER_KEY
from opensandbox_core.fleet import list_sandboxes, remove_sandboxes
from testbed.fault_tools import WithholdingProxy, run_asgi

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


async def _owned(session: AsyncSandboxSession) -> list[str]:
    found = await list_sandboxes(metadata={OWNER_KEY: session.owner_token})
    return [s.id for s in found]


async def test_create_attach_share_and_destroy(sandbox_image: str) -> None:
    creator = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata={"team": "qa"}))
    try:
        sandbox_id = await creator.start()
        assert creator.owned
        await creator.files.write_bytes("shared.txt", b"from the creator")
        summaries = {s.id: s for s in await list_sandboxes()}
        assert summaries[sandbox_id].metadata[LIBRARY_KEY] == "opensandbox-core"
        assert summaries[sandbox_id].metadata["team"] == "qa"

        async with AsyncSandboxSession.attach(sandbox_id) as attached:
            assert not attached.owned
            assert await attached.files.read_bytes("shared.txt") == b"from the creator"
            assert (await attached.commands.run("cat shared.txt")).stdout == "from the creator"
        # Leaving the attached session's block never destroys the sandbox.
        assert (await creator.commands.run("echo alive")).stdout == "alive\n"
    finally:
        await creator.destroy()
    await creator.destroy()  # idempotent and quiet
    with pytest.raises(SandboxUnavailableError) as info:
        await AsyncSandboxSession.attach(sandbox_id).commands.run("true")
    assert sandbox_id in str(info.value)


async def test_blocking_facade_shares_the_engine(sandbox_image: str) -> None:
    def work() -> str:
        with SandboxSession(SandboxSpec(image=sandbox_image)) as sb:
            sb.files.write_bytes("/tmp/b.bin", bytes(range(256)))
            assert sb.files.read_bytes("/tmp/b.bin") == bytes(range(256))
            assert sb.commands.run(["echo", "blocking"]).stdout == "blocking\n"
            assert sb.id is not None
            return sb.id

    sandbox_id = await asyncio.to_thread(work)
    assert sandbox_id not in {s.id for s in await list_sandboxes()}


async def test_ten_concurrent_first_operations_create_one_sandbox(sandbox_image: str) -> None:
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image))
    try:
        results = await asyncio.gather(*(session.commands.run(f"echo {i}") for i in range(10)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(10)]
        assert await _owned(session) == [session.id]
    finally:
        await session.destroy()


async def test_destroy_mid_command_raises_unavailable(sandbox_image: str) -> None:
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image))
    await session.start()
    other = AsyncSandboxSession.attach(session.id or "")
    task = asyncio.create_task(session.commands.run("sleep 120", timeout=60))
    await asyncio.sleep(1.0)
    await other.destroy()
    started = time.monotonic()
    with pytest.raises(SandboxUnavailableError):
        await task
    assert time.monotonic() - started < 30
    await session.destroy()


async def test_remove_sandboxes_by_age(sandbox_image: str) -> None:
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image))
    sandbox_id = await session.start()
    from datetime import timedelta

    assert sandbox_id not in await remove_sandboxes(idle_for=timedelta(hours=1))
    assert sandbox_id in {s.id for s in await list_sandboxes()}
    await session.destroy()


# -- lost create: a loopback proxy that withholds the answer to POST /v1/sandboxes ----------------


@pytest.fixture
def dropping_proxy(testbed_env: dict[str, str]) -> Iterator[str]:
    """A proxy in front of the server that forwards a create but never returns its answer."""
    proxy = WithholdingProxy(testbed_env["OPEN_SANDBOX_DOMAIN"], every=1, hold=30)
    with run_asgi(proxy.app) as address:
        yield address


@pytest.mark.long
async def test_lost_create_response_is_recovered_by_tag(
    sandbox_image: str, dropping_proxy: str
) -> None:
    connection = Connection(domain=dropping_proxy, request_timeout=3)
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image), connection=connection)
    try:
        result = await session.commands.run("echo adopted")
        assert result.stdout == "adopted\n"
        assert session.owned
        assert await _owned(session) == [session.id]
    finally:
        await session.destroy()
    assert await _owned(session) == []


@pytest.fixture
def holding_proxy(testbed_env: dict[str, str]) -> Iterator[tuple[str, WithholdingProxy]]:
    """A proxy in front of the server that holds a create's answer back for 5 s."""
    proxy = WithholdingProxy(testbed_env["OPEN_SANDBOX_DOMAIN"], every=1, hold=5)
    with run_asgi(proxy.app) as address:
        yield address, proxy


async def test_a_cancelled_async_with_deletes_the_sandbox_its_create_made(
    sandbox_image: str, holding_proxy: tuple[str, WithholdingProxy]
) -> None:
    address, proxy = holding_proxy
    session = AsyncSandboxSession(
        SandboxSpec(image=sandbox_image), connection=Connection(domain=address)
    )

    async def enter() -> None:
        async with session:
            raise AssertionError("the body never runs: the create is cancelled")

    task = asyncio.ensure_future(enter())
    await asyncio.sleep(1.5)
    assert not task.done() and session.id is None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert proxy.withheld == 1, "the cancellation landed while the answer was held back"
    assert session.id is not None, "the guard waited for the answer naming the sandbox"
    assert await _owned(session) == []


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_while_a_blocking_with_creates_leaves_no_sandbox(
    sandbox_image: str, holding_proxy: tuple[str, WithholdingProxy]
) -> None:
    address, proxy = holding_proxy
    session = SandboxSession(
        SandboxSpec(image=sandbox_image), connection=Connection(domain=address)
    )
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()
    timer = threading.Timer(1.5, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt), session:
            raise AssertionError("the body never runs: Ctrl-C lands during the create")
    finally:
        timer.cancel()
    assert proxy.withheld == 1, "Ctrl-C landed while the answer was held back"
    assert session.id is not None, "the clean-up waited for the answer naming the sandbox"
    assert asyncio.run(_owned(session.async_session)) == []


@pytest.mark.parametrize(
    ("option", "needle"),
    [({"allow_internet_access": False}, "egress"), ({"secure_access": True}, "secureAccess")],
)
async def test_options_the_docker_testbed_refuses_fail_cleanly(
    sandbox_image: str, option: dict[str, bool], needle: str
) -> None:
    # The request carries the option (a deny-all networkPolicy / secureAccess); this server has no
    # egress sidecar and runs Docker, so it refuses with a clear 400 and nothing is left behind.
    from opensandbox_core import ServerError

    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image, **option))
    with pytest.raises(ServerError) as info:
        await session.commands.run("true")
    assert info.value.status_code == 400
    assert needle in str(info.value)
    assert session.id is None
    assert await _owned(session) == []
