"""`terminal_tools(backend)`: interactive terminals for a deep agent, as LangChain tools.

Deep Agents' backend protocol has no terminal, so these are tools of their own, given to
`create_deep_agent(..., tools=terminal_tools(backend))`. They are opensandbox-core's
`TerminalTools`: names, descriptions, argument schemas (JSON schemas, so `StructuredTool` takes
them as they are) and results are the core's, the same as in the Pydantic AI package. The
blocking functions run on opensandbox-core's portal loop (`run_blocking`), the async ones on the
caller's; a terminal opened by one is reached by the other too.

Verified on 2026-12-03 with deepagents 0.7.32 and langchain-core 1.8.3
(`tests/live/deepagents_backend/test_deepagents_terminal.py`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from opensandbox_core import AsyncSandboxSession, TerminalTools, TerminalToolSpec, run_blocking
from opensandbox_core import validation as _validate

from ._backend import OpenSandboxBackend
from ._threads import ThreadSandboxBackend

__all__ = ["terminal_tools"]


class _Terminals:
    """The `TerminalTools` of each sandbox session the tools reach (one per thread's sandbox)."""

    def __init__(self, backend: OpenSandboxBackend | ThreadSandboxBackend, max_output: int):
        self._backend = backend
        self._max_output = max_output
        self._lock = threading.Lock()
        self._tools: weakref.WeakKeyDictionary[AsyncSandboxSession, TerminalTools] = (
            weakref.WeakKeyDictionary()
        )

    def _of(self, session: AsyncSandboxSession) -> TerminalTools:
        with self._lock:
            tools = self._tools.get(session)
            if tools is None:
                tools = self._tools[session] = TerminalTools(session, max_output=self._max_output)
            return tools

    def run(self, name: str, **arguments: Any) -> str:
        backend = self._backend
        if isinstance(backend, ThreadSandboxBackend):
            backend = backend.for_thread(backend.current_thread_id())
        return run_blocking(self._of(backend.session).call(name, arguments))

    async def arun(self, name: str, **arguments: Any) -> str:
        backend = self._backend
        if isinstance(backend, ThreadSandboxBackend):
            backend = await backend.afor_thread(backend.current_thread_id())
        return await self._of(backend.session).call(name, arguments)

    def tool(self, spec: TerminalToolSpec) -> BaseTool:
        def run(**arguments: Any) -> str:
            return self.run(spec.name, **arguments)

        async def arun(**arguments: Any) -> str:
            return await self.arun(spec.name, **arguments)

        return StructuredTool(
            name=spec.name,
            description=spec.description,
            args_schema=spec.schema(),
            func=run,
            coroutine=arun,
        )


def terminal_tools(
    backend: OpenSandboxBackend | ThreadSandboxBackend, *, max_output: int = 16 * 1024
) -> list[BaseTool]:
    """Four tools that give a deep agent interactive terminals in the backend's sandbox.

    ```python
    tools = terminal_tools(backend)
    agent = create_deep_agent(model=..., backend=backend, tools=tools)
    ```

    `terminal_start` opens a shell or runs a command and returns the terminal's id with its
    first output; `terminal_send` types keys (`<Enter>`, `<Ctrl-C>`, `<Up>`, ...) and returns
    what follows; `terminal_read` waits for more output; `terminal_close` ends it. Each waits
    until the output goes quiet or a given text appears. With a `ThreadSandboxBackend` they
    work in the current LangGraph thread's sandbox. Terminals keep running between runs (a
    later run reaches them by id) until closed; closing the backend lets go of their
    connections, deleting the sandbox ends them. `max_output`: bytes of output one result
    holds at most (the last ones; it says how many it left out).
    """
    if not isinstance(backend, OpenSandboxBackend | ThreadSandboxBackend):
        raise TypeError(
            "terminal_tools needs an OpenSandboxBackend or a ThreadSandboxBackend (not a "
            f"{type(backend).__name__}): pass the sandbox backend itself, not a composite."
        )
    terminals = _Terminals(backend, _validate.positive_int(max_output, "max_output"))
    return [terminals.tool(spec) for spec in TerminalTools.specs]
