"""The harness's Shell() background tools on this workspace, unchanged: a process started in one
run outlives it, and a follow-up run finds it again by its ID, reads its output and stops it."""

from __future__ import annotations

import asyncio
import re

import pytest
from _harness import MISSING
from _scripted import script

pytest.importorskip("pydantic_ai_harness", reason=MISSING)
from pydantic_ai import Agent
from pydantic_ai.workspaces import WorkspaceRef
from pydantic_ai_harness.shell import Shell

from pydantic_ai_opensandbox import OpenSandbox

IMAGE = "python:3.13-slim"
# The pid file is written once, before the first tick, by a rename: a reader never sees it empty.
TICKER = (
    "echo $$ > /tmp/ticker.pid.new && mv /tmp/ticker.pid.new /tmp/ticker.pid; "
    "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done"
)


async def _alive(ref: WorkspaceRef, pid: str) -> bool:
    assert pid.isdigit(), f"not a pid: {pid!r}"
    backend = OpenSandbox().backend(ref)
    try:
        check = f'[ -d /proc/{pid} ] && ! grep -q "^State:.*Z" /proc/{pid}/status'
        return (await backend.run(["sh", "-c", check])).exit_code == 0
    finally:
        await backend.aclose()


async def test_background_process_outlives_the_run_and_is_found_again(
    created_refs: list[WorkspaceRef],
) -> None:
    agent = Agent(capabilities=[OpenSandbox(image=IMAGE), Shell()])
    first = script(("start_command", {"command": TICKER}), "Started the ticker.")
    result = await agent.run("Start a ticker in the background.", model=first.model)
    ref = result.workspace.ref
    assert ref is not None
    created_refs.append(ref)
    found = re.search(r"ID: (\S+)", "\n".join(first.tool_returns))
    assert found, first.tool_returns
    job_id = found.group(1)

    await asyncio.sleep(1.0)  # the run is over; the process keeps ticking in the sandbox
    backend = OpenSandbox().backend(ref)
    try:
        pid = (await backend.read_bytes("/tmp/ticker.pid")).decode().strip()
    finally:
        await backend.aclose()
    assert await _alive(ref, pid)

    follow = script(
        ("check_command", {"command_id": job_id}),
        ("stop_command", {"command_id": job_id}),
        "Stopped it.",
    )
    await agent.run(
        "Check the ticker, then stop it.", message_history=result.all_messages(), model=follow.model
    )
    check, stop = follow.tool_returns[:2]
    assert "tick" in check, check
    assert "tick" in stop or "stop" in stop.lower(), stop
    for _ in range(50):
        if not await _alive(ref, pid):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the background process {pid} survived stop_command")
