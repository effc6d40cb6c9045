"""Time travel with files: forking a Deep Agents thread from an earlier checkpoint restores the
sandbox's files of that checkpoint (`TimeTravelSandboxBackend`, snapshots on Docker).

The thread's first turn writes a.txt (step 1), then writes b.txt and deletes a.txt (step 2). A
fork from the checkpoint after step 1 runs in a copy restored from that checkpoint's snapshot: it
sees a.txt and not b.txt. The original branch, continued from its last checkpoint, still runs in
the thread's own sandbox and sees b.txt. A second fork from the same checkpoint gets its own copy.
Each copy carries fresh ownership labels. At the end the thread's owner removes the thread's
sandbox, both copies and every snapshot; nothing is left.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from _durable_chat import HistoryScriptedModel
from deepagents import create_deep_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from deepagents_opensandbox_backend import (
    FORK_OF_METADATA_KEY,
    NAMESPACE_METADATA_KEY,
    SANDBOX_FILES_KEY,
    THREAD_METADATA_KEY,
    ThreadSandboxBackend,
    TimeTravelSandboxBackend,
)
from opensandbox_core._fleet._admin import SandboxSummary
from opensandbox_core._fleet._snapshots import get_snapshot
from opensandbox_core._metadata import OWNER_KEY
from opensandbox_core.adapters import run_blocking
from opensandbox_core.fleet import list_sandboxes

SCRIPTS: dict[str, list[Any]] = {
    "build": [
        ("write_file", {"file_path": "/workspace/a.txt", "content": "from step 1\n"}),
        ("execute", {"command": "echo step-2 > /workspace/b.txt && rm /workspace/a.txt"}),
        "built",
    ],
    "look": [("execute", {"command": "ls /workspace; cat /workspace/a.txt 2>&1"}), "looked"],
}


def _last_tool(result: dict[str, Any]) -> str:
    return str([m for m in result["messages"] if isinstance(m, ToolMessage)][-1].content)


def _listed(namespace: str) -> dict[str, SandboxSummary]:
    found = run_blocking(list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace}))
    return {s.id: s for s in found}


def test_a_fork_from_an_earlier_checkpoint_sees_that_checkpoints_files(
    tmp_path: Path, sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    namespace = f"tt-{uuid.uuid4().hex[:12]}"
    backend = TimeTravelSandboxBackend(namespace=namespace, image=sandbox_image)
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    agent = create_deep_agent(
        model=HistoryScriptedModel(steps=[], scripts=SCRIPTS),
        system_prompt="You keep files in the sandbox.",
        backend=backend,
        middleware=[backend.middleware],
        checkpointer=SqliteSaver(connection),
    )
    config: Any = {"configurable": {"thread_id": "thread-tt"}}
    snapshots: set[str] = set()
    try:
        started = time.monotonic()
        agent.invoke({"messages": "build"}, config, durability="sync")
        first_turn = time.monotonic() - started
        history = list(agent.get_state_history(config))
        snapshots |= {
            s.values[SANDBOX_FILES_KEY]["snapshot_id"]
            for s in history
            if s.values.get(SANDBOX_FILES_KEY)
        }
        assert len(snapshots) == 2, "one snapshot per file-changing step"
        [after_step_1] = [
            s
            for s in history
            if s.values["messages"]
            and isinstance(s.values["messages"][-1], ToolMessage)
            and s.values["messages"][-1].name == "write_file"
        ]
        original = history[0]
        own = run_blocking(backend.find_thread("thread-tt"))
        assert after_step_1.values[SANDBOX_FILES_KEY]["sandbox_id"] == own

        started = time.monotonic()
        fork = agent.invoke({"messages": "look"}, after_step_1.config, durability="sync")
        fork_turn = time.monotonic() - started
        seen = _last_tool(fork)
        assert "a.txt" in seen and "from step 1" in seen and "b.txt" not in seen, seen
        copy = fork[SANDBOX_FILES_KEY]["sandbox_id"]
        assert copy != own

        again = agent.invoke({"messages": "look"}, original.config, durability="sync")
        seen = _last_tool(again)
        assert "b.txt" in seen and "No such file" in seen, seen
        assert again[SANDBOX_FILES_KEY]["sandbox_id"] == own, "the original branch moved"

        second = agent.invoke({"messages": "look"}, after_step_1.config, durability="sync")
        assert "from step 1" in _last_tool(second) and "b.txt" not in _last_tool(second)
        copy_2 = second[SANDBOX_FILES_KEY]["sandbox_id"]
        assert copy_2 not in (own, copy), "two forks shared one copy"

        # Ownership: each copy has its own tag and a fork key; the thread still finds only its own.
        listed = _listed(namespace)
        assert set(listed) == {own, copy, copy_2}
        source = listed[own].metadata
        for copy_id in (copy, copy_2):
            labels = listed[copy_id].metadata
            assert labels[OWNER_KEY] != source[OWNER_KEY]
            assert labels[THREAD_METADATA_KEY] != source[THREAD_METADATA_KEY]
            assert labels[FORK_OF_METADATA_KEY] == source[THREAD_METADATA_KEY]
            assert listed[copy_id].adapter == "deepagents"  # the core writes the adapter's name
        plain = ThreadSandboxBackend(namespace=namespace, image=sandbox_image)
        assert run_blocking(plain.find_thread("thread-tt")) == own
        assert sorted(run_blocking(backend.find_copies("thread-tt"))) == sorted([copy, copy_2])
        for state in agent.get_state_history(config):
            if state.values.get(SANDBOX_FILES_KEY):
                snapshots.add(state.values[SANDBOX_FILES_KEY]["snapshot_id"])
        print(
            f"\ntime travel: first turn (2 file steps, 2 snapshots) {first_turn:.1f} s; fork "
            f"turn (restore + 1 step + 1 snapshot) {fork_turn:.1f} s; snapshots {len(snapshots)}"
        )
    finally:
        removed = backend.destroy_thread("thread-tt")
        backend.close()
        connection.close()
    assert len(removed) == 3
    assert _listed(namespace) == {}, "sandboxes leaked"
    left = [i for i in snapshots if run_blocking(get_snapshot(i)) is not None]
    assert left == [], f"snapshots left behind: {left}"


async def test_a_fork_from_async_code_sees_that_checkpoints_files(
    sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    """The same fork through `ainvoke` (the middleware's `awrap_tool_call`)."""
    namespace = f"tt-{uuid.uuid4().hex[:12]}"
    backend = TimeTravelSandboxBackend(namespace=namespace, image=sandbox_image)
    agent = create_deep_agent(
        model=HistoryScriptedModel(steps=[], scripts=SCRIPTS),
        system_prompt="You keep files in the sandbox.",
        backend=backend,
        middleware=[backend.middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "thread-tt-async"}}
    try:
        await agent.ainvoke({"messages": "build"}, config, durability="sync")
        history = [s async for s in agent.aget_state_history(config)]
        assert (
            len(
                {
                    s.values[SANDBOX_FILES_KEY]["snapshot_id"]
                    for s in history
                    if s.values.get(SANDBOX_FILES_KEY)
                }
            )
            == 2
        )
        [after_step_1] = [
            s
            for s in history
            if s.values["messages"]
            and isinstance(s.values["messages"][-1], ToolMessage)
            and s.values["messages"][-1].name == "write_file"
        ]
        fork = await agent.ainvoke({"messages": "look"}, after_step_1.config, durability="sync")
        seen = _last_tool(fork)
        assert "a.txt" in seen and "from step 1" in seen and "b.txt" not in seen, seen
        own = await backend.find_thread("thread-tt-async")
        assert fork[SANDBOX_FILES_KEY]["sandbox_id"] not in (own, None)
    finally:
        removed = await backend.adestroy_thread("thread-tt-async")
        await backend.aclose()
    assert len(removed) == 2  # the thread's sandbox and the fork's copy
    assert await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace}) == []
