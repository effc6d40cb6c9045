"""The cancellation-safe create (`CreateGuard`), on the core's fake server.

The server's answer to the create is held back by a transport in front of the fake, so a
cancellation lands after the server made the sandbox and before the session learned its id:
the window in which an unguarded create loses the sandbox.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from opensandbox_core import AsyncSandboxSession, Connection, OpenSandboxError, SandboxSpec
from opensandbox_core._lifecycle._guard import CreateGuard, discard_sandbox, run_to_completion
from opensandbox_core.adapters import OperationScope
from opensandbox_core.testing import FakeOpenSandbox

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")


class _Holding:
    """The fake behind a transport that holds the create's answer for `hold` seconds (the
    sandbox exists meanwhile)."""

    def __init__(self, hold: float) -> None:
        self.fake = FakeOpenSandbox()
        self.hold = hold
        self.answered = asyncio.Event()

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        response = await self.fake.transport.handle_async_request(request)
        if request.method == "POST" and request.url.path.rstrip("/").endswith("/sandboxes"):
            await asyncio.sleep(self.hold)
            self.answered.set()
        return response

    def session(self) -> AsyncSandboxSession:
        connection = Connection(
            domain=self.fake.domain,
            api_key=self.fake.api_key,
            transport=httpx.MockTransport(self._handle),
        )
        return AsyncSandboxSession(SandboxSpec(image="img"), connection=connection)


async def _cancel_when_created(holding: _Holding, call: asyncio.Future[object]) -> None:
    while not holding.fake.created:
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_a_cancelled_create_deletes_the_sandbox_the_answer_names() -> None:
    holding = _Holding(hold=0.5)
    session = holding.session()
    guard = CreateGuard(session)
    await _cancel_when_created(holding, asyncio.ensure_future(guard.start()))
    assert holding.answered.is_set(), "the guard waited for the server's answer"
    assert len(holding.fake.created) == 1
    assert holding.fake.deleted == holding.fake.created


async def test_an_answer_that_never_comes_is_found_by_the_owner_tag() -> None:
    holding = _Holding(hold=60.0)
    session = holding.session()
    guard = CreateGuard(session, wait=0.3)
    await _cancel_when_created(holding, asyncio.ensure_future(guard.start()))
    assert not holding.answered.is_set()
    assert session.owned and session.id == holding.fake.created[0]
    assert holding.fake.deleted == holding.fake.created


async def test_settle_waits_for_the_cleanup_of_a_cancelled_start() -> None:
    holding = _Holding(hold=0.3)
    guard = CreateGuard(holding.session())
    call = asyncio.ensure_future(guard.start())
    while not holding.fake.created:
        await asyncio.sleep(0.01)
    call.cancel()  # nobody awaits the cancelled call: settle() is what waits
    await guard.settle()
    assert holding.fake.deleted == holding.fake.created
    assert call.cancelled()


async def test_a_create_that_never_becomes_usable_is_deleted() -> None:
    fake = FakeOpenSandbox()
    fake.fail_next("endpoint", status=500, times=10_000)
    spec = SandboxSpec(image="img", ready_timeout=0.3)  # any budget: it never becomes usable
    session = AsyncSandboxSession(spec, connection=fake.connection())
    with pytest.raises(OpenSandboxError):
        await CreateGuard(session).start()
    assert len(fake.created) == 1
    assert fake.deleted == fake.created


async def test_keep_finishes_the_create_and_keeps_the_sandbox() -> None:
    holding = _Holding(hold=0.3)
    session = holding.session()
    await _cancel_when_created(
        holding, asyncio.ensure_future(CreateGuard(session, keep=True).start())
    )
    assert session.id == holding.fake.created[0], "the session knows the sandbox it made"
    assert holding.fake.deleted == []
    await session.destroy()
    assert holding.fake.deleted == holding.fake.created


async def test_a_cancelled_async_with_leaves_no_sandbox() -> None:
    holding = _Holding(hold=0.3)

    async def enter() -> None:
        async with holding.session():
            raise AssertionError("the body never runs: the create is cancelled")

    await _cancel_when_created(holding, asyncio.ensure_future(enter()))
    assert len(holding.fake.created) == 1
    assert holding.fake.deleted == holding.fake.created


async def test_discard_never_deletes_an_attached_sandbox() -> None:
    fake = FakeOpenSandbox()
    fake.add_sandbox("sbx-theirs")
    session = AsyncSandboxSession.attach("sbx-theirs", connection=fake.connection())
    await session.start()
    await discard_sandbox(session, "is not ours")
    assert fake.deleted == []


async def test_discard_reports_a_failed_delete_without_raising(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    await session.start()
    fake.fail_next("delete", status=500, times=10)
    with caplog.at_level(logging.WARNING, logger="opensandbox_core"):
        await discard_sandbox(session, "was made for a test")
    assert fake.deleted == []
    assert "Could not delete sandbox" in caplog.text and "ServerError" in caplog.text


async def test_run_to_completion_finishes_the_call_before_the_cancellation() -> None:
    finished: list[str] = []

    async def slow() -> str:
        await asyncio.sleep(0.2)
        finished.append("done")
        return "done"

    call = asyncio.ensure_future(run_to_completion(slow))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert finished == ["done"]
    assert await run_to_completion(slow) == "done"


@pytest.mark.parametrize("wait", [-1, float("nan"), "10"])
def test_a_bad_wait_is_refused_before_any_request(wait: object) -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    with pytest.raises((ValueError, TypeError), match="wait"):
        CreateGuard(session, wait=wait)  # type: ignore[arg-type]
    assert fake.requests == []


async def test_an_operation_scope_that_discards_unfinished_creates_leaves_nothing() -> None:
    # The Deep Agents backend's create: the guard without `keep`, through `OperationScope`.
    holding = _Holding(hold=0.5)
    scope = OperationScope(holding.session())
    start = scope.start(discard_unfinished=True)
    await _cancel_when_created(holding, asyncio.ensure_future(start))
    assert len(holding.fake.created) == 1
    assert holding.fake.deleted == holding.fake.created


async def test_an_operation_scope_discards_what_its_session_created_only() -> None:
    fake = FakeOpenSandbox()
    created = OperationScope(
        AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    )
    sandbox_id = await created.start()
    attached = OperationScope(AsyncSandboxSession.attach(sandbox_id, connection=fake.connection()))
    await attached.start()
    await attached.discard("is not ours")  # only closes its clients
    assert fake.deleted == []
    await created.discard("was made for a test")
    assert fake.deleted == [sandbox_id]
