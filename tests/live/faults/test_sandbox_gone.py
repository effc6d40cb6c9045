"""A sandbox that expires or is deleted by another client: every package's next operation fails
with its framework's unavailable error naming the sandbox, fast, and never creates a replacement."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from opensandbox_core import (
    OWNER_KEY,
    AsyncSandboxSession,
    SandboxSpec,
    SandboxUnavailableError,
    destroy_sandbox,
    list_sandboxes,
)
from testbed.fault_tools import expire_soon, wait_gone

GONE_HOW = ["deleted", "expired"]


async def _make_gone(how: str, sandbox_id: str, env: dict[str, str]) -> None:
    if how == "deleted":
        await destroy_sandbox(sandbox_id)  # another client
    else:
        domain, key = env["OPEN_SANDBOX_DOMAIN"], env["OPEN_SANDBOX_API_KEY"]
        await asyncio.to_thread(expire_soon, domain, key, sandbox_id, 1.0)
        await asyncio.to_thread(wait_gone, domain, key, sandbox_id)


async def _fails_fast(
    call: Callable[[], Awaitable[Any]], error: type[BaseException], sid: str
) -> None:
    started = time.monotonic()
    with pytest.raises(error) as info:
        async with asyncio.timeout(60):
            await call()
    assert sid in str(info.value), str(info.value)
    assert time.monotonic() - started < 30


async def _owned_count(token: str) -> int:
    return len(await list_sandboxes(metadata={OWNER_KEY: token}))


@pytest.mark.parametrize("how", GONE_HOW)
async def test_core_session(how: str, sandbox_image: str, testbed_env: dict[str, str]) -> None:
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image, lifetime=120))
    sid = await session.start()
    await session.write_bytes("a.txt", b"a")
    await _make_gone(how, sid, testbed_env)
    for call in (
        lambda: session.run("echo hi", timeout=10),
        lambda: session.read_bytes("a.txt"),
        lambda: session.write_bytes("b.txt", b"b"),
        lambda: session.list_dir("."),
        lambda: AsyncSandboxSession.attach(sid).run("true"),
    ):
        await _fails_fast(call, SandboxUnavailableError, sid)
    assert await _owned_count(session.owner_token) == 0
    await session.destroy()


@pytest.mark.parametrize("how", GONE_HOW)
async def test_pydantic_ai_backend(
    how: str, sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    from pydantic_ai.workspaces import WorkspaceUnavailableError

    from pydantic_ai_opensandbox import OpenSandboxBackend

    backend = OpenSandboxBackend(image=sandbox_image, sandbox_timeout=120)
    try:
        await backend.write_bytes("a.txt", b"a")
        assert backend.ref is not None
        sid = backend.ref.id
        token = backend.session.owner_token
        await _make_gone(how, sid, testbed_env)
        attached = OpenSandboxBackend(ref=backend.ref)
        for call in (
            lambda: backend.run(["echo", "hi"], timeout=10),
            lambda: backend.read_bytes("a.txt"),
            lambda: backend.write_bytes("b.txt", b"b"),
            lambda: backend.stat("a.txt"),
            lambda: attached.run(["true"]),
            lambda: attached.list_dir("."),
        ):
            await _fails_fast(call, WorkspaceUnavailableError, sid)
        assert backend.ref.id == sid  # the ref never changes
        assert await _owned_count(token) == 0
        await attached.aclose()
    finally:
        await backend.aclose()


@pytest.mark.parametrize("how", GONE_HOW)
async def test_deepagents_backend(
    how: str, sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    from deepagents_opensandbox_backend import OpenSandboxBackend

    backend = await OpenSandboxBackend.acreate(image=sandbox_image, timeout=120)
    sid = backend.id
    token = backend.session.owner_token
    try:
        await _make_gone(how, sid, testbed_env)
        for call in (
            lambda: backend.aexecute("echo hi", timeout=10),
            lambda: backend.aupload_files([("/tmp/x", b"x")]),
            lambda: backend.adownload_files(["/tmp/x"]),
        ):
            await _fails_fast(call, SandboxUnavailableError, sid)
        # The blocking side too (what the execute tool calls), off the event loop.
        await _fails_fast(
            lambda: asyncio.to_thread(backend.execute, "echo hi"), SandboxUnavailableError, sid
        )
        with pytest.raises(SandboxUnavailableError):
            await OpenSandboxBackend.aconnect(sid)
        assert await _owned_count(token) == 0
    finally:
        await backend.akill()
