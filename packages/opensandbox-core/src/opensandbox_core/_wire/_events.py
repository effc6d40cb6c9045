"""The wire layer's shared pieces: the one builder of execd command bodies, the one reader of
a command's events (`CommandEvents`, `read_events`), and what a facet needs to know about a
reachable sandbox (`Context`).

HTTP itself is `_execd` (execd's endpoints) and output framing is `_framing`; this module holds
what every command path (foreground, background, the probe) builds and reads the same way.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ._execd import ExecdClient
from ._framing import Framing

__all__ = [
    "COMMAND_ID",
    "CommandEvents",
    "Context",
    "OutputSink",
    "command_body",
    "read_events",
    "timeout_ms",
]

COMMAND_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""The command ids that may name files (execd keeps a command's raw output in `<tmpdir>/<id>.*`)."""

OutputSink = Callable[[Literal["stdout", "stderr"], str], Awaitable[None] | None]
"""Where `CommandEvents` hands each output event's text (raw: undoing the framing is the
caller's), as it arrives; it may return an awaitable, which is awaited before the next event."""


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


@dataclass
class CommandEvents:
    """What one command's events have told so far: the one reader of execd's `/command` events
    (a foreground run, a background start and the probe all read theirs here).

    - `execution_id`: the id the `init` event gave (None until then, or when it was empty);
    - `events`: how many events arrived;
    - `exit_code`: 0 at `execution_complete`, N at a `CommandExecError` whose value is N;
    - `error`: an `error` event that is not an exit code (`ename: evalue`, or the value of a
      `CommandExecError` that is no number), at most 300 characters;
    - `failure`: any `error` event, as `ename: evalue` (a background start that fails).

    The stream is over (`done()`) at the completion or the first error event.
    """

    output: OutputSink | None = None
    execution_id: str | None = None
    events: int = 0
    exit_code: int | None = None
    error: str | None = None
    failure: str | None = None

    def done(self) -> bool:
        return self.exit_code is not None or self.failure is not None

    def handle(self, event: Mapping[str, Any]) -> Awaitable[None] | None:
        """Take one event; returns what `output` returned for an output event."""
        kind = event.get("type")
        self.events += 1
        if kind == "init":
            self.execution_id = str(event.get("text") or "") or None
        elif kind in ("stdout", "stderr"):
            if self.output is not None:
                return self.output(kind, str(event.get("text", "")))
        elif kind == "execution_complete":
            self.exit_code = 0
        elif kind == "error":
            error = event.get("error") or {}
            self.failure = f"{error.get('ename')}: {error.get('evalue')}"[:300]
            if error.get("ename") == "CommandExecError":
                try:
                    self.exit_code = int(str(error.get("evalue", "")).strip())
                except ValueError:
                    self.error = str(error.get("evalue", ""))[:300]
            else:
                self.error = self.failure
        return None


async def read_events(
    execd: ExecdClient,
    body: Mapping[str, Any],
    handle: Callable[[Mapping[str, Any]], Awaitable[None] | None],
    *,
    done: Callable[[], bool],
    read_timeout: float | None = None,
) -> None:
    """Feed a command's events to `handle` until `done()` (then close the stream) or its end;
    `read_timeout`: the longest silence allowed between two chunks (None: no limit).

    execd sends nothing after a command's completion (or error) event but keeps the stream open
    for a grace period (1 s by default), so the stream is closed at once instead of read on.
    """
    events = execd.run_events(body, read_timeout=read_timeout)
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
