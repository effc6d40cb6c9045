"""`Terminal`: an interactive terminal in the sandbox (a shell, a REPL, any program).

A handle on one of execd's `/pty` sessions: the program runs in the sandbox whether or not a
handle is connected. The handle reads what the terminal prints into a buffer that `read` and
`expect` consume, sends keystrokes, and follows the connection (`_keeper`: reconnects with
replay, takes the end of the process). It belongs to the event loop it was opened on.

Output is the terminal's bytes exactly, in order, each once (the terminal's line discipline
applies: a program's `\\n` arrives as `\\r\\n`, typed input is echoed); what the core typed to set
the terminal up is not part of it (see `_script`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterable
from typing import Final

from opensandbox_core import _validate
from opensandbox_core._errors import (
    OpenSandboxError,
    TerminalClosedError,
    TerminalTimeoutError,
)

from . import _frames
from ._keeper import Keeper, TerminalRef

__all__ = ["Terminal", "let_go"]

logger = logging.getLogger(__name__)

_WRITE_SLICE: Final = 32 << 10
_MAX_HELD: Final = 64 << 20
"""Unread output held at most (bytes); beyond it the handle stops reading from the connection,
so the program in the terminal waits (as it would on a real terminal nobody reads)."""
_SEND_WAIT: Final = 30.0  # how long a keystroke waits for a dropped connection to come back
REGEX_REACH: Final = 64 << 10
"""How far back (bytes) `expect` searches again for a regular expression in output it has
already searched, when more arrives (a literal is searched again only where it could start)."""


class Terminal:
    """An interactive terminal in the sandbox: `session.terminals.open(...)` or
    `session.terminals.attach(id)`.

    ```python
    async with session.terminals.open() as term:
        await term.write("read -p 'Name? ' n; echo hello $n\\r")
        await term.expect("Name? ")
        await term.write("Ada\\r")
        await term.expect("hello Ada")
    ```

    `id` reaches the terminal again from any session on the sandbox (`terminals.attach`). Enter
    is `"\\r"`; output is bytes, with the terminal's `"\\r\\n"` line endings.
    """

    def __init__(self, ref: TerminalRef) -> None:
        self.id = ref.terminal_id
        self._life = ref.life
        self._loop = asyncio.get_running_loop()
        self._pending = bytearray()
        self._changed = asyncio.Event()
        self._state = "open"  # open | detached | closed
        self._keeper = Keeper(ref, on_output=self._arrived, on_change=self._changed.set)

    def __repr__(self) -> str:
        return (
            f"Terminal(id={self.id!r}, sandbox={self._life.sandbox_id!r}, "
            f"exit_code={self.exit_code!r})"
        )

    @property
    def exit_code(self) -> int | None:
        """The process's exit code once it has ended, as `subprocess` gives it: the exit
        status, or `-N` when signal N ended it. None while it runs, and when its end is not
        known (`close()` ended it, or it ended without the core's setup seeing it: see
        `ended`)."""
        return self._keeper.exit_code

    @property
    def ended(self) -> bool:
        """Whether the process has ended (as far as this handle saw, `close()` included)."""
        return self._keeper.done

    def _arrived(self, data: bytes) -> None:
        if not data:
            return
        self._pending += data
        if len(self._pending) > _MAX_HELD:
            self._keeper.room.clear()
        self._changed.set()

    async def _changed_within(self, seconds: float | None) -> None:
        """Wait until output arrives or the state changes, at most `seconds` (no error)."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()

    # -- state -------------------------------------------------------------------------------
    def _finished(self) -> OpenSandboxError | None:
        """Why nothing more will arrive (None: output may still come)."""
        keeper = self._keeper
        if keeper.problem is not None:
            return keeper.problem
        if self._state != "open":
            return TerminalClosedError(
                f"Terminal {self.id} was {self._state} by this handle; reach it again with "
                "terminals.attach(id)"
                + (" (it is closed for good)." if self._state == "closed" else "."),
                exit_code=keeper.exit_code,
                output=bytes(self._pending),
            )
        if keeper.done:
            code = keeper.exit_code
            return TerminalClosedError(
                f"The process of terminal {self.id} has ended ("
                + ("exit code unknown" if code is None else f"exit code {code}")
                + ").",
                exit_code=code,
                output=bytes(self._pending),
            )
        return None

    def _usable(self) -> None:
        finished = self._finished()
        if finished is not None:
            raise finished

    # -- input -------------------------------------------------------------------------------
    async def write(self, data: str | bytes) -> None:
        """Type `data` (a str is sent as UTF-8; Enter is `"\\r"`, Ctrl-D `b"\\x04"`)."""
        payload = _validate.terminal_input(data)
        for start in range(0, len(payload), _WRITE_SLICE):
            await self._send(_frames.stdin_frame(payload[start : start + _WRITE_SLICE]))

    async def interrupt(self) -> None:
        """Ctrl-C: stdin 0x03, which the terminal turns into SIGINT for the program in the
        foreground (execd's signal frames reach the shell alone)."""
        await self._send(_frames.stdin_frame(b"\x03"))

    async def resize(self, cols: int, rows: int) -> None:
        """Set the window size (the program gets SIGWINCH; `stty size` shows it)."""
        width, height = _validate.terminal_size(cols, rows)
        await self._send(_frames.resize_frame(width, height))

    async def _send(self, frame: bytes | str) -> None:
        """Send one frame, waiting for a dropped connection to come back (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _SEND_WAIT
        while True:
            self._usable()
            link = self._keeper.link
            if link is not None and not link.ended.is_set():
                try:
                    await link.send(frame)
                    return
                except Exception as exc:  # the connection went away under the send
                    logger.debug("terminal %s: send failed (%s)", self.id, type(exc).__name__)
            if loop.time() >= deadline:
                raise self._keeper.lost(ConnectionError("no connection to send on"))
            await self._changed_within(0.05)

    # -- output ------------------------------------------------------------------------------
    async def read(self, timeout: float = 1.0) -> bytes:
        """What the terminal printed since the last read or match; waits up to `timeout`
        seconds for something to arrive, and returns `b""` when nothing did. After the
        process's end, `b""` at once once everything was read."""
        limit = _validate.terminal_wait(timeout, allow_none=False)
        if not self._pending and self._finished() is None:
            await self._changed_within(limit)
        if self._pending:
            return self._take(len(self._pending))
        problem = self._keeper.problem
        if problem is not None:
            raise problem
        return b""

    def _take(self, count: int) -> bytes:
        data = bytes(self._pending[:count])
        self._consumed(count)
        return data

    def _consumed(self, count: int) -> None:
        del self._pending[:count]
        if len(self._pending) <= _MAX_HELD // 2:
            self._keeper.room.set()

    async def expect(
        self, pattern: str | bytes | re.Pattern[bytes], timeout: float = 30.0
    ) -> re.Match[bytes]:
        """Wait until the output since the last match contains `pattern`, consume the output up
        to the end of the match, and return the match.

        A str (as UTF-8) or bytes is matched literally (`"$ "`, `"[Y/n]"` mean what they say);
        pass `re.compile(rb"...")` for a regular expression. The match's `string` starts with
        the output since the last match (it may hold some of what follows the match). On
        timeout, `TerminalTimeoutError` (a `TimeoutError`) whose `output` is what was seen; if
        the process ends first, `TerminalClosedError` with `output` and `exit_code`. Nothing is
        consumed when no match is found.

        Each time output arrives, only the new output is searched (for a literal, from where it
        could start; for a regular expression, from `REGEX_REACH`, 64 KiB, before it): a
        regular expression whose match spans more than that of output that arrived earlier
        is not found, unless that output arrived before the call (which searches it whole).
        """
        regex = _validate.terminal_pattern(pattern)
        limit = _validate.terminal_wait(timeout, allow_none=False)
        assert limit is not None
        reach = (
            REGEX_REACH
            if isinstance(pattern, re.Pattern)
            else len(_validate.terminal_input(pattern)) - 1
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        start = 0
        while True:
            found = self._search(regex, start)
            if found is not None:
                self._consumed(found.end())
                return found
            start = max(0, len(self._pending) - reach)  # no match starts before this
            finished = self._finished()
            if finished is not None:
                raise finished
            if loop.time() >= deadline:
                raise TerminalTimeoutError(
                    f"{pattern!r} did not appear in terminal {self.id} within {limit:g} s "
                    f"({len(self._pending)} bytes of output since the last match, in "
                    "`output`).",
                    output=bytes(self._pending),
                )
            await self._changed_within(deadline - loop.time())

    def _search(self, regex: re.Pattern[bytes], start: int) -> re.Match[bytes] | None:
        """The first match in the unread output at or after `start`, on a copy of the output up
        to its end (the buffer itself is searched in place: no copy while nothing matches)."""
        found = regex.search(self._pending, start)
        if found is None:
            return None
        span = found.span()
        match = regex.search(bytes(self._pending[: span[1]]), span[0])
        if match is None or match.span() != span:  # it looked past its end (`$`, lookahead)
            match = regex.search(bytes(self._pending), span[0])
        return match

    async def wait(self, timeout: float | None = None) -> int | None:
        """Wait until the process ends and return its exit code (`-N`: signal N ended it;
        None: it ended, but how is not known, see `exit_code`). Output keeps arriving meanwhile
        and stays readable afterwards."""
        limit = _validate.terminal_wait(timeout, allow_none=True)
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        while not self._keeper.done:
            finished = self._finished()
            if finished is not None:
                raise finished
            if deadline is not None and loop.time() >= deadline:
                raise TerminalTimeoutError(
                    f"Terminal {self.id}'s process still runs after {limit:g} s.",
                    output=bytes(self._pending),
                )
            await self._changed_within(None if deadline is None else deadline - loop.time())
        return self._keeper.exit_code

    # -- letting go --------------------------------------------------------------------------
    async def detach(self) -> None:
        """Let go of the connection; the process keeps running, and `terminals.attach(id)`
        reaches it again (with what it printed meanwhile). Idempotent."""
        if self._state == "open":
            self._state = "detached"
            self._changed.set()
            await self._keeper.stop()

    async def close(self) -> None:
        """End the process (its whole process group) and delete the terminal in execd; the
        output already read stays readable. Idempotent. `exit_code` stays what it was: None
        unless the process had ended before (execd does not say how it ended it)."""
        if self._state == "closed":
            return
        self._state = "closed"
        self._changed.set()
        try:
            await asyncio.shield(self._keeper.delete())
            self._keeper.done = True  # the delete ended it (SIGKILL), if it still ran
        except Exception as exc:
            await self._life.fail(exc, "close a terminal", execd=self._keeper.execd)
        finally:
            await self._keeper.stop()

    async def __aenter__(self) -> Terminal:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def let_go(terminals: Iterable[Terminal]) -> None:
    """Detach every terminal still open (a session's `aclose`, `destroy`): those of this event
    loop at once, those of another loop on theirs (not waited for)."""
    loop = asyncio.get_running_loop()
    here = []
    for terminal in list(terminals):
        if terminal._loop is loop:
            here.append(terminal.detach())
        elif terminal._loop.is_running():
            asyncio.run_coroutine_threadsafe(terminal.detach(), terminal._loop)
    await asyncio.gather(*here, return_exceptions=True)
