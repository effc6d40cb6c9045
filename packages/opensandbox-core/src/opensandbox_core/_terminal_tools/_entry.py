"""One terminal as the tools hold it: its handle, what the model has been given of its output,
and the waiting that every tool call does (`collect`).

The handle belongs to the event loop it was opened on (`loop`); the toolkit runs each call on
that loop while it runs, and reaches the terminal again by id (`attach_terminal`) from the
calling loop once it has stopped. A new handle replays what execd kept of the output (the last
1 MiB); `skip_seen` leaves out what the model was already given, found by the count of bytes
given and their last bytes (exact while the terminal has printed less than execd keeps).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final, Literal

from opensandbox_core._errors import TerminalClosedError, TerminalTimeoutError
from opensandbox_core._terminal._handle import Terminal

from ._output import OutputText

__all__ = ["Collected", "Entry", "collect", "echo_of", "still_held"]

_TAIL: Final = 256
"""Bytes of the output given last that an entry keeps, to find its place in a replay."""

Outcome = Literal["quiet", "matched", "missed", "exited", "let-go"]
"""How a wait ended: the output went quiet, `wait_for` appeared, `wait_for` did not appear in
time, the process exited, or the handle was let go (its session closed) meanwhile."""


@dataclass
class Entry:
    """A terminal the tools opened or reached, and what the model has seen of it."""

    id: str
    text: OutputText
    terminal: Terminal | None = None
    loop: asyncio.AbstractEventLoop | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    given: int = 0
    tail: bytes = b""
    carry: bytes = b""
    note: str | None = None
    exit_code: int | None = None  # once `exited`: the code (None: not known)
    exited: bool = False
    closed: bool = False

    def took(self, data: bytes) -> None:
        """`data` goes to the model (now or with the next result)."""
        self.given += len(data)
        self.tail = (self.tail + data)[-_TAIL:]

    def hold(self, terminal: Terminal, loop: asyncio.AbstractEventLoop) -> None:
        self.terminal, self.loop, self.lock = terminal, loop, asyncio.Lock()

    def skip_seen(self, replay: bytes) -> None:
        """Keep, of a new handle's replay, what the model has not been given (`carry`)."""
        if self.given == 0:
            new = replay
            if replay:
                self.note = (
                    f"[reached terminal {self.id} again: the output below starts with what it "
                    "printed before, as far as the sandbox keeps it (the last 1 MiB)]"
                )
        elif len(replay) >= self.given and replay[: self.given].endswith(self.tail):
            new = replay[self.given :]
        else:
            place = replay.rfind(self.tail) if self.tail else -1
            new = replay if place < 0 else replay[place + len(self.tail) :]
            self.note = (
                f"[reached terminal {self.id} again: the sandbox keeps only the last 1 MiB of "
                "its output, so what follows may repeat some output, or miss some]"
            )
        self.carry += new
        self.took(new)


@dataclass
class Collected:
    data: bytearray
    outcome: Outcome


async def still_held(terminal: Terminal) -> bool:
    """Whether the handle still follows a running process (no I/O): False once it was let go
    or its process ended; raises what the handle lost it to (taken over, connection lost)."""
    try:
        await terminal.wait(timeout=0)
    except TerminalTimeoutError:
        return True
    except TerminalClosedError:
        return False
    return False


def _found(pattern: bytes, got: bytearray, echo: bytes) -> bool:
    """Whether `pattern` is in the output as the model reads it (line endings as `\n`), after
    the terminal's `echo` of what was typed when the output starts with it."""
    text = bytes(got)
    if echo:
        if text.startswith(echo):
            text = text[len(echo) :]
        elif echo.startswith(text):
            return False  # only the echo so far
    return pattern.replace(b"\r\n", b"\n") in text.replace(b"\r\n", b"\n")


def echo_of(typed: bytes) -> bytes:
    """What a terminal echoes of `typed` first: its first line, when it is plain text (a shell's
    readline and the line discipline echo it as typed; a line wider than the terminal, or a
    control key, is echoed otherwise, and then nothing is skipped)."""
    line = typed.split(b"\r", 1)[0]
    return line if 0 < len(line) < 80 and all(0x20 <= b < 0x7F for b in line) else b""


async def collect(
    entry: Entry,
    terminal: Terminal,
    *,
    pattern: bytes | None,
    limit: float,
    first: float,
    settle: float,
    seed: bytes = b"",
    echo: bytes = b"",
) -> Collected:
    """Gather output until `pattern` appears (if given), or else until none has arrived for
    `first` seconds (before any) or `settle` seconds (after some); at most `limit` seconds.
    `seed` is output already taken (a replay's), searched and returned first; `pattern` is
    looked for after `echo` (`echo_of` the keys just typed) where the output starts with it.

    Holds at most twice the result's cap: what comes before is left out (and counted) at once,
    so `pattern` is looked for in the last `max_output` bytes at least.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    quiet_at = loop.time() + (settle if seed else first)
    got = bytearray(seed)
    if pattern is not None and _found(pattern, got, echo):
        return Collected(got, "matched")
    while True:
        end = deadline if pattern is not None else min(deadline, quiet_at)
        chunk = await terminal.read(timeout=max(0.0, end - loop.time()))
        if chunk:
            entry.took(chunk)
            got += chunk
            if pattern is not None and _found(pattern, got, echo):
                return Collected(got, "matched")
            if len(got) > 2 * entry.text.limit:
                drop = len(got) - entry.text.limit
                while drop < len(got) - entry.text.limit + 3 and 0x80 <= got[drop] < 0xC0:
                    drop += 1  # keep whole characters
                entry.text.skip(drop)
                del got[:drop]
            quiet_at = loop.time() + settle
            continue
        if terminal.ended:
            return Collected(got, "exited")
        if loop.time() >= end:
            return Collected(got, "quiet" if pattern is None else "missed")
        if not await still_held(terminal):  # read returned early with nothing: why?
            return Collected(got, "exited" if terminal.ended else "let-go")
