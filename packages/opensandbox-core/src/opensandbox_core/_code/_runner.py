"""One run in one kernel: the cell sent, execd's stream read to its end, the record read back,
and the faults: the timeout (interrupt, then what the run printed), cancellation (interrupt),
a dead kernel (seen by its process, within seconds) and execd's refusals.

Reading stops only when execd ends the stream, never at `execution_complete` (execd sends it
at the first idle status of the kernel, often before the run's output). The record the kernel
wrote (`_kernel`) then gives the exact outcome; when there is none (a kernel the recorder is not
in, another language), the events do.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from opensandbox_core._commands._run import CommandRunner
from opensandbox_core._errors import ExecdError, ServerError
from opensandbox_core._wire._code import code_events, interrupt_code
from opensandbox_core._wire._events import Context

from . import _kernel
from ._kernel import KernelInfo, Record
from ._model import CodeError, Execution, StreamState, from_record

__all__ = ["Kernel", "Outcome", "RunFailed", "execute", "fetch", "prepare", "stream"]

logger = logging.getLogger(__name__)

CodeOutput = Callable[[Literal["stdout", "stderr"], str], Awaitable[None] | None]

FIRST_CHECK: Final = 1.5  # seconds into a run before the kernel's process is first looked at
CHECK_EVERY: Final = 2.0
_AFTER_INTERRUPT: Final = 5.0  # how long an interrupted run may take to end
# The record is written before the kernel's reply (`post_run_cell`), so it is missing at the
# stream's end only when execd ended the stream early: a cell queued behind one still being
# interrupted ran later than execd's `execution_complete` (CI saw 1.6 s at load 6). Up to ~10 s.
_RECORD_WAITS: Final = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 3.2)
_SETUP_LIMIT: Final = 120.0  # a new kernel's first cell (its start; bash_kernel's takes ~3 s)
RECORD_DIR: Final = "/tmp/.opensandbox-code"  # noqa: S108 - inside the sandbox, random names


@dataclass
class Kernel:
    """What the session knows of one context: its kernel's language, the directory it was made
    with, and once set up by this session, its process (`info`)."""

    id: str
    language: str
    cwd: str | None = None
    info: KernelInfo | None = None
    prepared: bool = False
    default: bool = False

    @property
    def recorded(self) -> bool:
        return self.language in ("python", "bash")

    def cell(self, code: str, record_path: str) -> str:
        if self.language == "python":
            return _kernel.python_cell(code, record_path)
        if self.language == "bash":
            return _kernel.bash_cell(code, record_path)
        return code

    def parse(self, data: bytes) -> Record | None:
        return (_kernel.parse_python if self.language == "python" else _kernel.parse_bash)(data)


class RunFailed(Exception):
    """execd refused the run: `refusal` is its message (busy, context not found)."""

    def __init__(self, refusal: str, error: ExecdError | None = None) -> None:
        super().__init__(refusal)
        self.refusal = refusal
        self.error = error


@dataclass
class Outcome:
    """How a run ended: `execution`, and whether it ran out of time or its kernel died."""

    execution: Execution
    timed_out: bool = False
    died: bool = False
    interrupted: bool = False


async def stream(
    ctx: Context, body: Mapping[str, Any], state: StreamState, on_output: CodeOutput | None
) -> None:
    """Read one run's events into `state` until execd ends the stream."""
    try:
        async for event in code_events(ctx.execd, body):
            text = state.take(event)
            if text is not None and on_output is not None:
                pending = on_output("stderr" if event.get("type") == "stderr" else "stdout", text)
                if pending is not None and inspect.isawaitable(pending):
                    await pending
    except ExecdError as exc:
        if exc.from_execd and exc.status == 500 and "context not found" in exc.message.lower():
            raise RunFailed("context not found", exc) from None
        raise
    if state.refusal is not None:
        raise RunFailed(state.refusal)


async def fetch(
    ctx: Context, path: str, *, waits: tuple[float, ...] = _RECORD_WAITS
) -> bytes | None:
    """A file the kernel writes at the end of a cell, read once it is there (the stream can end
    a moment before the kernel wrote it); None when it never came. It is deleted afterwards."""
    for wait in waits:
        if wait:
            await asyncio.sleep(wait)
        data = await _download(ctx, path)
        if data is not None:
            ctx.execd.discard_later([path])
            return data
    return None


async def _download(ctx: Context, path: str) -> bytes | None:
    try:
        parts = [chunk async for chunk in ctx.execd.download(path)]
    except ExecdError as exc:
        if exc.status == 404 or "not found" in exc.message.lower():
            return None
        raise
    return b"".join(parts)


async def prepare(ctx: Context, kernel: Kernel, sandbox_id: str | None) -> None:
    """The setup cell (`_kernel`: recorder, cwd, the kernel's process); for a default context
    (no id yet) it also makes the context and learns its id. execd's refusals are `RunFailed`."""
    info_path = f"{RECORD_DIR}/{uuid.uuid4().hex}.info"
    if kernel.language == "python":
        code: str | None = _kernel.python_setup(info_path, kernel.cwd)
    elif kernel.language == "bash":
        code = _kernel.bash_setup(info_path, kernel.cwd)
    else:
        code = None
    if code is None and kernel.id:
        kernel.prepared = True
        return
    context = {"language": kernel.language} | ({"id": kernel.id} if kernel.id else {})
    state = StreamState()
    try:
        async with asyncio.timeout(_SETUP_LIMIT):
            await stream(ctx, {"code": code or " ", "context": context}, state, None)
    except TimeoutError:
        raise ServerError(
            f"The {kernel.language} kernel of sandbox {sandbox_id} did not run its first cell "
            f"within {_SETUP_LIMIT:g} s.",
            retryable=True,
        ) from None
    kernel.id = kernel.id or state.context_id or ""
    if not kernel.id:
        raise ServerError("execd ran code in a default context but sent no context id.")
    if state.error is not None:
        raise ServerError(
            f"Could not set up code context {kernel.id} in sandbox {sandbox_id} (cwd "
            f"{kernel.cwd!r}): {state.error.name}: {state.error.value}"
        )
    data = None if code is None else await fetch(ctx, info_path)
    kernel.info = None if data is None else _kernel.parse_info(data)
    kernel.prepared = True


async def execute(
    ctx: Context,
    commands: CommandRunner,
    kernel: Kernel,
    code: str,
    *,
    limit: float | None,
    on_output: CodeOutput | None,
) -> Outcome:
    """Run `code` in `kernel` (its turn is the caller's) and return how it ended."""
    record_path = f"{RECORD_DIR}/{uuid.uuid4().hex}"
    body = {
        "code": kernel.cell(code, record_path),
        "context": {"id": kernel.id, "language": kernel.language},
    }
    state = StreamState()
    task = asyncio.get_running_loop().create_task(stream(ctx, body, state, on_output))
    try:
        ended = await _watch(task, commands, kernel, limit)
    except asyncio.CancelledError:
        # The interrupted run is waited for (bounded; shielded), so that the context is free
        # when the caller's next run comes: execd would answer it "busy" meanwhile.
        await _stop(ctx, kernel.id, task, wait=_AFTER_INTERRUPT)
        raise
    if ended == "died":
        await _stop(ctx, None, task, wait=0.0)
        return Outcome(_died(state.execution()), died=True)
    if ended == "timeout":
        await _stop(ctx, kernel.id, task, wait=_AFTER_INTERRUPT)
    else:
        task.result()  # execd's refusal or a failed read is raised here
    execution = await _result(ctx, kernel, record_path, state, complete=ended != "timeout")
    return Outcome(execution, timed_out=ended == "timeout")


async def _watch(
    task: asyncio.Task[None], commands: CommandRunner, kernel: Kernel, limit: float | None
) -> str:
    """Wait for the stream's end: "ended", or "timeout", or "died" (the kernel's process is
    gone while the run goes on: execd's stream would never end)."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    deadline = None if limit is None else now + limit
    check = now + FIRST_CHECK if kernel.info is not None else None
    while not task.done():
        until = min(t for t in (deadline, check, now + 3600.0) if t is not None)
        await asyncio.wait({task}, timeout=max(0.0, until - loop.time()))
        if task.done():
            break
        now = loop.time()
        if deadline is not None and now >= deadline:
            return "timeout"
        if check is not None and now >= check and kernel.info is not None:
            if not await _alive(commands, kernel.info) and not task.done():
                return "died"
            check = loop.time() + CHECK_EVERY
    return "ended"


async def _alive(commands: CommandRunner, info: KernelInfo) -> bool:
    try:
        result = await commands.run(
            _kernel.alive_script(info.pid, info.started),
            cwd="/",
            env=None,
            timeout=30.0,
            on_output=None,
            max_output=None,
            plain_lines=True,
        )
    except Exception as exc:  # a check that fails says nothing: the run goes on
        logger.debug("could not check a kernel's process (%s)", type(exc).__name__)
        return True
    return result.stdout.strip() != "dead"


async def _stop(
    ctx: Context, context_id: str | None, task: asyncio.Task[None], *, wait: float
) -> None:
    """Interrupt the kernel (when `context_id`), give the run `wait` seconds to end, then stop
    reading its stream. Never raises; shielded from the caller's cancellation."""

    async def stop() -> None:
        if context_id is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10.0):
                    await interrupt_code(ctx.execd, context_id)
        if wait:
            await asyncio.wait({task}, timeout=wait)
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task

    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(asyncio.ensure_future(stop()))


async def _result(
    ctx: Context, kernel: Kernel, record_path: str, state: StreamState, *, complete: bool
) -> Execution:
    """The run's execution: from its record when the kernel wrote one, else from the events."""
    if not kernel.recorded:
        return state.execution()
    data = await fetch(ctx, record_path, waits=_RECORD_WAITS if complete else (0.0, 0.2, 0.5))
    record = None if data is None else kernel.parse(data)
    if record is None:
        kernel.prepared = False  # the recorder is gone (a restarted kernel): set it up again
        logger.debug("no record of a run in context %s: the events are used", kernel.id)
        return state.execution()
    execution = from_record(record)
    if execution.execution_count is None and state.count is not None:
        execution = replace(execution, execution_count=state.count)
    return execution


def _died(seen: Execution) -> Execution:
    error = CodeError(
        "KernelDied",
        "The kernel's process ended while the code ran (os._exit, a crash, out of memory); "
        "its state is lost. The context was replaced by a new kernel.",
        "",
    )
    return replace(seen, error=error)
