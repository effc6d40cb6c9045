"""`ScopedTerminalTools`: the one registry of per-scope `TerminalTools` that the framework
packages use (the Deep Agents tools scope by LangGraph thread, the Pydantic AI capability by
sandbox).

One behaviour: a scope keeps its tools as long as its session is on the same sandbox. A new
session there (a later run's, a reattached backend's) is carried on with `TerminalTools.rebind`,
so what the model has seen of each terminal is remembered and its ids keep working; a session
on another sandbox gets new tools (the old ids mean nothing there). Rebinding rather than
rebuilding is the point of keeping tools per scope at all: new tools would replay a terminal's
whole kept output to the model when it is next used.

Bounded: a scope's tools are dropped when the scope lets go of them with `close=True`, or when
none of its terminals is open any more; at most `cap` scopes are kept (the least recently used
go first: their terminals run on, and are reached again by id, without the memory of what the
model has seen). Thread-safe: `of` and `let_go` may be called from any thread (the blocking
adapters call from theirs, the async ones from their loops).
"""

from __future__ import annotations

import threading
from typing import Final

from opensandbox_core import _validate
from opensandbox_core._lru import LruCache
from opensandbox_core._session import AsyncSandboxSession

from ._toolkit import TerminalTools

__all__ = ["DEFAULT_CAP", "ScopedTerminalTools"]

DEFAULT_CAP: Final = 256
"""Scopes whose tools are kept at most."""


class ScopedTerminalTools:
    """The `TerminalTools` of each scope (a string: a thread id, a sandbox id, ...), with
    `max_output` as `TerminalTools` takes it. No I/O."""

    def __init__(self, max_output: int, *, cap: int = DEFAULT_CAP) -> None:
        self._max_output = _validate.positive_int(max_output, "max_output")
        self._cap = _validate.positive_int(cap, "cap")
        self._lock = threading.Lock()  # `of` (take, rebind, put back) is one step
        self._tools: LruCache[str, TerminalTools] = LruCache(self._cap)

    def __repr__(self) -> str:
        return f"ScopedTerminalTools(scopes={len(self._tools)}, cap={self._cap})"

    def __len__(self) -> int:
        return len(self._tools)

    def of(self, scope: str, session: AsyncSandboxSession) -> TerminalTools:
        """The scope's tools on `session`: its own, rebound when the session is another one on
        the same sandbox, or new ones (first use, or another sandbox)."""
        with self._lock:
            tools = self._tools.pop(scope, None)
            if tools is not None and tools.session is not session:
                if session.id is not None and tools.session.id == session.id:
                    tools.rebind(session)
                else:
                    tools = None
            if tools is None:
                tools = TerminalTools(session, max_output=self._max_output)
            self._tools[scope] = tools  # the most recently used; past `cap` the least goes
            return tools

    async def let_go(
        self, scope: str, *, close: bool, session: AsyncSandboxSession | None = None
    ) -> None:
        """Detach (or close) the scope's terminals, if it has tools (on `session`, when given);
        no I/O when it opened none. Its tools are forgotten with `close=True`, or when none
        of its terminals is left open."""
        tools = self._tools.peek(scope)
        if tools is None or (session is not None and tools.session is not session):
            return
        try:
            await (tools.close_all() if close else tools.detach_all())
        finally:
            if close or not tools.terminals:
                with self._lock:
                    if self._tools.peek(scope) is tools:
                        del self._tools[scope]
