"""`read_lines` (the core's paged read) on a fake session that counts requests.

What a page says is compared with BaseSandbox's read script in the Deep Agents tests
(`tests/unit/deepagents_backend/test_paged_read.py`, `test_read_port.py`: the same pages, rendered
to its `ReadResult`). Here the oracle is `whole_page` on the whole file (the page of a file read
whole, which those tests check against the script), and what is checked is what paging changes:
how many requests a sequential read costs, that a changed file is never served from an old
window or old bytes, that the windows stay within their budget, and the errors.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from _page_files import PageFiles, lines

from opensandbox_core import LinePage, NotTextError
from opensandbox_core._files._page_index import READAHEAD_MAX, WINDOW_BUDGET, LineIndex
from opensandbox_core._files._page_layout import NeedMore, layout_any, layout_lf, whole_page
from opensandbox_core._files._pages import MAX_PAGE_BYTES, WHOLE_LIMIT, LineReader

MIB = 1024 * 1024
LIMIT = 6000


def _expected(data: bytes, path: str, offset: int, limit: int) -> LinePage:
    """The page of `data` as the file's whole bytes give it: `total_lines` only where the
    reader knows it (a file read whole, or a page that reached the end)."""
    laid = whole_page(data, offset, limit, MAX_PAGE_BYTES)
    assert laid.total is not None
    known = len(data) <= WHOLE_LIMIT or laid.end >= laid.total or laid.end == offset
    total = laid.total if known else None
    text = laid.content.decode()
    return LinePage(path, text, offset, laid.end, total, laid.truncated, len(data))


def _read_all(reader: LineReader, path: str, limit: int = LIMIT) -> list[LinePage]:
    async def run() -> list[LinePage]:
        pages, offset = [], 0
        while True:
            page = await reader.read_lines(path, offset, limit, max_bytes=MAX_PAGE_BYTES)
            pages.append(page)
            if page.next_offset is None:
                return pages
            offset = page.next_offset

    return asyncio.run(run())


def _page(reader: LineReader, path: str, offset: int, limit: int = LIMIT) -> LinePage:
    return asyncio.run(reader.read_lines(path, offset, limit, max_bytes=MAX_PAGE_BYTES))


def test_sequential_pages_come_from_a_few_large_reads() -> None:
    data = lines(130_000)  # about 8 MiB: 22 pages of 6000 lines
    files = PageFiles({"/f.txt": data})
    pages = _read_all(LineReader(files), "/f.txt")
    assert pages == [_expected(data, "/f.txt", 6000 * i, LIMIT) for i in range(len(pages))]
    assert len(pages) == 22 and pages[-1].total_lines == 130_000
    assert files.downloads == 1  # the first page tried a whole download (over 1 MiB: refused)
    assert files.stats == len(pages)  # then the version is checked on every page
    # The 8 KiB prefix, the first page's own bytes, then windows doubling from 1 MiB.
    assert len(files.ranges) <= 7, files.ranges
    moved = sum(min(length, len(data) - offset) for _, offset, length in files.ranges)
    assert moved <= len(data) + 2 * MIB
    assert max(length for _, _, length in files.ranges) <= READAHEAD_MAX


def test_a_changed_file_is_never_served_from_the_old_window() -> None:
    old, new = lines(60_000, b"o"), lines(60_000, b"n")
    files = PageFiles({"/f.txt": old})
    reader = LineReader(files)
    assert _page(reader, "/f.txt", 0) == _expected(old, "/f.txt", 0, LIMIT)
    assert _page(reader, "/f.txt", 6000) == _expected(old, "/f.txt", 6000, LIMIT)
    files.replace("/f.txt", new)  # same size, a later mtime
    ranges_before = len(files.ranges)
    assert _page(reader, "/f.txt", 12_000) == _expected(new, "/f.txt", 12_000, LIMIT)
    assert len(files.ranges) > ranges_before  # fetched again, not taken from the window


def test_windows_held_stay_within_the_budget() -> None:
    names = [f"/f{i}.txt" for i in range(4)]
    files = PageFiles({name: lines(70_000, name[2:3].encode()) for name in names})
    reader = LineReader(files)

    async def run() -> None:
        for offset in range(0, 42_000, LIMIT):
            for name in names:  # interleaved: every file's window grows at once
                page = await reader.read_lines(name, offset, LIMIT, max_bytes=MAX_PAGE_BYTES)
                assert page == _expected(files.files[name], name, offset, LIMIT)
                held = sum(len(index.window) for index in reader._cache._indexes.values())
                assert held <= WINDOW_BUDGET + READAHEAD_MAX  # the newest may exceed it alone

    asyncio.run(run())


def test_pages_of_a_small_file_download_it_once() -> None:
    data = lines(12_000, b"a")  # about 750 KiB: 6 pages of 2000 lines
    assert len(data) <= WHOLE_LIMIT
    files = PageFiles({"/s.txt": data})
    pages = _read_all(LineReader(files), "/s.txt", 2000)
    assert pages == [_expected(data, "/s.txt", 2000 * i, 2000) for i in range(6)]
    assert all(page.total_lines == 12_000 for page in pages)  # read whole: always known
    # One download; its version is checked once after it and once on each later page.
    assert files.downloads == 1 and files.stats == 6 and not files.ranges


def test_a_small_file_changed_between_pages_is_read_again() -> None:
    old = lines(8000, b"a")
    files = PageFiles({"/s.txt": old})
    reader = LineReader(files)
    assert _page(reader, "/s.txt", 0, 2000) == _expected(old, "/s.txt", 0, 2000)
    assert _page(reader, "/s.txt", 2000, 2000) == _expected(old, "/s.txt", 2000, 2000)
    same_size = lines(8000, b"b")  # same size, new mtime: a new version
    files.replace("/s.txt", same_size)
    page = _page(reader, "/s.txt", 4000, 2000)
    assert page == _expected(same_size, "/s.txt", 4000, 2000) and page.text.startswith("b")
    shorter = lines(3000, b"c")
    files.replace("/s.txt", shorter)
    page = _page(reader, "/s.txt", 2000, 2000)
    assert page.total_lines == 3000 and page.next_offset is None and page.end == 3000
    past_end = _page(reader, "/s.txt", 6000, 2000)
    assert (past_end.text, past_end.end, past_end.total_lines) == ("", 6000, 3000)
    assert files.downloads == 3  # the first page, then once per new version
    assert not files.ranges


def test_a_small_file_grown_past_the_limit_is_paged_by_ranges() -> None:
    files = PageFiles({"/s.txt": lines(8000, b"a")})
    reader = LineReader(files)
    _page(reader, "/s.txt", 0, 2000)
    files.replace("/s.txt", lines(20_000, b"d"))  # over 1 MiB now
    page = _page(reader, "/s.txt", 2000, 2000)
    assert page.text.split("\n")[0] == f"d{2000:062d}"
    assert (page.offset, page.end, page.total_lines) == (2000, 4000, None)
    assert files.ranges


def test_bytes_that_do_not_fit_the_version_are_not_kept() -> None:
    files = PageFiles({"/s.txt": lines(8000, b"a")})
    reader = LineReader(files)
    stale = lines(7000, b"a")  # what a download saw before the file grew
    asyncio.run(reader._keep_whole("/s.txt", stale))
    assert reader._cache.get("/s.txt") is None
    assert _page(reader, "/s.txt", 0, 2000) == _expected(files.files["/s.txt"], "/s.txt", 0, 2000)


@pytest.mark.parametrize("size", [100, 2 * MIB])
def test_binary_and_late_invalid_files_raise_not_text(size: int) -> None:
    binary = b"\xff\xfe" + b"a\n" * (size // 2)
    late = b"ok\n" * max(size // 3, 4000) + b"\xff\n"
    files = PageFiles({"/bin.txt": binary, "/late.txt": late})
    reader = LineReader(files)
    with pytest.raises(NotTextError) as caught:
        _page(reader, "/bin.txt", 0)
    assert caught.value.binary and caught.value.path == "/bin.txt"
    assert isinstance(caught.value, ValueError)
    with pytest.raises(NotTextError) as caught:
        _page(reader, "/late.txt", late.count(b"\n") - 5)
    assert not caught.value.binary
    if size > WHOLE_LIMIT:  # paged: only the bytes around the page are decoded
        assert _page(reader, "/late.txt", 0, 10).text == "\n".join(["ok"] * 10)
    else:  # read whole: the whole file must decode (its line count needs all of it)
        with pytest.raises(NotTextError):
            _page(reader, "/late.txt", 0, 10)


def test_empty_files_directories_and_bad_arguments() -> None:
    files = PageFiles({"/e.txt": b"", "/x.txt": b"one\ntwo"})
    reader = LineReader(files)
    empty = _page(reader, "/e.txt", 0)
    assert (empty.text, empty.size, empty.total_lines, empty.next_offset) == ("", 0, 0, None)
    with pytest.raises(IsADirectoryError):
        _page(reader, "/dir/", 0)
    with pytest.raises(FileNotFoundError):
        _page(reader, "/missing.txt", 0)
    for offset, limit, max_bytes in ((-1, 1, 10), (0, 0, 10), (0, 1, 0), (True, 1, 10)):
        with pytest.raises((ValueError, TypeError)):
            asyncio.run(reader.read_lines("/x.txt", offset, limit, max_bytes=max_bytes))
    cut = asyncio.run(reader.read_lines("/x.txt", 0, 2, max_bytes=5))
    assert (cut.text, cut.end, cut.truncated, cut.next_offset) == ("one\nt", 1, True, 1)


def test_checkpoints_stay_bounded() -> None:
    index = LineIndex(version=(1,), size=10**9)
    for line in range(1, 20_000):
        index.learn(line, line * 100, line * 100)
    assert len(index.starts) <= 4096
    assert index.starts[0] == (0, 0)
    line, offset = index.nearest(12_345)
    assert line <= 12_345 and offset == line * 100


def _outcome(layout: Any, buf: bytes, eof: bool, offset: int, limit: int) -> object:
    try:
        return layout(buf, eof, offset, limit, MAX_PAGE_BYTES)
    except NeedMore:
        return "more"


@pytest.mark.parametrize("seed", range(40))
def test_bulk_layout_decides_like_the_line_by_line_one(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 5, 63, 1000, 40_000, 300_000]) for _ in range(rng.randint(1, 60))]
    buf = b"".join(("é" * (n // 2)).encode()[:n] + b"\n" for n in lengths)
    if rng.random() < 0.5:
        buf += b"tail"
    cut = rng.randint(0, len(buf))
    for eof in (True, False):
        window = buf if eof else buf[:cut]
        for limit in (1, 2, 7, 2000):
            assert _outcome(layout_lf, window, eof, 3, limit) == _outcome(
                layout_any, window, eof, 3, limit
            ), (eof, limit)
