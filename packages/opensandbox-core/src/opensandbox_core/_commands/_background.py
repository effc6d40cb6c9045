"""Long-running processes: execd's native background mode, polled from a cursor.

A `BackgroundProcess` is a handle, not a connection: it holds only its session's lifecycle facet
(the sandbox, its clients and error boundary) and the execution id, so it can be re-created later
(`session.commands.background(id)`) by whoever knows the id.

What execd does with a background command, and what this module does about it:

- execd announces the command's id before the process has started and registers it only after
  the start, so a status, output or stop call made right after the announcement can be told
  "command not found" (real v1.0.19: every time at 0 ms, found after about 5 ms).
  `start_background` returns only once execd knows the process: the handle is usable at once.
- When the main process exits, execd kills its whole process group with SIGKILL: children
  started with `cmd &` or `nohup cmd &` die with it. A server should therefore be the main
  process itself (`exec server`, or the command line that runs it), which lives as long as the
  handle's process. A child that must outlive the main process has to leave the group before
  the main process exits: `BackgroundProcess.keep_running(command)` builds a command line that
  starts `command` with `setsid` and waits until it has left (see docs/core.md).
- execd writes the combined output to `<tmpdir>/<id>.output` and never deletes it.
  `BackgroundProcess.discard()` stops the process and deletes that file once its output is no
  longer wanted.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from opensandbox_core import _validate
from opensandbox_core._errors import CommandTimeoutError, ConfigurationError, ServerError
from opensandbox_core._wire._events import CommandEvents, read_events
from opensandbox_core._wire._execd import ExecdError

from ._run import Lifecycle

__all__ = ["BackgroundProcess", "OutputChunk", "ProcessStatus", "SessionLike"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_CHUNK = 1024 * 1024
_REGISTRATION_BUDGET = 5.0
"""Seconds `start_background` waits for execd to register a started process."""


class SessionLike(Protocol):
    """What a handle is built on: an `AsyncSandboxSession`, whose lifecycle facet it keeps."""

    @property
    def _life(self) -> Lifecycle: ...


@dataclass(frozen=True)
class ProcessStatus:
    """The state of a background process: `exit_code` is None while it runs."""

    running: bool
    exit_code: int | None
    error: str | None = None


@dataclass(frozen=True)
class OutputChunk:
    """Output read from a cursor: pass `cursor` to the next `read_output` to continue.

    `truncated` says that more than `max_bytes` arrived since the previous cursor and the excess
    was skipped (the client keeps memory bounded however much the process prints).
    """

    text: str
    cursor: int | None
    truncated: bool = False


class BackgroundProcess:
    """A command running in the background inside the sandbox (dev servers, watchers, jobs).

    When its main process exits, execd kills the whole process group (`cmd &` and `nohup cmd &`
    children too); `keep_running` builds a command line whose child survives that.
    """

    def __init__(self, session: SessionLike, execution_id: str) -> None:
        _validate.non_empty_string(execution_id, "execution_id")
        try:
            self._facet: Lifecycle | None = session._life
        except AttributeError:
            self._facet = None  # not a session: using the handle says so (`_life`)
        self.id = execution_id

    def __repr__(self) -> str:
        sandbox = None if self._facet is None else self._facet.sandbox_id
        return f"BackgroundProcess(id={self.id!r}, sandbox={sandbox!r})"

    @property
    def _life(self) -> Lifecycle:
        life = self._facet
        if life is None:
            raise ConfigurationError(
                "This BackgroundProcess was not built on an AsyncSandboxSession; get handles "
                "from session.commands.start_background(...) or session.commands.background(id)."
            )
        return life

    @staticmethod
    def keep_running(command: str, *, log: str = "/dev/null") -> str:
        """A shell command line that starts `command` (a shell line) in a session of its own,
        with its output in `log`, and returns once it has left the caller's process group.

        execd kills a background main process's whole process group when that process exits,
        so `cmd &` and `nohup cmd &` die with it; what `keep_running` starts survives it (and
        survives `stop()` of the handle that started it: stop it yourself, e.g. by its pid,
        which `$!` holds after the line). Use it inside `start_background` or `run`:
        `await session.commands.run(BackgroundProcess.keep_running("python3 -m http.server 8000"))`.
        """
        _validate.keep_running(command, log)
        return (
            f"setsid sh -c {shlex.quote(command)} >{shlex.quote(log)} 2>&1 </dev/null & "
            'until [ ! -e /proc/$! ] || [ "$(cut -d\' \' -f6 /proc/$!/stat)" = "$!" ]; '
            "do sleep 0.01; done"
        )

    async def status(self) -> ProcessStatus:
        life = self._life
        execd = (await life.context()).execd
        try:
            data = await execd.command_status(self.id)
        except Exception as exc:
            await life.fail(exc, "read a background process's status", execd=execd)
        exit_code = data.get("exit_code")
        running = bool(data.get("running"))
        return ProcessStatus(
            running=running,
            exit_code=None if running or exit_code is None else int(exit_code),
            error=str(data["error"]) if data.get("error") else None,
        )

    async def read_output(
        self, cursor: int | None = None, *, max_bytes: int = DEFAULT_MAX_CHUNK
    ) -> OutputChunk:
        """Output (stdout and stderr, combined as execd records it) after `cursor`."""
        _validate.positive_int(max_bytes, "max_bytes")
        life = self._life
        execd = (await life.context()).execd
        try:
            text, next_cursor, truncated = await execd.command_logs(self.id, cursor, max_bytes)
        except Exception as exc:
            await life.fail(exc, "read a background process's output", execd=execd)
        return OutputChunk(text=text, cursor=next_cursor, truncated=truncated)

    async def wait(self, timeout: float | None = None, *, poll: float = 0.2) -> int | None:
        """Wait until the process exits and return its exit code (None: it ended, but execd
        gives no exit code, as a terminal's `wait` says)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = await self.status()
            if not status.running:
                return status.exit_code
            if deadline is not None and time.monotonic() >= deadline:
                raise CommandTimeoutError(
                    f"Background process {self.id} still runs after {timeout:g} s.",
                    timeout=timeout or 0.0,
                )
            await asyncio.sleep(poll)

    async def stop(self) -> None:
        """Stop the process and everything it started (its whole process group). Idempotent."""
        life = self._life
        execd = (await life.context()).execd
        try:
            await execd.interrupt(self.id)
        except ExecdError as exc:
            if exc.status == 404 or "not running" in exc.message:
                return  # already finished or already stopped
            await life.fail(exc, "stop a background process", execd=execd)
        except Exception as exc:
            await life.fail(exc, "stop a background process", execd=execd)

    async def discard(self) -> None:
        """Stop the process if it still runs and delete the output file execd keeps for it
        (`<tmpdir>/<id>.output`, never deleted by execd). Afterwards `read_output` fails: call
        it when the output is no longer wanted. Idempotent; a no-op for the file where the
        sandbox's temp dir is unknown."""
        await self.stop()
        ctx = await self._life.context()
        execd, directory = ctx.execd, ctx.output_dir
        if directory is None or "/" in self.id or self.id in ("", ".", ".."):
            return
        deadline = time.monotonic() + 3.5  # stop = SIGTERM, then SIGKILL after 3 s
        while time.monotonic() < deadline:
            try:
                if not (await self.status()).running:
                    break
            except Exception:
                break
            await asyncio.sleep(0.05)
        await execd.discard_files([posixpath.join(directory, self.id + ".output")])


def _not_registered(exc: ExecdError) -> bool:
    """execd's answer for a background command it announced but has not registered yet."""
    return exc.status == 404 and "command not found" in exc.message


async def start_background(session: SessionLike, body: Mapping[str, Any]) -> BackgroundProcess:
    """Start a background command (`body` from `CommandRunner.prepare`) and return its
    handle once execd has registered it.

    The stream is read until its completion event (execd sends it right after starting the
    process) and closed without waiting for execd's one-second hold; then the status is asked
    until execd stops answering "command not found" (a few ms), at most `_REGISTRATION_BUDGET`.
    """
    life = session._life
    execd = (await life.context()).execd
    stream = CommandEvents()
    try:
        async with asyncio.timeout(_REGISTRATION_BUDGET * 6):
            await read_events(execd, body, stream.handle, done=stream.done)
    except Exception as exc:
        await life.fail(exc, "start a background process", execd=execd)
    execution_id = stream.execution_id
    if execution_id is None:
        raise ServerError(
            f"Sandbox {life.sandbox_id} did not return an id for the background process."
        )
    if stream.failure is not None:
        raise ServerError(
            f"The background process could not start in sandbox {life.sandbox_id}: {stream.failure}"
        )
    deadline = time.monotonic() + _REGISTRATION_BUDGET
    delay = 0.002
    attempts = 0
    while True:
        attempts += 1
        try:
            await execd.command_status(execution_id)
            break
        except ExecdError as exc:
            if not _not_registered(exc) or time.monotonic() >= deadline:
                await life.fail(exc, "start a background process", execd=execd)
        except Exception as exc:
            await life.fail(exc, "start a background process", execd=execd)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    if attempts > 1:
        logger.debug(
            "background command %s registered after %d status calls", execution_id, attempts
        )
    return BackgroundProcess(session, execution_id)
