"""The agent and flow of `test_prefect_resume.py` (loaded by every flow-run process).

The same scripted agent as the Temporal test (`_temporal_flow.py`), made durable with
`PrefectDurability`: every model request, tool call and the first workspace operation is a
Prefect task whose result is persisted under a key that includes the flow run's id. A flow run
that is run again (same id) gets the completed tasks' results back instead of running them, so
the workspace operation hands back the sandbox ref it recorded and no sandbox is created.

When the model is asked for the second step in a process that claims the `OSB_CRASH_ARM` file
(a rename, so exactly one does), it prints `crash-point` and waits to be SIGKILLed. The flow ends
by destroying the sandbox it created, once, in a task of its own (the flow is its owner). Before
that it counts this process's TCP connections to anything but the Prefect API: the run-owned
transport must be closed when the agent run ends.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from prefect import flow, task
from prefect.cache_policies import INPUTS, RUN_ID
from prefect.context import FlowRunContext
from pydantic_ai import Agent
from pydantic_ai.durable_exec.prefect import PrefectDurability, TaskConfig
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import WorkspaceRef
from pydantic_ai_harness.shell import Shell

from pydantic_ai_opensandbox import OpenSandbox

IMAGE = os.environ.get("OSB_TESTBED_IMAGE", "python:3.13-slim")

# Prefect configures logging for its own loggers; these three get a handler of their own, so
# the worker's log has every OpenSandbox request and the core's create line, with their times.
_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter("%(created).6f %(name)s %(message)s"))
for _name in ("httpx", "pydantic_ai_opensandbox", "opensandbox_core"):
    _logger = logging.getLogger(_name)
    _logger.setLevel(logging.INFO)
    _logger.addHandler(_handler)
    _logger.propagate = False


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields}), flush=True)


def _returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if part.part_kind == "tool-return"
    ]


def _claim_crash() -> bool:
    arm = os.environ.get("OSB_CRASH_ARM")
    if not arm:
        return False
    try:
        os.rename(arm, f"{arm}.claimed-by-{os.getpid()}")
    except FileNotFoundError:
        return False
    return True


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    seen = _returns(messages)
    emit("model", step=len(seen))
    if not seen:
        # Appends: had this step run twice, the marker would hold the line twice.
        command = "echo written-before-the-crash >> marker.txt && echo ok"
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": command}, "c1")])
    if len(seen) == 1:
        if _claim_crash():
            emit("crash-point")
            threading.Event().wait()  # SIGKILLed here by the test
        command = "cat marker.txt && date +%s.%N"
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": command}, "c2")])
    return ModelResponse(parts=[TextPart(seen[-1])])


sandboxes = OpenSandbox(image=IMAGE, sandbox_timeout=900)
agent = Agent(
    FunctionModel(scripted),
    name="osb_prefect",
    capabilities=[
        sandboxes,
        # An explicit id: without one pydantic-ai names the capability `<shell:random hex>` anew
        # in every process, the name is in every tool definition, the tool definitions are in
        # every model request's cache key, and a flow run resumed in another process then finds
        # no cached step and runs the completed ones again (seen with pydantic-ai 2.62.0).
        Shell(id="shell"),
        PrefectDurability(
            # No task retries inside one process: the resume under test is a new flow-run
            # process, not a retry in the one that died.
            model_task_config=TaskConfig(retries=0, timeout_seconds=120),
            tool_task_config=TaskConfig(retries=0, timeout_seconds=180),
        ),
    ],
)


def _established_peers(skip_port: int) -> list[str]:
    """Remote `ip:port` (hex, as /proc prints it) of this process's established TCP sockets,
    leaving out those to `skip_port` (the Prefect API)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    peers = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote = fields[2]
            established = fields[3] == "01" and fields[9] in inodes  # 01: ESTABLISHED
            if established and int(remote.rsplit(":", 1)[1], 16) != skip_port:
                peers.append(remote)
    return peers


def _prefect_port() -> int:
    port = urlsplit(os.environ["PREFECT_API_URL"]).port
    assert port is not None
    return port


# Cached by the flow run's id like the agent's tasks: a flow run resumed after the destroy
# completed does not send it again (it would be harmless: a gone sandbox returns quietly).
@task(cache_policy=INPUTS + RUN_ID, persist_result=True)
async def destroy_workspace(sandbox_id: str) -> None:
    """Delete the run's sandbox: the flow created it, so the flow removes it."""
    emit("destroy", sandbox=sandbox_id)
    await sandboxes.destroy(WorkspaceRef(provider="opensandbox", id=sandbox_id))


@flow(name="osb-prefect-run", persist_result=True)
async def osb_prefect_run(prompt: str) -> dict[str, object]:
    context = FlowRunContext.get()
    assert context is not None and context.flow_run is not None
    emit("flow-run", flow_run=str(context.flow_run.id))
    before = set(_established_peers(_prefect_port()))  # e.g. the runner's control channel
    result = await agent.run(prompt)
    ref = result.workspace.ref
    assert ref is not None
    open_after_run = sorted(set(_established_peers(_prefect_port())) - before)
    await destroy_workspace(ref.id)
    outcome: dict[str, object] = {
        "output": result.output,
        "ref": ref.id,
        "open_after_run": open_after_run,
    }
    emit("result", **outcome)
    return outcome
