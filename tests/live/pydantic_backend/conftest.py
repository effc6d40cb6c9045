"""Fixtures for the live tests of pydantic-ai-opensandbox.

The conformance suite is written for the anyio pytest plugin while the repository runs
pytest-asyncio in auto mode; `anyio_backend` pins anyio's tests to asyncio (the OpenSandbox SDK runs
on asyncio only), and pytest-asyncio leaves tests that carry the anyio marker to anyio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from pydantic_ai.workspaces import WorkspaceRef

from opensandbox_core.fleet import destroy_sandbox
from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend


@pytest.fixture(autouse=True)
def _testbed(testbed_env: dict[str, str]) -> dict[str, str]:
    """Every test here talks to the testbed: load its settings (OPEN_SANDBOX_*) first."""
    return testbed_env


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def created_refs() -> Iterator[list[WorkspaceRef]]:
    """Refs of sandboxes a test made; every one is destroyed afterwards."""
    refs: list[WorkspaceRef] = []
    yield refs

    async def cleanup() -> None:
        for ref in refs:
            with contextlib.suppress(Exception):
                await destroy_sandbox(ref.id)

    asyncio.run(cleanup())


@pytest.fixture
def make_backend(
    sandbox_image: str, created_refs: list[WorkspaceRef]
) -> Iterator[Callable[..., OpenSandboxBackend]]:
    """Build lazy backends on the testbed image; their sandboxes are destroyed after the test."""
    backends: list[OpenSandboxBackend] = []

    def make(**kwargs: object) -> OpenSandboxBackend:
        kwargs.setdefault("image", sandbox_image)
        backend = OpenSandboxBackend(**kwargs)  # type: ignore[arg-type]
        backends.append(backend)
        return backend

    yield make
    created_refs.extend(b.ref for b in backends if b.ref is not None and b.session.owned)


@pytest.fixture
async def destroy_ref() -> Callable[[WorkspaceRef], Awaitable[None]]:
    async def destroy(ref: WorkspaceRef) -> None:
        await OpenSandbox().destroy(ref)

    return destroy


@pytest.fixture
async def live_backend(
    make_backend: Callable[..., OpenSandboxBackend],
) -> AsyncIterator[OpenSandboxBackend]:
    backend = make_backend()
    try:
        yield backend
    finally:
        await backend.aclose()
