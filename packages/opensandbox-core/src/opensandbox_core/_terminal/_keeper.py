"""Keeping one terminal connected: start, reconnect with replay, the end, the final fetch.

The keeper owns the terminal's connection (`_link.Link`, one at a time) and the filter of its
output (`_script.OutputFilter`), and hands the terminal each new output byte once, in order:

- a connection that drops (the network, a proxy, execd's 60 s silence rule) is made again with
  `since=` the byte offset already read, so the replay fills the gap exactly; the daemon is
  asked first (`GET /pty/{id}`) whether the terminal still exists and still runs;
- the end mark of the core's setup (see `_script`) is acknowledged as soon as it arrives, so the
  process exits only once all its output has been read;
- the end mark carries the exit code (see `_script`); a process that ended without it (the
  wrapper killed, or `exec`'d away from the setup) has none that is known (execd's -1 does not
  say which signal), and it, or one that ended while no connection was up, may have left bytes in execd's replay buffer that the live
  stream never carried: they are fetched with one more connection (`since=`, up to the
  `output_offset` execd reports), and since that connection starts a new shell (execd starts
  a terminal's process again on the next connection after it ended), the keeper then deletes
  the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol

import httpx

from opensandbox_core._errors import (
    ExecdError,
    OpenSandboxError,
    ServerError,
    TerminalNotFoundError,
    TerminalTakenOverError,
)
from opensandbox_core._wire._execd import ExecdClient

from . import _frames
from ._link import KEEPALIVE, Link, Refused, Target
from ._script import ACK, OutputFilter

__all__ = ["Keeper", "TerminalLife", "not_found"]

logger = logging.getLogger(__name__)

RECONNECT_BUDGET: Final = 90.0
"""Seconds a dropped terminal connection is tried again (v1.0.18 answers 409 until it notices
that the old connection is gone; execd's own silence rule allows 60 s)."""
_CONNECT_TIMEOUT: Final = 30.0


class TerminalLife(Protocol):
    """What a terminal needs of its session's lifecycle facet."""

    @property
    def sandbox_id(self) -> str | None: ...

    async def renew_once(self) -> None: ...

    async def fail(
        self, exc: BaseException, action: str, *, execd: ExecdClient | None = None
    ) -> NoReturn: ...


def not_found(terminal_id: str, sandbox_id: str | None) -> TerminalNotFoundError:
    return TerminalNotFoundError(
        f"Terminal {terminal_id} was not found in sandbox {sandbox_id}: it was never opened "
        "there, or it was closed.",
        terminal_id=terminal_id,
    )


@dataclass(frozen=True, slots=True)
class TerminalRef:
    """What reaches one terminal: its id, its `/pty` target on the execd client that made it,
    the sandbox's lifecycle, and whether the core's setup runs in it (`setup`: opened by the
    core, so its output carries the core's marks)."""

    terminal_id: str
    execd: ExecdClient
    life: TerminalLife
    setup: bool

    @property
    def target(self) -> Target:
        return Target.of(self.execd.endpoint, self.terminal_id)


class Keeper:
    """One terminal's connection and the end of its process (module docstring)."""

    def __init__(
        self,
        ref: TerminalRef,
        *,
        on_output: Callable[[bytes], None],
        on_change: Callable[[], None],
    ) -> None:
        self.id = ref.terminal_id
        self.target = ref.target
        self.execd = ref.execd
        self.life = ref.life
        self.filter = OutputFilter(ref.terminal_id, setup=ref.setup)
        self.exit_code: int | None = None  # known once `done` (None: ended, code unknown)
        self.done = False  # the process has ended (or `close()` ended it)
        self.problem: OpenSandboxError | None = None
        self.link: Link | None = None
        self._on_output = on_output
        self._on_change = on_change
        self._acked = False
        self.room = asyncio.Event()  # cleared while the terminal holds too much unread output
        self.room.set()
        self._watcher: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()

    # -- output --------------------------------------------------------------------------
    def _raw(self, data: bytes) -> None:
        setting_up = self.filter.in_setup
        visible = self.filter.feed(data)
        if visible:
            self._on_output(visible)
        elif setting_up:
            self._on_change()  # `open_terminal` waits for the setup's progress
        if self.filter.ended and not self._acked:
            self._acked = True
            self._spawn(self._acknowledge())

    async def _acknowledge(self) -> None:
        link = self.link
        if link is not None:
            with contextlib.suppress(Exception):  # a drop: `_recover` acknowledges again
                await link.send(_frames.stdin_frame(ACK))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def offset(self) -> int:
        return 0 if self.link is None else self.link.offset

    # -- connecting ----------------------------------------------------------------------
    async def connect(self, *, since: int | None, takeover: bool, limit: int | None = None) -> Link:
        """A new connection from byte `since` (None: all that execd keeps)."""
        link = Link(self.target, self._raw, self.offset, self.room)
        link.limit = limit
        link.on_end = self._on_change
        self.link = link
        await link.open(since=since, takeover=takeover, timeout=_CONNECT_TIMEOUT)
        return link

    def watch(self) -> None:
        """Follow the connection from now on: reconnect, take the end, and keep the sandbox
        renewed while the terminal is held (idempotent)."""
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
            self._spawn(self._renewing())

    async def _renewing(self) -> None:
        """A terminal in use is the sandbox in use: renew it (when due) as keep-alives go."""
        while not self.done and self.problem is None:
            await asyncio.sleep(KEEPALIVE)
            try:
                await self.life.renew_once()
            except Exception as exc:  # the terminal's own calls report a gone sandbox
                logger.debug("renewing the sandbox of terminal %s failed (%s)", self.id, exc)

    async def _watch(self) -> None:
        while self.link is not None:
            link = self.link
            await link.ended.wait()
            if link is not self.link:
                continue
            try:
                if link.reason == "exit":
                    await self._after_exit(link.exit_code)
                    return
                if link.reason == "taken-over":
                    raise TerminalTakenOverError(
                        f"Terminal {self.id} was taken over by another client (terminals.attach "
                        "elsewhere); this handle can no longer use it."
                    )
                if link.reason == "closed" or not await self._recover():
                    return
            except OpenSandboxError as exc:
                self._fail(exc)
                return
            except Exception as exc:
                self._fail(self.lost(exc))
                return

    def _fail(self, problem: OpenSandboxError) -> None:
        if self.problem is None and not self.done:
            self.problem = problem
        self._on_change()

    def lost(self, exc: BaseException) -> ServerError:
        return ServerError(
            f"Lost the connection to terminal {self.id} in sandbox {self.life.sandbox_id} and "
            f"could not make it again within {RECONNECT_BUDGET:g} s ({type(exc).__name__}).",
            retryable=True,
        )

    def ended(self, exit_code: int | None) -> None:
        """The process has ended with `exit_code` (None: unknown)."""
        if not self.done and self.problem is None:
            self.done = True
            self.exit_code = exit_code
        self._on_change()

    # -- the end ---------------------------------------------------------------------------
    async def _after_exit(self, frame_code: int | None) -> None:
        """The `exit` frame came: the end mark's code, else execd's (None for a signal)."""
        if not self.filter.ended:  # no end mark: the last bytes may be in the replay only
            try:
                status = await self.status()
                if status is not None and status[1] > self.offset:
                    await self.fetch_rest(status[1])
            except Exception as exc:
                logger.warning("could not check terminal %s for lost output (%s)", self.id, exc)
        self.ended(self.filter.end_status if self.filter.ended else frame_code)

    async def fetch_rest(self, upto: int) -> None:
        """Read the kept output up to `upto` that the live stream did not carry, then delete
        the terminal: the connection that reads it starts a new shell."""
        try:
            link = await self.connect(since=self.offset, takeover=True, limit=upto)
            await link.close()
        except (Refused, OSError, TimeoutError, httpx.HTTPError) as exc:
            logger.warning("could not read the last output of terminal %s (%s)", self.id, exc)
        await self.delete()

    async def delete(self) -> None:
        """`DELETE /pty/{id}`; a terminal that is already gone is fine."""
        try:
            await self.execd.pty_delete(self.id)
        except ExecdError as exc:
            if exc.status != 404:
                raise

    async def status(self) -> tuple[bool, int] | None:
        """(running, output_offset) of the terminal; None when it no longer exists."""
        try:
            data = await self.execd.pty_status(self.id)
        except ExecdError as exc:
            if exc.status == 404 and exc.from_execd:
                return None
            raise
        offset = data.get("output_offset")
        return bool(data.get("running")), offset if isinstance(offset, int) else 0

    async def _recover(self) -> bool:
        """After a drop: reconnect from the offset read (True), or take the end that came
        meanwhile (False)."""
        deadline = time.monotonic() + RECONNECT_BUDGET
        delay = 0.05
        while True:
            try:
                status = await self.status()
                if status is None:
                    raise not_found(self.id, self.life.sandbox_id)
                running, kept = status
                if not running:
                    if not self.filter.ended and kept > self.offset:
                        await self.fetch_rest(kept)
                    self.ended(self.filter.end_status)
                    return False
                await self.connect(since=self.offset, takeover=True)
                if self.filter.ended:  # the acknowledgement may have been lost with the drop
                    await self._acknowledge()
                return True
            except Refused as exc:
                if exc.status == 404:
                    raise not_found(self.id, self.life.sandbox_id) from None
                if exc.status in (401, 403):
                    raise self.lost(exc) from None
                failure: BaseException = exc
            except (OSError, TimeoutError, httpx.HTTPError, ExecdError) as exc:
                failure = exc
            if time.monotonic() >= deadline:
                raise self.lost(failure) from failure
            logger.debug("terminal %s: reconnecting after %s", self.id, type(failure).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    # -- letting go ------------------------------------------------------------------------
    async def stop(self) -> None:
        """Close the connection and stop following it (the terminal itself is left alone)."""
        watcher, self._watcher = self._watcher, None
        link = self.link
        if link is not None:
            await link.close()
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
        for task in list(self._background):
            task.cancel()
