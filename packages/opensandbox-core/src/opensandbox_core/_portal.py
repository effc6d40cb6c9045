"""The portal: one event loop in a daemon thread, shared by every blocking caller of the
process, that blocking code submits coroutines to and waits on (`run_blocking`).

Ctrl-C (KeyboardInterrupt) while waiting cancels the coroutine, gives the cancellation a
moment to stop a remote command, then re-raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from opensandbox_core._session import AsyncSandboxSession

__all__ = ["close_everywhere", "portal", "run_blocking"]

T = TypeVar("T")


class _Portal:
    """A background event loop that blocking callers submit coroutines to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def runner() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(
                    target=runner, name="opensandbox-core-portal", daemon=True
                )
                thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], *, cancel_wait: float = 15.0) -> T:
        loop = self.loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError(
                "A blocking SandboxSession method was called from its own portal loop; "
                "use AsyncSandboxSession in async code."
            )
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            # Give the cancellation a moment to stop the remote command.
            with contextlib.suppress(BaseException):
                future.result(timeout=cancel_wait)
            raise
        except concurrent.futures.CancelledError:
            raise


portal = _Portal()
"""The process's one portal."""


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the shared portal loop and wait for it (for adapters' sync methods)."""
    return portal.run(coro)


async def close_everywhere(session: AsyncSandboxSession) -> None:
    """Close a session's connections on this event loop and on the portal's (a session used
    from async and from blocking code holds HTTP clients on both)."""
    await session.aclose()
    await asyncio.to_thread(run_blocking, session.aclose())
