"""`code_tools(backend)` in real `create_deep_agent` runs on a code-interpreter sandbox, driven by
a scripted chat model (the script is `tests/live/_code_agent.py`, shared with Pydantic AI): state
kept across two tool calls, the chart's PNG bytes as an image content block in the model's next
request, the traceback of an error, a `time.sleep(600)` interrupted by the timeout; sync
(`invoke`) and async (`ainvoke`)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from typing import Any

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
from deepagents import create_deep_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from deepagents_opensandbox_backend import OpenSandboxBackend, code_tools


class ScriptModel(BaseChatModel):
    """A chat model whose next message is `script(tool results so far)`; it keeps the last
    message of each request it gets (`seen`)."""

    script: Callable[[list[str]], tuple[str, dict[str, Any]] | str]
    seen: Any  # a list[BaseMessage], as given (pydantic would validate a list into a copy)

    @property
    def _llm_type(self) -> str:
        return "code-steps"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(messages[-1])
        results = [m for m in messages if isinstance(m, ToolMessage)]
        next_step = self.script([_text(m) for m in results])
        if isinstance(next_step, str):
            message = AIMessage(content=next_step)
        else:
            name, args = next_step
            call = {"name": name, "args": args, "id": f"call_{len(results)}"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


def _text(message: BaseMessage) -> str:
    """A tool message's text (its text blocks when its content is a list of blocks)."""
    if isinstance(message.content, str):
        return message.content
    return "".join(b["text"] for b in message.content_blocks if b["type"] == "text")


def _images(message: BaseMessage) -> list[tuple[bytes, str]]:
    if not isinstance(message, ToolMessage):
        return []
    return [
        (base64.b64decode(b["base64"]), b["mime_type"])
        for b in message.content_blocks
        if b["type"] == "image"
    ]


@pytest.fixture(scope="module")
def code_backend(testbed_env: dict[str, str]) -> Iterator[OpenSandboxBackend]:
    with OpenSandboxBackend.create(image=code_image(), entrypoint=CODE_ENTRYPOINT) as created:
        yield created


def test_deep_agent_runs_code_in_a_kernel_of_the_sandbox(code_backend: OpenSandboxBackend) -> None:
    seen: list[BaseMessage] = []
    agent = create_deep_agent(
        model=ScriptModel(script=step, seen=seen),
        backend=code_backend,
        tools=code_tools(code_backend),
    )
    result = agent.invoke({"messages": "Compute, chart, fail, wait."})
    assert result["messages"][-1].content == DONE
    # The request after the chart call holds the PNG the cell saved, byte for byte.
    [download] = code_backend.download_files([f"/workspace/{CHART_FILE}"])
    chart = download.content
    assert chart is not None and chart.startswith(b"\x89PNG\r\n\x1a\n")
    assert _images(seen[CHART_STEP + 1]) == [(chart, "image/png")]
    assert all(not _images(m) for i, m in enumerate(seen) if i != CHART_STEP + 1)
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert {m.name for m in tool_messages} == {"run_code"}
    check_results([_text(m) for m in tool_messages], len(chart))


async def test_deep_agent_runs_code_async(code_backend: OpenSandboxBackend) -> None:
    seen: list[BaseMessage] = []

    def script(results: list[str]) -> tuple[str, dict[str, Any]] | str:
        return ("run_code", {"code": "print(6 * 7)"}) if not results else results[0]

    agent = create_deep_agent(
        model=ScriptModel(script=script, seen=seen),
        backend=code_backend,
        tools=code_tools(code_backend),
    )
    result = await agent.ainvoke({"messages": "Compute."})
    assert result["messages"][-1].content.endswith(": done\n[stdout]\n42")
