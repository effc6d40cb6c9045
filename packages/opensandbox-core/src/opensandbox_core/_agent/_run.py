"""`run_for_agent`: a shell command's outcome as an agent's tool reports it, never raising for
the command itself: a non-zero exit is a result, a timed-out command exit code 124 with what it
printed and a closing notice. Failures that are not about the command raise (a sandbox that is
gone, a server failure, a bad argument)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from opensandbox_core._agent._output import combined_output
from opensandbox_core._errors import CommandTimeoutError, OutputLimitError, ServerError
from opensandbox_core._session import DEFAULT, AsyncSandboxSession
from opensandbox_core._wire._framing import Framing, decode_output

if TYPE_CHECKING:
    from opensandbox_core._agent._output import PreviewLayout
    from opensandbox_core._commands._offload import OffloadedRun

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "AgentOutput",
    "OffloadView",
    "offload_timed_out",
    "offload_view",
    "run_for_agent",
    "timed_out_output",
]

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
    plain: bool = False,
) -> AgentOutput:
    """Run `command` in a shell: stdout then stderr (each stderr line marked with
    `stderr_prefix` when given). `timeout`: the session's (`DEFAULT`, seconds, or None).
    `plain`: stdout through one base64 line on line-framed execd (`run_bytes`: exact bytes, no
    raw-file read), when the command prints nothing on stderr."""
    if plain and stderr_prefix is None and session.framing is not Framing.MODERN:
        try:
            exact = await session.run_bytes(command, timeout=timeout)
        except (CommandTimeoutError, OutputLimitError, ServerError):
            exact = None  # run as it is, below, for the command's own output and timeout
        if exact is not None and not exact.stderr:
            return AgentOutput(decode_output(exact.stdout), exact.exit_code, False)
    try:
        result = await session.run(command, timeout=timeout)
    except CommandTimeoutError as exc:
        return timed_out_output(exc, stderr_prefix)
    if stderr_prefix is None:
        return AgentOutput(result.output, result.exit_code, result.truncated)
    output = combined_output(result.stdout, result.stderr, stderr_prefix)
    return AgentOutput(output, result.exit_code, result.truncated)
