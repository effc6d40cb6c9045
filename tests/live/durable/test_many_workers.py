"""Many workers of both frameworks share one server, and a third of the creates lose their answer.

Bounded: 3 Temporal workers run 6 workflows (each creates a sandbox, runs two commands, and
destroys it in its last activity) while 6 LangGraph processes run 5 threads on one
`ThreadSandboxBackend` namespace, two of them racing for the same thread. Every worker talks to
the server through a loopback proxy (`_lost_creates.LosingProxy`) that carries out every third
create but answers it with a 504, so the creator never learns the id.

Afterwards every sandbox is accounted for: each lost create was recovered by its ownership tag in
the process that sent it (and used, not duplicated), each sandbox was deleted by the process that
created it (the workflow's destroy activity, a race loser its own duplicate, the test for the
threads it owns), and nothing is left on the server. Prints the figures docs/reliability.md
quotes.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")
pytest.importorskip("langgraph.checkpoint.sqlite")

from _durable_procs import Worker
from _lost_creates import LosingProxy
from _temporal_support import connect_client, created_sandboxes

from deepagents_opensandbox_backend import NAMESPACE_METADATA_KEY, ThreadSandboxBackend
from opensandbox_core.fleet import list_sandboxes
from testbed.fault_tools import run_asgi

HERE = Path(__file__).parent
DELETE = re.compile(r"DELETE \S+/v1/sandboxes/([0-9a-f-]{36})$")
RECOVERED = re.compile(r"Recovered sandbox (\S+) after a lost create response")
WORKFLOWS, THREADS = 6, [f"thread-{n}" for n in range(4)] + ["thread-race", "thread-race"]


def _deleted(worker: Worker) -> list[str]:
    return [m.group(1) for _, url in worker.requests() if (m := DELETE.match(url.split("?")[0]))]


def _recovered(worker: Worker) -> list[str]:
    return RECOVERED.findall(worker.log.read_text())


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _timed(handle: Any, since: float) -> tuple[dict[str, str], float]:
    result = await handle.result(rpc_timeout=None)
    return result, time.monotonic() - since


async def test_many_workers_with_lost_creates_share_one_server_without_leaks(
    tmp_path: Path,
    temporal_server: tuple[str, int],
    testbed_env: dict[str, str],
    sandbox_image: str,
    created_here: set[str],
) -> None:
    address, _ = temporal_server
    namespace = f"load-{uuid.uuid4().hex[:10]}"
    task_queue = f"load-{uuid.uuid4().hex[:8]}"
    proxy = LosingProxy(testbed_env["OPEN_SANDBOX_DOMAIN"], every=3)
    temporal: list[Worker] = []
    langgraph: list[Worker] = []
    with run_asgi(proxy) as domain:
        assert domain.startswith("127.0.0.1:")
        env = {**os.environ, **testbed_env, "OSB_CRASH_ARM": "", "OPEN_SANDBOX_DOMAIN": domain}
        started = time.monotonic()
        try:
            temporal = [
                Worker(
                    HERE / "_temporal_worker.py", [address, task_queue], tmp_path / f"t{n}.log", env
                )
                for n in range(3)
            ]
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
                for n in range(WORKFLOWS)
            ]
            runs_started = time.monotonic()
            langgraph = [
                Worker(
                    HERE / "_langgraph_worker.py",
                    [str(tmp_path / f"g{n}.sqlite"), namespace, sandbox_image, thread, "fresh"],
                    tmp_path / f"g{n}.log",
                    env,
                )
                for n, thread in enumerate(THREADS)
            ]
            timed = await asyncio.wait_for(
                asyncio.gather(*(_timed(h, runs_started) for h in handles)), timeout=400
            )
            results = [r for r, _ in timed]
            finished = [w.wait_for("finished", timeout=400) for w in langgraph]
            assert [w.finish(timeout=60) for w in langgraph] == [0] * len(langgraph)
            wall = time.monotonic() - started
            workers = temporal + langgraph

            # Lost creates: each was recovered by the process that sent it, none twice.
            recovered = [i for w in workers for i in _recovered(w)]
            assert proxy.lost, "the proxy lost no create answer: the run proves nothing"
            assert sorted(recovered) == sorted(proxy.lost), (proxy.lost, recovered)
            assert len(proxy.lost) <= proxy.creates // proxy.every

            # Temporal: one sandbox per workflow, each destroyed once, by its workflow's activity.
            created = [i for w in temporal for i in created_sandboxes(w)]
            created_here.update(created)
            refs = sorted(r["ref"] for r in results)
            assert sorted(created) == refs and len(set(refs)) == WORKFLOWS
            assert all("written-before-the-crash" in r["output"] for r in results)
            destroyed = sorted(e["sandbox"] for w in temporal for e in w.named_now("destroy"))
            assert destroyed == refs
            assert sorted(i for w in temporal for i in _deleted(w)) == refs

            # Threads: one sandbox per thread; the racers agree; a process deletes only its own.
            by_thread: dict[str, set[str]] = {}
            for thread, done in zip(THREADS, finished, strict=True):
                by_thread.setdefault(thread, set()).add(done["sandbox"])
            assert all(len(ids) == 1 for ids in by_thread.values()), by_thread
            kept = sorted(next(iter(ids)) for ids in by_thread.values())
            assert len(set(kept)) == len(by_thread)
            made_by_threads: set[str] = set()
            for worker in langgraph:
                own = set(created_sandboxes(worker))
                made_by_threads |= own
                created_here.update(own)
                assert set(_deleted(worker)) <= own - set(kept), (
                    "a process deleted a sandbox it did not create"
                )
            assert set(proxy.lost) <= set(refs) | made_by_threads
            listed = await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace})
            assert sorted(s.id for s in listed) == kept

            owner = ThreadSandboxBackend(namespace=namespace, image=sandbox_image)
            for thread in by_thread:
                await owner.adestroy_thread(thread)
            alive = {s.id for s in await list_sandboxes()}
            assert not (set(refs) | made_by_threads) & alive, "sandboxes leaked"

            # Figures: workflow wall times; LangGraph step latencies (one model step to the next:
            # the tool call in between, the first one including the sandbox's create).
            run_times = [t for _, t in timed]
            steps: dict[int, list[float]] = {0: [], 1: []}
            for worker in langgraph:
                model = {e["step"]: e["t"] for e in worker.named("model")}
                for n in steps:
                    steps[n].append(model[n + 1] - model[n])
            duplicates = sum(len(_deleted(w)) for w in langgraph)
            print(
                f"\nload: 3 Temporal workers x {WORKFLOWS} workflows + {len(langgraph)} LangGraph "
                f"processes x {len(by_thread)} threads in {wall:.1f} s; creates sent "
                f"{proxy.creates}, answers lost {len(proxy.lost)}, recovered by tag "
                f"{len(recovered)}; sandboxes created {len(created) + len(made_by_threads)}, kept "
                f"{len(refs) + len(kept)}, race duplicates deleted by their creators {duplicates}, "
                f"left on the server 0; workflow p50 {statistics.median(run_times):.1f} s p95 "
                f"{_p(run_times, 0.95):.1f} s; thread step 1 (create + write) p50 "
                f"{statistics.median(steps[0]):.2f} s p95 {_p(steps[0], 0.95):.2f} s; step 2 "
                f"(command) p50 {statistics.median(steps[1]):.2f} s p95 {_p(steps[1], 0.95):.2f} s"
            )
        finally:
            for worker in temporal + langgraph:
                worker.stop()
