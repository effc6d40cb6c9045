"""`OpenSandboxTerminal`: opensandbox-core's `TerminalTools` as four tools on the run's sandbox.

Names, descriptions, argument schemas and results are the core's (the same in the Deep Agents
package). Verified on 2026-12-03 with pydantic-ai-slim 2.62.0 (`test_pydantic_terminal.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, WrapRunHandler
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext, Tool
from pydantic_ai.toolsets import FunctionToolset

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import ScopedTerminalTools, TerminalTools, TerminalToolSpec

from ._backend import OpenSandboxBackend
from ._capability import OpenSandbox, _innermost_backend, workspace_sandbox
from ._translate import settings_checked

__all__ = ["OpenSandboxTerminal"]

logger = logging.getLogger(__name__)


@dataclass(kw_only=True)
class OpenSandboxTerminal(AbstractCapability[AgentDepsT]):
    """Interactive terminals in the run's OpenSandbox sandbox: `terminal_start`, `terminal_send`
    (keys such as `<Enter>`, `<Ctrl-C>`), `terminal_read`, `terminal_close`.

    ```python
    agent = Agent(model, capabilities=[OpenSandbox(image='python:3.13-slim'), OpenSandboxTerminal()])
    ```

    The run's workspace must be an OpenSandbox sandbox (from `OpenSandbox`, or an
    `OpenSandboxBackend` given as `workspace=`). A run's terminals are detached when it ends:
    they keep running, and a later run on the sandbox reaches them by id.
    """

    max_output: int = 16 * 1024
    """Bytes of output one tool result holds at most (the last; it says how many it left out)."""

    close_at_end: bool = False
    """End the run's terminals when it ends, instead of leaving them running."""

    _toolset: FunctionToolset[AgentDepsT] | None = field(default=None, init=False, repr=False)
    _scoped: ScopedTerminalTools = field(init=False, repr=False)
    """The tools of each sandbox (the core's registry: carried on to a later run's session)."""

    def __post_init__(self) -> None:
        with settings_checked():
            self._scoped = ScopedTerminalTools(self.max_output)

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(wrapped_by=[OpenSandbox])  # done before it closes the session

    def get_toolset(self) -> FunctionToolset[AgentDepsT]:
        if self._toolset is None:
            tools = [self._tool(spec) for spec in TerminalTools.specs]
            self._toolset = FunctionToolset(tools, id="opensandbox_terminal")
        return self._toolset

    def _tool(self, spec: TerminalToolSpec) -> Tool[AgentDepsT]:
        async def run(ctx: RunContext[AgentDepsT], **arguments: Any) -> str:
            async with workspace_sandbox(ctx, "OpenSandboxTerminal") as backend:
                return await self._for(backend).call(spec.name, arguments)

        return Tool.from_schema(run, spec.name, spec.description, spec.schema(), takes_ctx=True)

    def _for(self, backend: OpenSandboxBackend) -> TerminalTools:
        """The sandbox's tools, carried on from an earlier run on it (what the model has seen)."""
        session = backend.session
        assert session.id is not None  # the operation started the session
        return self._scoped.of(session.id, session)

    async def wrap_run(
        self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        try:
            return await handler()
        finally:
            backend = _innermost_backend(ctx.workspace)
            session = getattr(backend, "session", None)
            sandbox_id = getattr(session, "id", None)
            if isinstance(session, AsyncSandboxSession) and sandbox_id is not None:
                try:  # the run's own tools only (not those another run rebound meanwhile)
                    await self._scoped.let_go(sandbox_id, close=self.close_at_end, session=session)
                except Exception as exc:  # never hides how the run ended
                    logger.warning("Could not let go of the run's terminals: %s", exc)
