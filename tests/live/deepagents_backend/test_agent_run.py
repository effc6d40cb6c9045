"""A real `create_deep_agent` run, driven by a scripted chat model (no API key, no network)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from deepagents_opensandbox_backend import OpenSandboxBackend

SCRIPT = "import math\nprint(sum(math.isqrt(n) for n in range(1, 101)))\n"


class ScriptedModel(GenericFakeChatModel):
    """Replays the given AI messages; tool binding is a no-op."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}])


def _script(workdir: str) -> Iterator[AIMessage]:
    yield _call("write_file", {"file_path": f"{workdir}/isqrt.py", "content": SCRIPT}, 1)
    yield _call("execute", {"command": f"cd {workdir} && python3 isqrt.py | tee result.txt"}, 2)
    yield _call("read_file", {"file_path": f"{workdir}/result.txt"}, 3)
    yield AIMessage(content="The sum is 625.")


def _tool_messages(messages: list[BaseMessage]) -> dict[str, str]:
    return {m.name or "": str(m.content) for m in messages if isinstance(m, ToolMessage)}


def test_agent_writes_runs_and_reads_in_the_sandbox(backend: OpenSandboxBackend) -> None:
    workdir = "/workspace/agent"
    agent = create_deep_agent(
        model=ScriptedModel(messages=_script(workdir)),
        system_prompt="You are a Python coding assistant with sandbox access.",
        backend=CompositeBackend(default=backend, routes={}, artifacts_root="/workspace"),
    )
    result = agent.invoke({"messages": "Sum the integer square roots of 1..100."})
    tools = _tool_messages(result["messages"])
    assert set(tools) == {"write_file", "execute", "read_file"}
    assert "625" in tools["execute"] and "exit code 0" in tools["execute"].lower()
    assert "625" in tools["read_file"]
    assert result["messages"][-1].content == "The sum is 625."
    [script, output] = backend.download_files([f"{workdir}/isqrt.py", f"{workdir}/result.txt"])
    assert script.content == SCRIPT.encode()
    assert output.content == b"625\n"


async def test_agent_runs_async_too(backend: OpenSandboxBackend) -> None:
    workdir = "/workspace/agent-async"
    agent = create_deep_agent(model=ScriptedModel(messages=_script(workdir)), backend=backend)
    result = await agent.ainvoke({"messages": "Sum the integer square roots of 1..100."})
    assert "625" in _tool_messages(result["messages"])["read_file"]
    assert backend.execute(f"cat {workdir}/result.txt").output == "625\n"
