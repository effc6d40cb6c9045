"""Opening a terminal and attaching to one: `session.terminals.open` and
`session.terminals.attach` (`_facet`).

Opening: `POST /pty` (with the `cwd`), one connection, the window size, the setup line typed
once the shell's first prompt is there (`_script`), and the handle is returned once the setup
printed its ready mark (an interactive shell: and its next prompt, so that keys typed at once
are read by readline, not echoed by the terminal first). Whatever goes wrong or is cancelled on
the way deletes the terminal again before the error or the cancellation goes on (a cancelled
`POST` is awaited, bounded, for the id to delete), so nothing is left behind in execd.

Attaching: the terminal's state first (`GET /pty/{id}`: unknown ids fail before any upgrade),
then a connection that replays everything execd kept. A terminal held by another connection is
taken over where execd can (v1.0.19, `?takeover=1`: the old handle gets
`TerminalTakenOverError`); v1.0.18 refuses (HTTP 409), which is `TerminalBusyError`. A terminal
whose process ended while no one was connected is read to its end and deleted (see `_keeper`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Final, NoReturn, Protocol

from opensandbox_core import _validate
from opensandbox_core._errors import (
    ConfigurationError,
    ExecdError,
    ServerError,
    TerminalBusyError,
)
from opensandbox_core._failures import parse_error_body, scrub
from opensandbox_core._files import _fallback
from opensandbox_core._files._paths import resolve
from opensandbox_core._wire._events import Context
from opensandbox_core._wire._execd import ExecdClient

from . import _frames, _script
from ._handle import Terminal
from ._keeper import TerminalLife, TerminalRef, not_found
from ._link import Refused

__all__ = ["TerminalsLife", "attach_terminal", "open_terminal"]

OPEN_BUDGET: Final = 60.0
"""Seconds `open_terminal` and `attach_terminal` may take once the sandbox is reached."""
_FIRST_PROMPT: Final = 2.0  # seconds to wait for the shell's first output before typing
_CWD_FAILED: Final = 97  # the setup line's exit status when it cannot enter the directory
_CLEANUP_WAIT: Final = 10.0  # seconds a cancelled open waits to delete what it made


class TerminalsLife(TerminalLife, Protocol):
    """The lifecycle facet as `open_terminal` and `attach_terminal` use it."""

    async def context(self) -> Context: ...


async def open_terminal(
    life: TerminalsLife,
    command: str | None,
    *,
    cwd: str | None,
    cols: int,
    rows: int,
    register: Callable[[Terminal], None],
) -> Terminal:
    text = _validate.terminal_command(command)
    width, height = _validate.terminal_size(cols, rows)
    if cwd is not None:
        _validate.path(cwd)
    ctx = await life.context()
    directory = ctx.working_dir if cwd is None else resolve(cwd, ctx.working_dir)
    literal = _fallback.cwd_is_literal(directory)
    terminal_id = await _create(life, ctx.execd, directory if literal else None)
    terminal = Terminal(TerminalRef(terminal_id, ctx.execd, life, setup=True))
    enter = None if literal else directory
    line = (
        _script.interactive_line(terminal_id, cwd=enter)
        if text is None
        else _script.command_line(terminal_id, text, cwd=enter)
    )
    try:
        async with asyncio.timeout(OPEN_BUDGET):
            await _start(terminal, line, width, height, interactive=text is None)
        _started(terminal, directory)
    except BaseException as exc:
        await _discard(terminal)
        if isinstance(exc, Exception):
            await _fail(life, ctx.execd, exc, "open a terminal")
        raise
    register(terminal)
    return terminal


async def _create(life: TerminalsLife, execd: ExecdClient, cwd: str | None) -> str:
    """`POST /pty`; a cancellation first waits for the answer (bounded) and deletes the
    terminal it names, then goes on."""
    task = asyncio.get_running_loop().create_task(execd.pty_create(cwd))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(_CLEANUP_WAIT):
                await asyncio.shield(execd.pty_forget(await asyncio.shield(task)))
        raise
    except ExecdError as exc:
        if exc.from_execd and "work directory" in exc.message.lower():
            raise ConfigurationError(
                f"The terminal's cwd {cwd!r} cannot be used in sandbox {life.sandbox_id}: "
                f"{exc.message}"
            ) from None
        await life.fail(exc, "open a terminal", execd=execd)
    except Exception as exc:
        await life.fail(exc, "open a terminal", execd=execd)


async def _start(
    terminal: Terminal, line: bytes, width: int, height: int, *, interactive: bool
) -> None:
    keeper = terminal._keeper
    link = await keeper.connect(since=None, takeover=False)
    loop = asyncio.get_running_loop()
    first = loop.time() + _FIRST_PROMPT
    while not keeper.filter.held and not link.ended.is_set() and loop.time() < first:
        await terminal._changed_within(first - loop.time())
    # The size once the shell is up (a daemon may set its own when it starts the shell).
    await link.send(_frames.resize_frame(width, height))
    await link.send(_frames.stdin_frame(line))
    while keeper.filter.in_setup and not link.ended.is_set():
        await terminal._changed_within(None)
    if interactive:  # the prompt: readline reads keys raw from then on (no double echo)
        first = loop.time() + _FIRST_PROMPT
        while not terminal._pending and not link.ended.is_set() and loop.time() < first:
            await terminal._changed_within(first - loop.time())


def _started(terminal: Terminal, directory: str) -> None:
    """Raise when the setup did not print its ready mark (the shell ended first)."""
    keeper = terminal._keeper
    if not keeper.filter.in_setup:
        keeper.watch()
        return
    link = keeper.link
    code = None if link is None else link.exit_code
    said = scrub(keeper.filter.held.decode("utf-8", "replace"))[-300:]
    if code == _CWD_FAILED:
        raise ConfigurationError(
            f"The terminal's cwd {directory!r} cannot be used in sandbox "
            f"{keeper.life.sandbox_id}: the shell said {said!r}."
        )
    raise ServerError(
        f"The shell of terminal {terminal.id} in sandbox {keeper.life.sandbox_id} ended before "
        f"it was ready (exit code {code}); it printed {said!r}."
    )


async def _discard(terminal: Terminal) -> None:
    """Delete a terminal that is not handed out (its start failed or was cancelled)."""

    async def work() -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_CLEANUP_WAIT):
                await terminal._keeper.stop()
                await terminal._keeper.delete()

    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(asyncio.get_running_loop().create_task(work()))


async def _fail(life: TerminalsLife, execd: ExecdClient, exc: Exception, action: str) -> NoReturn:
    """The project's error for a failed connection (an upgrade refused: execd's answer)."""
    if isinstance(exc, Refused):
        status = exc.status
        if status is None:
            exc = ServerError(
                "The WebSocket upgrade was refused behind the server's proxy "
                f"({exc.body.decode(errors='replace')})."
            )
        else:
            code, message, from_execd = parse_error_body(exc.body, limit=None)
            exc = ExecdError(status, code, message, from_execd=from_execd, address="")
    await life.fail(exc, action, execd=execd)


async def attach_terminal(
    life: TerminalsLife, terminal_id: str, *, register: Callable[[Terminal], None]
) -> Terminal:
    tid = _validate.terminal_id(terminal_id)
    ctx = await life.context()
    terminal = Terminal(TerminalRef(tid, ctx.execd, life, setup=True))
    keeper = terminal._keeper
    try:
        status = await keeper.status()
    except Exception as exc:
        await life.fail(exc, "attach to a terminal", execd=ctx.execd)
    if status is None:
        raise not_found(tid, life.sandbox_id)
    try:
        async with asyncio.timeout(OPEN_BUDGET):
            await _reach(terminal, running=status[0], kept=status[1])
    except BaseException as exc:
        await keeper.stop()
        if isinstance(exc, Refused) and exc.status == 404:
            raise not_found(tid, life.sandbox_id) from None
        if isinstance(exc, Exception):
            await _fail(life, ctx.execd, exc, "attach to a terminal")
        raise
    register(terminal)
    return terminal


async def _reach(terminal: Terminal, *, running: bool, kept: int) -> None:
    keeper = terminal._keeper
    if not running and kept > 0:  # it ended while no one was connected
        await keeper.fetch_rest(kept)
        terminal._arrived(keeper.filter.end_setup())  # what no ready mark was found before
        keeper.ended(keeper.filter.end_status)
        return
    try:
        await keeper.connect(since=None, takeover=False)
    except Refused as exc:
        if exc.status not in (409, None):  # None: refused behind the server's proxy
            raise
        try:
            await keeper.connect(since=None, takeover=True)
        except Refused as again:
            if again.status not in (409, None):
                raise
            if again.status is None and await keeper.status() is None:
                raise not_found(terminal.id, keeper.life.sandbox_id) from None
            raise TerminalBusyError(
                f"Terminal {terminal.id} is held by another client, and this execd cannot take "
                "a terminal over (v1.0.18 and older; v1.0.19 can): detach or close the other "
                "handle first.",
                status_code=409,
            ) from None
    terminal._arrived(keeper.filter.end_setup())
    keeper.watch()
