"""A client that closes a command stream under execd kills the sandbox's other commands.

Real execd forwards every signal it receives to every running command's process group, and a
write to a connection its client closed gives it a SIGPIPE (see "Signals" in
docs/execd-generations.md). The testbed daemon does the same; `OSB_EXECD_TAIL_PING=1` makes it
send one more keep-alive during the hold after the last event, so that the end of the stream is
always a second write to a connection a client left early (EPIPE). The first test shows the
condition (a raw client that leaves at the completion event kills a bystander); the second that
the core never causes it, whatever else runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSpec

pytestmark = [pytest.mark.live, pytest.mark.testbed_daemon()]

BYSTANDER = "sleep 3; echo survived"


@pytest.fixture
async def session(sandbox_image: str) -> AsyncIterator[AsyncSandboxSession]:
    spec = SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_TAIL_PING": "1"})
    async with AsyncSandboxSession(spec) as sb:
        yield sb


async def _leave_at_completion(session: AsyncSandboxSession) -> None:
    """Run `true` the way a careless client does: close the stream at its completion event."""
    ctx = await session._life.context()
    endpoint = ctx.execd.endpoint
    async with (
        httpx.AsyncClient(base_url=endpoint.base_url, headers=dict(endpoint.headers)) as raw,
        raw.stream("POST", "/command", json={"command": "true"}, timeout=30) as response,
    ):
        async for chunk in response.aiter_bytes():
            if b"execution_complete" in chunk:
                break  # leaving the blocks closes the connection under execd


async def test_a_client_that_leaves_early_kills_the_other_commands(
    session: AsyncSandboxSession,
) -> None:
    bystander = asyncio.create_task(session.commands.run(BYSTANDER, timeout=30))
    await asyncio.sleep(0.5)
    await _leave_at_completion(session)
    result = await bystander
    # killed by the forwarded SIGPIPE about a second later, before it could print
    assert (result.exit_code, result.stdout) == (-1, ""), result


async def test_the_core_never_leaves_a_stream_under_execd(session: AsyncSandboxSession) -> None:
    bystander = asyncio.create_task(session.commands.run(BYSTANDER, timeout=30))
    await asyncio.sleep(0.3)
    for _ in range(8):  # short commands whose streams the core stops reading at completion
        assert (await session.commands.run("true")).exit_code == 0
        assert (await session.commands.run("echo hi")).stdout == "hi\n"
    result = await bystander
    assert (result.exit_code, result.stdout, result.stderr) == (0, "survived\n", "")
