"""`OpenSandboxTerminal` in real agent runs, driven by a scripted `FunctionModel`: the agent
answers a `read -p` prompt, drives `python3 -i` to a computed answer and interrupts a `sleep 600`
with Ctrl-C (the script is `tests/live/_terminal_agent.py`, shared with Deep Agents); a run's
terminals outlive it and a later run reaches them; `close_at_end=True` ends them."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from _terminal_agent import WORKDIR, TerminalAgent, check_results, terminal_state
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import WorkspaceRef

from opensandbox_core import TerminalNotFoundError
from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend, OpenSandboxTerminal

PROMPT = "Greet Ada, compute 6*7 in Python, stop a sleep."
Step = str | tuple[str, dict[str, object]]


def tool_results(messages: list[ModelMessage]) -> list[str]:
    """What the tools returned to the model, in order (errors the model was told included)."""
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind in ("tool-return", "retry-prompt")
    ]


def respond(step: Step, n: int) -> ModelResponse:
    if isinstance(step, str):
        return ModelResponse(parts=[TextPart(step)])
    name, args = step
    return ModelResponse(parts=[ToolCallPart(name, json.dumps(args), tool_call_id=f"call_{n}")])


async def _sleeping(backend: OpenSandboxBackend) -> bool:
    return (await backend.run(["pgrep", "-x", "sleep"])).exit_code == 0


async def test_pydantic_agent_drives_terminals(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend()
    script = TerminalAgent()

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = tool_results(messages)
        if script.interrupts_next(results):
            script.sleep_seen.append(await _sleeping(backend))
        return respond(script.step(results), len(results))

    agent = Agent(FunctionModel(model), capabilities=[OpenSandboxTerminal()])
    result = await agent.run(PROMPT, workspace=backend)
    assert result.output == "Greeted Ada; 6*7 = 42; interrupted the sleep."
    tid = check_results(tool_results(result.all_messages()), script)
    assert await backend.read_bytes(f"{WORKDIR}/greeting.txt") == b"hello Ada\n"
    assert await backend.read_bytes(f"{WORKDIR}/answer.txt") == b"42\n"
    assert not await _sleeping(backend)  # Ctrl-C ended it
    with pytest.raises(TerminalNotFoundError):  # terminal_close deleted the terminal
        await backend.session.terminals.attach(tid)
    await backend.aclose()


def scripted(*steps: Step | Callable[[list[str]], Step]) -> FunctionModel:
    """A model that takes the next step on each request of its run (a callable step gets the
    run's tool results)."""
    before: list[int] = []  # tool results in the history when the run started

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = tool_results(messages)
        if not before:
            before.append(len(results))
        mine = results[before[0] :]
        step = steps[len(mine)] if len(mine) < len(steps) else "done"
        return respond(step(mine) if callable(step) else step, len(results))

    return FunctionModel(model)


async def test_pydantic_terminals_outlive_the_run_and_a_later_run_reaches_them(
    sandbox_image: str, created_refs: list[WorkspaceRef]
) -> None:
    agent = Agent(capabilities=[OpenSandbox(image=sandbox_image), OpenSandboxTerminal()])
    first = await agent.run(
        "Start Python and set x.",
        model=scripted(
            ("terminal_start", {"command": "python3 -i", "wait_for": ">>> "}),
            lambda r: (
                "terminal_send",
                {"terminal_id": terminal_state(r[0])[0], "keys": "x = 6*7\n", "wait_for": ">>> "},
            ),
            "Python is ready, x is set.",
        ),
    )
    ref = first.workspace.ref
    assert ref is not None
    created_refs.append(ref)
    [started, assigned] = tool_results(first.all_messages())
    tid = terminal_state(started)[0]
    assert assigned.endswith("x = 6*7\n>>> ")

    # The run is over and its session closed: the REPL still runs in the sandbox.
    backend = OpenSandbox().backend(ref)
    try:
        assert (await backend.run(["pgrep", "-f", "python3 -i"])).exit_code == 0
    finally:
        await backend.aclose()

    later = await agent.run(
        "What is x?",
        message_history=first.all_messages(),
        model=scripted(
            ("terminal_send", {"terminal_id": tid, "keys": "x<Enter>", "wait_for": ">>> "}),
            ("terminal_close", {"terminal_id": tid}),
            "x is 42.",
        ),
    )
    asked, closed = tool_results(later.new_messages())
    assert terminal_state(asked) == (tid, "running; '>>> ' appeared")
    assert asked.split("\n", 1)[1] == "x\n42\n>>> "  # nothing of the first run again
    assert terminal_state(closed) == (tid, "closed")


async def test_pydantic_close_at_end_ends_the_runs_terminals(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend()
    agent = Agent(capabilities=[OpenSandboxTerminal(close_at_end=True)])
    result = await agent.run(
        "Start a long sleep.",
        workspace=backend,
        model=scripted(("terminal_start", {"command": "sleep 600", "timeout": 1}), "Started."),
    )
    [started] = tool_results(result.all_messages())
    assert terminal_state(started)[1] == "running"
    assert not await _sleeping(backend)
    await backend.aclose()


async def test_pydantic_terminal_needs_an_opensandbox_workspace() -> None:
    agent = Agent(
        capabilities=[OpenSandboxTerminal()],
        model=scripted(("terminal_start", {}), "never"),
    )
    with pytest.raises(UserError, match="needs an OpenSandbox workspace"):
        await agent.run("Start a shell.")
    with pytest.raises(UserError, match="max_output"):
        OpenSandboxTerminal(max_output=0)
