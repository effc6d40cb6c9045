"""The commands facet: `run` (events, exact output, timeout and cancellation), `interrupt`, and
starting background processes, on top of the lifecycle's small interface (`Lifecycle`).

It never reaches into the session: everything it needs from the lifecycle (a reachable sandbox,
the error boundary for a failed call, renewal while a command runs) comes through the
`Lifecycle` protocol, which `_lifecycle.SandboxLifecycle` implements. A `cwd` is resolved like
any path of the files facet (`_files._paths.resolve`, pure).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NoReturn, Protocol

import httpx

from opensandbox_core import _validate
from opensandbox_core._defaults import _Default
from opensandbox_core._errors import (
    CommandTimeoutError,
    ServerError,
    new_path_error,
    os_error,
    path_error,
)
from opensandbox_core._files import _fallback
from opensandbox_core._files._paths import resolve
from opensandbox_core._lifecycle._lifetime import renewing
from opensandbox_core._types import CommandResult
from opensandbox_core._wire._events import CommandEvents, Context, read_events
from opensandbox_core._wire._execd import ExecdClient, ExecdError
from opensandbox_core._wire._framing import Framing, OutputBuffer, rebuild

from ._capture import CAPTURE_ENV, Capture
from ._output import Cleanup, collect, leftover_files
from ._request import CommandRequest

__all__ = ["CommandRunner", "Lifecycle", "OutputCallback"]

logger = logging.getLogger(__name__)

OutputCallback = Callable[[Literal["stdout", "stderr"], str], Awaitable[None] | None]


_MISSING_CWD: Final = "working directory does not exist"


class Lifecycle(Protocol):
    """What the commands (and files) facets need from the lifecycle facet."""

    @property
    def sandbox_id(self) -> str | None: ...

    @property
    def lifetime(self) -> float | None: ...

    @property
    def stall_timeout(self) -> float: ...

    async def context(self) -> Context: ...

    async def fail(
        self,
        exc: BaseException,
        action: str,
        *,
        execd: ExecdClient | None = None,
        path: str | None = None,
        detail: str | None = None,
    ) -> NoReturn: ...

    async def renew_once(self) -> None: ...


@dataclass
class _RunState:
    """What a running command's events have told so far (`stream`, the one event reader),
    with its output rebuilt into the two buffers as it arrives."""

    framing: Framing
    out: OutputBuffer
    err: OutputBuffer
    on_output: OutputCallback | None = None
    capture: Capture | None = None
    cleanup: Cleanup | None = None
    sandbox_id: str | None = None
    stream: CommandEvents = field(init=False)

    def __post_init__(self) -> None:
        self.stream = CommandEvents(output=self._output)

    @property
    def execution_id(self) -> str | None:
        return self.stream.execution_id

    def _output(self, kind: Literal["stdout", "stderr"], text: str) -> Awaitable[None] | None:
        piece = rebuild(self.framing, text)
        (self.out if kind == "stdout" else self.err).add(piece)
        if self.on_output is not None:
            return self.on_output(kind, piece)
        return None

    def rebuilt(self) -> tuple[str, str, bool]:
        return self.out.text(), self.err.text(), self.out.truncated or self.err.truncated

    def leftovers(self, ctx: Context) -> list[str]:
        return leftover_files(ctx, self.execution_id, self.capture, self.cleanup)

    def discard_leftovers(self, ctx: Context) -> None:
        """Delete, in the background, every file the command left (nothing to do: no request)."""
        leftovers = self.leftovers(ctx)
        if leftovers:
            ctx.execd.discard_later(leftovers, after=self.cleanup.after if self.cleanup else None)


class CommandRunner:
    """Runs commands in the lifecycle's sandbox with the session's defaults."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        *,
        env: Mapping[str, str],
        default_timeout: float | None,
        max_output: int,
    ) -> None:
        self._life = lifecycle
        self._env = dict(env)
        self._timeout_default = default_timeout
        self._max_output = max_output

    @property
    def default_timeout(self) -> float | None:
        return self._timeout_default

    def limit(self, timeout: float | _Default | None) -> float | None:
        """`timeout`, or the session's default command timeout when it is `DEFAULT`."""
        return self._timeout_default if isinstance(timeout, _Default) else timeout

    @property
    def max_output(self) -> int:
        return self._max_output

    # -- run ----------------------------------------------------------------------------------
    async def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str] | None,
        timeout: float | None,
        on_output: OutputCallback | None,
        max_output: int | None,
        plain_lines: bool,
        read_timeout: float | None = None,
        cleanup: Cleanup | None = None,
    ) -> CommandResult:
        """`session.commands.run` (`Commands.run`); `timeout` is already the effective limit.

        `read_timeout`: the longest silence allowed on the event stream (None: as long as the
        command may run); file commands pass the lifecycle's `stall_timeout`. `cleanup`: files
        of the caller's deleted with the command's own (`_output.Cleanup`)."""
        cap = _validate.output_cap(self._max_output if max_output is None else max_output)
        request = await self.prepare(command, cwd=cwd, env=env, timeout=timeout)
        ctx, workdir, limit = request.ctx, request.workdir, request.limit
        streamed = on_output is not None
        capture = _capture_for(ctx, request.env, streamed=streamed, plain_lines=plain_lines)
        if capture is not None:
            request = request.captured(capture)
        body = request.body()
        state = _RunState(
            ctx.framing,
            OutputBuffer(cap),
            OutputBuffer(cap),
            on_output,
            capture,
            cleanup,
            self._life.sandbox_id,
        )
        started = time.monotonic()
        where = cwd if cwd is not None else workdir
        await self._stream(ctx, body, state, limit, cap, where=where, read_timeout=read_timeout)
        elapsed = time.monotonic() - started
        exit_code = await self._exit_code(ctx, state, workdir)
        try:
            stdout, stderr, truncated = await self._final_output(ctx, state, cap, plain_lines)
        except Exception as exc:
            await self._life.fail(exc, "read a command's output", execd=ctx.execd)
        if limit is not None and elapsed >= limit * 0.98 and exit_code in (-1, 137, 143):
            raise CommandTimeoutError(
                f"Command timed out after {limit:g} s and was stopped.",
                timeout=limit,
                stdout=stdout,
                stderr=stderr,
                truncated=truncated,
            )
        return CommandResult(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            truncated=truncated,
            duration=elapsed,
            execution_id=state.execution_id,
        )

    async def _stream(
        self,
        ctx: Context,
        body: Mapping[str, Any],
        state: _RunState,
        limit: float | None,
        cap: int,
        *,
        where: str,
        read_timeout: float | None,
    ) -> None:
        """Read the command's events until it ends; on timeout or cancellation stop it."""
        grace = None if limit is None else limit + min(10.0, 2.0 + limit * 0.1)
        try:
            async with asyncio.timeout(grace), renewing(self._life):
                # Reading stops at the completion (or error) event: execd holds the stream open
                # for a second after it, and sends nothing more.
                await read_events(
                    ctx.execd,
                    body,
                    state.stream.handle,
                    done=state.stream.done,
                    read_timeout=read_timeout,
                )
        except TimeoutError:
            stopped = await self.interrupt(ctx.execd, state.execution_id)
            stdout, stderr, cut = await _bounded(
                self._final_output(ctx, state, cap, False), 10.0, state.rebuilt()
            )
            raise CommandTimeoutError(
                f"Command timed out after {limit:g} s and {_stop_outcome(state, stopped)}.",
                timeout=limit or 0.0,
                stdout=stdout,
                stderr=stderr,
                truncated=cut,
            ) from None
        except asyncio.CancelledError:
            await self.interrupt(ctx.execd, state.execution_id, discard=state.leftovers(ctx))
            raise
        except Exception as exc:
            if isinstance(exc, ExecdError) and _MISSING_CWD in exc.message.lower():
                # v1.0.18 says only this; v1.0.19 adds the stat error ("no such file ...").
                raise new_path_error(FileNotFoundError, errno.ENOENT, where) from None
            detail = None
            state.discard_leftovers(ctx)
            if state.stream.events and isinstance(exc, httpx.TransportError):
                # The stream was cut after execd had accepted the command (HTTP 200, events).
                stopped = await self.interrupt(ctx.execd, state.execution_id)
                detail = (
                    f"the output stream of command {state.execution_id or '(no id yet)'} was "
                    f"cut after {state.stream.events} events ({type(exc).__name__}); whether and how "
                    f"the command ended is unknown, and it {_stop_outcome(state, stopped)}."
                )
            await self._life.fail(exc, "run a command", execd=ctx.execd, path=where, detail=detail)

    async def _exit_code(self, ctx: Context, state: _RunState, workdir: str) -> int:
        """The finished command's exit code, or the error its stream ended with."""
        if state.stream.exit_code is not None:
            return state.stream.exit_code
        state.discard_leftovers(ctx)
        error = state.stream.error
        if error:
            mapped = path_error(error, workdir)
            if mapped is not None:
                raise mapped
            raise ServerError(
                f"The command could not run in sandbox {self._life.sandbox_id}: {error}"
            )
        await self._life.fail(
            ServerError(
                f"The command's output stream in sandbox {self._life.sandbox_id} ended before "
                "the command finished.",
                retryable=False,
            ),
            "run a command",
            execd=ctx.execd,
        )

    async def _final_output(
        self, ctx: Context, state: _RunState, cap: int, plain_lines: bool
    ) -> tuple[str, str, bool]:
        """A finished command's stdout, stderr and whether the cap cut either (`_output`)."""
        return await collect(ctx, state, cap, plain_lines=plain_lines)

    async def interrupt(
        self, execd: ExecdClient, execution_id: str | None, *, discard: Sequence[str] = ()
    ) -> bool:
        """Stop a running command's process group (then delete `discard`, the files it leaves);
        never raises, never hangs. True when execd acknowledged the stop."""
        if not execution_id:
            return False

        async def send() -> bool:
            acknowledged = False
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await execd.interrupt(execution_id)
                    acknowledged = True
            if discard:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(10):
                        await execd.discard_files(list(discard))
            return acknowledged

        task = asyncio.ensure_future(send())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            return False

    # -- helpers for the files facet and background processes -------------------------------
    async def run_argv(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None,
        cwd: str | None = None,
        max_output: int | None = None,
        read_timeout: float | None = None,
    ) -> CommandResult:
        """Run an argv command to completion with the session's defaults, as `run` would."""
        return await self.run(
            argv,
            cwd=cwd,
            env=None,
            timeout=timeout,
            on_output=None,
            max_output=max_output,
            plain_lines=False,
            read_timeout=read_timeout,
        )

    async def file_command(
        self,
        argv: list[str],
        *,
        timeout: float,
        cwd: str | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        """Run one of the file commands (`_files`), with messages in English; a tool missing
        from the sandbox image is a ServerError that names it, never a path error.

        Such a command answers at once, so a stream silent for longer than the lifecycle's
        `stall_timeout` (execd's 3 s keep-alive plus the request timeout) is a stalled network,
        reported like a stalled HTTP request instead of waiting out the whole `timeout`."""
        result = await self.run_argv(
            ["env", "LC_ALL=C", *argv],
            cwd=cwd,
            timeout=timeout,
            max_output=max_output,
            read_timeout=self._life.stall_timeout,
        )
        if result.exit_code in (126, 127):
            raise ServerError(
                f"Could not run `{argv[0]}` in sandbox {self._life.sandbox_id} "
                f"({result.stderr.strip()[:200]}): this file operation needs it in the sandbox "
                "image (GNU coreutils and findutils)."
            )
        return result

    async def literal_cwd(
        self, text: str, workdir: str, ctx: Context | None = None
    ) -> tuple[str, str]:
        """The command text and `cwd` to send so that `text` (a checked command line, from
        `_validate.command_text`) starts in `workdir` exactly.

        execd expands `$` and a leading `~` in a command's `cwd` field too, so such a directory
        is entered by the command itself (`cd -- <quoted>`, from `/`), after the same check that
        execd makes of its `cwd` (missing: FileNotFoundError; not a directory:
        NotADirectoryError). Used by `run` and `start_background`.
        """
        if _fallback.cwd_is_literal(workdir):
            return text, workdir
        ctx = ctx or await self._life.context()
        if workdir != ctx.working_dir:  # the working dir was entered by the probe
            # `ls -d` names the errno (as `find -H` did); POSIX, so busybox has it too
            script = 'ls -d -- "$1" >/dev/null || exit 1; if [ -d "$1" ]; then echo d; fi'
            check = ["sh", "-c", script, "cwd", workdir]
            result = await self.file_command(check, timeout=60, cwd="/")
            if result.exit_code != 0:
                text_error = _fallback.error_text(result.stderr)
                raise os_error(text_error, workdir, "could not inspect the directory")
            if result.stdout != "d\n":
                raise new_path_error(NotADirectoryError, errno.ENOTDIR, workdir)
        return _fallback.with_cwd(text, workdir), "/"

    async def prepare(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str] | None,
        timeout: float | None,
    ) -> CommandRequest:
        """`command` checked and placed, ready to send: by `run`, or in the background
        (`request.body(background=True)`, see `_background`)."""
        text = _validate.command_text(command)
        limit = _validate.timeout(timeout, allow_none=True)
        envs = {**self._env, **_validate.env(env)}
        ctx = await self._life.context()
        workdir = ctx.working_dir if cwd is None else resolve(cwd, ctx.working_dir)
        text, sent_cwd = await self.literal_cwd(text, workdir, ctx)
        return CommandRequest(ctx, text, sent_cwd, workdir, envs, limit)


def _capture_for(
    ctx: Context, envs: Mapping[str, str], *, streamed: bool, plain_lines: bool
) -> Capture | None:
    """Line-framed execd sends one event per line: when nobody streams, the output goes to
    capture files instead and is read by range at the end (see `_capture`)."""
    if streamed or plain_lines or ctx.framing is not Framing.LEGACY or CAPTURE_ENV in envs:
        return None
    return Capture.new(ctx.output_dir)


def _stop_outcome(state: _RunState, stopped: bool) -> str:
    """How a stop attempt ended, as the end of a sentence ("... and was stopped")."""
    if state.execution_id is None:
        return "could not be stopped: execd never sent its command id, so it may still run"
    if stopped:
        return "was stopped"
    return "an interrupt was sent but not acknowledged, so it may still run"


async def _bounded(
    work: Awaitable[tuple[str, str, bool]], seconds: float, fallback: tuple[str, str, bool]
) -> tuple[str, str, bool]:
    """`work`'s result, or `fallback` if it fails or takes longer than `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            return await work
    except Exception:
        return fallback
