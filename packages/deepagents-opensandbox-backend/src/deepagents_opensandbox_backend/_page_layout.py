"""The read script's page loop on raw bytes, for `_paging.py`: which lines a page holds, where
it is cut (`MAX_OUTPUT_BYTES` with `TRUNCATION_MSG`), and what the result says, decided from a
window of the file's bytes that starts at the page's first line.

`layout` answers from the bytes it is given or raises `NeedMore` when they do not decide the
page (a line, or the file's end, lies past the window; or fewer than `SLACK` bytes follow what
the page consumed). `layout_lf` (no `\\r` in the window: lines split in bulk) and `layout_any`
(line by line) make the same decisions; `tests/unit/deepagents_backend/test_paged_read.py`
compares both, and the pages with BaseSandbox's script.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Final

from deepagents.backends.protocol import ReadResult
from deepagents.backends.sandbox import TRUNCATION_MSG

from ._read import EFFECTIVE_LIMIT, past_the_end, text_page

__all__ = ["SLACK", "TERMINATOR", "NeedMore", "Render", "layout", "layout_any", "layout_lf"]

SLACK: Final = 16 * 1024
"""Bytes read past a page: the script's decoder reads ahead 8 KiB, and a `\\r\\n` may straddle."""
TERMINATOR: Final = re.compile(rb"\r\n|\r|\n")
"""What ends a line, as the script splits them."""


class NeedMore(Exception):
    """The window does not hold enough of the file to decide the page: read more."""


Render = Callable[[str], ReadResult]
"""`render(file_path)`: the page's `ReadResult` (the path goes into its error message)."""


def layout(buf: bytes, eof: bool, offset: int, limit: int) -> tuple[Render, int, int, int]:
    """The script's page loop on `buf`, which starts at line `offset` (`eof`: it reaches the end
    of the file). Returns (render, bytes consumed, start of the next unreturned line in `buf`,
    its line number); raises `NeedMore` when `buf` does not hold enough to decide."""
    if b"\r" not in buf:
        return layout_lf(buf, eof, offset, limit)
    return layout_any(buf, eof, offset, limit)


def layout_any(buf: bytes, eof: bool, offset: int, limit: int) -> tuple[Render, int, int, int]:
    """`layout` for any window, line by line (`\r\n`, `\r` and `\n` end lines)."""
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
        if current + len(piece) > EFFECTIVE_LIMIT:
            truncated = True
            remaining = EFFECTIVE_LIMIT - current
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


def layout_lf(buf: bytes, eof: bool, offset: int, limit: int) -> tuple[Render, int, int, int]:
    """`layout` for a window without `\r` (every line ends with `\n`), in bulk: the same
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
    over = bisect.bisect_right(totals, EFFECTIVE_LIMIT)
    ends = list(accumulate(raw_lengths))
    truncated = over < len(lines)
    at_eof = False
    prefix = b""
    if truncated:
        returned, consumed_lines = over, over + 1
        current = totals[over - 1] if over else 0
        piece = lines[over] if over == 0 else b"\n" + lines[over]
        remaining = EFFECTIVE_LIMIT - current
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
) -> tuple[Render, int, int, int]:
    """The script's result for a laid-out page (see `layout`)."""
    line_count = offset + consumed_lines
    if truncated and returned == 0:
        returned = 1
        resume = pos
    next_line = offset + returned
    total_lines = line_count if at_eof else None

    def render(file_path: str) -> ReadResult:
        if returned == 0:  # not truncated: the file ended before the page's first line
            return past_the_end(file_path, offset, line_count)
        text = content.decode("utf-8") + (TRUNCATION_MSG if truncated else "")
        return text_page(text, offset, next_line, total_lines)

    return render, pos, resume, next_line
