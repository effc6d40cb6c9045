"""Interactive terminals for a deep agent: `terminal_tools(backend)` and `TerminalMiddleware`,
the core's `TerminalTools` as LangChain `StructuredTool`s (docs/deepagents.md#terminals).
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import BaseTool

from opensandbox_core.adapters import (
    ScopedTerminalTools,
    TerminalTools,
    TerminalToolSpec,
    run_blocking,
)

from ._scope import Backend, SandboxScope

__all__ = ["TerminalMiddleware", "terminal_tools"]


class _Terminals(SandboxScope):
    """The `TerminalTools` of the backend's sandbox, or of each LangGraph thread's sandbox."""

    def __init__(self, backend: Backend, max_output: int) -> None:
        super().__init__(backend, "terminal")
        # by thread id ("" without threads); it checks `max_output`
        self._scoped = ScopedTerminalTools(max_output)
        self.let_go = self._scoped.let_go

    async def call(self, scope: str, name: str, arguments: dict[str, Any]) -> str:
        return await self._scoped.of(scope, await self.session(scope)).call(name, arguments)

    def tools(self) -> list[BaseTool]:
        return [self._tool(spec) for spec in TerminalTools.specs]

    def _tool(self, spec: TerminalToolSpec) -> BaseTool:
        async def call(scope: str, arguments: dict[str, Any]) -> str:
            return await self.call(scope, spec.name, arguments)

        return self.tool(spec.name, spec.description, spec.schema(), call)


def terminal_tools(backend: Backend, *, max_output: int = 16 * 1024) -> list[BaseTool]:
    """Four tools that give a deep agent interactive terminals in the backend's sandbox.

    ```python
    agent = create_deep_agent(model=..., backend=backend, tools=terminal_tools(backend))
    ```

    `terminal_start`, `terminal_send` (keys such as `<Enter>`, `<Ctrl-C>`), `terminal_read` and
    `terminal_close` (the core's `TerminalTools`). With a `ThreadSandboxBackend` they work in
    the current LangGraph thread's sandbox. Terminals stay connected after a run until closed
    (`TerminalMiddleware` lets go of them when each run ends). `max_output`: bytes of output one
    result holds at most (the last ones).
    """
    return _Terminals(backend, max_output).tools()


class TerminalMiddleware(AgentMiddleware):
    """`terminal_tools(backend)` as agent middleware, which also lets go of the run's terminals
    when the run ends: detached (they keep running; a later run reaches them by id), or ended
    with `close_at_end=True`.

    ```python
    agent = create_deep_agent(model=..., backend=backend, middleware=[TerminalMiddleware(backend)])
    ```
    """

    def __init__(
        self, backend: Backend, *, close_at_end: bool = False, max_output: int = 16 * 1024
    ) -> None:
        super().__init__()
        self._terminals = _Terminals(backend, max_output)
        if not isinstance(close_at_end, bool):
            raise TypeError(f"close_at_end must be a bool, got {close_at_end!r}.")
        self._close = close_at_end
        self.tools = self._terminals.tools()

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        run_blocking(self._terminals.let_go(self._terminals.scope(), close=self._close))
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        await self._terminals.let_go(self._terminals.scope(), close=self._close)
        return None
