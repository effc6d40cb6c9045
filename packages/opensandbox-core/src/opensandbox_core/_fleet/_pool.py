"""`SandboxPool`: sandboxes created ahead of time, so that an agent does not wait for one to boot.

Each pooled sandbox is created by its own `AsyncSandboxSession`, exactly as a fresh one would be
(same ownership tag, same readiness checks); `acquire()` hands that session over, and from then on
the caller owns it like any session it created. The pool refills in the background and, on
`aclose()`, destroys the sandboxes still waiting in it (never those handed out).

The SDK's own pool (`opensandbox.pool`) keeps its state in a store and hands out SDK sandboxes;
this pool needs neither and hands out sessions, so it is built on the session instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from opensandbox_core import _validate
from opensandbox_core._config import Connection, SandboxSpec
from opensandbox_core._errors import ConfigurationError, SandboxUnavailableError
from opensandbox_core._session import AsyncSandboxSession

__all__ = ["SandboxPool"]

logger = logging.getLogger(__name__)

_BACKOFF_FIRST = 0.5
"""Seconds before the second create attempt; doubled after each further failure."""
_BACKOFF_MAX = 8.0


class SandboxPool:
    """Keep `size` ready sandboxes of one `SandboxSpec`.

    ```python
    async with SandboxPool(SandboxSpec(image="python:3.13-slim"), size=2) as pool:
        session = await pool.acquire()      # ready at once when the pool is warm
        async with session:                 # owned by the caller: destroyed on exit
            await session.commands.run("echo hi")
    ```

    `session_options` are passed to every `AsyncSandboxSession` (working_dir, env, timeouts).

    When creates keep failing, `acquire()` retries with a growing pause (0.5 s, doubled each
    time, at most 8 s) and gives up after `max_create_attempts` failures in a row with a
    `SandboxUnavailableError` that carries the last create error as its cause; an error that
    retrying cannot fix (a wrong API key, a bad spec) is raised at once.
    """

    def __init__(
        self,
        spec: SandboxSpec,
        *,
        size: int = 2,
        connection: Connection | None = None,
        session_options: Mapping[str, Any] | None = None,
        max_create_attempts: int = 5,
    ) -> None:
        _validate.instance(spec, SandboxSpec, "spec", "a SandboxSpec")
        _validate.int_between(size, "size", 1, 64)
        _validate.int_at_least(max_create_attempts, "max_create_attempts", 1)
        self._spec = spec
        self._max_attempts = max_create_attempts
        self._streak = 0  # create failures in a row
        self._last_error: Exception | None = None
        self._size = size
        self._connection = connection or Connection()
        self._options = dict(session_options or {})
        self._ready: asyncio.Queue[AsyncSandboxSession] = asyncio.Queue()
        self._filling: set[asyncio.Task[None]] = set()
        self._waiting: list[AsyncSandboxSession] = []
        self._closed = False
        self.created = 0
        self.failures = 0

    def __repr__(self) -> str:
        return f"SandboxPool(size={self._size}, ready={self._ready.qsize()}, spec={self._spec!r})"

    @property
    def ready_count(self) -> int:
        return self._ready.qsize()

    @property
    def ready_ids(self) -> list[str]:
        """The ids of the sandboxes waiting in the pool."""
        return [s.id for s in self._waiting if s.id]

    def _refill(self) -> None:
        missing = self._size - self._ready.qsize() - len(self._filling)
        for _ in range(max(missing, 0)):
            task = asyncio.get_running_loop().create_task(self._make_one())
            self._filling.add(task)
            task.add_done_callback(self._filling.discard)

    async def _make_one(self) -> None:
        session = AsyncSandboxSession(self._spec, connection=self._connection, **self._options)
        try:
            await session.start()
        except Exception as exc:
            self.failures += 1
            self._streak += 1
            self._last_error = exc
            logger.warning("Could not create a pooled sandbox: %s", type(exc).__name__)
            with contextlib.suppress(Exception):
                await session.destroy()
            return
        if self._closed:
            await session.destroy()
            return
        self.created += 1
        self._streak = 0
        self._last_error = None
        self._waiting.append(session)
        await self._ready.put(session)

    async def start(self, *, wait: bool = True) -> None:
        """Begin filling the pool; with `wait`, return when it is full (or creates failed)."""
        if self._closed:
            raise ConfigurationError("This pool is closed.")
        self._refill()
        if wait and self._filling:
            await asyncio.gather(*list(self._filling), return_exceptions=True)

    async def acquire(self, *, timeout: float | None = None) -> AsyncSandboxSession:
        """A ready session (owned by the caller from now on); the pool refills behind it.

        Waits at most `timeout` seconds (TimeoutError), or, without one, until a sandbox is ready
        or creates have failed `max_create_attempts` times in a row (SandboxUnavailableError).
        """
        if self._closed:
            raise ConfigurationError("This pool is closed.")
        self._refill()
        async with asyncio.timeout(timeout):
            session = await self._next_ready()
        self._waiting.remove(session)
        self._refill()
        return session

    async def _next_ready(self) -> AsyncSandboxSession:
        while True:
            if not self._ready.empty():
                return self._ready.get_nowait()
            if not self._filling:
                self._give_up_if_hopeless()
                if self._streak:
                    pause = _BACKOFF_FIRST * 2 ** (self._streak - 1)
                    await asyncio.sleep(min(pause, _BACKOFF_MAX))
                self._refill()
            getter = asyncio.ensure_future(self._ready.get())
            try:
                await asyncio.wait({getter, *self._filling}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await getter
            if getter.done() and not getter.cancelled():
                return getter.result()

    def _give_up_if_hopeless(self) -> None:
        last = self._last_error
        if last is None:
            return
        # A wrong key or spec (ConfigurationError, AuthenticationError) fails the same each time.
        streak = self._streak
        if streak < self._max_attempts and not isinstance(last, ConfigurationError):
            return
        self._streak = 0  # a later acquire() starts over
        raise SandboxUnavailableError(
            f"Could not create a sandbox for the pool: {streak} create attempt(s) in a row failed, "
            f"the last with {type(last).__name__}: {last}. Check the server and the spec, then "
            "call acquire() again."
        ) from last

    async def aclose(self) -> None:
        """Stop refilling and destroy the sandboxes still waiting in the pool."""
        self._closed = True
        for task in list(self._filling):
            task.cancel()
        await asyncio.gather(*list(self._filling), return_exceptions=True)
        while not self._ready.empty():
            session = self._ready.get_nowait()
            self._waiting.remove(session)
            with contextlib.suppress(Exception):
                await session.destroy()

    async def __aenter__(self) -> SandboxPool:
        await self.start(wait=False)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
