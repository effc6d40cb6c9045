"""Sharing one sandbox the other way round: Pydantic AI creates, Deep Agents and a core session
attach by id; processes and files are seen by all; only the creator destroys, also when an
attached side fails."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai.workspaces import Workspace

from deepagents_opensandbox_backend import OpenSandboxBackend
from opensandbox_core import AsyncSandboxSession, SandboxUnavailableError
from opensandbox_core.fleet import list_sandboxes
from pydantic_ai_opensandbox import OpenSandbox
from pydantic_ai_opensandbox import OpenSandboxBackend as PydanticBackend


async def _exists(sandbox_id: str) -> bool:
    return sandbox_id in {s.id for s in await list_sandboxes(all_sandboxes=True)}


async def test_pydantic_creates_deepagents_and_core_attach(sandbox_image: str) -> None:
    creator = PydanticBackend(image=sandbox_image)
    try:
        workspace = Workspace(creator)
        await workspace.write_text("from-pydantic.txt", "written by pydantic-ai\n")
        ref = creator.ref
        assert ref is not None

        # A process started by the creator is visible to the other sides.
        ticker = await creator.run(
            ["sh", "-c", "nohup sh -c 'while true; do sleep 1; done' >/dev/null 2>&1 & echo $!"]
        )
        pid = ticker.stdout.strip()

        def deepagents_side() -> str:
            attached = OpenSandboxBackend.connect(ref.id)
            try:
                seen = attached.execute("cat /workspace/from-pydantic.txt").output
                assert attached.execute(f"kill -0 {pid}").exit_code == 0
                attached.upload_files(
                    [("/workspace/from-deepagents.txt", b"written by deep agents\n")]
                )
                with pytest.raises(ValueError):
                    attached.execute("true", timeout=-1)  # a failure on the attached side ...
                return seen
            finally:
                attached.kill()  # ... and its kill() only closes local connections

        assert await asyncio.to_thread(deepagents_side) == "written by pydantic-ai\n"
        assert await _exists(ref.id)

        async with AsyncSandboxSession.attach(ref.id) as core:
            assert (
                await core.files.read_bytes("/workspace/from-deepagents.txt")
                == b"written by deep agents\n"
            )
            assert (await core.commands.run(["kill", "-0", pid])).exit_code == 0
        assert await _exists(ref.id)  # leaving the attached core session destroyed nothing

        assert await workspace.read_text("from-deepagents.txt") == "written by deep agents\n"
    finally:
        await creator.aclose()
        if creator.ref is not None:
            await OpenSandbox().destroy(creator.ref)
    assert creator.ref is not None
    assert not await _exists(creator.ref.id)
    with pytest.raises(SandboxUnavailableError):
        await asyncio.to_thread(OpenSandboxBackend.connect, creator.ref.id)
