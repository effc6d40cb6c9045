"""The agent and workflow of `test_temporal_resume.py` (imported by every worker process).

A scripted model drives two sandbox steps: write a marker file, then read it back with the
sandbox's clock. When the model is asked for the second step in a worker whose `OSB_CRASH_ARM`
file it manages to claim (a rename, so exactly one worker does), the worker prints
`crash-point` and waits to be SIGKILLed by the test. The workflow ends by destroying the sandbox
it created, once, through the capability (the workflow is the sandbox's owner).
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import timedelta

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import WorkspaceRef
from pydantic_ai_harness.shell import Shell
from temporalio import activity, workflow
from temporalio.workflow import ActivityConfig

from pydantic_ai_opensandbox import OpenSandbox

IMAGE = os.environ.get("OSB_TESTBED_IMAGE", "python:3.13-slim")


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
        command = "echo written-before-the-crash > marker.txt && echo ok"
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
    name="osb_temporal",
    capabilities=[
        sandboxes,
        Shell(),
        TemporalDurability(
            activity_config=ActivityConfig(start_to_close_timeout=timedelta(seconds=180)),
            # A model step of a dead worker is retried elsewhere once this runs out.
            model_activity_config=ActivityConfig(start_to_close_timeout=timedelta(seconds=10)),
        ),
    ],
)


@activity.defn
async def destroy_workspace(sandbox_id: str) -> None:
    """Delete the run's sandbox: the workflow created it, so the workflow removes it."""
    emit("destroy", sandbox=sandbox_id)
    await sandboxes.destroy(WorkspaceRef(provider="opensandbox", id=sandbox_id))


@workflow.defn(name="OsbDurableRun")
class OsbDurableRun(PydanticAIWorkflow):
    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, prompt: str) -> dict[str, str]:
        result = await agent.run(prompt)
        ref = result.workspace.ref
        assert ref is not None
        await workflow.execute_activity(
            destroy_workspace, ref.id, start_to_close_timeout=timedelta(seconds=120)
        )
        return {"output": result.output, "ref": ref.id}
