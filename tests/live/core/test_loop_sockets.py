"""A session used from repeated `asyncio.run()` calls keeps no sockets of the loops that ended
(`_lifecycle._loops.PerLoop` closes each loop's clients at its shutdown), live."""

from __future__ import annotations

import asyncio
import os

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSpec

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_twelve_asyncio_runs_hold_no_more_descriptors_than_two(sandbox_image: str) -> None:
    session = AsyncSandboxSession(SandboxSpec(image=sandbox_image))

    async def use() -> None:
        assert (await session.commands.run("echo hi")).stdout == "hi\n"
        assert await session.files.read_bytes("/etc/hostname")

    try:
        for _ in range(2):
            asyncio.run(use())
        after_two = _open_descriptors()
        for _ in range(10):
            asyncio.run(use())
        assert _open_descriptors() <= after_two
        assert len(session._life.loops) == 0
    finally:
        asyncio.run(session.destroy())
