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
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from opensandbox_core import _errors
from opensandbox_core._defaults import LIFETIME as DEFAULT_LIFETIME

if TYPE_CHECKING:
    from opensandbox.services.sandbox import Sandboxes

__all__ = ["Renewable", "Renewal", "renew_if_due", "renewal_interval", "renewing"]

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


@dataclass
class Renewal:
    """When the sandbox was last renewed (monotonic seconds)."""

    last: float = field(default_factory=time.monotonic)


async def renew_if_due(
    sandboxes: Sandboxes,
    sandbox_id: str,
    renewal: Renewal,
    *,
    lifetime: float | None,
    attached: bool,
) -> None:
    """Renew the sandbox to `lifetime` from now unless that was done a tenth of it ago.

    An `attached` session without a lifetime of its own keeps a sandbox that expires alive while
    it is used (its creator may have stopped renewing it): it extends the expiry to
    DEFAULT_LIFETIME from now, never shortens it, and never gives an expiry to a sandbox that has
    none. A failed renewal is logged, not raised, unless the sandbox is gone.
    """
    extend_only = not lifetime and attached
    if extend_only:
        lifetime = DEFAULT_LIFETIME
    if not lifetime:
        return
    now = time.monotonic()
    if now - renewal.last < max(1.0, lifetime / 10):
        return
    renewal.last = now
    target = datetime.now(UTC) + timedelta(seconds=lifetime)
    try:
        if extend_only:
            info = await sandboxes.get_sandbox_info(sandbox_id)
            current = getattr(info, "expires_at", None)
            if isinstance(current, datetime) and current.tzinfo is None:
                current = current.replace(tzinfo=UTC)
            if not isinstance(current, datetime) or current >= target:
                return
        await sandboxes.renew_sandbox_expiration(sandbox_id, target)
    except Exception as exc:
        if _errors.is_not_found(exc):
            raise _errors.sandbox_not_found(sandbox_id) from exc
        logger.warning("Could not renew sandbox %s (%s)", sandbox_id, type(exc).__name__)
