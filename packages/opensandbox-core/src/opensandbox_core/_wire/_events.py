"""The wire layer's shared pieces: the one builder of execd command bodies, the event reader, and
what a facet needs to know about a reachable sandbox (`Context`).

HTTP itself is `_execd` (execd's endpoints) and output framing is `_framing`; this module holds
what every command path (foreground, background, the probe) builds and reads the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._execd import ExecdClient
from ._framing import Framing

__all__ = ["STALL_TIMEOUT", "Context", "command_body", "read_events", "timeout_ms"]

# Set while the session runs a command of its own for a file operation: such a command answers at
# once, so a stream silent for longer than this (execd's 3 s keep-alive plus the request timeout)
# is a stalled network, reported like a stalled HTTP request instead of waiting out the command's
# whole timeout.
STALL_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "STALL_TIMEOUT", default=None
)


@dataclass(frozen=True)
class Context:
    """A reachable sandbox as the command and file facets see it (one event loop's client)."""

    execd: ExecdClient
    framing: Framing
    working_dir: str
    output_dir: str | None  # where execd keeps each command's raw output; None: unknown


def timeout_ms(seconds: float) -> int:
    """execd's `timeout` field (milliseconds) for a limit in seconds: rounded up, at least 1,
    so a command never gets less time than asked for."""
    return max(1, math.ceil(seconds * 1000))


def command_body(
    command: str,
    *,
    cwd: str | None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    background: bool = False,
) -> dict[str, Any]:
    """The JSON body of execd's `POST /command` (the only place that builds one)."""
    body: dict[str, Any] = {"command": command}
    if cwd is not None:
        body["cwd"] = cwd
    if env:
        body["envs"] = dict(env)
    if timeout is not None:
        body["timeout"] = timeout_ms(timeout)
    if background:
        body["background"] = True
    return body


async def read_events(
    execd: ExecdClient,
    body: Mapping[str, Any],
    handle: Callable[[Mapping[str, Any]], Awaitable[None] | None],
    *,
    done: Callable[[], bool],
) -> None:
    """Feed a command's events to `handle` until `done()` (then close the stream) or its end.

    execd sends nothing after a command's completion (or error) event but keeps the stream open
    for a grace period (1 s by default), so the stream is closed at once instead of read on.
    """
    events = execd.run_events(body, read_timeout=STALL_TIMEOUT.get())
    try:
        while not done():
            event = await anext(events, None)
            if event is None:
                return
            pending = handle(event)
            if pending is not None and inspect.isawaitable(pending):
                await pending
    finally:
        with contextlib.suppress(Exception):
            await events.aclose()
