"""`KeyedSandboxes` offline, against `opensandbox_core.testing.FakeOpenSandbox`: one sandbox per
key, found again by another instance (another process) through its labels, one create for
concurrent first calls, racing instances settling on the oldest, destroy, and its checks. The
live tests (`tests/live/durable/test_thread_sandboxes.py`) race real servers."""

from __future__ import annotations

import asyncio

import pytest

from opensandbox_core import AsyncSandboxSession, ConfigurationError, SandboxSpec
from opensandbox_core._fleet._keyed import KEY_METADATA_KEY, NAMESPACE_METADATA_KEY
from opensandbox_core.adapters import run_blocking
from opensandbox_core.fleet import KeyedSandboxes
from opensandbox_core.testing import FakeOpenSandbox

SPEC = SandboxSpec(image="img", metadata={"team": "a"})


def live(fake: FakeOpenSandbox) -> dict[str, dict[str, str]]:
    return {i: box.metadata for i, box in fake.sandboxes.items() if i not in fake.deleted}


async def test_one_sandbox_per_key_found_again_by_another_instance() -> None:
    fake = FakeOpenSandbox()
    first = KeyedSandboxes(SPEC, namespace="app", connection=fake.connection())
    session = await first.session("ticket-42")
    assert await first.session("ticket-42") is session
    (labels,) = live(fake).values()
    assert labels["team"] == "a" and labels[NAMESPACE_METADATA_KEY] == "app"
    assert labels[KEY_METADATA_KEY] == first.digest("ticket-42") != first.digest("ticket-43")
    assert first.labels("ticket-42") == {
        NAMESPACE_METADATA_KEY: "app",
        KEY_METADATA_KEY: first.digest("ticket-42"),
    }
    other = KeyedSandboxes(SPEC, namespace="app", connection=fake.connection())
    found = await other.session("ticket-42")
    assert found.id == session.id and not found.owned  # attached, never created
    assert await other.find("ticket-43") is None
    assert len(live(fake)) == 1
    elsewhere = KeyedSandboxes(SPEC, namespace="other", connection=fake.connection())
    assert elsewhere.digest("ticket-42") != first.digest("ticket-42")
    assert (await elsewhere.session("ticket-42")).id != session.id
    assert await other.destroy("ticket-42") == [session.id]
    assert await first.find("ticket-42") is None
    await first.aclose()
    await other.aclose()
    await elsewhere.aclose()


async def test_concurrent_first_calls_share_one_create() -> None:
    fake = FakeOpenSandbox()
    keyed = KeyedSandboxes(SPEC, namespace="app", connection=fake.connection())
    sessions = await asyncio.gather(*(keyed.session("t") for _ in range(5)))
    assert all(s is sessions[0] for s in sessions)
    assert len(fake.created) == 1
    await keyed.aclose()


async def test_racing_instances_settle_on_the_oldest() -> None:
    fake = FakeOpenSandbox()
    racers = [KeyedSandboxes(SPEC, namespace="app", connection=fake.connection()) for _ in range(3)]
    sessions = await asyncio.gather(*(r.session("t") for r in racers))
    assert len({s.id for s in sessions}) == 1
    assert list(live(fake)) == [sessions[0].id], "the losers did not delete their duplicates"
    for racer in racers:
        await racer.aclose()


async def test_adapter_factories_and_the_blocking_call() -> None:
    fake = FakeOpenSandbox()
    made: list[dict[str, str]] = []

    def create(labels: dict[str, str]) -> AsyncSandboxSession:
        made.append(dict(labels))
        return AsyncSandboxSession(
            SandboxSpec(image="x", metadata=labels), connection=fake.connection()
        )

    def attach(sandbox_id: str) -> AsyncSandboxSession:
        return AsyncSandboxSession.attach(sandbox_id, connection=fake.connection())

    keyed = KeyedSandboxes(
        namespace="app",
        connection=fake.connection(),
        create=create,
        attach=attach,
        key_label="app.thread",
        settle_timeout=5,
    )
    session = await asyncio.to_thread(keyed.session_blocking, "t")
    assert made == [{NAMESPACE_METADATA_KEY: "app", "app.thread": keyed.digest("t")}]
    assert keyed.forget("t") is session and keyed.forget("t") is None
    await keyed.aclose()


async def test_destroy_and_aclose_close_the_caller_loop_and_the_blocking_loop() -> None:
    """A key's session used by blocking callers (on the portal loop) and by async ones has
    clients on both loops; `destroy` and `aclose` close both (the adapters close nothing)."""
    fake = FakeOpenSandbox()
    keyed = KeyedSandboxes(SPEC, namespace="app", connection=fake.connection())
    for key in ("kept", "gone"):
        session = await asyncio.to_thread(keyed.session_blocking, key)
        await asyncio.to_thread(run_blocking, session.files.write_bytes("/workspace/f", b"x"))
        assert await session.files.read_bytes("/workspace/f") == b"x"
        assert len(session._life.loops) == 2  # the portal loop's clients and this loop's
    gone = await keyed.session("gone")
    assert await keyed.destroy("gone") == [gone.id]
    assert gone._life.loops == {}
    kept = await keyed.session("kept")
    await keyed.aclose()
    assert kept._life.loops == {} and gone.id not in live(fake) and kept.id in live(fake)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"namespace": "no spaces"},
        {"namespace": ""},
        {"namespace": "a" * 64},
        {"namespace": "ok", "spec": None},
        {"namespace": "ok", "create": lambda labels: None},
        {"namespace": "ok", "settle_timeout": -1},
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs: dict[str, object]) -> None:
    arguments = {"spec": SPEC, **kwargs}
    with pytest.raises(ConfigurationError):
        KeyedSandboxes(**arguments)  # type: ignore[arg-type]


def test_keys_must_be_non_empty_strings() -> None:
    keyed = KeyedSandboxes(SPEC, namespace="app")
    for bad in ("", None, 3):
        with pytest.raises(ConfigurationError):
            keyed.digest(bad)  # type: ignore[arg-type]
