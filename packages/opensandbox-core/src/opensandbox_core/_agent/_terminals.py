"""`ScopedTerminalTools`: one `TerminalTools` per scope (a thread, a run, a user), each on the
session its scope uses now; a scope whose sandbox changed gets fresh tools."""

from __future__ import annotations

import threading

from opensandbox_core._session import AsyncSandboxSession
from opensandbox_core._terminal_tools._toolkit import TerminalTools

__all__ = ["ScopedTerminalTools"]


class ScopedTerminalTools:
    """The `TerminalTools` of each scope; `max_output` as `TerminalTools` takes it. No I/O."""

    def __init__(self, max_output: int) -> None:
        self._max_output = max_output
        self._lock = threading.Lock()
        self._tools: dict[str, TerminalTools] = {}

    def of(self, scope: str, session: AsyncSandboxSession) -> TerminalTools:
        """The scope's tools on `session` (new ones when the scope's session changed)."""
        with self._lock:
            tools = self._tools.get(scope)
            if tools is None or tools.session is not session:
                tools = TerminalTools(session, max_output=self._max_output)
                self._tools[scope] = tools
            return tools

    async def let_go(self, scope: str, *, close: bool) -> None:
        """Detach (or close) the scope's terminals; no I/O if it opened none."""
        tools = self._tools.get(scope)
        if tools is not None:
            await (tools.close_all() if close else tools.detach_all())
