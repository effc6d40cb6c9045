"""Paged `read()` of large text files: a page costs about one page, not one file.

BaseSandbox's read script (`_READ_COMMAND_TEMPLATE` in `deepagents/backends/sandbox.py`) reads a
file from its start on every call, and the backend's whole-file download did the same over the
network: paging through a file was quadratic. For a text file over `MAX_LINE_COUNT_BYTES` (the
size above which the script stops counting the total lines, so the page depends only on the
bytes up to the page) this module renders the page from HTTP Range reads instead:

- `LineIndex` (`_page_index.py`) remembers, per file version (size and modification time, checked on every page),
  where some lines start: every page's end, and checkpoints along any scan. The next page of a
  sequential read starts where the last one ended, so it reads only its own bytes (plus
  `SLACK`); a jump forward scans from the nearest known line start.
- Bytes come through a read-ahead window kept with the index (so with one file version): a
  sequential read fetches its first page's bytes, then windows doubling from 1 MiB to 8 MiB,
  the next one in the background once half of the current one is used; a page inside the
  window costs only the version check. Windows are bounded per backend (`WINDOW_BUDGET`).
  Measured on the testbed (2026-12-01, loaded machine): an 8 MiB file in 22 pages went from
  about 500 ms to about 260-400 ms, about 12-18 ms a page, the cost of one `read` call whose
  page is already in memory; that call (version check + page layout + the blocking façade)
  is the floor while the Deep Agents tool makes one call per page.
- The page follows the contract `_read.py` describes, on raw bytes (`_page_layout.py`): line
  numbers, the 500 KiB truncation, the past-the-end message and `total_lines` (known only at
  the end of the file) come out as BaseSandbox's.
- Where the script would die on invalid UTF-8 (a byte it decodes: anything before the page's
  end, plus its 8 KiB read-ahead), `None` is returned and the caller runs the script, so that
  case stays exactly BaseSandbox's. `SLACK` covers twice the read-ahead, so the check is on the
  safe side: an invalid byte just past what the script decodes also sends the page to it.

`tests/live/deepagents_backend/test_native_tools.py` compares the pages with BaseSandbox's own
`read` on the same sandbox, on the installed deepagents release.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
from typing import Final

from deepagents.backends.protocol import ReadResult
from deepagents.backends.sandbox import MAX_OUTPUT_BYTES

from opensandbox_core import AsyncSandboxSession, FileInfo, OutputLimitError

from ._mapping import SCRIPT_ERRORS
from ._page_index import Fetch, LineIndex, PageCache, reading_ahead
from ._page_layout import SLACK, TERMINATOR, NeedMore, layout
from ._read import (
    MAX_LINE_COUNT_BYTES,
    PREFIX_BYTES,
    as_base64,
    past_the_end,
    read_error,
    render_page,
    text_named,
)

__all__ = ["PAGED_ABOVE", "keep_whole", "paged_read", "read_page"]

PAGED_ABOVE: Final = MAX_LINE_COUNT_BYTES
"""Text files larger than this are paged by Range reads; smaller ones are read whole, once per
file version (their bytes kept as the index's window)."""
MIN_WINDOW: Final = 64 * 1024
MAX_WINDOW: Final = 8 * 1024 * 1024
CHECKPOINT_EVERY: Final = 1 << 20
"""During a scan, a line start is remembered about once per this many bytes."""

BASE64_LIMIT: Final = 8 * 1024 * 1024
"""A text-named file whose first 8 KiB are not UTF-8 is returned whole as base64 (as the script
does) up to this size; larger ones are left to the script."""


def _valid(data: bytes, *, final: bool) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        return False
    return True


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
        return past_the_end(file_path, offset, lines_in_file)
    guess = _window(index, limit)
    buf = bytearray()
    while True:
        want = min(guess, index.size - start - len(buf))
        more = await fetch(start + len(buf), want) if want > 0 else b""
        buf += more
        eof = start + len(buf) >= index.size or len(more) < want or want <= 0
        try:
            page = layout(bytes(buf), eof, offset, limit)
        except NeedMore:
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
            for match in TERMINATOR.finditer(chunk):
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


def _version(info: FileInfo) -> tuple[object, ...]:
    return (info.size, info.modified_at)


async def _inspect(session: AsyncSandboxSession, file_path: str) -> FileInfo:
    """The file's metadata, a symlink's target's (its size and mtime are the version)."""
    info = await session.stat(file_path)
    if info.kind == "symlink":  # a dangling one raises FileNotFoundError here, as os.stat does
        info = await session.stat(await session.realpath(file_path))
    return info


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
    planned = _first_request(index, offset, limit) if index is not None else None
    # A sequential read asks for the page's bytes while the file's version is checked: one
    # round trip per page (none but the check when the read-ahead window holds them). The
    # bytes are used only if the version is still the index's.
    pending: list[asyncio.Future[bytes]] = []
    if index is not None and planned is not None:
        pending.append(asyncio.ensure_future(reading_ahead(ranged, cache, index)(*planned)))
    try:
        try:
            info = await _inspect(session, file_path)
        except OSError as exc:
            cache.drop(file_path)
            code = SCRIPT_ERRORS.get(exc.errno or 0)
            return read_error(file_path, code) if code is not None else None
        if not info.is_file:
            cache.drop(file_path)
            return read_error(file_path, SCRIPT_ERRORS[errno.EISDIR])
        if index is None or index.version != _version(info):
            for task in pending:
                task.cancel()
            pending.clear()
            index = LineIndex(version=_version(info), size=info.size)
            cache.put(file_path, index)
        fetch = reading_ahead(ranged, cache, index)  # its state is the index's: one per page

        async def planned_fetch(start: int, length: int) -> bytes:
            if pending and planned == (start, length):
                return await pending.pop()
            return await fetch(start, length)

        if info.size <= PAGED_ABOVE:
            raw = await _whole(session, cache, index, file_path)
            return None if raw is None else render_page(raw, file_path, offset, limit)
        if not text_named(file_path):
            return None  # BaseSandbox's read: its file-type table moves between releases
        if index.prefix_binary is None:
            index.prefix_binary = not _valid(await ranged(0, PREFIX_BYTES), final=False)
        if index.prefix_binary:
            return await _whole_base64(session, file_path, info.size)
        return await read_page(planned_fetch, index, file_path, offset, limit)
    finally:
        await _settle(pending)


async def _whole_base64(
    session: AsyncSandboxSession, file_path: str, size: int
) -> ReadResult | None:
    """The whole file as base64, as the script returns a text-named file whose first 8 KiB are
    not UTF-8; None over `BASE64_LIMIT` (left to the script)."""
    if size > BASE64_LIMIT:
        return None
    return as_base64(await session.read_bytes(file_path, max_size=BASE64_LIMIT))


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
