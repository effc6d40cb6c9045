"""`execute_with_offload` for the Deep Agents backend, on the core's `run_offloaded`.

The protocol (`BaseSandbox.execute_with_offload`, deepagents 0.7.30 on, documented on
`ExecuteOffloadResult`): the command's combined output is captured in the sandbox; at most
`max_inline_bytes` of it comes back whole (`offloaded=False`); a larger one stays at
`capture_path`, exactly as printed and capped at `max_capture_bytes` (`response.truncated` when
the cap was reached; the command is never stopped for it), and `response.output` is a preview:
the first and last lines around `TRUNCATION_MARKER_TEMPLATE` when there are more lines than the
two excerpts hold (`preview_has_truncation_marker`), else a leading byte excerpt closed by a
notice saying how much there is. The excerpts are byte-capped first, then line-capped, and say
so in-band when that cut a line (`_texts.py` has the words and budgets).

Here the core's output capture writes the file (`AsyncSandboxSession.run_offloaded`: one
command, then one or two range reads), and the preview is cut from the file's head and tail
bytes exactly as the protocol's shell wrapper cuts it with `head`/`tail`. Nothing needs python3.
"""

from __future__ import annotations

from deepagents.backends.protocol import ExecuteOffloadResult, ExecuteResponse

from opensandbox_core import CommandTimeoutError, OffloadedRun, decode_output

from ._texts import (
    OFFLOAD_CLIP,
    OFFLOAD_CLIP_CAPPED,
    OFFLOAD_EXCERPT_CLIP,
    OFFLOAD_HEAD_BYTES,
    OFFLOAD_HEAD_LINES,
    OFFLOAD_TAIL_BYTES,
    OFFLOAD_TAIL_LINES,
    TRUNCATION_MARKER_TEMPLATE,
)

__all__ = ["PREVIEW_BYTES", "head_lines", "offload_result", "tail_lines", "timed_out_result"]

PREVIEW_BYTES = OFFLOAD_HEAD_BYTES + OFFLOAD_TAIL_BYTES
"""What the core reads of the file's head and of its tail: the longest excerpt cut from either."""


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


def _preview(run: OffloadedRun) -> tuple[bytes, bool]:
    """The preview of an offloaded output, and whether it holds the truncation marker."""
    omitted = run.lines - OFFLOAD_HEAD_LINES - OFFLOAD_TAIL_LINES
    if omitted > 0:
        head = run.head[:OFFLOAD_HEAD_BYTES]
        tail = run.tail[-OFFLOAD_TAIL_BYTES:]
        # Did the byte caps cut the line excerpts? (`head -n`/`tail -n` of the whole file
        # longer than the byte budget.) One byte more of the tail tells where its lines start.
        cut = (
            head.count(b"\n") < OFFLOAD_HEAD_LINES
            or len(tail_lines(run.tail[-(OFFLOAD_TAIL_BYTES + 1) :], OFFLOAD_TAIL_LINES))
            > OFFLOAD_TAIL_BYTES
        )
        parts = [head_lines(head, OFFLOAD_HEAD_LINES)]
        if cut:
            parts.append(b"\n" + OFFLOAD_EXCERPT_CLIP.encode() + b"\n")
        parts.append(TRUNCATION_MARKER_TEMPLATE.format(omitted_lines=omitted).encode() + b"\n")
        parts.append(tail_lines(tail, OFFLOAD_TAIL_LINES))
        return b"".join(parts), True
    excerpt = run.head[:PREVIEW_BYTES]
    if run.size > PREVIEW_BYTES:
        notice = OFFLOAD_CLIP_CAPPED if run.truncated else OFFLOAD_CLIP
        excerpt += b"\n" + notice.format(captured_bytes=run.size).encode() + b"\n"
    return excerpt, False


def offload_result(run: OffloadedRun) -> ExecuteOffloadResult:
    """The protocol's result for a finished `run_offloaded`."""
    if run.output is not None:
        response = ExecuteResponse(
            output=run.output, exit_code=run.exit_code, truncated=run.truncated
        )
        return ExecuteOffloadResult(offloaded=False, response=response)
    preview, marker = _preview(run)
    response = ExecuteResponse(
        output=decode_output(preview), exit_code=run.exit_code, truncated=run.truncated
    )
    return ExecuteOffloadResult(
        offloaded=True, response=response, preview_has_truncation_marker=marker
    )


def timed_out_result(exc: CommandTimeoutError, capture_path: str) -> ExecuteOffloadResult:
    """A command stopped at its timeout, reported as `execute()` reports one (exit code 124);
    what it printed until then is in the capture file, which is named."""
    output = (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; what it "
        f"printed before that is in {capture_path} (its last few KiB may be missing)."
    )
    response = ExecuteResponse(output=output, exit_code=124, truncated=False)
    return ExecuteOffloadResult(offloaded=False, response=response)
