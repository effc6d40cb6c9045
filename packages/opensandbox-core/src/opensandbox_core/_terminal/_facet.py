"""`Terminals`: the session's interactive terminals, `session.terminals`.

`open(...)` returns an `OpeningTerminal`: awaiting it gives the `Terminal`, and `async with`
on it opens the terminal and closes it on leaving the block (as `websockets.connect` allows
both). The facet keeps a weak set of the terminals it handed out; the session detaches them
when it closes (their processes keep running).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from ._handle import Terminal, let_go
from ._open import TerminalsLife, attach_terminal, open_terminal

__all__ = ["OpeningTerminal", "Terminals"]


class OpeningTerminal(Awaitable[Terminal]):
    """What `session.terminals.open(...)` returns: `await` it for the `Terminal`, or use it in
    `async with` to have the terminal closed at the end of the block."""

    def __init__(self, start: Callable[[], Awaitable[Terminal]]) -> None:
        self._start = start
        self._terminal: Terminal | None = None

    def __await__(self) -> Generator[Any, None, Terminal]:
        return self._open().__await__()

    async def _open(self) -> Terminal:
        if self._terminal is not None:
            raise RuntimeError("This terminal was opened already; call open() again for another.")
        self._terminal = await self._start()
        return self._terminal

    async def __aenter__(self) -> Terminal:
        return await self._open()

    async def __aexit__(self, *exc_info: object) -> None:
        if self._terminal is not None:
            await self._terminal.close()


class Terminals:
    """Interactive terminals (pseudo-terminals over execd's `/pty`) in the session's sandbox."""

    def __init__(self, life: TerminalsLife) -> None:
        self._life = life
        self._handed_out: weakref.WeakSet[Terminal] = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"Terminals(open={len(self._handed_out)})"

    def open(
        self, command: str | None = None, *, cwd: str | None = None, cols: int = 80, rows: int = 24
    ) -> OpeningTerminal:
        """An interactive terminal (a pseudo-terminal of `cols` x `rows`) running `command`, a
        shell command line, as its process; `None`: an interactive `bash`.

        `term = await session.terminals.open()` or `async with session.terminals.open() as
        term:` (closed at the end of the block). It starts in `cwd` (relative to the working
        directory; default: the working directory; created when missing). Type with `write`
        (Enter is `"\\r"`), read with `read` and `expect`, Ctrl-C with `interrupt`; the
        process's end gives `wait()` its exit code. `close()` ends the process; `detach()`
        leaves it running for `attach(terminal.id)`. See docs/core.md, "Interactive terminals".
        """
        return OpeningTerminal(
            lambda: open_terminal(
                self._life, command, cwd=cwd, cols=cols, rows=rows, register=self._handed_out.add
            )
        )

    async def attach(self, terminal_id: str) -> Terminal:
        """The terminal `terminal_id` of this sandbox (opened by any session or process): what
        it printed (as far as execd keeps it: the last 1 MiB), then its live output.

        A terminal that another client holds is taken over where execd can (v1.0.19: the other
        handle raises `TerminalTakenOverError`); older execd refuses (`TerminalBusyError`). An
        unknown or closed id raises `TerminalNotFoundError`.
        """
        return await attach_terminal(self._life, terminal_id, register=self._handed_out.add)

    async def _let_go(self) -> None:
        """Detach every terminal this facet handed out that is still open (the session's
        `aclose` and `destroy`)."""
        await let_go(self._handed_out)
