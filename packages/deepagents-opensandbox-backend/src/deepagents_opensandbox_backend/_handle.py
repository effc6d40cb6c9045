"""`BackendHandle`: the lifecycle methods of the seed's backend (`start`, `pause`, `resume`,
`kill`, `close`, `with`), blocking and async, over the backend's core session. The blocking
methods run on the core's portal loop (`twin`, `run_blocking`), the async ones on the caller's.
Whoever creates a sandbox owns it: `kill()` deletes it only when the session created it (or
with `force=True`)."""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Self

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import run_blocking, twin

__all__ = ["BackendHandle"]

logger = logging.getLogger(__name__)


class BackendHandle:
    """Lifecycle methods over `self._session` (set by the subclass; no I/O until a call)."""

    _session: AsyncSandboxSession

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

    async def astart(self) -> str:
        """`start()` on the caller's event loop."""
        return await self._session.start()

    async def apause(self) -> None:
        """`pause()` on the caller's event loop."""
        await self._session.pause()

    async def aresume(self) -> None:
        """`resume()` on the caller's event loop."""
        await self._session.resume()

    start = twin(
        astart,
        name="start",
        on_self=True,
        doc="Create or attach now if that has not happened yet; return the sandbox id.",
    )
    pause = twin(
        apause,
        name="pause",
        on_self=True,
        doc="""Freeze the sandbox (processes, memory and files kept) until `resume()`.

        While paused, every operation raises `SandboxUnavailableError` saying to resume it; its
        idle lifetime keeps counting, so give a longer one to pause for long.
        """,
    )
    resume = twin(
        aresume,
        name="resume",
        on_self=True,
        doc="Thaw a paused sandbox; returns once its daemon answers again.",
    )

    def kill(self, *, force: bool = False) -> None:
        """Delete the sandbox if this handle created it (or `force=True`); close connections.

        Idempotent. On a handle that attached, without `force`, the sandbox keeps running and
        only local connections are closed: the creator owns it.
        """
        run_blocking(self._akill(force=force))

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
        run_blocking(self._session.aclose())

    async def aclose(self) -> None:
        """`close()` for async code: closes this loop's and the blocking loop's connections."""
        await self._session.aclose()
        await asyncio.to_thread(run_blocking, self._session.aclose())

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
