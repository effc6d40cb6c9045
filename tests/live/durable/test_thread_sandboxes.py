"""`ThreadSandboxBackend` live: one sandbox per thread, and racing first calls agree on one.

Separate `ThreadSandboxBackend` instances share nothing in memory, so three of them racing for
one thread behave like three worker processes: each creates, the oldest sandbox wins, the others
delete their duplicate and attach to it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

import pytest

from deepagents_opensandbox_backend import (
    NAMESPACE_METADATA_KEY,
    THREAD_METADATA_KEY,
    ThreadSandboxBackend,
)
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes


def _live(summaries: list, key: str | None = None) -> list[str]:
    gone = ("terminated", "failed", "stopping", "deleting")
    return sorted(
        s.id
        for s in summaries
        if s.state.rsplit(".", 1)[-1].lower() not in gone
        and (key is None or s.metadata.get(THREAD_METADATA_KEY) == key)
    )


@pytest.fixture
async def namespace(testbed_env: dict[str, str]) -> AsyncIterator[str]:
    """A namespace of this test's own; every sandbox in it is deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    for summary in await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: name}):
        await destroy_sandbox(summary.id)


async def test_racing_processes_settle_on_one_sandbox_per_thread(
    namespace: str, sandbox_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="opensandbox_core")  # KeyedSandboxes logs the election
    racers = [ThreadSandboxBackend(namespace=namespace, image=sandbox_image) for _ in range(3)]
    try:
        won = await asyncio.wait_for(
            asyncio.gather(*(r.afor_thread("thread-a") for r in racers)), timeout=180
        )
        ids = {b.id for b in won}
        assert len(ids) == 1, f"the racers ended on different sandboxes: {ids}"
        key = racers[0].thread_key("thread-a")
        listed = await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace})
        assert _live(listed, key) == sorted(ids), "the losers' duplicates were not all deleted"
        kept = [r.getMessage() for r in caplog.records if r.getMessage().endswith("for a key")]
        assert len(kept) == 1, f"more than one racer kept its sandbox: {kept}"

        await won[0].awrite("/workspace/shared.txt", "one sandbox\n")
        for racer in racers:
            read = await (await racer.afor_thread("thread-a")).aread("/workspace/shared.txt")
            assert read.error is None and "one sandbox" in str(read.file_data)

        # One instance, concurrent first calls of another thread: one lookup, one sandbox.
        same = await asyncio.gather(*(racers[0].afor_thread("thread-b") for _ in range(4)))
        assert all(b.session is same[0].session for b in same)  # one lookup, one session
        assert same[0].id not in ids, "a second thread got the first thread's sandbox"
        assert await racers[1].find_thread("thread-b") == same[0].id

        assert await racers[2].adestroy_thread("thread-a") == sorted(ids)
        assert await racers[0].find_thread("thread-a") is None
        assert await racers[0].find_thread("thread-b") == same[0].id
    finally:
        for racer in racers:
            await racer.aclose()


def test_the_same_thread_id_in_two_namespaces_gets_two_keys() -> None:
    a, b = ThreadSandboxBackend(namespace="app-a"), ThreadSandboxBackend(namespace="app-b")
    assert a.thread_key("t") != b.thread_key("t")
    assert a.thread_key("t") == ThreadSandboxBackend(namespace="app-a").thread_key("t")
    with pytest.raises(ValueError, match="namespace"):
        ThreadSandboxBackend(namespace="bad namespace!")
    with pytest.raises(RuntimeError, match="outside a LangGraph run"):
        ThreadSandboxBackend.current_thread_id()
