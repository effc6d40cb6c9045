"""Long-running processes: execd's native background mode, polled from a cursor.

A `BackgroundProcess` is a handle, not a connection: it holds only the sandbox session and the
execution id, so it can be re-created later (`session.background(id)`) by whoever knows the id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import CommandTimeoutError, ConfigurationError
from ._execd import ExecdError

if TYPE_CHECKING:
    from ._session import AsyncSandboxSession

__all__ = ["BackgroundProcess", "OutputChunk", "ProcessStatus"]

DEFAULT_MAX_CHUNK = 1024 * 1024


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
    """A command running in the background inside the sandbox (dev servers, watchers, jobs)."""

    def __init__(self, session: AsyncSandboxSession, execution_id: str) -> None:
        if not isinstance(execution_id, str) or not execution_id:
            raise ConfigurationError("execution_id must be a non-empty string.")
        self._session = session
        self.id = execution_id

    def __repr__(self) -> str:
        return f"BackgroundProcess(id={self.id!r}, sandbox={self._session.id!r})"

    async def status(self) -> ProcessStatus:
        clients, execd = await self._session._file_op()
        try:
            data = await execd.command_status(self.id)
        except Exception as exc:
            await self._session._fail(
                clients, exc, "read a background process's status", execd=execd
            )
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
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigurationError("max_bytes must be a positive int.")
        clients, execd = await self._session._file_op()
        try:
            text, next_cursor, truncated = await execd.command_logs(self.id, cursor, max_bytes)
        except Exception as exc:
            await self._session._fail(
                clients, exc, "read a background process's output", execd=execd
            )
        return OutputChunk(text=text, cursor=next_cursor, truncated=truncated)

    async def wait(self, timeout: float | None = None, *, poll: float = 0.2) -> int:
        """Wait until the process exits and return its exit code."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = await self.status()
            if not status.running:
                return status.exit_code if status.exit_code is not None else -1
            if deadline is not None and time.monotonic() >= deadline:
                raise CommandTimeoutError(
                    f"Background process {self.id} still runs after {timeout:g} s.",
                    timeout=timeout or 0.0,
                )
            await asyncio.sleep(poll)

    async def stop(self) -> None:
        """Stop the process and everything it started (its whole process group). Idempotent."""
        clients, execd = await self._session._file_op()
        try:
            await execd.interrupt(self.id)
        except ExecdError as exc:
            if exc.status == 404 or "not running" in exc.message:
                return  # already finished or already stopped
            await self._session._fail(clients, exc, "stop a background process", execd=execd)
        except Exception as exc:
            await self._session._fail(clients, exc, "stop a background process", execd=execd)


async def start_background(
    session: AsyncSandboxSession,
    body: Mapping[str, Any],
) -> BackgroundProcess:
    clients, execd = await session._file_op()
    execution_id: str | None = None
    try:
        async for event in execd.run_events({**body, "background": True}):
            if event.get("type") == "init":
                execution_id = str(event.get("text") or "") or None
                break
    except Exception as exc:
        await session._fail(clients, exc, "start a background process", execd=execd)
    if execution_id is None:
        from ._errors import ServerError

        raise ServerError(f"Sandbox {session.id} did not return an id for the background process.")
    return BackgroundProcess(session, execution_id)


def command_body(
    command: str | Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float | None,
) -> dict[str, Any]:
    from ._session import _command_text

    body: dict[str, Any] = {"command": _command_text(command), "cwd": cwd}
    if env:
        body["envs"] = dict(env)
    if timeout is not None:
        body["timeout"] = max(1, int(timeout * 1000))
    return body
