"""BaseSandbox's texts, the ones agents see, in one module (read pages, ls/edit, the
execute_with_offload preview): what the native tools answer must read
exactly as `deepagents.backends.sandbox.BaseSandbox`'s own scripts print it.

Matches deepagents 0.7.30 to 0.7.32 (the package's range is `>=0.7.30,<0.8`; `nox -s
deepagents` runs the differential tests against BaseSandbox's public methods at both ends: the
lowest release, 0.7.30, and the newest). Where a text moved between releases, the call goes to
BaseSandbox's own method instead of being rendered here (a non-positive `limit`, a negative
`offset`, file types by name beyond `TEXT_SUFFIXES`).

## read
A page is `limit` source lines from the 0-indexed line `offset` (lines end at `\\r\\n`, `\\r` or
`\\n`; the page joins them with `\\n`), cut at `MAX_OUTPUT_BYTES` of UTF-8 with `TRUNCATION_MSG`
appended (both public constants of `deepagents.backends.sandbox`), with `start_line`/`end_line`
1-indexed, `next_offset == end_line` while lines remain, and `total_lines` where it is known (the
page reached the end, or the file is at most 1 MiB, which the script counts whole). An empty
file answers `EMPTY_FILE_REMINDER`, a file whose first 8 KiB are not UTF-8 the whole file as
base64, an offset past the end `Line offset N exceeds file length (M lines)`. The page itself is
opensandbox-core's `read_lines` (`LinePage`, whose `total_lines` follows the same 1 MiB rule);
`read_result` renders it. Only files whose name BaseSandbox surely reads as text are rendered
here (`text_named`).
"""

from __future__ import annotations

import base64
import posixpath
from typing import Final

from deepagents.backends.protocol import FileData, GrepResult, ReadResult
from deepagents.backends.sandbox import MAX_OUTPUT_BYTES, TRUNCATION_MSG
from deepagents.backends.utils import TRUNCATION_MARKER_TEMPLATE

from opensandbox_core import LinePage

__all__ = [
    "BASE64_LIMIT",
    "EFFECTIVE_LIMIT",
    "EMPTY_FILE_REMINDER",
    "OFFLOAD_CLIP",
    "OFFLOAD_CLIP_CAPPED",
    "OFFLOAD_EXCERPT_CLIP",
    "OFFLOAD_HEAD_BYTES",
    "OFFLOAD_HEAD_LINES",
    "OFFLOAD_MAX_CAPTURE_BYTES",
    "OFFLOAD_TAIL_BYTES",
    "OFFLOAD_TAIL_LINES",
    "TEXT_SUFFIXES",
    "TRUNCATION_MARKER_TEMPLATE",
    "as_base64",
    "grep_error",
    "grep_timed_out",
    "past_the_end",
    "read_error",
    "read_result",
    "text_named",
]

EMPTY_FILE_REMINDER: Final = "System reminder: File exists but has empty contents"
EFFECTIVE_LIMIT: Final = MAX_OUTPUT_BYTES - len(TRUNCATION_MSG.encode("utf-8"))
"""Content bytes a page holds before it is cut and `TRUNCATION_MSG` appended."""
BASE64_LIMIT: Final = 8 * 1024 * 1024
"""A text-named file whose first 8 KiB are not UTF-8 is returned whole as base64 (as the script
does) up to this size; larger ones are left to the script."""

_SUFFIXES: Final = (
    "txt text md rst py pyi js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf env csv "
    "tsv log html htm css scss xml sh bash zsh c h cc cpp hpp rs go java kt rb php sql lock patch "
    "diff tex gitignore dockerfile makefile"
)
TEXT_SUFFIXES: Final = frozenset(_SUFFIXES.split())
"""Suffixes read as text by every deepagents 0.7 release (no suffix is text too)."""


def text_named(path: str) -> bool:
    """Whether BaseSandbox reads a file of this name as text (a conservative list)."""
    suffix = posixpath.splitext(posixpath.basename(path))[1]
    return not suffix or suffix[1:].lower() in TEXT_SUFFIXES


def read_error(file_path: str, code: str) -> ReadResult:
    return ReadResult(error=f"File '{file_path}': {code}")


def past_the_end(file_path: str, offset: int, lines: int) -> ReadResult:
    """The script's answer to a page that starts after the file's last line."""
    return read_error(file_path, f"Line offset {offset} exceeds file length ({lines} lines)")


def as_base64(raw: bytes) -> ReadResult:
    return ReadResult(
        file_data=FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
    )


def read_result(page: LinePage) -> ReadResult:
    """The script's `ReadResult` for a page of a text-named file that `read_lines` gave with
    `max_bytes=EFFECTIVE_LIMIT`."""
    if page.size == 0:
        return ReadResult(file_data=FileData(content=EMPTY_FILE_REMINDER, encoding="utf-8"))
    if page.end == page.offset:
        return past_the_end(page.path, page.offset, page.total_lines or 0)
    content = page.text + (TRUNCATION_MSG if page.truncated else "")
    return ReadResult(
        file_data=FileData(content=content, encoding="utf-8"),
        total_lines=page.total_lines,
        start_line=page.offset + 1,
        end_line=page.end,
        next_offset=page.next_offset,
    )


# -- execute_with_offload: the preview of an output left in the sandbox ----------------------
# `BaseSandbox.execute_with_offload` (enable_capture_offload): output over `max_inline_bytes`
# stays at `capture_path`; the preview is the first and last lines around a marker, or, with
# few lines, a leading byte excerpt that ends in a notice.

OFFLOAD_HEAD_LINES: Final = 5
OFFLOAD_TAIL_LINES: Final = 5
OFFLOAD_HEAD_BYTES: Final = 2000
OFFLOAD_TAIL_BYTES: Final = 2000
OFFLOAD_MAX_CAPTURE_BYTES: Final = 10 * 1024 * 1024
"""The cap of a captured output when the caller passes `max_capture_bytes=None`."""

OFFLOAD_CLIP: Final = (
    "... [output clipped here; {captured_bytes} bytes total, full output at the path above] ..."
)
"""After a leading byte excerpt shorter than the output."""
OFFLOAD_CLIP_CAPPED: Final = (
    "... [output clipped here; capture stopped at its {captured_bytes}-byte limit, so the file "
    "at the path above is also incomplete] ..."
)
"""`OFFLOAD_CLIP` when the output reached the capture cap (`captured_bytes` is the cap)."""
OFFLOAD_EXCERPT_CLIP: Final = (
    "... [the excerpts above and below are byte-capped, so the lines bordering this marker may "
    "be cut mid-line] ..."
)
"""Before the marker, when the head or tail lines exceed their byte budget."""


# -- grep ------------------------------------------------------------------------------------


def grep_error(path: str | None, detail: str) -> GrepResult:
    """A grep whose command failed, or printed no record: `detail` is its output, else
    `exit code N`."""
    return GrepResult(error=f"Path '{path or '.'}': {detail}")


def grep_timed_out(seconds: float) -> GrepResult:
    """`agrep` past its time budget (`ASYNC_GREP_TIMEOUT`); used for `grep` too."""
    return GrepResult(
        error=f"Error: grep timed out after {seconds:g}s. Try a more specific pattern or a "
        "narrower path."
    )
