"""What `_pages.py` keeps per file version between pages, and the read-ahead through it.

- `LineIndex`: the known line starts of one version (size and mtime) of one file, and its
  read-ahead window: the bytes of the file last fetched, kept with the version they belong to.
- `PageCache`: the indexes of one session's recently paged files, by path. The session holds
  one (through its `LineReader`), so it lives and dies with the session; it bounds the files
  (`CACHED_FILES`) and the bytes of windows (`WINDOW_BUDGET`) it keeps.
- `reading_ahead`: a fetch through an index's window, which fetches ahead of a sequential read
  (windows doubling from `READAHEAD_FIRST` to `READAHEAD_MAX`), the next window in the
  background once half of the current one is used.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from opensandbox_core._lru import LruCache

__all__ = [
    "CACHED_FILES",
    "READAHEAD_FIRST",
    "READAHEAD_MAX",
    "WINDOW_BUDGET",
    "Fetch",
    "LineIndex",
    "PageCache",
    "reading_ahead",
]

MAX_CHECKPOINTS: Final = 4096
"""Line starts an index keeps at most (every other one dropped when it has more)."""
CACHED_FILES: Final = 32
"""Line indexes kept per page cache (least recently used dropped first)."""
READAHEAD_FIRST: Final = 1024 * 1024
READAHEAD_MAX: Final = 8 * 1024 * 1024
"""A sequential read fetches ahead of its page, the window doubling from the first to the max
size: the next pages come from memory and cost only the version check."""
WINDOW_BUDGET: Final = 16 * 1024 * 1024
"""Bytes of read-ahead windows kept per page cache (older files' windows dropped first)."""

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


class PageCache:
    """The line indexes of one session's recently paged files, by path (see the module
    docstring)."""

    def __init__(self) -> None:
        self._indexes: LruCache[str, LineIndex] = LruCache(CACHED_FILES)

    def get(self, path: str) -> LineIndex | None:
        return self._indexes.get(path)

    def put(self, path: str, index: LineIndex) -> None:
        self._indexes[path] = index

    def drop(self, path: str) -> None:
        self._indexes.pop(path, None)

    def trim(self, keep: LineIndex) -> None:
        """Drop the read-ahead windows of the least recently paged files while the windows
        held exceed `WINDOW_BUDGET` (`keep`'s is the last to go)."""
        indexes = [i for i in map(self._indexes.peek, self._indexes) if i is not None]
        held = sum(len(i.window) for i in indexes)
        for index in indexes:
            if held <= WINDOW_BUDGET:
                return
            if index is not keep and index.window:
                held -= len(index.window)
                index.keep_window(0, b"")


def reading_ahead(ranged: Fetch, cache: PageCache, index: LineIndex) -> Fetch:
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
