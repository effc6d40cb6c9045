"""Small per-package drivers, so that one scenario body runs for the core and each adapter.

A driver creates a sandbox through its package (the core's `AsyncSandboxSession`, the Pydantic
AI backend, the Deep Agents backend) and exposes the few operations the shared fault, hostile
and secrets scenarios need, each going through that package's own public API. `unavailable` is
the error the package raises once the sandbox or its daemon is gone, `died` what a command that
was running when the daemon died raises.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from opensandbox_core import (
    AsyncSandboxSession,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)

PACKAGES = ["core", "pydantic_ai", "deepagents"]
MISSING = "no-such-sandbox"


@dataclass
class Driver:
    """One package's view of one sandbox (see the module docstring)."""

    package: str
    session: AsyncSandboxSession  # the core session behind the package's object
    sandbox_id: str
    backend: Any  # the package's own object (the session itself for the core)
    run: Callable[[str, float], Awaitable[tuple[int, str]]]
    write: Callable[[str, bytes], Awaitable[Any]]
    read: Callable[[str], Awaitable[bytes]]
    attach_and_run: Callable[[], Awaitable[Any]]  # a new client on the same sandbox id
    attach_missing: Callable[[], Awaitable[Any]]  # a new client on a sandbox that never existed
    unavailable: type[BaseException]  # what every call raises once the sandbox is gone
    died: tuple[type[BaseException], ...]  # what a command raises when its daemon dies under it
    env_in_container: bool  # whether create(env=...) reaches the container itself
    extra: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)


@asynccontextmanager
async def open_driver(
    package: str,
    image: str,
    *,
    env: Mapping[str, str] | None = None,
    lifetime: int = 600,
    api_key: str | None = None,
) -> AsyncIterator[Driver]:
    """A driver on a fresh sandbox, destroyed on exit whatever the scenario did."""
    if package == "core":
        async with _core(image, env, lifetime, api_key) as driver:
            yield driver
    elif package == "pydantic_ai":
        async with _pydantic(image, env, lifetime, api_key) as driver:
            yield driver
    elif package == "deepagents":
        async with _deep(image, env, lifetime, api_key) as driver:
            yield driver
    else:
        raise ValueError(f"unknown package {package!r}")


@asynccontextmanager
async def _core(
    image: str, env: Mapping[str, str] | None, lifetime: int, api_key: str | None
) -> AsyncIterator[Driver]:
    from opensandbox_core import Connection

    connection = Connection(api_key=api_key) if api_key else None
    session = AsyncSandboxSession(
        SandboxSpec(image=image, lifetime=lifetime), connection=connection, env=env
    )
    try:
        sid = await session.start()

        async def run(command: str, timeout: float) -> tuple[int, str]:
            result = await session.run(command, timeout=timeout)
            return result.exit_code, result.stdout

        yield Driver(
            package="core",
            session=session,
            sandbox_id=sid,
            backend=session,
            run=run,
            write=session.write_bytes,
            read=session.read_bytes,
            attach_and_run=lambda: AsyncSandboxSession.attach(sid, connection=connection).run(
                "true"
            ),
            attach_missing=lambda: AsyncSandboxSession.attach(MISSING, connection=connection).run(
                "true"
            ),
            unavailable=SandboxUnavailableError,
            died=(SandboxUnavailableError, ServerError),
            env_in_container=False,
            extra={"list_dir": lambda: session.list_dir(".")},
        )
    finally:
        await session.destroy()


@asynccontextmanager
async def _pydantic(
    image: str, env: Mapping[str, str] | None, lifetime: int, api_key: str | None
) -> AsyncIterator[Driver]:
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.workspaces import WorkspaceRef, WorkspaceUnavailableError

    from pydantic_ai_opensandbox import OpenSandboxBackend

    domain = os.environ.get("OPEN_SANDBOX_DOMAIN")
    config = ConnectionConfig(domain=domain, api_key=api_key) if api_key else None
    backend = OpenSandboxBackend(image=image, sandbox_timeout=lifetime, env=env, connection=config)
    attached: list[OpenSandboxBackend] = []
    try:
        await backend.run(["true"])
        assert backend.ref is not None
        ref = backend.ref

        async def run(command: str, timeout: float) -> tuple[int, str]:
            result = await backend.run(command, shell=True, timeout=timeout)  # noqa: S604
            return result.exit_code, result.stdout

        def other(target: WorkspaceRef = ref) -> OpenSandboxBackend:
            attached.append(OpenSandboxBackend(ref=target, connection=config))
            return attached[-1]

        missing = WorkspaceRef(provider="opensandbox", id=MISSING)

        yield Driver(
            package="pydantic_ai",
            session=backend.session,
            sandbox_id=ref.id,
            backend=backend,
            run=run,
            write=backend.write_bytes,
            read=backend.read_bytes,
            attach_and_run=lambda: other().run(["true"]),
            attach_missing=lambda: other(missing).run(["true"]),
            unavailable=WorkspaceUnavailableError,
            died=(WorkspaceUnavailableError,),
            env_in_container=False,
            extra={
                "stat": lambda: backend.stat("a.txt"),
                "attached list_dir": lambda: other().list_dir("."),
            },
        )
    finally:
        for extra in attached:
            await extra.aclose()
        await backend.aclose()
        await backend.session.destroy()


@asynccontextmanager
async def _deep(
    image: str, env: Mapping[str, str] | None, lifetime: int, api_key: str | None
) -> AsyncIterator[Driver]:
    import asyncio

    from deepagents_opensandbox_backend import OpenSandboxBackend

    backend = await OpenSandboxBackend.acreate(
        image=image, timeout=lifetime, env=env, api_key=api_key
    )
    try:

        async def run(command: str, timeout: float) -> tuple[int, str]:
            response = await backend.aexecute(command, timeout=max(1, round(timeout)))
            if response.exit_code is None:
                raise AssertionError(f"no exit code: {response.output!r}")
            return response.exit_code, response.output

        async def write(path: str, data: bytes) -> None:
            (result,) = await backend.aupload_files([(_absolute(path), data)])
            if result.error is not None:
                raise OSError(f"upload of {path} failed: {result.error}")

        async def read(path: str) -> bytes:
            (result,) = await backend.adownload_files([_absolute(path)])
            if result.error is not None or result.content is None:
                raise OSError(f"download of {path} failed: {result.error}")
            return result.content

        yield Driver(
            package="deepagents",
            session=backend.session,
            sandbox_id=backend.id,
            backend=backend,
            run=run,
            write=write,
            read=read,
            attach_and_run=lambda: OpenSandboxBackend.aconnect(backend.id, api_key=api_key),
            attach_missing=lambda: OpenSandboxBackend.aconnect(MISSING, api_key=api_key),
            unavailable=SandboxUnavailableError,
            died=(SandboxUnavailableError, ServerError),
            env_in_container=True,
            # The blocking side too (what the execute tool calls), off the event loop.
            extra={"blocking execute": lambda: asyncio.to_thread(backend.execute, "echo hi")},
        )
    finally:
        await backend.akill()


def _absolute(path: str) -> str:
    return path if path.startswith("/") else f"/workspace/{path}"
