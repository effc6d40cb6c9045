"""Paged `read()` with its read-ahead window, on a fake session that counts requests.

The page logic itself is compared with BaseSandbox's script in `test_paged_read.py`; here the
oracle is `render_page` on the whole file (the port, compared with the script in
`test_read_port.py`), and what is checked is what the window changes: how many requests a
sequential read costs, that a changed file is never served from an old window, and that the
windows held stay within their budget.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from _page_files import PageFiles, lines

from deepagents_opensandbox_backend._page_index import READAHEAD_MAX, WINDOW_BUDGET, PageCache
from deepagents_opensandbox_backend._paging import paged_read
from deepagents_opensandbox_backend._read import render_page
from opensandbox_core import AsyncSandboxSession

MIB = 1024 * 1024
LIMIT = 6000


def _read_all(files: PageFiles, cache: PageCache, path: str) -> list[Any]:
    async def run() -> list[Any]:
        session = cast(AsyncSandboxSession, files)
        pages, offset = [], 0
        while True:
            page = await paged_read(session, cache, path, offset, LIMIT)
            assert page is not None and page.error is None
            pages.append(page)
            if page.next_offset is None:
                return pages
            offset = page.next_offset

    return asyncio.run(run())


def test_sequential_pages_come_from_a_few_large_reads() -> None:
    data = lines(130_000)  # about 8 MiB: 22 pages of 6000 lines
    files = PageFiles({"/f.txt": data})
    pages = _read_all(files, PageCache(), "/f.txt")
    expected = [render_page(data, "/f.txt", 6000 * i, LIMIT) for i in range(len(pages))]
    assert pages == expected
    assert len(pages) == 22
    assert files.stats == len(pages)  # the version is checked on every page
    # The 8 KiB prefix, the first page's own bytes, then windows doubling from 1 MiB.
    assert len(files.ranges) <= 7, files.ranges
    moved = sum(min(length, len(data) - offset) for _, offset, length in files.ranges)
    assert moved <= len(data) + 2 * MIB
    assert max(length for _, _, length in files.ranges) <= READAHEAD_MAX


def test_a_changed_file_is_never_served_from_the_old_window() -> None:
    old = lines(60_000, b"o")
    new = lines(60_000, b"n")
    files = PageFiles({"/f.txt": old})
    cache = PageCache()

    async def page(offset: int) -> Any:
        return await paged_read(cast(AsyncSandboxSession, files), cache, "/f.txt", offset, LIMIT)

    async def run() -> None:
        assert await page(0) == render_page(old, "/f.txt", 0, LIMIT)
        assert await page(6000) == render_page(old, "/f.txt", 6000, LIMIT)
        files.replace("/f.txt", new)  # same size, a later mtime
        ranges_before = len(files.ranges)
        assert await page(12_000) == render_page(new, "/f.txt", 12_000, LIMIT)
        assert len(files.ranges) > ranges_before  # fetched again, not taken from the window

    asyncio.run(run())


def test_windows_held_stay_within_the_budget() -> None:
    names = [f"/f{i}.txt" for i in range(4)]
    files = PageFiles({name: lines(70_000, name[2:3].encode()) for name in names})
    cache = PageCache()

    async def run() -> None:
        session = cast(AsyncSandboxSession, files)
        for offset in range(0, 42_000, LIMIT):
            for name in names:  # interleaved: every file's window grows at once
                page = await paged_read(session, cache, name, offset, LIMIT)
                assert page == render_page(files.files[name], name, offset, LIMIT)
                held = sum(len(index.window) for index in cache._indexes.values())
                assert held <= WINDOW_BUDGET + READAHEAD_MAX  # the newest may exceed it alone

    asyncio.run(run())
