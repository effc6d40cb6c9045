"""A Pydantic AI agent on Prefect survives a SIGKILLed worker, in the same sandbox.

A real Prefect server (`prefect server start` from the `prefect` wheel: loopback only, SQLite in
a temp dir, no UI, analytics off) and two worker processes, each a Prefect runner serving the
same deployment. The agent (`PrefectDurability` + `OpenSandbox` + `Shell`, scripted model)
writes a marker file in a new sandbox; the worker running the flow is SIGKILLed inside the next
model step. Nothing on the server notices a dead runner by itself, so the test does what an
operator (or Prefect's zombie-flow automation) does: it marks the flow run Crashed and
schedules it again, as `prefect flow-run retry` does. The other worker picks the same flow run up; the tasks that completed
(the first model step, the workspace operation holding the sandbox ref, the first command) come
back from Prefect's persisted results instead of running again, the interrupted step runs in the
same sandbox (the marker is there, once), and the flow destroys the sandbox once at the end.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
import uuid
from pathlib import Path

import pytest

if importlib.util.find_spec("prefect") is None or importlib.util.find_spec("temporalio") is None:
    pytest.skip("needs the durable dependency group (prefect)", allow_module_level=True)

from _durable_procs import Worker
from _prefect_support import PrefectServer, group_pids, wait_group_gone
from _temporal_support import LOOPBACK, api_base, created_sandboxes, listening_addresses

from opensandbox_core.fleet import list_sandboxes

WORKER = Path(__file__).with_name("_prefect_worker.py")
MARKER = "written-before-the-crash"


async def test_a_sigkilled_prefect_worker_is_replaced_in_the_same_sandbox(
    tmp_path: Path,
    prefect_server: PrefectServer,
    testbed_env: dict[str, str],
    created_here: set[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listening: set[str] = set()
    for pid in group_pids(prefect_server.proc.pid):
        listening |= listening_addresses(pid)
    assert listening and listening <= LOOPBACK, f"Prefect listens beyond loopback: {listening}"

    # Prefect reads its settings when imported: this process talks to the local server only.
    for key, value in prefect_server.client_env.items():
        monkeypatch.setenv(key, value)
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import State, StateType
    from prefect.client.schemas.responses import SetStateStatus
    from prefect.states import Crashed, Scheduled

    arm = tmp_path / "crash-armed"
    arm.write_text("")
    deployment = f"osb-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        **testbed_env,
        **prefect_server.client_env,
        "OSB_CRASH_ARM": str(arm),
    }
    workers = [Worker(WORKER, [deployment], tmp_path / f"worker-{n}.log", env) for n in (1, 2)]
    try:
        for worker in workers:
            worker.wait_for("ready", timeout=180)
        async with get_client() as client:
            found = await client.read_deployment_by_name(f"osb-prefect-run/{deployment}")
            flow_run = await client.create_flow_run_from_deployment(
                found.id, parameters={"prompt": "Leave a marker and read it back."}
            )

            deadline = time.monotonic() + 240
            victim = None
            while victim is None:
                assert time.monotonic() < deadline, "no worker reached the crash point"
                state = (await client.read_flow_run(flow_run.id)).state
                assert state is None or not state.is_final(), f"the flow run ended: {state}"
                for worker in workers:
                    if worker.poll("crash-point", timeout=0.5) is not None:
                        victim = worker
            survivor = next(w for w in workers if w is not victim)
            assert [e["flow_run"] for e in victim.named("flow-run")] == [str(flow_run.id)]
            created_before = created_sandboxes(workers[0]) + created_sandboxes(workers[1])
            created_here.update(created_before)
            assert len(created_before) == 1, f"one sandbox before the crash, got {created_before}"
            killed_at = victim.sigkill()
            assert wait_group_gone(victim.proc.pid) == [], (
                "the flow-run process outlived its worker"
            )

            state = (await client.read_flow_run(flow_run.id)).state
            assert state is not None and state.type == StateType.RUNNING, state
            await client.set_flow_run_state(
                flow_run.id, Crashed(message="its worker was SIGKILLed"), force=True
            )
            # What `prefect flow-run retry <id>` does for a crashed run of a deployment (the CLI
            # would spend ~15 s here importing itself): back to Scheduled, for any runner.
            scheduled: State[None] = Scheduled(message="retried after its worker died")
            retried = await client.set_flow_run_state(flow_run.id, scheduled, force=True)
            assert retried.status == SetStateStatus.ACCEPT, retried
            rescheduled_at = time.time()

            outcome = survivor.wait_for("result", timeout=240)
            deadline = time.monotonic() + 60
            while (state := (await client.read_flow_run(flow_run.id)).state) is None or (
                not state.is_final()
            ):
                assert time.monotonic() < deadline, f"the flow run did not finish: {state}"
                await asyncio.sleep(0.5)
            assert state.type == StateType.COMPLETED, state

        assert [e["flow_run"] for e in survivor.named("flow-run")] == [str(flow_run.id)]
        created_here.update(created_sandboxes(survivor))
        assert outcome["ref"] == created_before[0]
        output_lines = str(outcome["output"]).strip().splitlines()  # "[stdout]", then the lines
        assert output_lines.count(MARKER) == 1, outcome["output"]
        assert created_sandboxes(workers[0]) + created_sandboxes(workers[1]) == created_before, (
            "a second sandbox"
        )
        # The completed first model step came back from the cache; the interrupted one ran again.
        assert [e["step"] for e in survivor.named("model")] == [1, 2]
        assert [e["sandbox"] for e in survivor.named("destroy")] == [outcome["ref"]]
        assert victim.named("destroy") == []
        assert outcome["ref"] not in {s.id for s in await list_sandboxes()}
        # The run-owned transport is closed when the agent run ends (seed 004, in-process engine).
        assert outcome["open_after_run"] == [], outcome["open_after_run"]

        resumed_at = float(output_lines[output_lines.index(MARKER) + 1])
        resumed_model = survivor.named("model")[0]["t"]
        base = api_base(testbed_env)
        after = [
            (t, url.split("?")[0])
            for t, url in survivor.requests()
            if t > killed_at and not url.split(" ", 1)[1].startswith(prefect_server.api_url)
        ]
        assert not any(url == f"POST {base}/sandboxes" for _, url in after)
        requests_after = [url for t, url in after if t <= resumed_at]
        print(
            f"\nprefect: kill -> retry scheduled {rescheduled_at - killed_at:.2f} s, "
            f"-> interrupted model step run on the other worker {resumed_model - killed_at:.2f} s, "
            f"-> resumed sandbox step {resumed_at - killed_at:.2f} s; survivor's OpenSandbox "
            f"requests up to that step: {len(requests_after)} {requests_after}"
        )
    finally:
        for worker in workers:
            worker.stop()
        for worker in workers:
            assert wait_group_gone(worker.proc.pid) == [], "a worker's process outlived it"
