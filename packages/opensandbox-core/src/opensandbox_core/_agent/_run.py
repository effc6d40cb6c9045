"""`run_for_agent`: a shell command's outcome as an agent's tool reports it, never raising for
the command itself: a non-zero exit is a result, a timed-out command exit code 124 with what it
printed and a closing notice. Failures that are not about the command raise (a sandbox that is
gone, a server failure, a bad argument)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from opensandbox_core._agent._output import combined_output
from opensandbox_core._defaults import DEFAULT
from opensandbox_core._errors import CommandTimeoutError
from opensandbox_core._session import AsyncSandboxSession
from opensandbox_core._wire._framing import decode_output

if TYPE_CHECKING:
    from opensandbox_core._agent._output import PreviewLayout
    from opensandbox_core._commands._offload import OffloadedRun

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "AgentOutput",
    "OffloadView",
    "offload_for_agent",
    "offload_timed_out",
    "offload_view",
    "run_for_agent",
    "timed_out_output",
]

logger = logging.getLogger(__name__)

TIMEOUT_EXIT_CODE: Final = 124
"""What `timeout(1)` exits with; a timed-out command is reported with it."""


@dataclass(frozen=True)
class AgentOutput:
    """The combined `output`, the `exit_code`, and whether the output cap cut it (`truncated`)."""

    output: str
    exit_code: int | None
    truncated: bool = False


def timed_out_output(exc: CommandTimeoutError, stderr_prefix: str | None = None) -> AgentOutput:
    """What a command printed before its timeout stopped it, then a notice saying so."""
    output = combined_output(exc.stdout, exc.stderr, stderr_prefix)
    if output and not output.endswith("\n"):
        output += "\n"
    output += (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; "
        "the output above is what it printed before that."
    )
    # `truncated`: the output cap (the session's `max_output`) cut what it printed before that.
    return AgentOutput(output, TIMEOUT_EXIT_CODE, exc.truncated)


@dataclass(frozen=True)
class OffloadView:
    """A finished `run_offloaded` as an agent's tool reports it: the whole `output` when small,
    else a preview (`offloaded`; `marker`: the layout's marker is in it)."""

    output: AgentOutput
    offloaded: bool
    marker: bool = False


def offload_view(run: OffloadedRun, layout: PreviewLayout) -> OffloadView:
    """The whole output of `run` when it came back inline, else `layout`'s preview of it."""
    if run.output is not None:
        return OffloadView(AgentOutput(run.output, run.exit_code, run.truncated), offloaded=False)
    preview, marker = layout.preview(run)
    output = AgentOutput(decode_output(preview), run.exit_code, run.truncated)
    return OffloadView(output, offloaded=True, marker=marker)


def offload_timed_out(exc: CommandTimeoutError, capture_path: str) -> AgentOutput:
    """A command stopped at its timeout while its output went to `capture_path` (named)."""
    output = (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; what it "
        f"printed before that is in {capture_path} (its last few KiB may be missing)."
    )
    return AgentOutput(output, TIMEOUT_EXIT_CODE, False)


async def run_for_agent(
    session: AsyncSandboxSession,
    command: str,
    *,
    timeout: Any = DEFAULT,
    stderr_prefix: str | None = None,
) -> AgentOutput:
    """Run `command` in a shell: stdout then stderr (each stderr line marked with
    `stderr_prefix` when given). `timeout`: the session's (`DEFAULT`, seconds, or None)."""
    try:
        result = await session.commands.run(command, timeout=timeout)
    except CommandTimeoutError as exc:
        return timed_out_output(exc, stderr_prefix)
    if stderr_prefix is None:
        return AgentOutput(result.output, result.exit_code, result.truncated)
    output = combined_output(result.stdout, result.stderr, stderr_prefix)
    return AgentOutput(output, result.exit_code, result.truncated)


async def offload_for_agent(
    session: AsyncSandboxSession,
    command: str,
    capture_path: str,
    layout: PreviewLayout,
    *,
    max_bytes: int,
    inline_limit: int,
    timeout: Any = DEFAULT,
    stderr_prefix: str | None = None,
) -> OffloadView:
    """`run_offloaded` as an agent's tool reports it (`offload_view`): the whole output when it
    is at most `inline_limit` bytes, else `layout`'s preview, the output staying at
    `capture_path` (at most `max_bytes`). A timeout is exit code 124 naming `capture_path`
    (`offload_timed_out`). When `capture_path` cannot be written, nothing has run: the command
    then runs without capture and its whole output comes back (`run_for_agent`)."""
    try:
        run = await session.commands.run_offloaded(
            command,
            capture_path,
            max_bytes=max_bytes,
            inline_limit=inline_limit,
            preview_bytes=layout.read_bytes,
            timeout=timeout,
        )
    except CommandTimeoutError as exc:
        return OffloadView(offload_timed_out(exc, capture_path), offloaded=False)
    except OSError as exc:
        logger.warning("Could not offload a command's output to %s (%s)", capture_path, exc)
        output = await run_for_agent(session, command, timeout=timeout, stderr_prefix=stderr_prefix)
        return OffloadView(output, offloaded=False)
    return offload_view(run, layout)
