"""The core's structure: facets composed directly, no import loops, no process-wide mutable
state but the documented caches (and those forget a destroyed sandbox)."""

from __future__ import annotations

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSpec
from opensandbox_core._lifecycle import _caches
from opensandbox_core.testing import FakeOpenSandbox

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")


async def test_destroy_forgets_every_cached_verdict_about_the_sandbox() -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    other = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    async with session, other:
        await session.files.write_bytes("f.txt", b"x")
        await session.files.stat("f.txt")  # learns the file API too
        assert await session.files.realpath("f.txt") == "/workspace/f.txt"  # and the tools (GNU)
        await other.files.write_bytes("g.txt", b"y")
        await other.files.stat("g.txt")
        await other.files.realpath("g.txt")
        key = (session.connection.resolved_domain(), session.id)
        holding = {c.what for c in _caches._CACHES if any(k[:2] == key for k in c)}
        assert len(holding) == len(_caches._CACHES) == 6, holding
        await session.destroy()
        assert not [c.what for c in _caches._CACHES if any(k[:2] == key for k in c)]
        kept = (other.connection.resolved_domain(), other.id)
        assert all(any(k[:2] == kept for k in c) for c in _caches._CACHES)  # only that one
