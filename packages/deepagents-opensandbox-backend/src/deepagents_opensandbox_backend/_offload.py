"""`execute_with_offload`'s results, from the core's `run_offloaded` (one command, then one or
two range reads; no python3): the whole output when small, else a preview cut as the protocol's
shell wrapper cuts it (`OFFLOAD_PREVIEW`, the core's `PreviewLayout`). The protocol is
documented on deepagents' `ExecuteOffloadResult` (0.7.30 on)."""

from __future__ import annotations

from deepagents.backends.protocol import ExecuteOffloadResult, ExecuteResponse

from opensandbox_core import CommandTimeoutError, OffloadedRun, decode_output

from ._texts import OFFLOAD_PREVIEW

__all__ = ["PREVIEW_BYTES", "TIMEOUT_EXIT_CODE", "offload_result", "timed_out_result"]

PREVIEW_BYTES = OFFLOAD_PREVIEW.read_bytes
"""What the core reads of the file's head and of its tail: the longest excerpt cut from either."""
TIMEOUT_EXIT_CODE = 124
"""What `timeout(1)` exits with; `execute()` reports a timed-out command with it."""


def offload_result(run: OffloadedRun) -> ExecuteOffloadResult:
    """The protocol's result for a finished `run_offloaded`."""
    if run.output is not None:
        response = ExecuteResponse(
            output=run.output, exit_code=run.exit_code, truncated=run.truncated
        )
        return ExecuteOffloadResult(offloaded=False, response=response)
    preview, marker = OFFLOAD_PREVIEW.preview(run)
    response = ExecuteResponse(
        output=decode_output(preview), exit_code=run.exit_code, truncated=run.truncated
    )
    return ExecuteOffloadResult(
        offloaded=True, response=response, preview_has_truncation_marker=marker
    )


def timed_out_result(exc: CommandTimeoutError, capture_path: str) -> ExecuteOffloadResult:
    """A command stopped at its timeout, reported as `execute()` reports one; what it printed
    until then is in the capture file, which is named."""
    output = (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; what it "
        f"printed before that is in {capture_path} (its last few KiB may be missing)."
    )
    response = ExecuteResponse(output=output, exit_code=TIMEOUT_EXIT_CODE, truncated=False)
    return ExecuteOffloadResult(offloaded=False, response=response)
