"""Paged `read()` of large text files: a page costs about one page, not one file.

BaseSandbox's read script (`_READ_COMMAND_TEMPLATE` in `deepagents/backends/sandbox.py`) reads a
file from its start on every call, and the backend's whole-file download did the same over the
network: paging through a file was quadratic. For a text file over `MAX_LINE_COUNT_BYTES` (the
size above which the script stops counting the total lines, so the page depends only on the
bytes up to the page) this module renders the page from HTTP Range reads instead:

- `LineIndex` remembers, per file version (size and modification time, checked on every page),
  where some lines start: every page's end, and checkpoints along any scan. The next page of a
  sequential read starts where the last one ended, so it reads only its own bytes (plus
  `SLACK`); a jump forward scans from the nearest known line start.
- Bytes come through a read-ahead window kept with the index (so with one file version): a
  sequential read fetches its first page's bytes, then windows doubling from 1 MiB to 8 MiB,
  the next one in the background once half of the current one is used; a page inside the
  window costs only the version check. Windows are bounded per session (`WINDOW_BUDGET`).
  Measured on the testbed (2026-12-01, loaded machine): an 8 MiB file in 22 pages went from
  about 500 ms to about 260-400 ms, about 12-18 ms a page, the cost of one `read` call whose
  page is already in memory; that call (version check + page layout + the blocking façade)
  is the floor while the Deep Agents tool makes one call per page.
- The page follows the contract `_read.py` describes, on raw bytes: line numbers, the
  500 KiB truncation, the past-the-end message and `total_lines` (known only at the end of
  the file) come out as BaseSandbox's.
- Where the script would die on invalid UTF-8 (a byte it decodes: anything before the page's
  end, plus its 8 KiB read-ahead), `None` is returned and the caller runs the script, so that
  case stays exactly BaseSandbox's. `SLACK` covers twice the read-ahead, so the check is on the
  safe side: an invalid byte just past what the script decodes also sends the page to it.

`tests/live/deepagents_backend/test_native_tools.py` compares the pages with BaseSandbox's own
`read` on the same sandbox, on the installed deepagents release.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import codecs
import errno
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Final

from deepagents.backends.protocol import FileData, ReadResult
from deepagents.backends.sandbox import MAX_OUTPUT_BYTES, TRUNCATION_MSG

from opensandbox_core import AsyncSandboxSession, FileInfo, OutputLimitError

from ._read import (
    EFFECTIVE_LIMIT,
    MAX_LINE_COUNT_BYTES,
    PREFIX_BYTES,
    READ_ERRORS,
    read_error,
    render_page,
    text_named,
)

__all__ = [
    "PAGED_ABOVE",
    "SLACK",
    "Fetch",
    "LineIndex",
    "PageCache",
    "keep_whole",
    "page_cache",
    "paged_read",
    "read_page",
]

PAGED_ABOVE: Final = MAX_LINE_COUNT_BYTES
"""Text files larger than this are paged by Range reads; smaller ones are read whole, once per
file version (their bytes kept as the index's window)."""
SLACK: Final = 16 * 1024
"""Bytes read past a page: the script's decoder reads ahead 8 KiB, and a `\\r\\n` may straddle."""
MIN_WINDOW: Final = 64 * 1024
MAX_WINDOW: Final = 8 * 1024 * 1024
MAX_CHECKPOINTS: Final = 4096
CHECKPOINT_EVERY: Final = 1 << 20
"""During a scan, a line start is remembered about once per this many bytes."""

BASE64_LIMIT: Final = 8 * 1024 * 1024
"""A text-named file whose first 8 KiB are not UTF-8 is returned whole as base64 (as the script
does) up to this size; larger ones are left to the script."""
CACHED_FILES: Final = 32
"""Line indexes kept per sandbox session (least recently used dropped first)."""
READAHEAD_FIRST: Final = 1024 * 1024
READAHEAD_MAX: Final = 8 * 1024 * 1024
"""A sequential read fetches ahead of its page, the window doubling from the first to the max
size: the next pages come from memory and cost only the version check."""
WINDOW_BUDGET: Final = 16 * 1024 * 1024
"""Bytes of read-ahead windows kept per sandbox session (older files' windows dropped first)."""

_EFFECTIVE_LIMIT: Final = EFFECTIVE_LIMIT
_TERMINATOR: Final = re.compile(rb"\r\n|\r|\n")

Fetch = Callable[[int, int], Awaitable[bytes]]
"""`fetch(start, length)`: up to `length` bytes of the file from byte `start`."""


@dataclass
class LineIndex:
    """Known line starts of one version of one file (size and mtime), for paging it.

    `starts` holds (line number, byte offset) pairs sorted by both; (0, 0) is always known.
    `prefix_binary` is None until the first 8 KiB were checked. `valid_to`: bytes before it are
    known to be valid UTF-8 (every known line start lies before it, since line starts are
    only learnt by reading the file from an earlier known start).
    """

    version: tuple[object, ...]
    size: int
    starts: list[tuple[int, int]] = field(default_factory=lambda: [(0, 0)])
    prefix_binary: bool | None = None
    valid_to: int = 0
    bytes_per_line: float | None = None
    window_start: int = 0
    window: bytes = field(default=b"", repr=False)
    readahead: int = 0
    ahead: asyncio.Future[bytes] | None = field(default=None, repr=False)
    ahead_start: int = 0
    ahead_loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def cached(self, start: int, length: int) -> bytes | None:
        """The file's bytes [start, start + length) (fewer at its end) from the read-ahead
        window of this version, or None when the window does not hold them all."""
        with self._lock:
            end = min(start + length, self.size)
            begin = start - self.window_start
            if begin < 0 or end - self.window_start > len(self.window):
                return None
            return self.window[begin : end - self.window_start]

    def keep_window(self, start: int, data: bytes) -> None:
        with self._lock:
            self.window_start, self.window = start, data

    def nearest(self, line: int) -> tuple[int, int]:
        """The known line start at or before `line`."""
        with self._lock:
            at = bisect.bisect_right(self.starts, (line, float("inf"))) - 1
            return self.starts[max(at, 0)]

    def learn(self, line: int, offset: int, valid_to: int) -> None:
        """Remember that `line` starts at byte `offset` and bytes before `valid_to` decode."""
        with self._lock:
            self.valid_to = max(self.valid_to, valid_to)
            if line > 0 and offset > 0:
                self.bytes_per_line = offset / line
            at = bisect.bisect_left(self.starts, (line, -1))
            if at < len(self.starts) and self.starts[at][0] == line:
                return
            self.starts.insert(at, (line, offset))
            if len(self.starts) > MAX_CHECKPOINTS:
                self.starts = [self.starts[0], *self.starts[1::2]]


def _valid(data: bytes, *, final: bool) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        return False
    return True


class _NeedMore(Exception):
    pass


async def read_page(
    fetch: Fetch, index: LineIndex, file_path: str, offset: int, limit: int
) -> ReadResult | None:
    """The page the read script prints for a text file over `PAGED_ABOVE` whose first 8 KiB
    decode (the caller checked size, kind, file type and prefix), or None where the script would
    die on invalid UTF-8 (the caller then runs it)."""
    if offset < 0 or limit <= 0:
        return None  # BaseSandbox's read answers these (its answer moved between releases)
    found = await _seek(fetch, index, offset)
    if found is None:
        return None
    start, lines_in_file = found
    if start is None:
        return read_error(
            file_path, f"Line offset {offset} exceeds file length ({lines_in_file} lines)"
        )
    guess = _window(index, limit)
    buf = bytearray()
    while True:
        want = min(guess, index.size - start - len(buf))
        more = await fetch(start + len(buf), want) if want > 0 else b""
        buf += more
        eof = start + len(buf) >= index.size or len(more) < want or want <= 0
        try:
            page = _layout(bytes(buf), eof, offset, limit)
        except _NeedMore:
            if eof:  # cannot happen: at the end of the file every question has an answer
                raise AssertionError("paging needed bytes past the end of the file") from None
            guess = min(guess * 2, MAX_WINDOW)
            continue
        break
    result, consumed, next_line_start, next_line = page
    checked = min(len(buf), consumed + SLACK)
    if not _valid(bytes(buf[:checked]), final=eof and checked == len(buf)):
        return None
    index.learn(next_line, start + next_line_start, start + checked)
    return result(file_path)


def _window(index: LineIndex, limit: int) -> int:
    """How many bytes to read first for a page of `limit` lines."""
    guess = MIN_WINDOW
    if index.bytes_per_line is not None:
        guess = int(index.bytes_per_line * limit * 1.1) + SLACK
    return max(MIN_WINDOW, min(guess, 2 * MAX_OUTPUT_BYTES + SLACK))


def _first_request(index: LineIndex, offset: int, limit: int) -> tuple[int, int] | None:
    """The (start, length) `read_page` reads first, when the index already knows where the
    page starts (a sequential read); None otherwise."""
    if offset < 0 or limit <= 0 or index.prefix_binary is not False:
        return None
    line, pos = index.nearest(offset)
    if line != offset:
        return None
    return pos, max(0, min(_window(index, limit), index.size - pos))


async def _seek(fetch: Fetch, index: LineIndex, offset: int) -> tuple[int | None, int] | None:
    """(byte offset where line `offset` starts, lines counted), or (None, lines in the file) when
    the file has no such line; None when a byte on the way is not UTF-8."""
    line, pos = index.nearest(offset)
    if line == offset:
        return pos, line
    window = MIN_WINDOW * 4
    line_start = pos
    decoder = codecs.getincrementaldecoder("utf-8")()
    while True:
        want = min(window, index.size - pos)
        chunk = await fetch(pos, want) if want > 0 else b""
        eof = pos + len(chunk) >= index.size or len(chunk) < want or want <= 0
        if not eof and chunk.endswith(b"\r"):
            chunk = chunk[:-1]  # a "\r\n" may straddle: look at this "\r" with the next read
        count = chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
        if line + count >= offset:
            for match in _TERMINATOR.finditer(chunk):
                line += 1
                if line == offset:
                    # Only the bytes up to the line's start are the script's to decode here.
                    try:
                        decoder.decode(chunk[: match.end()], final=False)
                    except UnicodeDecodeError:
                        return None
                    start = pos + match.end()
                    index.learn(line, start, start)
                    return start, line
        try:
            decoder.decode(chunk, final=eof)
        except UnicodeDecodeError:
            return None
        line += count
        last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if last >= 0:
            line_start = pos + last + 1
        pos += len(chunk)
        if last >= 0 and line_start - index.nearest(line)[1] >= CHECKPOINT_EVERY:
            index.learn(line, line_start, pos)
        if eof:
            # An unterminated last line still counts as a line.
            total = line + (1 if line_start < pos else 0)
            if total > offset:  # the unterminated last line is the one asked for
                return line_start, offset
            return None, total
        window = min(window * 2, MAX_WINDOW)


_Render = Callable[[str], ReadResult]


def _layout(buf: bytes, eof: bool, offset: int, limit: int) -> tuple[_Render, int, int, int]:
    """The script's page loop on `buf`, which starts at line `offset` (`eof`: it reaches the end
    of the file). Returns (render, bytes consumed, start of the next unreturned line in `buf`,
    its line number); raises `_NeedMore` when `buf` does not hold enough to decide."""
    if b"\r" not in buf:
        return _layout_lf(buf, eof, offset, limit)
    return _layout_any(buf, eof, offset, limit)


def _layout_any(buf: bytes, eof: bool, offset: int, limit: int) -> tuple[_Render, int, int, int]:
    """`_layout` for any window, line by line (`\r\n`, `\r` and `\n` end lines)."""
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
                raise _NeedMore
            at_eof = True
            break
        match = _TERMINATOR.search(buf, pos)
        if match is None:
            if not eof:
                raise _NeedMore
            line_end = next_pos = n
        else:
            if match.end() == n and not eof and match.group() == b"\r":
                raise _NeedMore
            line_end, next_pos = match.start(), match.end()
        raw = buf[pos:line_end]
        consumed_lines += 1
        piece = raw if returned == 0 else b"\n" + raw
        if current + len(piece) > _EFFECTIVE_LIMIT:
            truncated = True
            remaining = _EFFECTIVE_LIMIT - current
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
            raise _NeedMore  # is the file's end right here? the next read tells
        at_eof = pos >= n
    if not eof and n - pos < SLACK:
        raise _NeedMore
    return _finish(
        b"".join(parts), offset, returned, consumed_lines, truncated, at_eof, pos, resume
    )


def _layout_lf(buf: bytes, eof: bool, offset: int, limit: int) -> tuple[_Render, int, int, int]:
    """`_layout` for a window without `\r` (every line ends with `\n`), in bulk: the same
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
    over = bisect.bisect_right(totals, _EFFECTIVE_LIMIT)
    ends = list(accumulate(raw_lengths))
    truncated = over < len(lines)
    at_eof = False
    prefix = b""
    if truncated:
        returned, consumed_lines = over, over + 1
        current = totals[over - 1] if over else 0
        piece = lines[over] if over == 0 else b"\n" + lines[over]
        remaining = _EFFECTIVE_LIMIT - current
        if remaining > 0:
            prefix = piece[:remaining].decode("utf-8", errors="ignore").encode("utf-8")
        pos = ends[over]
        resume = ends[over - 1] if over else 0
    else:
        returned = consumed_lines = len(lines)
        pos = resume = ends[-1] if ends else 0
        if returned < limit:
            if not eof:
                raise _NeedMore
            at_eof = True
    if not at_eof:
        if pos >= n and not eof:
            raise _NeedMore
        at_eof = pos >= n
    if not eof and n - pos < SLACK:
        raise _NeedMore
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
) -> tuple[_Render, int, int, int]:
    """The script's result for a laid-out page (see `_layout`)."""
    line_count = offset + consumed_lines
    if truncated and returned == 0:
        returned = 1
        resume = pos
    next_line = offset + returned
    end_line = offset + returned
    total_lines = line_count if at_eof else None
    if total_lines is not None:
        next_offset = end_line if end_line < total_lines else None
    else:
        next_offset = end_line

    def render(file_path: str) -> ReadResult:
        if returned == 0:  # not truncated: the file ended before the page's first line
            return read_error(
                file_path, f"Line offset {offset} exceeds file length ({line_count} lines)"
            )
        text = content.decode("utf-8") + (TRUNCATION_MSG if truncated else "")
        return ReadResult(
            file_data=FileData(content=text, encoding="utf-8"),
            total_lines=total_lines,
            start_line=offset + 1,
            end_line=end_line,
            next_offset=next_offset,
        )

    return render, pos, resume, next_line


class PageCache:
    """The line indexes of one sandbox session's recently paged files, by path."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._indexes: OrderedDict[str, LineIndex] = OrderedDict()

    def get(self, path: str) -> LineIndex | None:
        with self._lock:
            index = self._indexes.get(path)
            if index is not None:
                self._indexes.move_to_end(path)
            return index

    def put(self, path: str, index: LineIndex) -> None:
        with self._lock:
            self._indexes[path] = index
            self._indexes.move_to_end(path)
            while len(self._indexes) > CACHED_FILES:
                self._indexes.popitem(last=False)

    def drop(self, path: str) -> None:
        with self._lock:
            self._indexes.pop(path, None)

    def trim(self, keep: LineIndex) -> None:
        """Drop the read-ahead windows of the least recently paged files while the windows
        held exceed `WINDOW_BUDGET` (`keep`'s is the last to go)."""
        with self._lock:
            held = sum(len(i.window) for i in self._indexes.values())
            for index in list(self._indexes.values()):
                if held <= WINDOW_BUDGET:
                    return
                if index is not keep and index.window:
                    held -= len(index.window)
                    index.keep_window(0, b"")


_caches: weakref.WeakKeyDictionary[AsyncSandboxSession, PageCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def page_cache(session: AsyncSandboxSession) -> PageCache:
    """The page cache of a session (made on first use, dropped with the session)."""
    with _caches_lock:
        cache = _caches.get(session)
        if cache is None:
            cache = _caches[session] = PageCache()
        return cache


def _version(info: FileInfo) -> tuple[object, ...]:
    return (info.size, info.modified_at)


async def _inspect(session: AsyncSandboxSession, file_path: str) -> FileInfo:
    """The file's metadata, a symlink's target's (its size and mtime are the version)."""
    info = await session.stat(file_path)
    if info.kind == "symlink":  # a dangling one raises FileNotFoundError here, as os.stat does
        info = await session.stat(await session.realpath(file_path))
    return info


def _reading_ahead(ranged: Fetch, cache: PageCache, index: LineIndex) -> Fetch:
    """`ranged` through `index`'s read-ahead window: a request the window holds costs nothing;
    a miss fetches its bytes and, once the file is read on past its first miss, more ahead
    (the window doubling up to `READAHEAD_MAX`). Once a page has used half of the window, the
    next window is fetched in the background, so a sequential read rarely waits for bytes.
    The window belongs to the index, so to one version of the file: the caller checks the
    version on every page, as before."""

    async def fetch(start: int, length: int) -> bytes:
        held = index.cached(start, length)
        if held is None and await _take_ahead(index, start):
            held = index.cached(start, length)
        if held is None:
            want = min(max(length, index.readahead), max(0, index.size - start))
            data = await ranged(start, want)
            index.keep_window(start, data)
            index.readahead = min(max(2 * index.readahead, READAHEAD_FIRST), READAHEAD_MAX)
            cache.trim(index)
            held = data[:length]
        _fetch_ahead(ranged, index, start + len(held))
        return held

    return fetch


async def _take_ahead(index: LineIndex, start: int) -> bool:
    """Join the background fetch to the window if it holds `start`; whether it did."""
    ahead = index.ahead
    if ahead is None or index.ahead_loop is not asyncio.get_running_loop():
        return False
    if not index.window_start <= start < index.ahead_start + READAHEAD_MAX:
        return False  # a jump: the background bytes are not the ones needed
    try:
        data = await asyncio.shield(ahead)
    except Exception:
        index.ahead = None
        return False
    with index._lock:
        if index.ahead is not ahead:
            return False
        index.ahead = None
        window_end = index.window_start + len(index.window)
        if window_end == index.ahead_start and start <= window_end:
            tail = index.window[start - index.window_start :]
            index.window_start, index.window = start, tail + data
        elif start >= index.ahead_start:
            index.window_start, index.window = index.ahead_start, data
        else:
            return False
    return True


def _fetch_ahead(ranged: Fetch, index: LineIndex, position: int) -> None:
    """Start fetching the window after the current one once `position` has passed its middle
    (one background fetch at a time)."""
    with index._lock:
        window_end = index.window_start + len(index.window)
        if index.ahead is not None or not index.window or window_end >= index.size:
            return
        if window_end - position > len(index.window) // 2:
            return
        length = min(max(index.readahead, READAHEAD_FIRST), index.size - window_end)
        index.readahead = min(2 * max(index.readahead, READAHEAD_FIRST), READAHEAD_MAX)
        index.ahead_start = window_end
        index.ahead_loop = asyncio.get_running_loop()
        index.ahead = asyncio.ensure_future(ranged(window_end, length))
        index.ahead.add_done_callback(_retrieved)


def _retrieved(future: asyncio.Future[bytes]) -> None:
    """A background fetch nobody awaited (the file changed, the reader stopped) must not be
    logged as an unretrieved exception."""
    if not future.cancelled():
        future.exception()


async def keep_whole(session: AsyncSandboxSession, cache: PageCache, path: str, raw: bytes) -> None:
    """Keep the bytes of a small file whose first page was just read whole, with its version
    (size and mtime, taken now: after the download), for the pages that follow: each of them
    then costs only the version check. Nothing is kept when the version does not fit the bytes
    (another size: the file changed since the download) or cannot be taken. A rewrite of the
    same size between the download and this check, within the mtime's resolution, is the one
    change this misses, as for every version check by size and mtime."""
    try:
        info = await _inspect(session, path)
    except OSError:
        return
    if not info.is_file or info.size != len(raw):
        return
    index = LineIndex(version=_version(info), size=info.size)
    index.keep_window(0, raw)
    cache.put(path, index)
    cache.trim(index)


async def _whole(
    session: AsyncSandboxSession, cache: PageCache, index: LineIndex, file_path: str
) -> bytes | None:
    """The bytes of a small file (at most `PAGED_ABOVE`), downloaded once per version: the
    script's page needs the whole file (`total_lines`), so the bytes are kept as the index's
    window and later pages of the same version cost only the version check. None when the
    download fails (the caller runs the script)."""
    held = index.cached(0, index.size)
    if held is not None and len(held) == index.size:
        return held
    try:
        raw = await session.read_bytes(file_path, max_size=PAGED_ABOVE)
    except (OSError, OutputLimitError):
        return None
    if len(raw) == index.size:  # else the file changed since its stat: use it, keep nothing
        index.keep_window(0, raw)
        cache.trim(index)
    return raw


async def paged_read(
    session: AsyncSandboxSession, cache: PageCache, file_path: str, offset: int, limit: int
) -> ReadResult | None:
    """A page of `file_path` through Range reads (see the module docstring); None where only
    BaseSandbox's script can answer exactly."""

    async def ranged(start: int, length: int) -> bytes:
        return await session.read_range(file_path, start, length)

    index = cache.get(file_path)
    fetch: Fetch = ranged if index is None else _reading_ahead(ranged, cache, index)
    planned = _first_request(index, offset, limit) if index is not None else None
    # A sequential read asks for the page's bytes while the file's version is checked: one
    # round trip per page (none but the check when the read-ahead window holds them). The
    # bytes are used only if the version is still the index's.
    pending: list[asyncio.Future[bytes]] = []
    if planned is not None:
        pending.append(asyncio.ensure_future(fetch(*planned)))

    async def planned_fetch(start: int, length: int) -> bytes:
        if pending and planned == (start, length):
            return await pending.pop()
        return await fetch(start, length)

    try:
        try:
            info = await _inspect(session, file_path)
        except OSError as exc:
            cache.drop(file_path)
            code = READ_ERRORS.get(exc.errno or 0)
            return read_error(file_path, code) if code is not None else None
        if not info.is_file:
            cache.drop(file_path)
            return read_error(file_path, READ_ERRORS[errno.EISDIR])
        if index is None or index.version != _version(info):
            for task in pending:
                task.cancel()
            pending.clear()
            index = LineIndex(version=_version(info), size=info.size)
            cache.put(file_path, index)
            fetch = _reading_ahead(ranged, cache, index)
        if info.size <= PAGED_ABOVE:
            raw = await _whole(session, cache, index, file_path)
            return None if raw is None else render_page(raw, file_path, offset, limit)
        if not text_named(file_path):
            return None  # BaseSandbox's read: its file-type table moves between releases
        if index.prefix_binary is None:
            index.prefix_binary = not _valid(await ranged(0, PREFIX_BYTES), final=False)
        if index.prefix_binary:
            if info.size > BASE64_LIMIT:
                return None
            raw = await session.read_bytes(file_path, max_size=BASE64_LIMIT)
            return ReadResult(
                file_data=FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
            )
        return await read_page(planned_fetch, index, file_path, offset, limit)
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
            for task in pending:
                if not task.cancelled():
                    task.exception()  # retrieved, so asyncio does not log it
