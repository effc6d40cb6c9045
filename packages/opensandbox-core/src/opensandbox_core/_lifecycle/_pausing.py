"""Pausing and resuming a sandbox: the server requests and the waits behind
`SandboxLifecycle.pause_or_resume`.

A pause or resume is asked once and then waited for, by polling the sandbox's state, until the
deadline. A 409 answer counts as done when the sandbox already is in the state asked for (a
second pause of a paused sandbox). After a resume the sandbox's daemon must answer again
before the session uses it.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from opensandbox_core import _errors
from opensandbox_core._errors import SandboxUnavailableError

from . import _reach

if TYPE_CHECKING:
    from opensandbox.services.sandbox import Sandboxes

    from opensandbox_core._wire._execd import ExecdClient

__all__ = ["request", "state", "wait_for_daemon"]


async def state(sandboxes: Sandboxes, sandbox_id: str) -> str:
    """The sandbox's state as the server reports it, lower case ('' when unknown)."""
    with _errors.translated("read the sandbox's state", sandbox_id=sandbox_id):
        info = await sandboxes.get_sandbox_info(sandbox_id)
    return str(getattr(info.status, "state", "") or "").lower()


async def request(
    sandboxes: Sandboxes, sandbox_id: str, *, pause: bool, limit: float, deadline: float
) -> None:
    """Ask the server to pause (or resume) the sandbox and wait until it reports so, until
    `deadline` (monotonic; `limit` seconds after the caller began)."""
    verb = "pause" if pause else "resume"
    want = "paused" if pause else "running"
    call = sandboxes.pause_sandbox if pause else sandboxes.resume_sandbox
    try:
        await call(sandbox_id)
    except Exception as exc:
        if not _is_conflict(exc) or await state(sandboxes, sandbox_id) != want:
            with _errors.translated(f"{verb} the sandbox", sandbox_id=sandbox_id):
                raise
    while (now := await state(sandboxes, sandbox_id)) != want:
        if _errors.is_gone_state(now) or time.monotonic() >= deadline:
            raise SandboxUnavailableError(
                f"Sandbox {sandbox_id} did not become {want} within {limit:g} s after "
                f"the {verb} request (its state is {now or 'unknown'!r}). Check the "
                "server log.",
                sandbox_id=sandbox_id,
            )
        await asyncio.sleep(_reach.READY_POLL * 4)


async def wait_for_daemon(
    execd: ExecdClient, sandbox_id: str, *, limit: float, deadline: float
) -> None:
    """Wait until a resumed sandbox's execd answers again, until `deadline`."""
    while not await execd.ping(timeout=2.0):
        if time.monotonic() >= deadline:
            raise SandboxUnavailableError(
                f"Sandbox {sandbox_id} is running again but its execd daemon did not "
                f"answer within {limit:g} s of the resume request.",
                sandbox_id=sandbox_id,
            )
        await asyncio.sleep(_reach.READY_POLL)


def _is_conflict(exc: BaseException) -> bool:
    """Whether the server refused a request with 409 (e.g. pausing a paused sandbox)."""
    return getattr(exc, "status_code", None) == 409
