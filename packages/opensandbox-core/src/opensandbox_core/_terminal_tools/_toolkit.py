"""`TerminalTools`: the interactive terminals of an agent's tools, on one sandbox session.

The framework packages build their tools from it (`TerminalTools.specs` and `call`); a custom
agent loop can call it directly. Every result is text for a model: the terminal's state on the
first line, then its output (see `_output`). What the model can act on (an unknown or closed id,
a process that has exited, a bad argument, a `cwd` the sandbox cannot use, a terminal another
client holds) comes back as a result starting with `Error:`; what it cannot (the sandbox is gone,
the server fails) raises, as the session's other operations do.

Terminals are left running when the tools are done with them: `detach_all()` lets go of the
connections (what a framework does when an agent's run ends), and a later call with the same id
reaches the terminal again, from this object or another one on the same sandbox (another run,
another process), with the output the model has not seen. Only `close` (the model's, or
`close_all()`) ends a terminal's process.

Event loops: a terminal's handle belongs to the loop it was opened on. A call made on another
loop runs on the handle's loop while that loop runs (the blocking adapters' portal loop always
does) and otherwise reaches the terminal again from the calling loop. A call made from a thread
that blocks the handle's loop would wait for it forever: do not mix the blocking and the async
tools of one toolkit on the same loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar

from opensandbox_core import _validate
from opensandbox_core._errors import (
    ConfigurationError,
    TerminalBusyError,
    TerminalClosedError,
    TerminalNotFoundError,
    TerminalTakenOverError,
)
from opensandbox_core._session import AsyncSandboxSession
from opensandbox_core._terminal._handle import Terminal

from ._entry import Collected, Entry, collect, echo_of, still_held
from ._keys import keystrokes
from ._output import OutputText
from ._specs import DEFAULT_WAIT, MAX_WAIT, SPECS, TerminalToolSpec

__all__ = ["DEFAULT_MAX_OUTPUT", "SETTLE", "TerminalTools"]

DEFAULT_MAX_OUTPUT = 16 * 1024
"""Bytes of output one result holds at most (the last ones; the result says how many it left
out)."""
SETTLE = 0.5
"""Seconds without output after which a call returns (when it waits for no text)."""

Operation = Callable[[Entry, Terminal], Awaitable[str]]


def _error(exc: BaseException) -> str:
    return f"Error: {exc}"


class TerminalTools:
    """Interactive terminals for an agent's tools, on one sandbox (`docs/core.md`).

    ```python
    tools = TerminalTools(session)
    started = await tools.start("python3 -i", wait_for=">>> ")
    terminal_id = started.split(":", 1)[0].removeprefix("terminal ")
    print(await tools.send(terminal_id, "6*7<Enter>", wait_for=">>> "))  # ... 42 ...
    await tools.close(terminal_id)
    ```

    `specs` describes the four tools for a model (names, descriptions, JSON schemas of the
    arguments); `call(name, arguments)` runs one as a framework received it. Construction does
    no I/O. `max_output`: bytes of output one result holds at most; `settle`: seconds without
    output after which a call that waits for no text returns.
    """

    specs: ClassVar[tuple[TerminalToolSpec, ...]] = SPECS

    def __init__(
        self,
        session: AsyncSandboxSession,
        *,
        max_output: int = DEFAULT_MAX_OUTPUT,
        settle: float = SETTLE,
    ) -> None:
        self._session = _validate.instance(
            session, AsyncSandboxSession, "session", "an opensandbox_core.AsyncSandboxSession"
        )
        self._max_output = _validate.positive_int(max_output, "max_output")
        self._settle = _validate.seconds(settle, "settle", minimum=0)
        self._entries: dict[str, Entry] = {}

    def __repr__(self) -> str:
        return f"TerminalTools(sandbox={self._session.id!r}, terminals={self.terminals!r})"

    @property
    def session(self) -> AsyncSandboxSession:
        """The session the tools open and reach terminals through."""
        return self._session

    def rebind(self, session: AsyncSandboxSession) -> None:
        """Carry on through another session on the same sandbox (a later run's): the terminals
        are reached again by id when next used, with what the model has seen remembered."""
        self._session = _validate.rebound_session(self._session, session, AsyncSandboxSession)

    @property
    def terminals(self) -> list[str]:
        """The ids of the terminals these tools opened or reached that are not closed."""
        return [e.id for e in self._entries.values() if not e.closed and not e.exited]

    # -- the tools ---------------------------------------------------------------------------
    async def call(self, name: str, arguments: Mapping[str, object]) -> str:
        """Run the tool `name` (one of `specs`) with the arguments a model sent."""
        spec = _validate.tool_spec(name, {s.name: s for s in self.specs})
        try:
            checked = _validate.tool_arguments(arguments, spec.parameters, name)
        except ConfigurationError as exc:
            return _error(exc)
        method: Callable[..., Awaitable[str]] = getattr(self, spec.method)
        return await method(**checked)

    async def start(
        self,
        command: str | None = None,
        *,
        cwd: str | None = None,
        wait_for: str | None = None,
        timeout: float = DEFAULT_WAIT,
    ) -> str:
        """Open a terminal running `command` (a shell command line; None: an interactive bash)
        and return its id (the first line: `terminal <id>: running`) with its first output:
        waits up to `timeout` seconds for output, then until it is quiet (or `wait_for`)."""
        try:
            line = None if command is None else _validate.tool_text(command, "command")
            pattern = _validate.wait_pattern(wait_for)
            limit = _validate.tool_wait(timeout, MAX_WAIT)
            terminal = await self._session.terminals.open(line, cwd=cwd)
        except ConfigurationError as exc:
            return _error(exc)
        entry = Entry(terminal.id, OutputText(self._max_output))
        entry.hold(terminal, asyncio.get_running_loop())
        self._entries[entry.id] = entry
        async with entry.lock:
            got = await collect(
                entry, terminal, pattern=pattern, limit=limit, first=limit, settle=self._settle
            )
            return await self._result(entry, terminal, got, wait_for, limit)

    async def send(
        self,
        terminal_id: str,
        keys: str,
        *,
        wait_for: str | None = None,
        timeout: float = DEFAULT_WAIT,
    ) -> str:
        """Type `keys` (in the key notation: `<Enter>`, `<Ctrl-C>`, ...; see `keystrokes`) and
        return the output that follows: until `wait_for` appears, or else until the output is
        quiet; at most `timeout` seconds."""
        try:
            tid = _validate.tool_text(terminal_id, "terminal_id")
            data = keystrokes(keys)
            pattern = _validate.wait_pattern(wait_for)
            limit = _validate.tool_wait(timeout, MAX_WAIT)
        except ConfigurationError as exc:
            return _error(exc)

        async def operation(entry: Entry, terminal: Terminal) -> str:
            before = await terminal.read(timeout=0)  # unread output goes first, unsearched
            entry.took(before)
            entry.carry += before
            try:
                await terminal.write(data)
            except TerminalClosedError:
                if not terminal.ended:
                    raise
                got = await self._rest(entry, terminal)
                return await self._result(entry, terminal, got, None, limit, refused=True)
            got = await collect(
                entry,
                terminal,
                pattern=pattern,
                limit=limit,
                first=self._settle,
                settle=self._settle,
                echo=echo_of(data),
            )
            return await self._result(entry, terminal, got, wait_for, limit)

        return await self._on(tid, operation)

    async def read(
        self, terminal_id: str, *, wait_for: str | None = None, timeout: float = DEFAULT_WAIT
    ) -> str:
        """The output since the last call: waits up to `timeout` seconds for some to arrive,
        then until it is quiet (or until `wait_for` appears)."""
        try:
            tid = _validate.tool_text(terminal_id, "terminal_id")
            pattern = _validate.wait_pattern(wait_for)
            limit = _validate.tool_wait(timeout, MAX_WAIT)
        except ConfigurationError as exc:
            return _error(exc)

        async def operation(entry: Entry, terminal: Terminal) -> str:
            seed, entry.carry = entry.carry, b""  # a replay's output is searched too
            got = await collect(
                entry,
                terminal,
                pattern=pattern,
                limit=limit,
                first=limit,
                settle=self._settle,
                seed=seed,
            )
            return await self._result(entry, terminal, got, wait_for, limit)

        return await self._on(tid, operation)

    async def close(self, terminal_id: str) -> str:
        """End the terminal's process (its whole process group) and delete the terminal;
        returns the output not returned yet. Closing a closed terminal says so."""
        try:
            tid = _validate.tool_text(terminal_id, "terminal_id")
        except ConfigurationError as exc:
            return _error(exc)
        entry = self._entries.get(tid)
        if entry is not None and (entry.closed or entry.exited):
            return f"terminal {tid}: already closed" + _code(entry.exit_code)

        async def operation(entry: Entry, terminal: Terminal) -> str:
            got = await self._rest(entry, terminal)
            await terminal.close()
            entry.closed = True
            return self._text(entry, f"closed{_code(terminal.exit_code)}", got, final=True)

        return await self._on(tid, operation)

    # -- letting go --------------------------------------------------------------------------
    async def detach_all(self) -> None:
        """Let go of every terminal's connection; the processes keep running, and the next call
        with an id reaches its terminal again. What a framework does when an agent's run ends."""
        here = asyncio.get_running_loop()
        for entry in list(self._entries.values()):
            terminal, loop = entry.terminal, entry.loop
            entry.terminal = None
            if terminal is None or loop is None:
                continue
            if loop is here:
                await terminal.detach()
            elif loop.is_running():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(terminal.detach(), loop))

    async def close_all(self) -> None:
        """Close every terminal these tools opened or reached that is still open."""
        for terminal_id in self.terminals:
            await self.close(terminal_id)

    # -- reaching a terminal -----------------------------------------------------------------
    async def _on(self, terminal_id: str, operation: Operation) -> str:
        """Run `operation` on the terminal, on its handle's loop while that loop runs."""
        entry = self._entries.get(terminal_id)
        if entry is not None and (entry.closed or entry.exited):
            return _gone(entry)
        home = None if entry is None or entry.terminal is None else entry.loop
        if home is not None and home is not asyncio.get_running_loop() and home.is_running():
            work = asyncio.run_coroutine_threadsafe(self._here(terminal_id, operation), home)
            return await asyncio.wrap_future(work)
        return await self._here(terminal_id, operation)

    async def _here(self, terminal_id: str, operation: Operation) -> str:
        for attempt in range(2):
            terminal: Terminal | None = None
            try:
                entry, terminal = await self._handle(terminal_id)
                async with entry.lock:
                    return await operation(entry, terminal)
            except TerminalClosedError as exc:
                # Let go meanwhile (its session closed): reach it again, once.
                self._drop_handle(terminal_id)
                if (terminal is not None and terminal.ended) or attempt:
                    return _error(exc)
            except TerminalNotFoundError:
                self._entries.pop(terminal_id, None)
                return (
                    f"Error: there is no terminal {terminal_id} in this sandbox: it was closed, "
                    "or never opened here. Open one with terminal_start."
                )
            except TerminalTakenOverError:
                self._drop_handle(terminal_id)
                return (
                    f"Error: another client took terminal {terminal_id} over; it keeps running "
                    "there. A new call takes it back."
                )
            except TerminalBusyError:
                return (
                    f"Error: another client holds terminal {terminal_id}, and this sandbox "
                    "cannot take a terminal over; try again once that client lets go of it."
                )
            except ConfigurationError as exc:
                return _error(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    def _drop_handle(self, terminal_id: str) -> None:
        entry = self._entries.get(terminal_id)
        if entry is not None:
            entry.terminal = None

    async def _handle(self, terminal_id: str) -> tuple[Entry, Terminal]:
        """The entry and a usable handle on this loop (reaching the terminal again if needed)."""
        here = asyncio.get_running_loop()
        entry = self._entries.get(terminal_id)
        if entry is not None and entry.loop is here and entry.terminal is not None:
            held = entry.terminal
            # A handle its session let go of (`aclose()`, a backend's close) is reached again.
            if held.ended or await still_held(held):
                return entry, held
        terminal = await self._session.terminals.attach(terminal_id)
        if entry is None:
            entry = self._entries.setdefault(
                terminal_id, Entry(terminal_id, OutputText(self._max_output))
            )
        entry.hold(terminal, here)
        entry.skip_seen(await terminal.read(timeout=0))
        return entry, terminal

    # -- results -----------------------------------------------------------------------------
    async def _rest(self, entry: Entry, terminal: Terminal) -> Collected:
        """What the terminal printed that was not read yet (at once)."""
        data = await terminal.read(timeout=0)
        entry.took(data)
        return Collected(bytearray(data), "exited" if terminal.ended else "quiet")

    async def _result(
        self,
        entry: Entry,
        terminal: Terminal,
        got: Collected,
        wait_for: str | None,
        limit: float,
        *,
        refused: bool = False,
    ) -> str:
        if got.outcome == "exited" or terminal.ended:
            entry.exited, entry.exit_code = True, terminal.exit_code
            await terminal.close()  # delete it in execd, or the next attach would start it again
            state = f"exited{_with_code(entry.exit_code)}; the terminal is closed"
            if refused:
                state += ", so the keys were not sent"
            return ("Error: " if refused else "") + self._text(entry, state, got, final=True)
        if got.outcome == "let-go":
            entry.terminal = None
            state = "running (this call lost its connection to it; read again to go on)"
        elif got.outcome == "matched":
            state = f"running; {wait_for!r} appeared"
        elif got.outcome == "missed":
            state = f"running; {wait_for!r} did not appear within {limit:g} s"
        else:
            state = "running"
        return self._text(entry, state, got, final=False)

    def _text(self, entry: Entry, state: str, got: Collected, *, final: bool) -> str:
        data = entry.carry + bytes(got.data)
        entry.carry = b""
        rendered = entry.text.render(data, final=final)
        lines = [f"terminal {entry.id}: {state}"]
        if entry.note is not None:
            lines.append(entry.note)
            entry.note = None
        if rendered.elided:
            lines.append(
                f"[{rendered.elided:,} bytes of output left out here; the last "
                f"{min(len(data), self._max_output):,} follow]"
            )
        lines.append(rendered.text if rendered.text else "(no new output)")
        return "\n".join(lines)


def _code(exit_code: int | None) -> str:
    return "" if exit_code is None else f" (exit code {exit_code})"


def _with_code(exit_code: int | None) -> str:
    return "" if exit_code is None else f" with code {exit_code}"


def _gone(entry: Entry) -> str:
    if entry.exited:
        return (
            f"Error: the process of terminal {entry.id} exited{_with_code(entry.exit_code)}, "
            "and the terminal is closed. Open a new one with terminal_start."
        )
    return f"Error: terminal {entry.id} was closed. Open a new one with terminal_start."
