"""A finished command's exact output: from the core's capture files (`_capture`), from the raw
files execd keeps per command (line-framed execd), or from the events themselves.

Every path here reads what the sandbox holds on disk once the command has ended; the event
stream's rebuilt text is only the last resort (a file that cannot be read), and a capture file
that should hold bytes but reads empty is an error, never an empty result.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from opensandbox_core._errors import ServerError
from opensandbox_core._wire._events import COMMAND_ID, Context
from opensandbox_core._wire._framing import Framing, OutputBuffer, decode_output, whole_characters

from ._capture import Capture, parse_marker

__all__ = ["Cleanup", "Collected", "collect", "exact", "leftover_files"]

logger = logging.getLogger(__name__)

WARNED_REBUILT: set[str | None] = set()
"""Sandbox ids already warned about output rebuilt from line events (a process-wide cache keyed
on the sandbox id, so that the warning is logged once per sandbox; emptied at `_WARNED_MAX`, after
which a sandbox may be warned about once more)."""
_WARNED_MAX = 4096


class Collected(Protocol):
    """What the events of a finished (or stopped) command told, as `collect` needs it (the
    command's run state, `_run._RunState`)."""

    @property
    def framing(self) -> Framing: ...
    @property
    def execution_id(self) -> str | None: ...
    @property
    def out(self) -> OutputBuffer: ...
    @property
    def err(self) -> OutputBuffer: ...
    @property
    def capture(self) -> Capture | None: ...
    @property
    def sandbox_id(self) -> str | None: ...
    @property
    def cleanup(self) -> Cleanup | None: ...


def exact(raw: bytes, cap: int) -> OutputBuffer:
    """A buffer holding a raw output file's text, cut at `cap` bytes on a character boundary."""
    buffer = OutputBuffer(cap)
    if len(raw) > cap:
        buffer.truncated = True
        raw = whole_characters(raw[:cap])
    buffer.add(decode_output(raw))
    return buffer


@dataclass(frozen=True)
class Cleanup:
    """Files of the caller's to delete with a command's own (`paths`), in the same background
    request, once `after` (a task of the caller's, e.g. an upload still under way) has ended."""

    paths: tuple[str, ...] = ()
    after: Awaitable[object] | None = None


def leftover_files(
    ctx: Context,
    execution_id: str | None,
    capture: Capture | None,
    cleanup: Cleanup | None = None,
) -> list[str]:
    """Every file a command leaves behind: execd's raw output files and the capture files (and
    the caller's `cleanup` paths)."""
    paths = list(capture.paths) if capture is not None else []
    if cleanup is not None:
        paths += cleanup.paths
    if ctx.output_dir is not None and execution_id and COMMAND_ID.fullmatch(execution_id):
        base = posixpath.join(ctx.output_dir, execution_id)
        paths += [base + ".stdout", base + ".stderr"]
    return paths


async def collect(
    ctx: Context, run: Collected, cap: int, *, plain_lines: bool
) -> tuple[str, str, bool]:
    """A finished command's stdout, stderr and whether the cap cut either; every file the
    command left is deleted afterwards, in the background (`ExecdClient.discard_later`: with
    the files of other operations, in one request)."""
    leftovers = leftover_files(ctx, run.execution_id, run.capture, run.cleanup)
    try:
        if run.capture is not None:
            captured = await _from_capture(ctx, run, cap)
            if captured is not None:
                return captured
        return await _from_execd_files(ctx, run, cap, plain_lines=plain_lines)
    finally:
        if leftovers:
            ctx.execd.discard_later(leftovers, after=run.cleanup.after if run.cleanup else None)


async def _from_capture(ctx: Context, run: Collected, cap: int) -> tuple[str, str, bool] | None:
    """The output from the capture files, or None where the capture was never set up."""
    assert run.capture is not None
    paths = run.capture.paths
    flags = parse_marker(run.out.text())
    if flags is None:
        # No marker: the wrapper did not finish (a timeout, an interrupt) or the command
        # replaced its exit path. Read both files; both missing means capture never started.
        out, err = await asyncio.gather(*(ctx.execd.read_head(p, cap + 1) for p in paths))
        if out is None and err is None:
            return None
        return _texts((out or b"", err or b""), cap)
    raws = await asyncio.gather(
        *(
            _read_flagged(ctx, path, cap, run) if has else _empty()
            for path, has in zip(paths, flags, strict=True)
        )
    )
    return _texts(raws, cap)


async def _empty() -> bytes:
    return b""


async def _read_flagged(ctx: Context, path: str, cap: int, run: Collected) -> bytes:
    """A capture file the wrapper saw non-empty: its first `cap` + 1 bytes, read again once if
    it comes back empty, and an error (never an empty result) if it still does."""
    for _ in range(2):
        raw = await ctx.execd.read_head(path, cap + 1)
        if raw:
            return raw
    raise ServerError(
        f"The output of command {run.execution_id} in sandbox {run.sandbox_id} was lost: its "
        f"capture file {path} held bytes when the command ended but reads "
        f"{'as missing' if raw is None else 'empty'} now (did the command, or another, delete "
        "or truncate files in the sandbox's temp dir?). The command itself has finished.",
        retryable=False,
    )


async def _from_execd_files(
    ctx: Context, run: Collected, cap: int, *, plain_lines: bool
) -> tuple[str, str, bool]:
    """Line-framed execd (LEGACY) without capture: read from the raw files execd kept (at most
    `cap` + 1 bytes of each), so the output is byte-exact; with `plain_lines` the events are
    exact already. MODERN: the events are exact. Where a file cannot be read, the output
    rebuilt from the events is used (and a warning logged once per sandbox)."""
    rebuilt = (run.out.text(), run.err.text(), run.out.truncated or run.err.truncated)
    execution_id = run.execution_id
    if ctx.output_dir is None or not execution_id or not COMMAND_ID.fullmatch(execution_id):
        return rebuilt
    if run.framing is not Framing.LEGACY or plain_lines:
        return rebuilt
    base = posixpath.join(ctx.output_dir, execution_id)
    # Both files are read whatever the events said: a stream whose events never arrived must
    # not read as empty output.
    raw_out, raw_err = await asyncio.gather(
        ctx.execd.read_head(base + ".stdout", cap + 1),
        ctx.execd.read_head(base + ".stderr", cap + 1),
    )
    if (raw_out is None or raw_err is None) and run.sandbox_id not in WARNED_REBUILT:
        if len(WARNED_REBUILT) >= _WARNED_MAX:
            WARNED_REBUILT.clear()
        WARNED_REBUILT.add(run.sandbox_id)
        logger.warning(
            "Sandbox %s: the raw output files of command %s were not found, so its output "
            "is rebuilt from line events (a missing final newline and \\r\\n line endings "
            "are not kept exactly).",
            run.sandbox_id,
            execution_id,
        )
    texts: list[str] = []
    truncated = False
    for raw, buffer in ((raw_out, run.out), (raw_err, run.err)):
        chosen = buffer if raw is None else exact(raw, cap)
        texts.append(chosen.text())
        truncated = truncated or chosen.truncated
    return texts[0], texts[1], truncated


def _texts(raws: Sequence[bytes], cap: int) -> tuple[str, str, bool]:
    out, err = (exact(raw, cap) for raw in raws)
    return out.text(), err.text(), out.truncated or err.truncated
