"""`OperationScope` and `keyword_defaults` (behind `spec_from_keywords`): the core's pieces an
adapter builds its backend on, offline against `opensandbox_core.testing.FakeOpenSandbox`; and
the Pydantic AI package's `running_on_asyncio`."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import trio

from opensandbox_core import AsyncSandboxSession, SandboxSpec
from opensandbox_core._keywords import keyword_defaults
from opensandbox_core.adapters import OperationScope
from opensandbox_core.testing import FakeOpenSandbox
from pydantic_ai_opensandbox._translate import running_on_asyncio


def scoped(fake: FakeOpenSandbox, closes: list[int], **kwargs: bool) -> OperationScope:
    """A scope on a fresh session whose `aclose()` calls are recorded (the count in flight)."""
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    scope = OperationScope(session, **kwargs)
    original = session.aclose

    async def recorded() -> None:
        closes.append(scope.in_flight)
        await original()

    session.aclose = recorded  # type: ignore[method-assign]
    return scope


async def test_the_clients_close_after_the_last_operation_only_when_asked() -> None:
    fake = FakeOpenSandbox()
    closes: list[int] = []
    scope = scoped(fake, closes)
    async with scope.operation():
        sandbox_id = await scope.start()
        assert (await scope.session.commands.run("echo hi")).stdout == "hi\n"
    assert closes == [] and scope.in_flight == 0  # not asked: left open for the next one
    scope.close_after_operation = True
    async with scope.operation(), scope.operation():
        assert scope.in_flight == 2
        assert await scope.start() == sandbox_id  # started once: the same sandbox
    assert closes == [0]  # once, when the outer one ended
    assert list(fake.created) == [sandbox_id]


async def test_aclose_during_an_operation_waits_for_its_end() -> None:
    fake = FakeOpenSandbox()
    closes: list[int] = []
    scope = scoped(fake, closes)
    async with scope.operation():
        await scope.start()
        await scope.aclose()
        assert closes == [] and scope.close_after_operation
        assert (await scope.session.commands.run("echo still")).stdout == "still\n"
    assert closes == [0]
    await scope.aclose()  # nothing in flight: at once
    assert closes == [0, 0]


async def test_a_cancelled_start_keeps_the_sandbox_it_created() -> None:
    fake = FakeOpenSandbox()
    scope = scoped(fake, [])
    task = asyncio.ensure_future(scope.start())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert scope.session.owned and scope.session.id in fake.created
    assert fake.deleted == []  # kept, not discarded as `CreateGuard` without `keep` would
    assert await scope.start() == scope.session.id
    await scope.session.destroy()


async def test_running_on_asyncio_in_an_asyncio_loop() -> None:
    assert running_on_asyncio()


def test_not_running_on_asyncio_outside_a_loop_or_under_trio() -> None:
    assert not running_on_asyncio()

    async def under_trio() -> bool:
        return running_on_asyncio()

    assert trio.run(under_trio) is False


def test_keyword_defaults_of_a_function_a_class_and_a_dataclass() -> None:
    def backend(*, image: str = "a:1", timeout: float | None = 600, env: object = None) -> None:
        del image, timeout, env

    class Backend:
        def __init__(self, image: str, *, lifetime: int = 5) -> None:
            del image, lifetime

    @dataclasses.dataclass
    class Capability:
        image: str | None = None
        tags: list[str] = dataclasses.field(default_factory=list)

    assert keyword_defaults(backend) == {"image": "a:1", "timeout": 600, "env": None}
    assert keyword_defaults(Backend) == {"lifetime": 5}  # `image` has no default
    assert keyword_defaults(Capability)["image"] is None
