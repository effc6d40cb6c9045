"""`execute` and `execute_with_offload` as BaseSandbox reports them, on the core's
`session.commands`: never raising for the command itself (a non-zero exit is a result, a
timed-out command exit code 124 with what it printed and a closing notice), stderr lines marked
with `stderr_prefix` when given; failures not about the command raise (a gone sandbox, a server
failure, a bad argument). An output left in the sandbox (`run_offloaded`) is previewed as the
protocol's shell wrapper cuts it (`PreviewLayout`: head and tail lines around a marker, or a
leading excerpt closed by a notice, cut exactly as `head -n` / `tail -n` would)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from deepagents.backends.protocol import ExecuteOffloadResult, ExecuteResponse

from opensandbox_core import AsyncSandboxSession, CommandTimeoutError, OffloadedRun
from opensandbox_core.adapters import decode_output
from opensandbox_core.defaults import DEFAULT

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "PreviewLayout",
    "combined_output",
    "head_lines",
    "offload_for_agent",
    "offload_view",
    "run_for_agent",
    "tail_lines",
    "timed_out_output",
]

logger = logging.getLogger(__name__)

TIMEOUT_EXIT_CODE: Final = 124
"""What `timeout(1)` exits with; a timed-out command is reported with it."""


def combined_output(stdout: str, stderr: str, stderr_prefix: str | None) -> str:
    """stdout, then stderr with every line starting with `stderr_prefix` (on a line of its own,
    never glued to stdout's last line). Without a prefix, the two joined as printed."""
    if stderr_prefix is None or not stderr:
        return stdout + stderr
    head = stdout if not stdout or stdout.endswith("\n") else stdout + "\n"
    lines = stderr.split("\n")
    tail = lines.pop() if lines[-1] == "" else None  # stderr ended with a line break
    marked = "\n".join(stderr_prefix + line for line in lines)
    return head + marked + ("\n" if tail is not None else "")


def timed_out_output(exc: CommandTimeoutError, stderr_prefix: str | None = None) -> ExecuteResponse:
    """What a command printed before its timeout stopped it, then a notice saying so."""
    output = combined_output(exc.stdout, exc.stderr, stderr_prefix)
    if output and not output.endswith("\n"):
        output += "\n"
    output += (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; "
        "the output above is what it printed before that."
    )
    # `truncated`: the output cap (the session's `max_output`) cut what it printed before that.
    return ExecuteResponse(output=output, exit_code=TIMEOUT_EXIT_CODE, truncated=exc.truncated)


async def run_for_agent(
    session: AsyncSandboxSession,
    command: str,
    *,
    timeout: Any = DEFAULT,
    stderr_prefix: str | None = None,
) -> ExecuteResponse:
    """Run `command` in a shell: stdout then stderr (each stderr line marked with
    `stderr_prefix` when given). `timeout`: the session's (`DEFAULT`, seconds, or None)."""
    try:
        result = await session.commands.run(command, timeout=timeout)
    except CommandTimeoutError as exc:
        return timed_out_output(exc, stderr_prefix)
    output = result.output
    if stderr_prefix is not None:
        output = combined_output(result.stdout, result.stderr, stderr_prefix)
    return ExecuteResponse(output=output, exit_code=result.exit_code, truncated=result.truncated)


# -- execute_with_offload ----------------------------------------------------------------------


def head_lines(data: bytes, count: int) -> bytes:
    """`head -n count` of `data`: up to and including its `count`-th line break."""
    end = -1
    for _ in range(count):
        end = data.find(b"\n", end + 1)
        if end < 0:
            return data
    return data[: end + 1]


def tail_lines(data: bytes, count: int) -> bytes:
    """`tail -n count` of `data`: its last `count` lines, an unterminated last line counting."""
    start = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(count):
        start = data.rfind(b"\n", 0, start)
        if start < 0:
            return data
    return data[start + 1 :]


@dataclass(frozen=True, kw_only=True)
class PreviewLayout:
    """How an offloaded output is previewed, and the words the preview uses.

    `marker` (formatted with `omitted_lines`) stands between the head and tail lines when
    there are more lines than both hold; `cut_notice` precedes it when a byte budget cut a line.
    With fewer lines, the output's first `head_bytes + tail_bytes` bytes, then `clip` (or
    `clip_capped` when the capture cap was reached; formatted with `captured_bytes`)."""

    head_lines: int
    tail_lines: int
    head_bytes: int
    tail_bytes: int
    marker: str
    cut_notice: str
    clip: str
    clip_capped: str

    @property
    def read_bytes(self) -> int:
        """What to read of the file's head and of its tail (`run_offloaded(preview_bytes=)`)."""
        return self.head_bytes + self.tail_bytes

    def preview(self, run: OffloadedRun) -> tuple[bytes, bool]:
        """The preview of an offloaded output, and whether it holds `marker`."""
        omitted = run.lines - self.head_lines - self.tail_lines
        if omitted <= 0:
            excerpt = run.head[: self.read_bytes]
            if run.size > self.read_bytes:
                notice = self.clip_capped if run.truncated else self.clip
                excerpt += b"\n" + notice.format(captured_bytes=run.size).encode() + b"\n"
            return excerpt, False
        head = run.head[: self.head_bytes]
        tail = run.tail[-self.tail_bytes :]
        # Did the byte caps cut the line excerpts? One byte more of the tail tells where its
        # lines start.
        whole_tail = tail_lines(run.tail[-(self.tail_bytes + 1) :], self.tail_lines)
        cut = head.count(b"\n") < self.head_lines or len(whole_tail) > self.tail_bytes
        parts = [head_lines(head, self.head_lines)]
        if cut:
            parts.append(b"\n" + self.cut_notice.encode() + b"\n")
        parts.append(self.marker.format(omitted_lines=omitted).encode() + b"\n")
        parts.append(tail_lines(tail, self.tail_lines))
        return b"".join(parts), True


def offload_view(run: OffloadedRun, layout: PreviewLayout) -> ExecuteOffloadResult:
    """The whole output of `run` when it came back inline, else `layout`'s preview of it."""
    if run.output is not None:
        whole = ExecuteResponse(output=run.output, exit_code=run.exit_code, truncated=run.truncated)
        return ExecuteOffloadResult(False, whole, False)
    preview, marker = layout.preview(run)
    output = ExecuteResponse(
        output=decode_output(preview), exit_code=run.exit_code, truncated=run.truncated
    )
    return ExecuteOffloadResult(True, output, marker)


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
) -> ExecuteOffloadResult:
    """`run_offloaded` as the protocol reports it (`offload_view`): the whole output when it
    is at most `inline_limit` bytes, else `layout`'s preview, the output staying at
    `capture_path` (at most `max_bytes`). A timeout is exit code 124 naming `capture_path`.
    When `capture_path` cannot be written, nothing has run: the command then runs without
    capture and its whole output comes back (`run_for_agent`)."""
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
        notice = (
            f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; what "
            f"it printed before that is in {capture_path} (its last few KiB may be missing)."
        )
        timed_out = ExecuteResponse(output=notice, exit_code=TIMEOUT_EXIT_CODE, truncated=False)
        return ExecuteOffloadResult(False, timed_out, False)
    except OSError as exc:
        logger.warning("Could not offload a command's output to %s (%s)", capture_path, exc)
        output = await run_for_agent(session, command, timeout=timeout, stderr_prefix=stderr_prefix)
        return ExecuteOffloadResult(False, output, False)
    return offload_view(run, layout)
