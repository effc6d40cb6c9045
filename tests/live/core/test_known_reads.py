"""`read_bytes` of a file the session knows as a regular file, live: one download read whole,
and a path that became a FIFO since is still read like `cat` (never a download left waiting)."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest

from opensandbox_core import AsyncSandboxSession, OutputLimitError, SandboxSpec

pytestmark = pytest.mark.live


@pytest.mark.parametrize("profile", ["1.0.19", "1.0.18"])
@pytest.mark.testbed_daemon("1.0.19", "1.0.18")
async def test_known_files_read_exactly_and_a_new_fifo_does_not_block(
    sandbox_image: str, profile: str
) -> None:
    spec = SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": profile})
    async with AsyncSandboxSession(spec) as session:
        small, large = os.urandom(4096), os.urandom(3 << 20)
        await session.files.write_bytes("/tmp/known-small", small)
        await session.files.write_bytes("/tmp/known-large", large)
        assert await session.files.read_bytes("/tmp/known-small") == small
        assert await session.files.read_bytes("/tmp/known-large") == large
        with pytest.raises(OutputLimitError):
            await session.files.read_bytes("/tmp/known-small", max_size=4095)
        await session.commands.run("rm /tmp/known-small && mkfifo /tmp/known-small")
        async with asyncio.timeout(30):
            with pytest.raises(OSError) as info:
                await session.files.read_bytes("/tmp/known-small")
        assert info.value.errno == errno.ETIMEDOUT  # a FIFO without a writer, read like `cat`
