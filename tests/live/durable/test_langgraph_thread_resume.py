"""A Deep Agents thread on a SQLite checkpointer survives a killed process, in the same sandbox.

The first process starts thread A: `ThreadSandboxBackend` creates the thread's sandbox, the agent
writes a note there, and the process is SIGKILLed while the model works on the next step. A new
process resumes the thread from its checkpoint (`invoke(None, ...)`): it finds the thread's
sandbox again through its metadata, the note is there, and no second sandbox is created. A third
process runs thread B, which gets a sandbox of its own. The test, as the application that owns
the threads, destroys both at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from _durable_procs import Worker

from deepagents_opensandbox_backend import NAMESPACE_METADATA_KEY, ThreadSandboxBackend
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes

WORKER = Path(__file__).with_name("_langgraph_worker.py")
GONE = ("terminated", "failed", "stopping", "deleting")


async def _live(namespace: str) -> list[str]:
    found = await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace})
    return sorted(s.id for s in found if s.state.rsplit(".", 1)[-1].lower() not in GONE)


@pytest.fixture
async def namespace(testbed_env: dict[str, str]) -> AsyncIterator[str]:
    """A namespace of this test's own; whatever is left in it is deleted afterwards."""
    name = f"lg-{uuid.uuid4().hex[:12]}"
    yield name
    for summary in await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: name}):
        await destroy_sandbox(summary.id)


async def test_a_killed_thread_resumes_in_its_own_sandbox(
    tmp_path: Path, namespace: str, sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    env = {**os.environ, **testbed_env}
    workers: list[Worker] = []

    def start(name: str, thread_id: str, mode: str) -> Worker:
        args = [str(db), namespace, sandbox_image, thread_id, mode]
        workers.append(Worker(WORKER, args, tmp_path / f"{name}.log", env))
        return workers[-1]

    try:
        first = start("first", "thread-a", "crash")
        first.wait_for("crash-point", timeout=240)
        [sandbox_a] = await _live(namespace)
        killed_at = first.sigkill()
        assert first.proc.returncode == -9

        second = start("second", "thread-a", "resume")
        done = second.wait_for("finished", timeout=240)
        assert second.finish(timeout=60) == 0, second.log.read_text()[-3000:]
        assert [e["step"] for e in second.named("model")] == [1, 2], (
            "the new process must continue at the step that was interrupted, not start over"
        )
        assert done["sandbox"] == sandbox_a
        assert "written-before-the-crash" in done["tools"]["execute"]
        assert done["final"] == "The note is still there."
        assert await _live(namespace) == [sandbox_a], "resuming created another sandbox"

        third = start("third", "thread-b", "fresh")
        other = third.wait_for("finished", timeout=240)
        assert third.finish(timeout=60) == 0, third.log.read_text()[-3000:]
        assert other["sandbox"] != sandbox_a
        assert sorted([sandbox_a, other["sandbox"]]) == await _live(namespace)

        # Figures: from the kill to the resumed sandbox step (the sandbox's own clock, same
        # host), and the requests the new process made to find and reattach the thread's sandbox.
        resumed_at = float(done["tools"]["execute"].split("\n")[1])
        ready = second.wait_for("ready", 0)
        attached_at = second.logged_at("Attached to sandbox")
        reattach = [url.split("?")[0] for t, url in second.requests() if t <= attached_at]
        print(
            f"\nlanggraph: kill -> resumed sandbox step {resumed_at - killed_at:.2f} s, of which "
            f"process start -> agent ready {ready['t'] - ready['started']:.2f} s; "
            f"reattach: {len(reattach)} requests {reattach}"
        )
        assert reattach and "GET" in reattach[0] and "/sandboxes" in reattach[0]
        assert resumed_at > killed_at

        owner = ThreadSandboxBackend(namespace=namespace, image=sandbox_image)
        assert await owner.adestroy_thread("thread-a") == [sandbox_a]
        assert await owner.adestroy_thread("thread-b") == [other["sandbox"]]
        assert await _live(namespace) == []
    finally:
        for worker in workers:
            worker.stop()
