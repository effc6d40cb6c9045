"""What the code and terminal tools share: which sandbox a call runs in (the backend's, or the
current LangGraph thread's), and a LangChain `StructuredTool` over one of the core's tools.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from langchain_core.tools import BaseTool, StructuredTool

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import run_blocking

from ._backend import OpenSandboxBackend
from ._threads import ThreadSandboxBackend

__all__ = ["Backend", "SandboxScope"]

T = TypeVar("T")

Backend = OpenSandboxBackend | ThreadSandboxBackend

ScopedCall = Callable[[str, dict[str, Any]], Coroutine[Any, Any, T]]
"""A tool's work: `(scope, arguments)`, where `scope` is what `SandboxScope.scope` returned."""


class SandboxScope:
    """The sandbox of a tool call: the backend's, or with a `ThreadSandboxBackend` the current
    LangGraph thread's (its `scope` is the thread id; "" without threads)."""

    def __init__(self, backend: Backend, tools: str) -> None:
        if not isinstance(backend, OpenSandboxBackend | ThreadSandboxBackend):
            raise TypeError(
                f"The {tools} tools need an OpenSandboxBackend or a ThreadSandboxBackend (not a "
                f"{type(backend).__name__}): pass the sandbox backend itself, not a composite."
            )
        self._backend = backend

    def scope(self) -> str:
        """The current call's scope, read in the caller's context (the portal loop, where a
        blocking call runs, has no LangGraph run)."""
        backend = self._backend
        return backend.current_thread_id() if isinstance(backend, ThreadSandboxBackend) else ""

    async def session(self, scope: str) -> AsyncSandboxSession:
        """The core session of `scope`'s sandbox."""
        backend = self._backend
        if isinstance(backend, ThreadSandboxBackend):
            backend = await backend.afor_thread(scope)
        return backend.session

    def tool(
        self, name: str, description: str, schema: dict[str, Any], call: ScopedCall[T]
    ) -> BaseTool:
        """A `StructuredTool` (blocking and async) that runs `call` in the caller's scope."""

        def run(**arguments: Any) -> T:
            return run_blocking(call(self.scope(), arguments))

        async def arun(**arguments: Any) -> T:
            return await call(self.scope(), arguments)

        return StructuredTool(
            name=name, description=description, args_schema=schema, func=run, coroutine=arun
        )
