"""`OpenSandboxCodeInterpreter` in agent runs offline: a scripted `FunctionModel`, a workspace
on the fake OpenSandbox server with the fake `/code` (`FakeCodeInterpreter`). The model's next
request holds the chart's PNG as `BinaryContent`; text results are plain text; misuse raises
`UserError`. The live twin is tests/live/pydantic_backend/test_pydantic_code.py."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest
from opensandbox.config import ConnectionConfig
from pydantic_ai import Agent, BinaryContent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from opensandbox_core.testing import FakeCodeInterpreter, FakeOpenSandbox
from opensandbox_core.testing._code import FakeCell, FakeKernel
from pydantic_ai_opensandbox import OpenSandboxBackend, OpenSandboxCodeInterpreter

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def cells(code: str, kernel: FakeKernel) -> FakeCell | None:
    if code == "chart":
        bundle = {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()}
        return FakeCell(outputs=(("display", bundle),))
    if code == "6 * 7":
        return FakeCell(result={"text/plain": "42"})
    return None


@pytest.fixture
async def backend() -> AsyncIterator[OpenSandboxBackend]:
    fake = FakeOpenSandbox(code=FakeCodeInterpreter(on_cell=cells))
    config = ConnectionConfig(domain=fake.domain, api_key=fake.api_key, transport=fake.transport)
    backend = OpenSandboxBackend(image="img", connection=config)
    yield backend
    await backend.aclose()


def images_in(message: ModelMessage) -> list[BinaryContent]:
    """The `BinaryContent` of a request, wherever the release puts a tool's content."""
    found: list[BinaryContent] = []
    for part in message.parts if isinstance(message, ModelRequest) else ():
        content = getattr(part, "content", None)
        for item in content if isinstance(content, list | tuple) else [content]:
            if isinstance(item, BinaryContent):
                found.append(item)
    return found


def one_call(code: str, seen: list[ModelMessage]) -> FunctionModel:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            args = json.dumps({"code": code})
            return ModelResponse(parts=[ToolCallPart("run_code", args, tool_call_id="c1")])
        seen.append(messages[-1])
        return ModelResponse(parts=[TextPart("seen")])

    return FunctionModel(model)


async def test_the_chart_reaches_the_model_as_binary_content(backend: OpenSandboxBackend) -> None:
    seen: list[ModelMessage] = []
    agent = Agent(one_call("chart", seen), capabilities=[OpenSandboxCodeInterpreter()])
    await agent.run("Draw.", workspace=backend)
    [request] = seen
    assert [(i.data, i.media_type) for i in images_in(request)] == [(PNG, "image/png")]
    returns = [p for p in request.parts if p.part_kind == "tool-return"]
    assert "[display 1: image/png, 70 bytes, attached as image 1]" in str(returns[0].content)


async def test_a_text_result_is_plain_text(backend: OpenSandboxBackend) -> None:
    seen: list[ModelMessage] = []
    agent = Agent(one_call("6 * 7", seen), capabilities=[OpenSandboxCodeInterpreter()])
    await agent.run("Compute.", workspace=backend)
    [request] = seen
    assert images_in(request) == []
    [part] = [p for p in request.parts if p.part_kind == "tool-return"]
    assert isinstance(part.content, str) and part.content.endswith("[result]\n42")


async def test_it_needs_an_opensandbox_workspace_and_good_settings() -> None:
    agent = Agent(one_call("1", []), capabilities=[OpenSandboxCodeInterpreter()])
    with pytest.raises(UserError, match="needs an OpenSandbox workspace"):
        await agent.run("Run.")
    for bad in ({"timeout": 0}, {"max_output": 0}, {"language": ""}):
        with pytest.raises(UserError):
            OpenSandboxCodeInterpreter(**bad)  # type: ignore[arg-type]


async def test_a_sandbox_without_jupyter_is_a_user_error() -> None:
    fake = FakeOpenSandbox(code=FakeCodeInterpreter(jupyter=False))
    config = ConnectionConfig(domain=fake.domain, api_key=fake.api_key, transport=fake.transport)
    backend = OpenSandboxBackend(image="img", connection=config)
    agent = Agent(one_call("1", []), capabilities=[OpenSandboxCodeInterpreter()])
    with pytest.raises(UserError, match="code-interpreter image"):
        await agent.run("Run.", workspace=backend)
    await backend.aclose()
