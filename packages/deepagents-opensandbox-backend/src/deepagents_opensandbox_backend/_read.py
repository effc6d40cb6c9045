"""`read()` rendered on the client from a downloaded file, to the protocol's `ReadResult` contract.

A page is `limit` source lines from the 0-indexed line `offset` (lines end at `\\r\\n`, `\\r` or
`\\n`; the page joins them with `\\n`), cut at `MAX_OUTPUT_BYTES` of UTF-8 with `TRUNCATION_MSG`
appended (both public constants of `deepagents.backends.sandbox`), with `start_line`/`end_line`
1-indexed, `next_offset == end_line` while lines remain, and `total_lines` where it is known (the
page reached the end, or the file is at most `MAX_LINE_COUNT_BYTES`). An empty file answers the
empty-file reminder, a file whose first 8 KiB are not UTF-8 the whole file as base64, an offset
past the end `Line offset N exceeds file length (M lines)`.

Only files whose name BaseSandbox surely reads as text are rendered here (`text_named`): the
others (images, audio, video, documents: a table that moves between deepagents releases) and
every case this module cannot answer return None, and the caller runs BaseSandbox's own `read`
for that call. `tests/live/deepagents_backend/test_native_tools.py` compares both on the same
sandbox, on the installed deepagents release.
"""

from __future__ import annotations

import base64
import posixpath
import re
from typing import Final

from deepagents.backends.protocol import FileData, ReadResult
from deepagents.backends.sandbox import MAX_OUTPUT_BYTES, TRUNCATION_MSG

__all__ = [
    "EFFECTIVE_LIMIT",
    "EMPTY_FILE_REMINDER",
    "MAX_LINE_COUNT_BYTES",
    "PREFIX_BYTES",
    "as_base64",
    "past_the_end",
    "read_error",
    "render_page",
    "text_named",
    "text_page",
    "valid_utf8",
]

MAX_LINE_COUNT_BYTES: Final = 1024 * 1024
"""Up to this size BaseSandbox counts every line of the file (`total_lines`)."""
PREFIX_BYTES: Final = 8192
"""A file whose first 8 KiB are not UTF-8 is binary: returned whole, as base64."""
EMPTY_FILE_REMINDER: Final = "System reminder: File exists but has empty contents"
EFFECTIVE_LIMIT: Final = MAX_OUTPUT_BYTES - len(TRUNCATION_MSG.encode("utf-8"))
"""Content bytes a page holds before it is cut and `TRUNCATION_MSG` appended."""

TEXT_SUFFIXES: Final = frozenset(
    [
        "txt",
        "text",
        "md",
        "rst",
        "py",
        "pyi",
        "js",
        "mjs",
        "cjs",
        "ts",
        "tsx",
        "jsx",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "env",
        "csv",
        "tsv",
        "log",
        "html",
        "htm",
        "css",
        "scss",
        "xml",
        "sh",
        "bash",
        "zsh",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "rs",
        "go",
        "java",
        "kt",
        "rb",
        "php",
        "sql",
        "lock",
        "patch",
        "diff",
        "tex",
        "gitignore",
        "dockerfile",
        "makefile",
    ]
)
"""Suffixes read as text by every deepagents 0.7 release (no suffix is text too)."""

_TERMINATOR: Final = re.compile(r"\r\n|\r|\n")


def text_named(path: str) -> bool:
    """Whether BaseSandbox reads a file of this name as text (a conservative list)."""
    suffix = posixpath.splitext(posixpath.basename(path))[1]
    return not suffix or suffix[1:].lower() in TEXT_SUFFIXES


def valid_utf8(data: bytes, *, final: bool) -> bool:
    """Whether `data` decodes as UTF-8 (`final=False`: a sequence cut at its end is fine)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not final and exc.end == len(data) and exc.reason == "unexpected end of data"
    return True


def read_error(file_path: str, code: str) -> ReadResult:
    return ReadResult(error=f"File '{file_path}': {code}")


def past_the_end(file_path: str, offset: int, lines: int) -> ReadResult:
    """The script's answer to a page that starts after the file's last line."""
    return read_error(file_path, f"Line offset {offset} exceeds file length ({lines} lines)")


def text_page(content: str, offset: int, end_line: int, total_lines: int | None) -> ReadResult:
    """A page of text from the 0-indexed line `offset` to the 1-indexed `end_line`;
    `total_lines` where the file's line count is known. `next_offset` is `end_line` unless the
    page is known to end the file."""
    ends_file = total_lines is not None and end_line >= total_lines
    return ReadResult(
        file_data=FileData(content=content, encoding="utf-8"),
        total_lines=total_lines,
        start_line=offset + 1,
        end_line=end_line,
        next_offset=None if ends_file else end_line,
    )


def as_base64(raw: bytes) -> ReadResult:
    return ReadResult(
        file_data=FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
    )


def render_page(raw: bytes, file_path: str, offset: int, limit: int) -> ReadResult | None:
    """The page of a text-named regular file holding `raw` (see the module docstring); None
    where BaseSandbox's own read must answer (an invalid byte after the first 8 KiB, a
    non-positive limit or a negative offset: their answers differ between releases)."""
    if not raw:
        return ReadResult(file_data=FileData(content=EMPTY_FILE_REMINDER, encoding="utf-8"))
    if not valid_utf8(raw[:PREFIX_BYTES], final=False):
        return as_base64(raw)
    if type(offset) is not int or type(limit) is not int or offset < 0 or limit <= 0:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = _TERMINATOR.split(text)
    if lines[-1] == "":
        lines.pop()
    if offset >= len(lines):
        return past_the_end(file_path, offset, len(lines))
    page = lines[offset : offset + limit]
    content = "\n".join(page)
    encoded = content.encode("utf-8")
    truncated = len(encoded) > EFFECTIVE_LIMIT
    if truncated:
        # Whole lines that fit, then the part of the next one that fits, on a character edge.
        used, shown = 0, 0
        for line in page:
            size = len(line.encode("utf-8")) + (1 if shown else 0)
            if used + size > EFFECTIVE_LIMIT:
                break
            used, shown = used + size, shown + 1
        content = encoded[:EFFECTIVE_LIMIT].decode("utf-8", errors="ignore") + TRUNCATION_MSG
        shown = max(shown, 1)
    else:
        shown = len(page)
    end_line = offset + shown
    at_end = end_line >= len(lines)
    total = len(lines) if at_end or len(raw) <= MAX_LINE_COUNT_BYTES else None
    return text_page(content, offset, end_line, total)
