"""The page loop on raw bytes, for `_pages.py`: which lines a page holds, where it is cut
(`max_bytes`), and what the page says, decided from a window of the file's bytes that starts at
the page's first line.

`layout` answers from the bytes it is given or raises `NeedMore` when they do not decide the
page (a line, or the file's end, lies past the window; or fewer than `SLACK` bytes follow what
the page consumed). `layout_lf` (no `\\r` in the window: lines split in bulk) and `layout_any`
(line by line) make the same decisions; `tests/unit/core/test_line_pages.py` compares both, and
`tests/unit/deepagents_backend/test_paged_read.py` the pages with BaseSandbox's read script.
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate
from typing import Final, NamedTuple

__all__ = [
    "PREFIX_BYTES",
    "SLACK",
    "TERMINATOR",
    "Laid",
    "NeedMore",
    "Undecodable",
    "layout",
    "layout_any",
    "layout_lf",
    "valid_utf8",
    "whole_page",
]

SLACK: Final = 16 * 1024
"""Bytes read past a page: a text reader's decoder reads ahead 8 KiB, and a `\\r\\n` may
straddle."""
TERMINATOR: Final = re.compile(rb"\r\n|\r|\n")
"""What ends a line: `\\r\\n`, `\\r` or `\\n`, as Python's universal newlines split them."""
_TEXT_TERMINATOR: Final = re.compile(r"\r\n|\r|\n")
PREFIX_BYTES: Final = 8192
"""A file whose first 8 KiB are not UTF-8 is binary (`NotTextError.binary`)."""


class NeedMore(Exception):
    """The window does not hold enough of the file to decide the page: read more."""


class Laid(NamedTuple):
    """A laid-out page: its text as UTF-8 bytes (lines joined by `"\\n"`, cut at `max_bytes`;
    decoded by the caller once the window is known to be UTF-8), the line after its last one
    (`end`), the file's line count when the page reached its end (else None), whether it was
    cut, the bytes of the window it consumed, and where the line `end` starts in the window
    (`resume`)."""

    content: bytes
    end: int
    total: int | None
    truncated: bool
    consumed: int
    resume: int


def layout(buf: bytes, eof: bool, offset: int, limit: int, max_bytes: int) -> Laid:
    """The page loop on `buf`, which starts at line `offset` (`eof`: it reaches the end of the
    file); raises `NeedMore` when `buf` does not hold enough to decide."""
    if b"\r" not in buf:
        return layout_lf(buf, eof, offset, limit, max_bytes)
    return layout_any(buf, eof, offset, limit, max_bytes)


def layout_any(buf: bytes, eof: bool, offset: int, limit: int, max_bytes: int) -> Laid:
    """`layout` for any window, line by line (`\\r\\n`, `\\r` and `\\n` end lines)."""
    n = len(buf)
    pos = 0
    returned = 0
    consumed_lines = 0
    truncated = False
    at_eof = False
    parts: list[bytes] = []
    current = 0
    resume = 0
    while returned < limit and not truncated:
        if pos >= n:
            if not eof:
                raise NeedMore
            at_eof = True
            break
        match = TERMINATOR.search(buf, pos)
        if match is None:
            if not eof:
                raise NeedMore
            line_end = next_pos = n
        else:
            if match.end() == n and not eof and match.group() == b"\r":
                raise NeedMore
            line_end, next_pos = match.start(), match.end()
        raw = buf[pos:line_end]
        consumed_lines += 1
        piece = raw if returned == 0 else b"\n" + raw
        if current + len(piece) > max_bytes:
            truncated = True
            remaining = max_bytes - current
            if remaining > 0:
                prefix = piece[:remaining].decode("utf-8", errors="ignore")
                if prefix:
                    parts.append(prefix.encode("utf-8"))
                    current += len(prefix.encode("utf-8"))
            resume = pos
            pos = next_pos
            break
        parts.append(piece)
        current += len(piece)
        returned += 1
        pos = next_pos
        resume = pos
    if not at_eof:
        if pos >= n and not eof:
            raise NeedMore  # is the file's end right here? the next read tells
        at_eof = pos >= n
    if not eof and n - pos < SLACK:
        raise NeedMore
    return _finish(
        b"".join(parts), offset, returned, consumed_lines, truncated, at_eof, pos, resume
    )


def layout_lf(buf: bytes, eof: bool, offset: int, limit: int, max_bytes: int) -> Laid:
    """`layout` for a window without `\\r` (every line ends with `\\n`), in bulk: the same
    decisions, made on line lengths instead of line by line."""
    n = len(buf)
    pieces = buf.split(b"\n", limit)
    if len(pieces) > limit:
        lines, raw_lengths = pieces[:limit], [len(p) + 1 for p in pieces[:limit]]
    else:
        lines, raw_lengths = pieces[:-1], [len(p) + 1 for p in pieces[:-1]]
        if eof and pieces[-1]:  # the unterminated last line
            lines.append(pieces[-1])
            raw_lengths.append(len(pieces[-1]))
    # Content bytes after each line: "\n" joins the lines of a page.
    totals = list(accumulate(len(line) + (1 if i else 0) for i, line in enumerate(lines)))
    over = bisect.bisect_right(totals, max_bytes)
    ends = list(accumulate(raw_lengths))
    truncated = over < len(lines)
    at_eof = False
    prefix = b""
    if truncated:
        returned, consumed_lines = over, over + 1
        current = totals[over - 1] if over else 0
        piece = lines[over] if over == 0 else b"\n" + lines[over]
        remaining = max_bytes - current
        if remaining > 0:
            prefix = piece[:remaining].decode("utf-8", errors="ignore").encode("utf-8")
        pos = ends[over]
        resume = ends[over - 1] if over else 0
    else:
        returned = consumed_lines = len(lines)
        pos = resume = ends[-1] if ends else 0
        if returned < limit:
            if not eof:
                raise NeedMore
            at_eof = True
    if not at_eof:
        if pos >= n and not eof:
            raise NeedMore
        at_eof = pos >= n
    if not eof and n - pos < SLACK:
        raise NeedMore
    content = b"\n".join(lines[:returned]) + prefix
    return _finish(content, offset, returned, consumed_lines, truncated, at_eof, pos, resume)


def _finish(
    content: bytes,
    offset: int,
    returned: int,
    consumed_lines: int,
    truncated: bool,
    at_eof: bool,
    pos: int,
    resume: int,
) -> Laid:
    """The page for a laid-out window (see `layout`). A page of no lines is past the file's
    end (its `total` is then known); a page cut inside its first line still counts that line."""
    line_count = offset + consumed_lines
    if truncated and returned == 0:
        returned = 1
        resume = pos
    total_lines = line_count if at_eof else None
    return Laid(
        content if returned else b"", offset + returned, total_lines, truncated, pos, resume
    )


class Undecodable(Exception):
    """The bytes a page needs are not UTF-8; `binary` when the first `PREFIX_BYTES` are not."""

    def __init__(self, *, binary: bool) -> None:
        super().__init__("not UTF-8")
        self.binary = binary


def valid_utf8(data: bytes, *, final: bool) -> bool:
    """Whether `data` decodes as UTF-8 (`final=False`: a sequence cut at its end is fine)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not final and exc.end == len(data) and exc.reason == "unexpected end of data"
    return True


def whole_page(raw: bytes, offset: int, limit: int, max_bytes: int) -> Laid:
    """The page of a file read whole (`raw`, not empty); `total` is always known. Raises
    `Undecodable` when the file is not UTF-8 (`binary`: its first 8 KiB are not)."""
    if not valid_utf8(raw[:PREFIX_BYTES], final=False):
        raise Undecodable(binary=True)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Undecodable(binary=False) from None
    lines = _TEXT_TERMINATOR.split(text)
    if lines[-1] == "":
        lines.pop()
    if offset >= len(lines):
        return Laid(b"", offset, len(lines), False, len(raw), len(raw))
    page = lines[offset : offset + limit]
    content = "\n".join(page)
    encoded = content.encode("utf-8")
    truncated = len(encoded) > max_bytes
    if truncated:
        # Whole lines that fit, then the part of the next one that fits, on a character edge.
        used, shown = 0, 0
        for line in page:
            size = len(line.encode("utf-8")) + (1 if shown else 0)
            if used + size > max_bytes:
                break
            used, shown = used + size, shown + 1
        content = encoded[:max_bytes].decode("utf-8", errors="ignore")
        shown = max(shown, 1)
    else:
        shown = len(page)
    return Laid(content.encode(), offset + shown, len(lines), truncated, len(raw), len(raw))
