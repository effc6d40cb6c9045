"""`TerminalMethods`: the session's interactive terminals (the `_terminal` facet).

A mixin of `AsyncSandboxSession` (like `SessionInfo`). The session keeps a weak set of the
terminals it handed out (`_terminals`), and detaches them when it closes (they keep running).
"""

from __future__ import annotations

import weakref

from ._lifecycle._sandbox import SandboxLifecycle
from ._terminal._handle import Terminal
from ._terminal._open import attach_terminal, open_terminal

__all__ = ["TerminalMethods"]


class TerminalMethods:
    """Opening and attaching terminals (state set by `AsyncSandboxSession`)."""

    _life: SandboxLifecycle
    _terminals: weakref.WeakSet[Terminal]

    async def open_terminal(
        self, command: str | None = None, *, cwd: str | None = None, cols: int = 80, rows: int = 24
    ) -> Terminal:
        """An interactive terminal (a pseudo-terminal of `cols` x `rows`) running `command`, a
        shell command line, as its process; `None`: an interactive `bash`.

        It starts in `cwd` (relative to the working directory; default: the working directory;
        created when missing). Type with `write` (Enter is `"\r"`), read with `read` and
        `expect`, Ctrl-C with `interrupt`; the process's end gives `wait()` its exit code. Close
        it (`async with`, `close()`) to end the process; `detach()` leaves it running for
        `attach_terminal(terminal.id)`. See docs/core.md, "Interactive terminals".
        """
        return await open_terminal(
            self._life, command, cwd=cwd, cols=cols, rows=rows, register=self._terminals.add
        )

    async def attach_terminal(self, terminal_id: str) -> Terminal:
        """The terminal `terminal_id` of this sandbox (opened by any session or process): what
        it printed (as far as execd keeps it: the last 1 MiB), then its live output.

        A terminal that another client holds is taken over where execd can (v1.0.19: the other
        handle raises `TerminalTakenOverError`); older execd refuses (`TerminalBusyError`). An
        unknown or closed id raises `TerminalNotFoundError`.
        """
        return await attach_terminal(self._life, terminal_id, register=self._terminals.add)
