"""A run that fails deletes the sandbox it created, and only that one (issue 14).

Each failing run first has the sandbox print its own id (`$OPENSANDBOX_ID`, set by the server in
every sandbox), so the test knows which sandbox to look for afterwards, then fails: the model
raises, or Ctrl-C (a real SIGINT to the main thread) stops `run_sync` while the model "thinks".
The README's `on_run_error` example runs here as written, with a scripted model.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from _scripted import script
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.workspaces import Workspace, WorkspaceRef
from pydantic_ai_harness.shell import Shell

from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral

IMAGE = "python:3.13-slim"
README = Path(__file__).resolve().parents[3] / "packages/pydantic-ai-opensandbox/README.md"
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _sandbox(env: dict[str, str], sandbox_id: str) -> httpx.Response:
    return httpx.get(
        f"http://{env['OPEN_SANDBOX_DOMAIN']}/v1/sandboxes/{sandbox_id}",
        headers={"OPEN-SANDBOX-API-KEY": env.get("OPEN_SANDBOX_API_KEY", "")},
        timeout=10,
    )


def _gone(env: dict[str, str], sandbox_id: str) -> bool:
    return _sandbox(env, sandbox_id).status_code == 404


def _tool_returns(messages: list[ModelMessage]) -> list[str]:
    """The tool returns of this run's latest request (not those of an earlier run's history)."""
    last = messages[-1]
    if not isinstance(last, ModelRequest):
        return []
    return [str(part.content) for part in last.parts if part.part_kind == "tool-return"]


class FailingModel:
    """Step 1 prints the sandbox id; step 2 fails the way `fail` says."""

    def __init__(self, fail: Callable[[], Any]) -> None:
        self.fail = fail
        self.sandbox_id: str | None = None

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen = _tool_returns(messages)
        if not seen:
            command = 'echo "$OPENSANDBOX_ID"'
            return ModelResponse(parts=[ToolCallPart("run_command", {"command": command}, "c1")])
        found = _ID.search(seen[0])
        assert found is not None, seen[0]
        self.sandbox_id = found.group(0)
        result = self.fail()
        if asyncio.iscoroutine(result):
            await result
        raise AssertionError("unreachable: the step fails")


def _model_down() -> None:
    raise RuntimeError("The model provider answered 503.")


async def test_a_failed_run_deletes_the_sandbox_it_created(testbed_env: dict[str, str]) -> None:
    model = FailingModel(_model_down)
    agent = Agent(FunctionModel(model), capabilities=[OpenSandbox(image=IMAGE), Shell()])
    with pytest.raises(RuntimeError, match="503"):
        await agent.run("Do something.")
    assert model.sandbox_id is not None
    assert _gone(testbed_env, model.sandbox_id)


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_in_run_sync_deletes_the_sandbox_it_created(testbed_env: dict[str, str]) -> None:
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()

    async def interrupted() -> None:
        # Ctrl-C while the model is awaited: the loop is waiting, as for a real model's answer.
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        await asyncio.sleep(30)

    model = FailingModel(interrupted)
    agent = Agent(FunctionModel(model), capabilities=[OpenSandbox(image=IMAGE), Shell()])
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        agent.run_sync("Do something.")
    assert time.monotonic() - started < 20
    assert model.sandbox_id is not None
    assert _gone(testbed_env, model.sandbox_id)


async def test_a_failed_run_never_deletes_a_sandbox_it_attached_to(
    testbed_env: dict[str, str],
    make_backend: Callable[..., OpenSandboxBackend],
    created_refs: list[WorkspaceRef],
) -> None:
    backend = make_backend(image=IMAGE)
    await Workspace(backend).write_text("kept.txt", "kept")
    await backend.aclose()
    ref = backend.ref
    assert ref is not None
    agent = Agent(capabilities=[OpenSandbox(image=IMAGE), Shell()])

    # Attached by ref, then the model fails.
    model = FailingModel(_model_down)
    with pytest.raises(RuntimeError, match="503"):
        await agent.run("Do something.", workspace=ref, model=FunctionModel(model))
    assert model.sandbox_id == ref.id
    assert not _gone(testbed_env, ref.id)

    # Found in the message history of an earlier run, then the model fails.
    first = await agent.run(
        "Read it.",
        workspace=ref,
        model=script(("run_command", {"command": "cat kept.txt"}), "ok").model,
    )
    again = FailingModel(_model_down)
    with pytest.raises(RuntimeError, match="503"):
        await agent.run("Again.", message_history=first.all_messages(), model=FunctionModel(again))
    assert again.sandbox_id == ref.id
    assert not _gone(testbed_env, ref.id)
    assert await Workspace(OpenSandbox().backend(ref)).read_text("kept.txt") == "kept"


async def test_a_run_s_sandbox_expires_after_thirty_idle_minutes(
    testbed_env: dict[str, str], created_refs: list[WorkspaceRef]
) -> None:
    agent = Agent(capabilities=[OpenSandbox(image=IMAGE), Shell()])
    result = await agent.run(
        "Say hi.", model=script(("run_command", {"command": "echo hi"}), "ok").model
    )
    ref = result.workspace.ref
    assert ref is not None
    created_refs.append(ref)
    expires = _sandbox(testbed_env, ref.id).json().get("expiresAt")
    assert expires, "a sandbox the capability creates has a bounded lifetime by default"
    left = datetime.fromisoformat(expires.replace("Z", "+00:00")) - datetime.now(UTC)
    assert 1700 < left.total_seconds() <= 1810


def _readme_block(needle: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if needle in b]
    return block


async def test_readme_on_run_error_example(
    testbed_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _readme_block("@hooks.on.run_error")
    # The example as written, minus the paid model: the run gets a scripted one instead.
    code = code.replace('"anthropic:claude-opus-5-5",', "", 1)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    agent: Agent[None, str] = namespace["agent"]

    command = 'echo "$OPENSANDBOX_ID"; echo "error: step 2 failed" > build.log'

    def step(messages: list[ModelMessage]) -> None:
        seen = _tool_returns(messages)
        if seen:
            state["id"] = _ID.search(seen[0]).group(0)  # type: ignore[union-attr]
            raise RuntimeError("The model provider answered 503.")

    async def builds_then_fails(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step(messages)
        return ModelResponse(parts=[ToolCallPart("shell", {"command": command}, "c1")])

    async def streamed(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[DeltaToolCalls]:
        step(messages)
        yield {0: DeltaToolCall(name="shell", json_args=json.dumps({"command": command}))}

    state: dict[str, str] = {}
    with pytest.raises(RuntimeError, match="503"):
        await agent.run(
            "Build it.", model=FunctionModel(builds_then_fails, stream_function=streamed)
        )
    assert (tmp_path / "failed-run.log").read_text() == "error: step 2 failed\n"
    assert _gone(testbed_env, state["id"])
