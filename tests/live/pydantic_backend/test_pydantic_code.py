"""`OpenSandboxCodeInterpreter` in real agent runs on a code-interpreter sandbox, driven by a
scripted `FunctionModel` (the script is `tests/live/_code_agent.py`, shared with Deep Agents):
state kept across two tool calls, the chart's PNG bytes in the model's next request, the
traceback of an error, a `time.sleep(600)` interrupted by the timeout; and with `OpenSandbox`,
the kernel is the capability's own across two runs on the sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from _code_agent import (
    CHART_FILE,
    CHART_STEP,
    CODE_ENTRYPOINT,
    DONE,
    check_results,
    code_image,
    step,
)
from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import WorkspaceRef

from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend, OpenSandboxCodeInterpreter


def tool_results(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind in ("tool-return", "retry-prompt")
    ]


def images_in(message: ModelMessage) -> list[BinaryContent]:
    """The `BinaryContent` of a request, wherever the release puts a tool's content."""
    found: list[BinaryContent] = []
    for part in message.parts if isinstance(message, ModelRequest) else ():
        content = getattr(part, "content", None)
        for item in content if isinstance(content, list | tuple) else [content]:
            if isinstance(item, BinaryContent):
                found.append(item)
    return found


def respond(next_step: tuple[str, dict[str, object]] | str, n: int) -> ModelResponse:
    if isinstance(next_step, str):
        return ModelResponse(parts=[TextPart(next_step)])
    name, args = next_step
    return ModelResponse(parts=[ToolCallPart(name, json.dumps(args), tool_call_id=f"call_{n}")])


@pytest.mark.long
async def test_pydantic_agent_runs_code_in_a_kernel_of_the_sandbox(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend(image=code_image(), entrypoint=CODE_ENTRYPOINT)
    requests: list[ModelMessage] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        requests.append(messages[-1])
        results = tool_results(messages)
        return respond(step(results), len(results))

    agent = Agent(FunctionModel(model), capabilities=[OpenSandboxCodeInterpreter()])
    result = await agent.run("Compute, chart, fail, wait.", workspace=backend)
    assert result.output == DONE
    # The request after the chart call holds the PNG the cell saved, byte for byte.
    chart = await backend.read_bytes(CHART_FILE)  # relative: the kernel's cwd is the workspace's
    assert chart.startswith(b"\x89PNG\r\n\x1a\n")
    images = images_in(requests[CHART_STEP + 1])
    assert [(i.data, i.media_type) for i in images] == [(chart, "image/png")]
    assert all(not images_in(r) for i, r in enumerate(requests) if i != CHART_STEP + 1)
    check_results(tool_results(result.all_messages()), len(chart))
    await backend.aclose()


async def test_pydantic_the_kernel_carries_over_to_a_later_run(
    created_refs: list[WorkspaceRef],
) -> None:
    def scripted(code: str, answer: str) -> FunctionModel:
        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            if isinstance(messages[-1], ModelRequest) and any(
                p.part_kind == "tool-return" for p in messages[-1].parts
            ):
                return respond(answer, 1)
            return respond(("run_code", {"code": code}), len(messages))

        return FunctionModel(model)

    code = OpenSandboxCodeInterpreter()
    sandbox = OpenSandbox(image=code_image(), entrypoint=CODE_ENTRYPOINT)
    agent = Agent(capabilities=[sandbox, code])
    first = await agent.run("Set y.", model=scripted("y = 'kept'", "set"))
    ref = first.workspace.ref
    assert ref is not None
    created_refs.append(ref)
    later = await agent.run(
        "Read y.", model=scripted("y", "read"), message_history=first.all_messages()
    )
    assert later.workspace.ref == ref
    [read] = tool_results(later.new_messages())
    assert read.endswith("[result]\n'kept'"), read
