"""Sandboxes that 0.2.0 created are still found, reused and cleaned up by this release.

Each sandbox is created with the raw `opensandbox` SDK, its metadata written out literally as
0.2.0 wrote it (`opensandbox_core._metadata` and `_fleet._keyed` at 5fc2004), not through this
release's constants: a renamed key or a changed digest would make these tests fail.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from opensandbox import Sandbox
from opensandbox.config import ConnectionConfig

from deepagents_opensandbox_backend import TimeTravelSandboxBackend
from opensandbox_core._doctor import DoctorOptions, run_doctor
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes
from pydantic_ai_opensandbox import CREATE_METADATA_KEY

pytestmark = pytest.mark.daemon_neutral  # the server's labels, the same on every generation

MARKER = "/tmp/made-by-0.2.0"  # inside the sandbox


def _v020_digest(namespace: str, key: str) -> str:
    """0.2.0's thread label value: a digest of (namespace, thread id)."""
    return hashlib.sha256(f"{namespace}\0{key}".encode()).hexdigest()[:40]


def _v020_labels(adapter: str, **labels: str) -> dict[str, str]:
    """What 0.2.0's create wrote on every sandbox, plus the package's own labels."""
    return {
        "opensandbox-agents.library": "opensandbox-core",
        "opensandbox-agents.owner": uuid.uuid4().hex,
        "opensandbox-agents.adapter": adapter,
        **labels,
    }


class _Made:
    """Sandboxes created with the SDK, deleted at the end whatever happened."""

    def __init__(self, testbed_env: dict[str, str], image: str) -> None:
        self.config = ConnectionConfig(
            domain=testbed_env["OPEN_SANDBOX_DOMAIN"],
            api_key=testbed_env["OPEN_SANDBOX_API_KEY"],
            request_timeout=timedelta(seconds=60),
        )
        self.image = image
        self.ids: list[str] = []

    async def create(self, metadata: dict[str, str], timeout: timedelta | None) -> Sandbox:
        sandbox = await Sandbox.create(
            self.image,
            timeout=timeout,
            ready_timeout=timedelta(seconds=60),
            metadata=metadata,
            connection_config=self.config,
        )
        self.ids.append(sandbox.id)
        return sandbox


@pytest.fixture
async def made(testbed_env: dict[str, str], sandbox_image: str) -> AsyncIterator[_Made]:
    sandboxes = _Made(testbed_env, sandbox_image)
    try:
        yield sandboxes
    finally:
        for sandbox_id in sandboxes.ids:
            await destroy_sandbox(sandbox_id)


class _State(TypedDict):
    out: Any


async def _in_thread(thread_id: str, call: Callable[[], Any]) -> Any:
    """`await call()` inside a LangGraph run of `thread_id` (how an agent's tool calls run)."""

    async def node(state: _State) -> _State:
        return {"out": await call()}

    graph = StateGraph(_State)
    graph.add_node("op", node)
    graph.add_edge(START, "op")
    graph.add_edge("op", END)
    config = {"configurable": {"thread_id": thread_id}}
    return (await graph.compile().ainvoke({"out": None}, config))["out"]


async def _leftovers(**options: Any) -> Any:
    results = await run_doctor(DoctorOptions(skip_sandbox=True, **options))
    return {r.name: r for r in results}["leftovers"]


async def test_a_thread_sandbox_of_0_2_0_is_reused_and_cleaned_up(made: _Made) -> None:
    namespace, thread = f"v020-{uuid.uuid4().hex[:12]}", "ticket-0.2.0"
    in_namespace = {"opensandbox-agents.namespace": namespace}
    thread_key = _v020_digest(namespace, thread)
    # The thread's sandbox as 0.2.0's ThreadSandboxBackend made it (without expiry here, so
    # that the doctor's idle rule can remove it), and a time-travel copy of one of its forks
    # as 0.2.0's TimeTravelSandboxBackend restored it (`restore_snapshot` labelled it `core`).
    own = await made.create(
        _v020_labels("deepagents", **in_namespace, **{"opensandbox-agents.thread": thread_key}),
        timeout=None,
    )
    await own.files.write_file(MARKER, f"files of {own.id}")
    copy = await made.create(
        _v020_labels(
            "core",
            **in_namespace,
            **{
                "opensandbox-agents.thread": _v020_digest(thread_key, uuid.uuid4().hex),
                "opensandbox-agents.fork-of": thread_key,
            },
        ),
        timeout=timedelta(minutes=10),
    )
    for sandbox in (own, copy):
        await sandbox.close()

    # The doctor lists both, counted by the package that made them; the idle one is reported.
    report = await _leftovers(match=in_namespace, stale_after=timedelta(0), include_no_expiry=True)
    assert report.data["count"] == 2, report.summary
    assert report.data["adapters"] == {"core": 1, "deepagents": 1}, report.summary
    assert report.data["stale"] == [own.id], report.summary

    # This release's thread backend finds the thread's sandbox and reuses it: by id, inside a
    # LangGraph run of the thread (the path an agent's tools take), and without a second one.
    backend = TimeTravelSandboxBackend(namespace=namespace, image=made.image)
    try:
        assert backend.thread_key(thread) == thread_key
        assert await backend.find_thread(thread) == own.id
        assert (await backend.afor_thread(thread)).id == own.id
        result = await _in_thread(thread, lambda: backend.aexecute(f"cat {MARKER}"))
        assert result.exit_code == 0 and result.output == f"files of {own.id}", result
        listed = await list_sandboxes(metadata=in_namespace)
        assert sorted(s.id for s in listed) == sorted([own.id, copy.id])

        # The doctor's cleanup removes the idle one (the copy expires on its own: kept) ...
        report = await _leftovers(
            match=in_namespace, remove_idle_for=timedelta(0), include_no_expiry=True
        )
        assert report.data["removed"] == [own.id], report.summary
        assert report.data["kept"] == [copy.id], report.summary
        # ... and destroying the thread removes its fork's copy, found by 0.2.0's fork-of label.
        assert await backend.adestroy_thread(thread) == [copy.id]
        assert await list_sandboxes(metadata=in_namespace) == []
    finally:
        await backend.aclose()


async def test_a_pydantic_ai_sandbox_of_0_2_0_is_found_by_its_seed_key(made: _Made) -> None:
    tag = {"osb-v020-test": uuid.uuid4().hex}
    sandbox = await made.create(
        _v020_labels("pydantic-ai", **tag, **{"pydantic-ai-create": "true"}),
        timeout=timedelta(minutes=10),
    )
    await sandbox.close()
    # Seed 004's promise: one left without a stored ref is found by listing the server's sandboxes.
    (found,) = await list_sandboxes(metadata={CREATE_METADATA_KEY: "true", **tag})
    assert found.id == sandbox.id and found.adapter == "pydantic-ai"
    report = await _leftovers(match=tag)
    assert report.data["count"] == 1 and report.data["adapters"] == {"pydantic-ai": 1}, (
        report.summary
    )
