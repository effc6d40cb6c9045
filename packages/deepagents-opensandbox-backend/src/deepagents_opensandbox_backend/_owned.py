"""Creating a backend's own sandbox so that a failed or interrupted create leaks nothing.

If the sandbox was created but never became usable, it is destroyed before the error is
raised. Ctrl-C or a cancellation while the server is still answering waits for the answer (at
most `CANCEL_CLEANUP_WAIT`) and deletes the sandbox it names; an answer that never came is
looked for by the session's owner tag. Verified live with a proxy holding the answer back
(`tests/live/deepagents_backend/test_deepagents_outlive.py`).
"""

from __future__ import annotations

import asyncio
import logging

from opensandbox_core import OWNER_KEY, AsyncSandboxSession, destroy_sandbox, list_sandboxes

__all__ = ["CANCEL_CLEANUP_WAIT", "OwnedCreate"]

logger = logging.getLogger(__name__)

CANCEL_CLEANUP_WAIT = 10.0
"""Seconds an interrupted `create()` waits for the server to name the sandbox it is making."""


class OwnedCreate:
    """Creates the sandbox of one session, and cleans up after a create that did not finish."""

    def __init__(self, session: AsyncSandboxSession) -> None:
        self._session = session
        self._cleanup: asyncio.Future[None] | None = None

    async def run(self) -> None:
        """Create the sandbox; on failure or interruption, delete whatever was created.

        The create runs in a task of its own, so Ctrl-C (KeyboardInterrupt in `create()`, which
        cancels this coroutine) or a cancelled `acreate()` cannot cut it off between the server
        making the sandbox and the answer naming it: the answer is awaited (up to
        `CANCEL_CLEANUP_WAIT` seconds), the sandbox deleted, and the cancellation re-raised.
        """
        task = asyncio.ensure_future(self._session.start())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            self._cleanup = asyncio.ensure_future(self._abandon(task))
            await asyncio.shield(self._cleanup)
            raise
        except BaseException:
            await self.discard("did not become usable")
            raise

    async def settle(self) -> None:
        """Wait for the cleanup that an interrupted create started (on the same loop)."""
        for _ in range(100):
            if self._cleanup is not None:
                break
            await asyncio.sleep(0.01)
        if self._cleanup is not None:
            await asyncio.wait([self._cleanup])

    async def _abandon(self, task: asyncio.Future[str]) -> None:
        """After a cancelled create: wait for the server's answer, then delete the sandbox."""
        session = self._session
        deadline = asyncio.get_running_loop().time() + CANCEL_CLEANUP_WAIT
        while session.id is None and not task.done():
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.wait([task], timeout=0.1)
        answered = task.done()
        if not answered:
            task.cancel()
            await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it
        if session.id is None and answered:
            await session.aclose()
            return  # the server refused the create: nothing exists
        if session.id is None:
            found = await self._find_created()
            if found is None:
                logger.warning(
                    "Sandbox creation was interrupted before the server answered; if it finishes, "
                    "the sandbox carries metadata %s=%s and expires after its idle lifetime.",
                    OWNER_KEY,
                    session.owner_token,
                )
                return
            await self._destroy_by_id(found)
            return
        await self.discard("was being created when the caller was interrupted")

    async def _find_created(self) -> str | None:
        """The id of a sandbox this session created whose answer never arrived."""
        try:
            found = await list_sandboxes(
                self._session.connection, metadata={OWNER_KEY: self._session.owner_token}
            )
        except Exception as exc:
            logger.warning("Could not look for the interrupted sandbox (%s)", type(exc).__name__)
            return None
        return found[0].id if found else None

    async def _destroy_by_id(self, sandbox_id: str) -> None:
        logger.warning("Deleting sandbox %s, whose creation was interrupted", sandbox_id)
        try:
            await destroy_sandbox(sandbox_id, self._session.connection)
        except Exception as exc:
            logger.warning("Could not delete sandbox %s (%s)", sandbox_id, type(exc).__name__)

    async def discard(self, why: str) -> None:
        """Delete the sandbox of a create that failed; never raises."""
        sandbox_id = self._session.id
        if sandbox_id is None:
            await self._session.aclose()
            return
        logger.warning("Deleting sandbox %s, which %s", sandbox_id, why)
        try:
            await self._session.destroy()
        except Exception as exc:
            logger.warning("Could not delete sandbox %s (%s)", sandbox_id, type(exc).__name__)
