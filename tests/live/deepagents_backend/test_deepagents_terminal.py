"""`terminal_tools(backend)` in a real `create_deep_agent` run, driven by a scripted chat model:
it answers a `read -p` prompt, drives `python3 -i` to a computed answer and interrupts a
`sleep 600` with Ctrl-C (the script is `tests/live/_terminal_agent.py`, shared with Pydantic AI)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from _terminal_agent import WORKDIR, TerminalAgent, check_results, terminal_state
from deepagents import create_deep_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from deepagents_opensandbox_backend import (
    NAMESPACE_METADATA_KEY,
    OpenSandboxBackend,
    TerminalMiddleware,
    ThreadSandboxBackend,
    terminal_tools,
)
from opensandbox_core import TerminalNotFoundError
from opensandbox_core.adapters import run_blocking
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes


class StepModel(BaseChatModel):
    """A chat model whose next message is `agent.step(tool results so far)`."""

    agent: Any
    sleeping: Callable[[], bool]

    @property
    def _llm_type(self) -> str:
        return "terminal-steps"

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
        results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        if self.agent.interrupts_next(results):
            self.agent.sleep_seen.append(self.sleeping())
        step = self.agent.step(results)
        if isinstance(step, str):
            message = AIMessage(content=step)
        else:
            name, args = step
            call = {"name": name, "args": args, "id": f"call_{len(results)}"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


def _results(messages: list[BaseMessage]) -> list[str]:
    found = [m for m in messages if isinstance(m, ToolMessage)]
    assert {m.name for m in found} <= {"terminal_start", "terminal_send", "terminal_close"}
    return [str(m.content) for m in found]


def _check_sandbox(backend: OpenSandboxBackend, tid: str) -> None:
    files = backend.execute(f"cd {WORKDIR} && cat greeting.txt answer.txt")
    assert files.output == "hello Ada\n42\n"
    assert backend.execute("pgrep -x sleep").exit_code == 1  # Ctrl-C ended it
    with pytest.raises(TerminalNotFoundError):  # terminal_close deleted the terminal
        run_blocking(backend.session.terminals.attach(tid))


def _model(backend: OpenSandboxBackend, script: TerminalAgent) -> StepModel:
    """The scripted model; it checks that the sleep runs before it presses Ctrl-C."""
    return StepModel(
        agent=script, sleeping=lambda: backend.execute("pgrep -x sleep").exit_code == 0
    )


def test_deep_agent_drives_terminals(backend: OpenSandboxBackend) -> None:
    script = TerminalAgent()
    tools = terminal_tools(backend)
    assert [t.name for t in tools] == [
        "terminal_start",
        "terminal_send",
        "terminal_read",
        "terminal_close",
    ]
    assert tools[1].args["keys"]["type"] == "string" and "<Ctrl-C>" in tools[1].description
    agent = create_deep_agent(model=_model(backend, script), backend=backend, tools=tools)
    result = agent.invoke({"messages": "Greet Ada, compute 6*7 in Python, stop a sleep."})
    tid = check_results(_results(result["messages"]), script)
    assert result["messages"][-1].content == "Greeted Ada; 6*7 = 42; interrupted the sleep."
    _check_sandbox(backend, tid)


async def test_deep_agent_drives_terminals_async(backend: OpenSandboxBackend) -> None:
    script = TerminalAgent()
    agent = create_deep_agent(
        model=_model(backend, script), backend=backend, tools=terminal_tools(backend)
    )
    result = await agent.ainvoke({"messages": "Greet Ada, compute 6*7 in Python, stop a sleep."})
    tid = check_results(_results(result["messages"]), script)
    _check_sandbox(backend, tid)


class Steps:
    """A script of fixed steps for one run; a callable step gets the tool results so far."""

    def __init__(self, *steps: Any) -> None:
        self.steps = steps

    @staticmethod
    def interrupts_next(results: list[str]) -> bool:
        return False

    def step(self, results: list[str]) -> Any:
        step = self.steps[len(results)] if len(results) < len(self.steps) else "done"
        return step(results) if callable(step) else step


def _run(backend: OpenSandboxBackend, middleware: TerminalMiddleware, *steps: Any) -> list[str]:
    model = StepModel(agent=Steps(*steps), sleeping=lambda: False)
    agent = create_deep_agent(model=model, backend=backend, middleware=[middleware])
    return _results(agent.invoke({"messages": "Use the terminal."})["messages"])


def test_terminal_middleware_detaches_at_the_end_of_a_run_and_a_later_run_goes_on(
    backend: OpenSandboxBackend,
) -> None:
    middleware = TerminalMiddleware(backend)
    started, assigned = _run(
        backend,
        middleware,
        ("terminal_start", {"command": "python3 -i", "wait_for": ">>> "}),
        lambda r: (
            "terminal_send",
            {"terminal_id": terminal_state(r[0])[0], "keys": "x = 6*7\n", "wait_for": ">>> "},
        ),
        "Python is ready.",
    )
    tid = terminal_state(started)[0]
    assert assigned.endswith("x = 6*7\n>>> ")
    # The run is over: the REPL runs on (detached, not ended).
    assert backend.execute("pgrep -f '[p]ython3 -i'").exit_code == 0
    [asked] = _run(
        backend,
        middleware,
        ("terminal_send", {"terminal_id": tid, "keys": "x<Enter>", "wait_for": ">>> "}),
        "x is 42.",
    )
    assert asked.split("\n", 1)[1] == "x\n42\n>>> "  # nothing of the first run again

    closing = TerminalMiddleware(backend, close_at_end=True)
    [slept] = _run(
        backend, closing, ("terminal_start", {"command": "sleep 600", "timeout": 1}), "Started."
    )
    assert terminal_state(slept)[1] == "running"
    assert backend.execute("pgrep -x sleep").exit_code == 1  # ended with the run
    _run(backend, middleware, ("terminal_close", {"terminal_id": tid}), "Closed.")
    assert backend.execute("pgrep -f '[p]ython3 -i'").exit_code == 1


@pytest.fixture
async def namespace(testbed_env: dict[str, str]) -> AsyncIterator[str]:
    """A namespace of this test's own; every sandbox in it is deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    for summary in await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: name}):
        await destroy_sandbox(summary.id)


def test_thread_agent_drives_terminals_in_its_threads_sandbox(
    namespace: str, sandbox_image: str
) -> None:
    threads = ThreadSandboxBackend(namespace=namespace, image=sandbox_image)
    try:
        own = threads.for_thread("ticket-7")
        script = TerminalAgent()
        agent = create_deep_agent(
            model=_model(own, script),
            backend=threads,
            tools=terminal_tools(threads),
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "ticket-7"}}
        result = agent.invoke({"messages": "Greet Ada, compute, stop a sleep."}, config)
        tid = check_results(_results(result["messages"]), script)
        _check_sandbox(own, tid)
    finally:
        threads.close()


def test_terminal_tools_refuse_a_backend_they_cannot_use() -> None:
    with pytest.raises(TypeError, match="OpenSandboxBackend or a ThreadSandboxBackend"):
        terminal_tools(object())  # type: ignore[arg-type]
