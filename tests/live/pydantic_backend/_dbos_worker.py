"""A DBOS worker process for `test_durable.py`: one durable agent run, optionally crashing midway.

argv: <sqlite path> <workflow id> <image> <crash: 0|1|fail>. With crash=1 the process dies
(os._exit) inside the second model step, after the sandbox was created and a file written in it.
Launched again without crash, DBOS recovers the pending workflow from SQLite and finishes it.
Prints one JSON line: the workflow's result. With `fail` the model raises in that step instead:
the durable run fails (exit 3), and its sandbox must stay, for the engine may resume the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from dbos import DBOS
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness.shell import Shell

from pydantic_ai_opensandbox import OpenSandbox

db, workflow_id, image, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
crash = mode == "1"


def returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if part.part_kind == "tool-return"
    ]


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    seen = returns(messages)
    if not seen:
        command = "echo written-before-the-crash > marker.txt && echo ok"
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": command}, "c1")])
    if len(seen) == 1:
        if crash:
            os._exit(17)  # the worker dies mid-run
        if mode == "fail":
            raise RuntimeError("the model failed mid-run")
        return ModelResponse(
            parts=[ToolCallPart("run_command", {"command": "cat marker.txt"}, "c2")]
        )
    return ModelResponse(parts=[TextPart(seen[-1])])


agent = Agent(
    FunctionModel(model),
    name="osb_durable",
    # Tagged with the workflow id, so the test counts this workflow's sandboxes only.
    capabilities=[
        OpenSandbox(image=image, metadata={"osb-durable": workflow_id}),
        Shell(),
        DBOSDurability(),
    ],
)


@DBOS.workflow()
async def durable_run(prompt: str) -> dict[str, str | None]:
    result = await agent.run(prompt)
    ref = result.workspace.ref
    return {"output": result.output, "ref": ref.id if ref else None}


async def main() -> None:
    DBOS(config={"name": "osb-durable-test", "system_database_url": f"sqlite:///{db}"})
    DBOS.launch()
    try:
        if crash or mode == "fail":
            with __import__("dbos").SetWorkflowID(workflow_id):
                try:
                    await durable_run("Leave a marker and read it back.")
                except RuntimeError:
                    sys.exit(3)
        else:
            # Recovery of the pending workflow starts at launch; wait for its result.
            handle = await DBOS.retrieve_workflow_async(workflow_id)
            print(json.dumps(await handle.get_result()), flush=True)
    finally:
        DBOS.destroy()


asyncio.run(main())
