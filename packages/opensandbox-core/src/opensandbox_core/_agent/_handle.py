"""`SessionHandle`: the lifecycle of one session's sandbox, blocking and async, for the backend
class of a framework adapter. The blocking methods run on the core's portal loop
(`run_blocking`), the async ones on the caller's. Whoever creates a sandbox owns it: `kill()`
deletes it only when the session created it (or with `force=True`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from opensandbox_core._portal import close_everywhere
from opensandbox_core._session import AsyncSandboxSession
from opensandbox_core._sync import run_blocking

__all__ = ["SessionHandle"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class SessionHandle:
    """Lifecycle methods over `self._session` (set by the subclass; no I/O until a call)."""

    _session: AsyncSandboxSession

    @staticmethod
    def _run(coro: Coroutine[Any, Any, T]) -> T:
        return run_blocking(coro)

    @property
    def owned(self) -> bool:
        """True when this handle's session created the sandbox (and so `kill()` deletes it)."""
        return self._session.owned

    @property
    def session(self) -> AsyncSandboxSession:
        """The opensandbox-core session behind this handle (same sandbox, same state)."""
        return self._session

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self._session.id!r}, owned={self._session.owned}, "
            f"connection={self._session.connection!r})"
        )

    def start(self) -> str:
        """Create or attach now if that has not happened yet; return the sandbox id."""
        return self._run(self._session.start())

    async def astart(self) -> str:
        """`start()` on the caller's event loop."""
        return await self._session.start()

    def pause(self) -> None:
        """Freeze the sandbox (processes, memory and files kept) until `resume()`.

        While paused, every operation raises `SandboxUnavailableError` saying to resume it; its
        idle lifetime keeps counting, so give a longer one to pause for long.
        """
        self._run(self._session.pause())

    async def apause(self) -> None:
        """`pause()` on the caller's event loop."""
        await self._session.pause()

    def resume(self) -> None:
        """Thaw a paused sandbox; returns once its daemon answers again."""
        self._run(self._session.resume())

    async def aresume(self) -> None:
        """`resume()` on the caller's event loop."""
        await self._session.resume()

    def kill(self, *, force: bool = False) -> None:
        """Delete the sandbox if this handle created it (or `force=True`); close connections.

        Idempotent. On a handle that attached, without `force`, the sandbox keeps running and
        only local connections are closed: the creator owns it.
        """
        self._run(self._akill(force=force))

    async def akill(self, *, force: bool = False) -> None:
        """`kill()` on the caller's event loop (also closes the blocking loop's connections)."""
        await self._akill(force=force)
        await asyncio.to_thread(run_blocking, self._session.aclose())

    async def _akill(self, *, force: bool) -> None:
        if self._session.owned or force:
            await self._session.destroy()
        else:
            logger.debug("Not deleting sandbox %s: this backend attached to it", self._session.id)
            await self._session.aclose()

    def close(self) -> None:
        """Close local connections. The sandbox keeps running; nothing else changes."""
        self._run(self._session.aclose())

    async def aclose(self) -> None:
        """`close()` for async code: closes this loop's and the blocking loop's connections."""
        await close_everywhere(self._session)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.akill()
