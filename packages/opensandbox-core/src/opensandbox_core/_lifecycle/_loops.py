"""`PerLoop`: values (HTTP clients) kept per event loop, each closed on its own loop when that
loop shuts down.

httpx's async clients belong to the loop that opened them, so a session used from several
loops keeps one set per loop. A loop that `asyncio.run()` (or `asyncio.Runner`) ends would
otherwise leave its set behind, sockets open, until `aclose()`: a session used from repeated
`asyncio.run()` calls piled them up. Each value is therefore watched by a small async generator
that is started (synchronously, to its first `yield`) on the value's loop: asyncio registers it
with the loop, and the loop's shutdown (`shutdown_asyncgens`, which `asyncio.run` calls before
it closes the loop) finalises it while the loop still runs: its `finally` closes the value there
and drops it from the registry. A loop closed without that shutdown (a bare `loop.close()`) can
no longer run anything: its value is dropped (unclosed; the garbage collector closes the
sockets) the next time the registry is used from any loop.

Thread-safe: loops in different threads use one registry under a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from typing import Generic, TypeVar

__all__ = ["PerLoop"]

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("dead", "value", "watch")

    def __init__(self, value: T) -> None:
        self.value = value
        self.dead = False  # its loop closed without a shutdown: nothing can be awaited on it
        self.watch: AsyncGenerator[None] | None = None


class PerLoop(Mapping[asyncio.AbstractEventLoop, T]):
    """Values per event loop (see the module docstring); `close(value)` closes one, on its loop."""

    def __init__(self, close: Callable[[T], Awaitable[None]]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._entries: dict[asyncio.AbstractEventLoop, _Entry[T]] = {}

    # -- the Mapping view (what the loops hold now) --------------------------------------------
    def __getitem__(self, loop: asyncio.AbstractEventLoop) -> T:
        with self._lock:
            return self._entries[loop].value

    def __iter__(self) -> Iterator[asyncio.AbstractEventLoop]:
        with self._lock:
            return iter(list(self._entries))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"PerLoop({len(self)} loops)"

    # -- use -------------------------------------------------------------------------------------
    def get_or_make(self, make: Callable[[], T]) -> T:
        """The running loop's value, made (and watched) on first use."""
        loop = asyncio.get_running_loop()
        dropped = self._drop_closed()
        with self._lock:
            entry = self._entries.get(loop)
            if entry is None:
                entry = self._entries[loop] = _Entry(make())
                created = True
            else:
                created = False
        if created:
            entry.watch = self._watch(loop, entry)
        for old in dropped:
            _finish(old)
        return entry.value

    def __setitem__(self, loop: asyncio.AbstractEventLoop, value: T) -> None:
        """Register `value` for `loop`, the running loop (tests put prepared clients here)."""
        assert loop is asyncio.get_running_loop()
        entry = _Entry(value)
        with self._lock:
            self._entries[loop] = entry
        entry.watch = self._watch(loop, entry)

    async def close_current(self) -> None:
        """Close and drop the running loop's value, if any (and drop those of closed loops)."""
        loop = asyncio.get_running_loop()
        for old in self._drop_closed():
            _finish(old)
        with self._lock:
            entry = self._entries.pop(loop, None)
        if entry is None:
            return
        watch, entry.watch = entry.watch, None
        if watch is None:
            await self._close(entry.value)
        else:
            await watch.aclose()  # its `finally` closes the value

    # -- the watch -------------------------------------------------------------------------------
    def _watch(self, loop: asyncio.AbstractEventLoop, entry: _Entry[T]) -> AsyncGenerator[None]:
        watch = self._until_shutdown(loop, entry)
        with contextlib.suppress(StopIteration):
            watch.asend(None).send(None)  # to its `yield`: the running loop now knows it
        return watch

    async def _until_shutdown(
        self, loop: asyncio.AbstractEventLoop, entry: _Entry[T]
    ) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            with self._lock:
                if self._entries.get(loop) is entry:
                    del self._entries[loop]
            if not entry.dead and not loop.is_closed():
                with contextlib.suppress(Exception):
                    await self._close(entry.value)

    def _drop_closed(self) -> list[_Entry[T]]:
        with self._lock:
            closed = [loop for loop in self._entries if loop.is_closed()]
            return [self._entries.pop(loop) for loop in closed]


def _finish(entry: _Entry[T]) -> None:
    """End the watch of a value whose loop closed without a shutdown: its `finally` awaits
    nothing then (`dead`), so it runs to its end right here, on no loop."""
    entry.dead = True
    watch, entry.watch = entry.watch, None
    if watch is not None:
        with contextlib.suppress(BaseException):
            watch.aclose().send(None)
