"""`read_lines`: a page of a text file's lines, costing about one page, not one file.

An agent's read tool pages through files (`offset`, `limit` lines). Read naively, every page
downloads the file from its start, so paging through a big file is quadratic. `LineReader`
(one per session; `AsyncSandboxSession.read_lines`) answers a page instead from:

- one download for a file up to `WHOLE_LIMIT` (1 MiB), its bytes kept with the file's version
  (size and modification time, checked on every later page, a `stat`), so the next pages of
  the same version cost only that check; the first page of a file costs no `stat` at all;
- HTTP Range reads for a bigger file: `LineIndex` (`_page_index.py`) remembers, per file
  version, where some lines start (every page's end, and checkpoints along any scan), so the
  next page of a sequential read starts where the last one ended and reads only its own bytes
  (plus `SLACK`); a jump forward scans from the nearest known line start. Bytes come through
  a read-ahead window kept with the index: a sequential read fetches its first page's bytes,
  then windows doubling from 1 MiB to 8 MiB, the next one in the background once half of the
  current one is used. The windows are bounded per session (`WINDOW_BUDGET`). Measured on the
  testbed (2026-12-01, loaded machine): an 8 MiB file in 22 pages took about 260-400 ms,
  about 12-18 ms a page; before, about 500 ms.

The page (`_page_layout.py`): lines end at `\\r\\n`, `\\r` or `\\n` and are joined by `\\n`; the
text is cut at `max_bytes` of UTF-8 on a character edge; `total_lines` is known where the page
reached the file's end, or where the file was read whole. Text is strict UTF-8: a file whose
first 8 KiB are not is binary, and a page whose bytes are not (the page's bytes and up to
`SLACK` after them, what a Python text reader would have decoded) raises `NotTextError`.

Deep Agents' read tool is built on this (`deepagents_opensandbox_backend._filesystem`), and its
differential tests compare the pages with BaseSandbox's own read script.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
from typing import Final, Protocol

from opensandbox_core import _validate
from opensandbox_core._errors import NotTextError, OutputLimitError, new_path_error
from opensandbox_core._types import FileInfo, LinePage

from ._page_index import Fetch, LineIndex, PageCache, reading_ahead
from ._page_layout import (
    PREFIX_BYTES,
    SLACK,
    TERMINATOR,
    Laid,
    NeedMore,
    Undecodable,
    layout,
    whole_page,
)

__all__ = ["MAX_PAGE_BYTES", "WHOLE_LIMIT", "LineReader", "PageSource", "read_page"]

WHOLE_LIMIT: Final = 1024 * 1024
"""Files up to this size are read whole, once per version; larger ones by Range reads."""
MAX_PAGE_BYTES: Final = 512 * 1024
"""`read_lines`' default `max_bytes`: the most text one page returns."""
MIN_WINDOW: Final = 64 * 1024
MAX_WINDOW: Final = 8 * 1024 * 1024
CHECKPOINT_EVERY: Final = 1 << 20
"""During a scan, a line start is remembered about once per this many bytes."""


class PageSource(Protocol):
    """What the reader needs of a session (`AsyncSandboxSession` is one)."""

    async def stat(self, path: str) -> FileInfo: ...

    async def realpath(self, path: str) -> str: ...

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes: ...

    async def read_range(self, path: str, offset: int, length: int) -> bytes: ...


def _valid(data: bytes, *, final: bool) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        return False
    return True


def _not_text(path: str, *, binary: bool) -> NotTextError:
    where = "its first 8 KiB are not UTF-8" if binary else "the page's bytes are not UTF-8"
    return NotTextError(
        f"{path!r} is not a UTF-8 text file ({where}); read it with read_bytes().",
        path=path,
        binary=binary,
    )


def _page(path: str, offset: int, laid: Laid, size: int) -> LinePage:
    return LinePage(
        path=path,
        text=laid.content.decode("utf-8"),
        offset=offset,
        end=laid.end,
        total_lines=laid.total,
        truncated=laid.truncated,
        size=size,
    )


def _version(info: FileInfo) -> tuple[object, ...]:
    return (info.size, info.modified_at)


class LineReader:
    """Pages of text files, with a cache of line indexes and read-ahead windows by file version
    (see the module docstring). Construction does no I/O."""

    def __init__(self, source: PageSource) -> None:
        self._source = source
        self._cache = PageCache()

    async def read_lines(self, path: str, offset: int, limit: int, *, max_bytes: int) -> LinePage:
        """Lines `offset` to `offset + limit` (0-based) of a text file."""
        _validate.non_negative_int(offset, "offset")
        _validate.positive_int(limit, "limit")
        _validate.positive_int(max_bytes, "max_bytes")
        if self._cache.get(path) is None:
            try:
                raw = await self._source.read_bytes(path, max_size=WHOLE_LIMIT)
            except OutputLimitError:
                pass  # over 1 MiB: paged by Range reads below
            else:
                page = self._whole(path, raw, offset, limit, max_bytes)
                if page.next_offset is not None:  # more pages will follow: keep the bytes
                    await self._keep_whole(path, raw)
                return page
        return await self._paged(path, offset, limit, max_bytes)

    @staticmethod
    def _whole(path: str, raw: bytes, offset: int, limit: int, max_bytes: int) -> LinePage:
        if not raw:
            return LinePage(path, "", offset, offset, 0, False, 0)
        try:
            return _page(path, offset, whole_page(raw, offset, limit, max_bytes), len(raw))
        except Undecodable as exc:
            raise _not_text(path, binary=exc.binary) from None

    async def _inspect(self, path: str) -> FileInfo:
        """The file's metadata, a symlink's target's (its size and mtime are the version)."""
        info = await self._source.stat(path)
        if info.kind == "symlink":  # a dangling one raises FileNotFoundError, as os.stat does
            info = await self._source.stat(await self._source.realpath(path))
        return info

    async def _keep_whole(self, path: str, raw: bytes) -> None:
        """Keep the bytes of a small file whose first page was just read whole, with its version
        (size and mtime, taken now: after the download), for the pages that follow: each of
        them then costs only the version check. Nothing is kept when the version does not fit
        the bytes (another size: the file changed since the download) or cannot be taken. A
        rewrite of the same size between the download and this check, within the mtime's
        resolution, is the one change this misses, as for every version check by size and
        mtime."""
        try:
            info = await self._inspect(path)
        except OSError:
            return
        if not info.is_file or info.size != len(raw):
            return
        index = LineIndex(version=_version(info), size=info.size)
        index.keep_window(0, raw)
        self._cache.put(path, index)
        self._cache.trim(index)

    async def _whole_bytes(self, index: LineIndex, path: str) -> bytes:
        """The bytes of a small file, downloaded once per version and kept as the index's
        window, so later pages of the same version cost only the version check."""
        held = index.cached(0, index.size)
        if held is not None and len(held) == index.size:
            return held
        raw = await self._source.read_bytes(path, max_size=WHOLE_LIMIT)
        if len(raw) == index.size:  # else the file changed since its stat: use it, keep nothing
            index.keep_window(0, raw)
            self._cache.trim(index)
        return raw

    async def _paged(self, path: str, offset: int, limit: int, max_bytes: int) -> LinePage:
        """A page through the cache: the version checked, then Range reads (or the kept bytes
        of a small file)."""

        async def ranged(start: int, length: int) -> bytes:
            return await self._source.read_range(path, start, length)

        cache = self._cache
        index = cache.get(path)
        planned = _first_request(index, offset, limit, max_bytes) if index is not None else None
        # A sequential read asks for the page's bytes while the file's version is checked: one
        # round trip per page (none but the check when the read-ahead window holds them). The
        # bytes are used only if the version is still the index's.
        pending: list[asyncio.Future[bytes]] = []
        if index is not None and planned is not None:
            pending.append(asyncio.ensure_future(reading_ahead(ranged, cache, index)(*planned)))
        try:
            info = await self._checked(path)
            if index is None or index.version != _version(info):
                await _settle(pending)
                pending.clear()
                index = LineIndex(version=_version(info), size=info.size)
                cache.put(path, index)
            if info.size <= WHOLE_LIMIT:
                return self._whole(
                    path, await self._whole_bytes(index, path), offset, limit, max_bytes
                )
            fetch = reading_ahead(ranged, cache, index)  # its state is the index's

            async def planned_fetch(start: int, length: int) -> bytes:
                if pending and planned == (start, length):
                    return await pending.pop()
                return await fetch(start, length)

            if index.prefix_binary is None:
                index.prefix_binary = not _valid(await ranged(0, PREFIX_BYTES), final=False)
            if index.prefix_binary:
                raise _not_text(path, binary=True)
            return await read_page(planned_fetch, index, path, offset, limit, max_bytes)
        finally:
            await _settle(pending)

    async def _checked(self, path: str) -> FileInfo:
        """The file's metadata; a path that is not a regular file (or gone) leaves the cache."""
        try:
            info = await self._inspect(path)
        except OSError:
            self._cache.drop(path)
            raise
        if not info.is_file:
            self._cache.drop(path)
            if info.is_dir:
                raise new_path_error(IsADirectoryError, errno.EISDIR, path)
            raise OSError(errno.EINVAL, "Not a regular file", path)
        return info


async def read_page(
    fetch: Fetch, index: LineIndex, path: str, offset: int, limit: int, max_bytes: int
) -> LinePage:
    """The page of a file over `WHOLE_LIMIT` whose first 8 KiB decode, by Range reads."""
    found = await _seek(fetch, index, offset)
    if found is None:
        raise _not_text(path, binary=False)
    start, lines_in_file = found
    if start is None:
        return LinePage(path, "", offset, offset, lines_in_file, False, index.size)
    guess = _window(index, limit, max_bytes)
    buf = bytearray()
    while True:
        want = min(guess, index.size - start - len(buf))
        more = await fetch(start + len(buf), want) if want > 0 else b""
        buf += more
        eof = start + len(buf) >= index.size or len(more) < want or want <= 0
        try:
            laid = layout(bytes(buf), eof, offset, limit, max_bytes)
        except NeedMore:
            if eof:  # cannot happen: at the end of the file every question has an answer
                raise AssertionError("paging needed bytes past the end of the file") from None
            guess = min(guess * 2, MAX_WINDOW)
            continue
        break
    checked = min(len(buf), laid.consumed + SLACK)
    if not _valid(bytes(buf[:checked]), final=eof and checked == len(buf)):
        raise _not_text(path, binary=False)
    index.learn(laid.end, start + laid.resume, start + checked)
    return _page(path, offset, laid, index.size)


def _window(index: LineIndex, limit: int, max_bytes: int) -> int:
    """How many bytes to read first for a page of `limit` lines."""
    guess = MIN_WINDOW
    if index.bytes_per_line is not None:
        guess = int(index.bytes_per_line * limit * 1.1) + SLACK
    return max(MIN_WINDOW, min(guess, 2 * max_bytes + SLACK))


def _first_request(
    index: LineIndex, offset: int, limit: int, max_bytes: int
) -> tuple[int, int] | None:
    """The (start, length) `read_page` reads first, when the index already knows where the
    page starts (a sequential read); None otherwise."""
    if index.prefix_binary is not False:
        return None
    line, pos = index.nearest(offset)
    if line != offset:
        return None
    return pos, max(0, min(_window(index, limit, max_bytes), index.size - pos))


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
            for match in TERMINATOR.finditer(chunk):
                line += 1
                if line == offset:
                    # Only the bytes up to the line's start are decoded on the way here.
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


async def _settle(pending: list[asyncio.Future[bytes]]) -> None:
    """Cancel a planned fetch the page did not use and wait for it to end, its exception
    retrieved, so asyncio does not log it."""
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
        for task in pending:
            if not task.cancelled():
                task.exception()
