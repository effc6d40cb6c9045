"""Pause and resume, live: the server's state, the paused error, work after resume, ownership."""

from __future__ import annotations

import pytest

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec, SandboxUnavailableError
from opensandbox_core._metadata import OWNER_KEY
from opensandbox_core.fleet import list_sandboxes

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


async def _state(session: AsyncSandboxSession) -> str:
    assert session.id is not None
    found = {s.id: s for s in await list_sandboxes(metadata={OWNER_KEY: session.owner_token})}
    return found[session.id].state.lower()


async def test_pause_blocks_work_and_resume_restores_it(sandbox_image: str) -> None:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as sb:
        await sb.files.write_bytes("kept.txt", b"before the pause")
        started = await sb.commands.start_background("sleep 300")
        await sb.pause()
        assert await _state(sb) == "paused"
        assert sb.owned  # pausing keeps ownership: leaving `async with` still destroys it
        with pytest.raises(SandboxUnavailableError, match=r"paused.*resume\(\)"):
            await sb.commands.run("echo never")
        with pytest.raises(SandboxUnavailableError, match="resume"):
            await sb.files.read_bytes("kept.txt")
        await sb.pause()  # pausing a paused sandbox is quiet

        await sb.resume()
        assert await _state(sb) == "running"
        result = await sb.commands.run("echo back")
        assert (result.exit_code, result.stdout) == (0, "back\n")
        assert await sb.files.read_bytes("kept.txt") == b"before the pause"
        assert (await started.status()).running  # its processes survived the pause
        await sb.resume()  # resuming a running sandbox is quiet
        sandbox_id = sb.id
    assert sandbox_id not in {s.id for s in await list_sandboxes()}  # destroyed by its owner


async def test_a_session_sees_a_resume_by_another_client(sandbox_image: str) -> None:
    """A sees the sandbox paused by B; once B resumes it, A's next command works without A
    calling resume() itself (the paused verdict is re-checked with the server)."""
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as owner:
        assert owner.id is not None
        a = AsyncSandboxSession.attach(owner.id, connection=Connection(request_timeout=5.0))
        b = AsyncSandboxSession.attach(owner.id)
        try:
            assert (await a.commands.run("echo before")).stdout == "before\n"
            await b.pause()
            # A learns of the pause from a failed call (a file request times out after 5 s; a
            # command would wait for its own timeout), then refuses while the server agrees.
            with pytest.raises(SandboxUnavailableError, match="paused"):
                await a.files.stat("/etc/hostname")
            with pytest.raises(SandboxUnavailableError, match="paused"):
                await a.commands.run("echo still paused")
            await b.resume()
            result = await a.commands.run("echo after")
            assert (result.exit_code, result.stdout) == (0, "after\n")
            assert await a.files.read_bytes("/etc/hostname")
        finally:
            await a.aclose()
            await b.aclose()
