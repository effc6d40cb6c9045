"""Fixtures for the core's live tests: one shared sandbox per module where tests allow it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSpec


@pytest.fixture
async def session(sandbox_image: str) -> AsyncIterator[AsyncSandboxSession]:
    """A fresh sandbox, destroyed afterwards."""
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as sb:
        yield sb
