"""Many workers of both frameworks share one server (slow): no leaks, no foreign deletes.

Bounded: 3 Temporal workers run 6 workflows (each creates a sandbox, runs two commands, and
destroys it in its last activity) while 6 LangGraph processes run 5 threads on one
`ThreadSandboxBackend` namespace, two of them racing for the same thread. Afterwards every
sandbox is accounted for: each was deleted by the process that created it (the workflow's
destroy activity, a race loser its own duplicate, the test for the threads it owns), and
nothing is left on the server.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("temporalio")
pytest.importorskip("langgraph.checkpoint.sqlite")

from _durable_procs import Worker
from _temporal_support import connect_client, created_sandboxes

from deepagents_opensandbox_backend import NAMESPACE_METADATA_KEY, ThreadSandboxBackend
from opensandbox_core import list_sandboxes

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
DELETE = re.compile(r"DELETE \S+/v1/sandboxes/([0-9a-f-]{36})$")


def _deleted(worker: Worker) -> list[str]:
    return [m.group(1) for _, url in worker.requests() if (m := DELETE.match(url.split("?")[0]))]


async def test_many_workers_share_one_server_without_leaks(
    tmp_path: Path,
    temporal_server: tuple[str, int],
    testbed_env: dict[str, str],
    sandbox_image: str,
    created_here: set[str],
) -> None:
    address, _ = temporal_server
    namespace = f"load-{uuid.uuid4().hex[:10]}"
    task_queue = f"load-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **testbed_env, "OSB_CRASH_ARM": ""}
    started = time.monotonic()
    temporal = [
        Worker(HERE / "_temporal_worker.py", [address, task_queue], tmp_path / f"t{n}.log", env)
        for n in range(3)
    ]
    threads = [f"thread-{n}" for n in range(4)] + ["thread-race", "thread-race"]
    langgraph: list[Worker] = []
    try:
        for worker in temporal:
            worker.wait_for("ready", timeout=240)
        client = await connect_client(address)
        handles = [
            await client.start_workflow(
                "OsbDurableRun",
                "Leave a marker and read it back.",
                id=f"load-{n}-{uuid.uuid4().hex}",
                task_queue=task_queue,
                result_type=dict,
            )
            for n in range(6)
        ]
        langgraph = [
            Worker(
                HERE / "_langgraph_worker.py",
                [str(tmp_path / f"g{n}.sqlite"), namespace, sandbox_image, thread, "fresh"],
                tmp_path / f"g{n}.log",
                env,
            )
            for n, thread in enumerate(threads)
        ]
        results = await asyncio.wait_for(
            asyncio.gather(*(h.result(rpc_timeout=None) for h in handles)), timeout=400
        )
        finished = [w.wait_for("finished", timeout=400) for w in langgraph]
        assert [w.finish(timeout=60) for w in langgraph] == [0] * len(langgraph)
        wall = time.monotonic() - started

        # Temporal: one sandbox per workflow, each destroyed once, by its workflow's activity.
        created = [i for w in temporal for i in created_sandboxes(w)]
        created_here.update(created)
        refs = sorted(r["ref"] for r in results)
        assert sorted(created) == refs and len(set(refs)) == 6
        assert all("written-before-the-crash" in r["output"] for r in results)
        destroyed = sorted(e["sandbox"] for w in temporal for e in w.named_now("destroy"))
        assert destroyed == refs
        assert sorted(i for w in temporal for i in _deleted(w)) == refs

        # Threads: one sandbox per thread; the racers agree; a process deletes only its own.
        by_thread: dict[str, set[str]] = {}
        for thread, done in zip(threads, finished, strict=True):
            by_thread.setdefault(thread, set()).add(done["sandbox"])
        assert all(len(ids) == 1 for ids in by_thread.values()), by_thread
        kept = sorted(next(iter(ids)) for ids in by_thread.values())
        assert len(set(kept)) == 5
        for worker in langgraph:
            own = {
                line.rsplit(" ", 1)[-1]
                for line in worker.log.read_text().splitlines()
                if " opensandbox_core._session Created OpenSandbox sandbox " in line
            }
            created_here.update(own)
            assert set(_deleted(worker)) <= own - set(kept), (
                "a process deleted a sandbox it did not create"
            )
        listed = await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace})
        assert sorted(s.id for s in listed) == kept

        owner = ThreadSandboxBackend(namespace=namespace, image=sandbox_image)
        for thread in by_thread:
            await owner.adestroy_thread(thread)
        alive = {s.id for s in await list_sandboxes()}
        assert not (set(refs) | set(kept)) & alive, "sandboxes leaked"
        duplicates = sum(len(_deleted(w)) for w in langgraph)
        print(
            f"\nload: 3 Temporal workers x 6 workflows + 6 LangGraph processes x 5 threads in "
            f"{wall:.1f} s; sandboxes created {len(created) + len(kept) + duplicates}, kept "
            f"{len(refs) + len(kept)}, race duplicates deleted by their creators {duplicates}, "
            f"left on the server 0"
        )
    finally:
        for worker in temporal + langgraph:
            worker.stop()
