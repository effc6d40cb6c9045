"""Keeping a sandbox alive while it is in use.

A sandbox's lifetime (`SandboxSpec.lifetime`, `AsyncSandboxSession.set_lifetime`) is idle time:
the server deletes the sandbox that long after its last renewal. Every operation renews it as it
starts; `renewing()` also renews it while one long operation runs (a build that takes longer
than the lifetime), so only the time with nothing running counts. A process that dies stops
renewing, and the server then removes the sandbox after one lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Protocol

__all__ = ["Renewable", "renewal_interval", "renewing"]

logger = logging.getLogger(__name__)


def renewal_interval(lifetime: float) -> float:
    """How often a running operation renews a sandbox of `lifetime` seconds (a third of it)."""
    return max(1.0, lifetime / 3)


class Renewable(Protocol):
    """What `renewing` needs: the lifetime in seconds (None: none) and one renewal when due."""

    @property
    def lifetime(self) -> float | None: ...

    async def renew_once(self) -> None: ...


async def _renew_once(session: Renewable) -> None:
    try:
        await session.renew_once()
    except Exception as exc:
        # The operation itself reports a sandbox that is gone; renewing is best effort.
        logger.debug("renewing a sandbox failed (%s)", exc)


@contextlib.asynccontextmanager
async def renewing(session: Renewable) -> AsyncIterator[None]:
    """Renew the session's sandbox every third of its lifetime while the block runs.

    A timer, not a task, until the first renewal is due: a short command costs a few
    microseconds.
    """
    lifetime = session.lifetime
    if not lifetime:
        yield
        return
    loop = asyncio.get_running_loop()
    running: set[asyncio.Task[None]] = set()
    timer: asyncio.TimerHandle | None = None

    def due() -> None:
        nonlocal timer
        task = loop.create_task(_renew_once(session))
        running.add(task)
        task.add_done_callback(running.discard)
        current = session.lifetime
        timer = loop.call_later(renewal_interval(current), due) if current else None

    timer = loop.call_later(renewal_interval(lifetime), due)
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
        for task in running:
            task.cancel()
        if running:
            # Waits for the renewal to stop without swallowing a cancellation of the caller.
            await asyncio.wait(set(running))
