"""`code_tools(backend)` offline: the `run_code` tool on a backend whose session talks to the fake
OpenSandbox server with the fake `/code`. Its `ToolMessage` carries the chart as a standard
image content block after the text block, a text result is a plain string, state carries over
between calls, sync and async alike. The live twin is
tests/live/deepagents_backend/test_deepagents_code.py."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from langchain_core.messages import ToolMessage

from deepagents_opensandbox_backend import OpenSandboxBackend, code_tools
from opensandbox_core import AsyncSandboxSession, SandboxSpec
from opensandbox_core.testing import FakeCodeInterpreter, FakeOpenSandbox
from opensandbox_core.testing._code import FakeCell, FakeKernel

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def cells(code: str, kernel: FakeKernel) -> FakeCell | None:
    if code == "chart":
        bundle = {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()}
        return FakeCell(outputs=(("display", bundle),))
    if code.startswith("x = "):
        kernel.names["x"] = int(code[4:])
        return FakeCell()
    if code == "x + 1":
        return FakeCell(result={"text/plain": repr(kernel.names["x"] + 1)})
    return None


@pytest.fixture
def backend() -> Iterator[OpenSandboxBackend]:
    fake = FakeOpenSandbox(code=FakeCodeInterpreter(on_cell=cells))
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    with OpenSandboxBackend(session) as backend:
        yield backend


def call(code: str, n: int = 1) -> dict[str, object]:
    return {"type": "tool_call", "name": "run_code", "args": {"code": code}, "id": f"call_{n}"}


def test_the_chart_is_an_image_block_of_the_tool_message(backend: OpenSandboxBackend) -> None:
    [tool] = code_tools(backend)
    message = tool.invoke(call("chart"))
    assert isinstance(message, ToolMessage) and isinstance(message.content, list)
    text, image = message.content
    assert isinstance(text, dict) and text["type"] == "text"
    assert "[display 1: image/png, 70 bytes, attached as image 1]" in text["text"]
    assert isinstance(image, dict)
    assert (image["type"], image["mime_type"]) == ("image", "image/png")
    assert base64.b64decode(image["base64"]) == PNG
    assert [b["type"] for b in message.content_blocks] == ["text", "image"]


async def test_state_carries_over_and_text_stays_a_string(backend: OpenSandboxBackend) -> None:
    [tool] = code_tools(backend)
    await tool.ainvoke(call("x = 41"))
    message = await tool.ainvoke(call("x + 1", 2))
    assert isinstance(message, ToolMessage) and isinstance(message.content, str)
    assert message.content.endswith("[result]\n42")


def test_the_tool_is_described_and_checks_what_it_is_given(backend: OpenSandboxBackend) -> None:
    [tool] = code_tools(backend, timeout=30)
    assert tool.name == "run_code" and "plt.show()" in tool.description
    assert tool.args["timeout"]["default"] == 30
    with pytest.raises(TypeError, match="OpenSandboxBackend or a ThreadSandboxBackend"):
        code_tools(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        code_tools(backend, timeout=0)
