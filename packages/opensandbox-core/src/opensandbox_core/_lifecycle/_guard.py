"""A create that neither a failure nor a cancellation can leave half done.

Between the server making a sandbox and its answer naming it, a cancelled caller (Ctrl-C, a
cancelled task, a timeout around the call) would lose the only record of the sandbox: it runs on,
owned by nobody, until its idle lifetime ends. `CreateGuard.start()` runs the create in a task of
its own so that it cannot be cut off there, and then does what its owner asked:

- `keep=False` (the default; a caller that gets nothing back when the create does not finish):
  a create that fails deletes the sandbox it made; a cancelled one waits for the server's answer
  (at most `CANCEL_CLEANUP_WAIT` seconds) and deletes the sandbox it names, or the one carrying
  the session's owner tag when no answer came.
- `keep=True` (a caller that holds the session and decides later, as a workspace backend does):
  the create runs to its end, so the session knows its sandbox; then the cancellation goes on.

Used by `AsyncSandboxSession.__aenter__` and by both framework adapters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

from opensandbox_core import _validate
from opensandbox_core._metadata import OWNER_KEY
from opensandbox_core._portal import run_blocking

if TYPE_CHECKING:
    from opensandbox_core._session import AsyncSandboxSession

__all__ = ["CANCEL_CLEANUP_WAIT", "CreateGuard", "discard_sandbox", "run_to_completion"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

CANCEL_CLEANUP_WAIT: Final = 10.0
"""Seconds a cancelled create waits for the server to name the sandbox it is making."""


async def run_to_completion(start: Callable[[], Awaitable[_T]]) -> _T:
    """Await `start()` in its own task and see it finish even when the caller is cancelled
    meanwhile; the cancellation is raised once it has (its result or error is then dropped)."""
    task: asyncio.Future[_T] = asyncio.ensure_future(start())
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError as error:
            cancelled = error
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved
        raise cancelled
    return task.result()


async def discard_sandbox(session: AsyncSandboxSession, why: str) -> None:
    """Delete the sandbox `session` created, saying `why` in the log; never raises an error.

    A cancellation of the caller waits for the deletion and is raised after it. A session that
    did not create its sandbox only closes its clients: whoever created it owns it.
    """
    sandbox_id = session.id
    if sandbox_id is None or not session.owned:
        await run_to_completion(session.aclose)
        return
    logger.warning("Deleting sandbox %s, which %s", sandbox_id, why)
    try:
        await run_to_completion(session.destroy)
    except Exception as exc:
        logger.warning(
            "Could not delete sandbox %s (%s); it expires after its idle lifetime.",
            sandbox_id,
            type(exc).__name__,
        )


class CreateGuard:
    """Runs one session's create (or attach) so that it is never left half done.

    ```python
    guard = CreateGuard(session)
    sandbox_id = await guard.start()  # on failure or cancellation, nothing is left behind
    ```

    `start_blocking()` is the same for blocking code (Ctrl-C waits for the clean-up);
    `settle()` waits for the clean-up a cancelled `start()` began, for a caller whose
    cancellation did not wait.
    """

    def __init__(
        self, session: AsyncSandboxSession, *, keep: bool = False, wait: float = CANCEL_CLEANUP_WAIT
    ) -> None:
        self._session = session
        self._keep = keep
        self._wait = _validate.seconds(wait, "wait", minimum=0)
        self._cleanup: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        return f"CreateGuard({self._session!r}, keep={self._keep})"

    async def start(self) -> str:
        """`session.start()`, guarded as the class docstring says; returns the sandbox id."""
        session = self._session
        if session.id is not None:  # attaching (or started before): no sandbox can be lost
            try:
                return await session.start()
            except BaseException:
                if not self._keep:
                    await discard_sandbox(session, "did not become usable")
                raise
        if self._keep:  # the session keeps what the create made
            return await run_to_completion(session.start)
        task = asyncio.ensure_future(session.start())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._cleanup = asyncio.ensure_future(self._abandon(task))
            await asyncio.shield(self._cleanup)
            raise
        except BaseException:
            await discard_sandbox(session, "did not become usable")
            raise

    def start_blocking(self) -> str:
        """`start()` for blocking code, on the shared portal loop (`run_blocking`).

        Ctrl-C cannot wait inside the cancelled create, so it waits here for the clean-up
        (at most `wait` seconds for the server's answer, then the delete); a second Ctrl-C
        leaves at once, and the sandbox then expires after its idle lifetime.
        """
        try:
            return run_blocking(self.start())
        except KeyboardInterrupt:
            logger.warning(
                "Interrupted while creating a sandbox: deleting it once the server has answered "
                "(at most %g s; press Ctrl-C again to leave at once).",
                self._wait,
            )
            run_blocking(self.settle())
            raise

    async def settle(self) -> None:
        """Wait for the clean-up a cancelled `start()` began (on the loop it ran on)."""
        for _ in range(100):  # the cancellation reaches start() within a few loop turns
            if self._cleanup is not None:
                break
            await asyncio.sleep(0.01)
        if self._cleanup is not None:
            await asyncio.wait([self._cleanup])

    async def _abandon(self, task: asyncio.Future[str]) -> None:
        """After a cancelled create: wait for the server's answer, then delete the sandbox."""
        session = self._session
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._wait
        while session.id is None and not task.done() and loop.time() < deadline:
            await asyncio.wait([task], timeout=0.1)
        answered = task.done()
        if not answered:
            task.cancel()
            await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it
        if session.id is None and not answered:
            await self._find_lost(session)
        await discard_sandbox(session, "was being created when the caller was interrupted")

    @staticmethod
    async def _find_lost(session: AsyncSandboxSession) -> None:
        """Take on the sandbox of a create whose answer never came, found by the owner tag."""
        try:
            found = await session._life.find_by_tag()
        except Exception as exc:
            found = None
            logger.warning("Could not look for the interrupted sandbox (%s)", type(exc).__name__)
        if found is None:
            logger.warning(
                "Sandbox creation was interrupted before the server answered; if it finishes, "
                "the sandbox carries metadata %s=%s and expires after its idle lifetime.",
                OWNER_KEY,
                session.owner_token,
            )
            return
        session._life.take(found)
