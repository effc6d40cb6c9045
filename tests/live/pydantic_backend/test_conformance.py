"""Pydantic AI's `WorkspaceBackendSuite` against `OpenSandboxBackend` on the testbed.

Every optional fixture is given, so the race, attach and destroy rules run too. One sandbox serves
the whole class (`backend` is class-scoped); the rules that destroy a sandbox get their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from pydantic_ai.workspaces import WorkspaceBackend, WorkspaceRef
from pydantic_ai.workspaces.conformance import WorkspaceBackendSuite

from opensandbox_core.fleet import destroy_sandbox
from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend


@pytest.fixture(scope="module")
def _shared_ref() -> Iterator[list[WorkspaceRef]]:
    """The ref of the sandbox the class shares; destroyed when the module ends."""
    holder: list[WorkspaceRef] = []
    yield holder
    for ref in holder:
        asyncio.run(_quiet_destroy(ref))


class TestOpenSandboxConformance(WorkspaceBackendSuite):
    @pytest.fixture
    async def backend(
        self, sandbox_image: str, _shared_ref: list[WorkspaceRef]
    ) -> AsyncIterator[WorkspaceBackend]:
        # One sandbox for the class: the first test creates it, the others attach by ref (clients
        # are per event loop, and each test has its own loop).
        if _shared_ref:
            backend = OpenSandboxBackend(ref=_shared_ref[0])
        else:
            backend = OpenSandboxBackend(image=sandbox_image)
        try:
            yield backend
        finally:
            if not _shared_ref and backend.ref is not None:
                _shared_ref.append(backend.ref)
            await backend.aclose()

    @pytest.fixture
    def fresh_backend(
        self, sandbox_image: str, created_refs: list[WorkspaceRef]
    ) -> Iterator[Callable[[], WorkspaceBackend]]:
        built: list[OpenSandboxBackend] = []

        def make() -> WorkspaceBackend:
            backend = OpenSandboxBackend(image=sandbox_image)
            built.append(backend)
            return backend

        yield make
        created_refs.extend(b.ref for b in built if b.ref is not None)

    @pytest.fixture
    def attach_backend(self) -> Callable[[WorkspaceRef], WorkspaceBackend]:
        return lambda ref: OpenSandboxBackend(ref=ref)

    @pytest.fixture
    def destroy_environment(self) -> Callable[[WorkspaceBackend], Awaitable[None]]:
        async def destroy(backend: WorkspaceBackend) -> None:
            assert backend.ref is not None
            await OpenSandbox().destroy(backend.ref)

        return destroy


async def _quiet_destroy(ref: WorkspaceRef) -> None:
    with contextlib.suppress(Exception):
        await destroy_sandbox(ref.id)
