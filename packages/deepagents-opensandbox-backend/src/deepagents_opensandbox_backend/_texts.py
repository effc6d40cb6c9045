"""The texts of deepagents' `BaseSandbox` that agents see, as this package re-renders them.

They match deepagents 0.7.30, 0.7.31 and 0.7.32 (`deepagents/backends/sandbox.py` is the same in
the three releases; read 2026-12-02); the differential tests against BaseSandbox's public methods
(`tests/live/deepagents_backend/test_native_tools.py`, run at both ends of the range by
`nox -s deepagents`) fail when a release changes one. Published texts are imported.
"""

from __future__ import annotations

import base64
import posixpath
from collections.abc import Sequence
from typing import Final

from deepagents.backends.protocol import (
    DeleteResult,
    EditResult,
    FileData,
    FileInfo,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import MAX_OUTPUT_BYTES, TRUNCATION_MSG
from deepagents.backends.utils import TRUNCATION_MARKER_TEMPLATE

from opensandbox_core import LinePage

from ._listing import DirectoryEntry
from ._run import PreviewLayout

__all__ = [
    "BASE64_LIMIT",
    "EFFECTIVE_LIMIT",
    "EMPTY_FILE_REMINDER",
    "OFFLOAD_MAX_CAPTURE_BYTES",
    "OFFLOAD_PREVIEW",
    "TEXT_SUFFIXES",
    "as_base64",
    "delete_error",
    "delete_not_found",
    "edit_error",
    "grep_error",
    "grep_timed_out",
    "ls_result",
    "read_error",
    "read_result",
    "text_named",
    "write_error",
]

# -- ls, edit, write, delete ----------------------------------------------------------------


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


def as_base64(raw: bytes) -> ReadResult:
    return ReadResult(
        file_data=FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
    )


def read_result(page: LinePage) -> ReadResult:
    """The script's `ReadResult` for a page of a text-named file that `read_lines` gave with
    `max_bytes=EFFECTIVE_LIMIT`."""
    if page.size == 0:
        return ReadResult(file_data=FileData(content=EMPTY_FILE_REMINDER, encoding="utf-8"))
    if page.end == page.offset:  # the page starts after the file's last line
        lines = page.total_lines or 0
        return read_error(
            page.path, f"Line offset {page.offset} exceeds file length ({lines} lines)"
        )
    content = page.text + (TRUNCATION_MSG if page.truncated else "")
    return ReadResult(
        file_data=FileData(content=content, encoding="utf-8"),
        total_lines=page.total_lines,
        start_line=page.offset + 1,
        end_line=page.end,
        next_offset=page.next_offset,
    )


def ls_result(path: str, entries: Sequence[DirectoryEntry] | None, error: str | None) -> LsResult:
    """A native listing of `path` (`DirectoryListing`'s entries or error: the script's code,
    `path_not_found`, `not_a_directory` or `permission_denied`) as BaseSandbox's."""
    if error is not None or entries is None:
        return LsResult(entries=None, error=f"Path '{path}': {error or 'path_not_found'}")
    infos: list[FileInfo] = [{"path": e.path, "is_dir": e.is_dir} for e in entries]
    return LsResult(entries=infos)


def edit_error(code: str, file_path: str, old: str) -> EditResult:
    """An edit that failed with the edit script's error code `code`."""
    messages = {
        "file_not_found": f"Error: File '{file_path}' not found",
        "permission_denied": f"Error: Permission denied editing file '{file_path}'",
        "not_a_file": f"Error: '{file_path}' is not a regular file",
        "not_a_text_file": f"Error: File '{file_path}' is not a text file",
        "string_not_found": f"Error: String not found in file: '{old}'",
        "multiple_occurrences": f"Error: String '{old}' appears multiple times. "
        "Use replace_all=True to replace all occurrences.",
    }
    return EditResult(error=messages.get(code, f"Error editing file '{file_path}': {code}"))


def write_error(file_path: str, error: str) -> WriteResult:
    """A write whose upload failed with the protocol's error code `error`."""
    return WriteResult(error=f"Failed to write file '{file_path}': {error}")


def delete_not_found(file_path: str) -> DeleteResult:
    """A delete of a path that is not there (BaseSandbox's `test -e` fails)."""
    return DeleteResult(error=f"Error: '{file_path}' not found")


def delete_error(file_path: str, reason: str) -> DeleteResult:
    """A delete that failed for `reason`."""
    return DeleteResult(error=f"Error deleting file '{file_path}': {reason}")


# -- execute_with_offload: the preview of an output left in the sandbox ----------------------
# `BaseSandbox.execute_with_offload` (enable_capture_offload): output over `max_inline_bytes`
# stays at `capture_path`; the preview is the first and last lines around a marker, or, with
# few lines, a leading byte excerpt that ends in a notice.

OFFLOAD_MAX_CAPTURE_BYTES: Final = 10 * 1024 * 1024
"""The cap of a captured output when the caller passes `max_capture_bytes=None`."""
OFFLOAD_PREVIEW: Final = PreviewLayout(
    head_lines=5,
    tail_lines=5,
    head_bytes=2000,
    tail_bytes=2000,
    marker=TRUNCATION_MARKER_TEMPLATE,
    # Before the marker, when the head or tail lines exceed their byte budget.
    cut_notice="... [the excerpts above and below are byte-capped, so the lines bordering this "
    "marker may be cut mid-line] ...",
    # After a leading byte excerpt shorter than the output.
    clip="... [output clipped here; {captured_bytes} bytes total, full output at the path "
    "above] ...",
    # The same, when the output reached the capture cap (`captured_bytes` is the cap).
    clip_capped="... [output clipped here; capture stopped at its {captured_bytes}-byte limit, "
    "so the file at the path above is also incomplete] ...",
)


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
