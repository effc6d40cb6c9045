"""A session's HTTP clients are per event loop, and each loop's are closed when that loop shuts
down (`_lifecycle._loops.PerLoop`): a session used from repeated `asyncio.run()` calls keeps no
clients of the loops that ended. Against the in-process fake."""

from __future__ import annotations

import asyncio
import threading

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSession, SandboxSpec
from opensandbox_core._lifecycle._sandbox import LoopClients
from opensandbox_core.testing import FakeOpenSandbox

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")


def _run_once(session: AsyncSandboxSession, seen: list[LoopClients]) -> None:
    async def main() -> None:
        assert (await session.commands.run("echo hi")).stdout == "hi\n"
        seen.append(session._life.loops[asyncio.get_running_loop()])

    asyncio.run(main())


def test_each_asyncio_run_closes_its_clients_when_it_ends() -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    seen: list[LoopClients] = []
    for _ in range(12):
        _run_once(session, seen)
        assert len(session._life.loops) == 0  # nothing kept of the loop that ended
    assert len(seen) == 12 and len({id(c) for c in seen}) == 12
    for clients in seen:
        assert clients.execd is not None and clients.execd._client.is_closed
    asyncio.run(session.destroy())
    assert fake.deleted == [session.id]


def test_a_loop_closed_without_shutdown_is_dropped_on_next_use() -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    loop = asyncio.new_event_loop()
    loop.run_until_complete(session.commands.run("true"))
    loop.close()  # no shutdown_asyncgens: its clients cannot be closed on it any more
    assert list(session._life.loops) == [loop]
    seen: list[LoopClients] = []
    _run_once(session, seen)
    assert len(session._life.loops) == 0
    asyncio.run(session.destroy())


def test_explicit_aclose_then_shutdown_closes_once_and_keeps_working() -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())

    async def main() -> None:
        await session.commands.run("true")
        await session.aclose()
        assert len(session._life.loops) == 0
        assert (await session.commands.run("echo again")).stdout == "again\n"
        assert len(session._life.loops) == 1

    asyncio.run(main())
    assert len(session._life.loops) == 0
    asyncio.run(session.destroy())


def test_loops_in_threads_share_one_registry() -> None:
    fake = FakeOpenSandbox()
    with SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                for _ in range(3):
                    asyncio.run(sb.async_session.commands.run("true"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(sb.async_session._life.loops) == 1  # the portal loop's only
