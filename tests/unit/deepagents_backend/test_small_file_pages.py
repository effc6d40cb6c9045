"""Paged `read()` of files up to 1 MiB: downloaded once per file version, not once per page.

The oracle is `render_page` on the file's current bytes (compared with BaseSandbox's script in
`test_read_port.py`); the fake session counts whole-file downloads and version checks.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from _page_files import PageFiles, lines

from deepagents_opensandbox_backend._page_index import PageCache
from deepagents_opensandbox_backend._paging import PAGED_ABOVE, keep_whole, paged_read
from deepagents_opensandbox_backend._read import render_page
from opensandbox_core import AsyncSandboxSession

LIMIT = 2000


def _page(files: PageFiles, cache: PageCache, path: str, offset: int) -> Any:
    """One `aread` page the way the backend makes it: the first page of an unknown file is
    rendered from a plain download, the next ones go through `paged_read`."""

    async def run() -> Any:
        if cache.get(path) is None:
            raw = await cast(Any, files).read_bytes(path, max_size=PAGED_ABOVE)
            page = render_page(raw, path, offset, LIMIT)
            if page is not None and page.next_offset is not None:
                await keep_whole(cast(AsyncSandboxSession, files), cache, path, raw)
            return page
        return await paged_read(cast(AsyncSandboxSession, files), cache, path, offset, LIMIT)

    page = asyncio.run(run())
    assert not files.ranges, "a small file is never read by ranges"
    return page


def test_pages_of_a_small_file_download_it_once() -> None:
    data = lines(12_000, b"a")  # about 750 KiB: 6 pages
    assert len(data) <= PAGED_ABOVE
    files, cache = PageFiles({"/s.txt": data}), PageCache()
    offset: int | None = 0
    pages = []
    while offset is not None:
        page = _page(files, cache, "/s.txt", offset)
        assert page == render_page(data, "/s.txt", offset, LIMIT)
        pages.append(page)
        offset = page.next_offset
    assert len(pages) == 6
    # One download; its version is checked once after it and once on each later page.
    assert files.downloads == 1
    assert files.stats == 6


def test_a_small_file_changed_between_pages_is_read_again() -> None:
    old = lines(8000, b"a")
    files, cache = PageFiles({"/s.txt": old}), PageCache()
    assert _page(files, cache, "/s.txt", 0) == render_page(old, "/s.txt", 0, LIMIT)
    assert _page(files, cache, "/s.txt", 2000) == render_page(old, "/s.txt", 2000, LIMIT)
    same_size = lines(8000, b"b")  # same size, new mtime: a new version
    files.replace("/s.txt", same_size)
    page = _page(files, cache, "/s.txt", 4000)
    assert page == render_page(same_size, "/s.txt", 4000, LIMIT)
    assert page.file_data["content"].startswith("b")
    shorter = lines(3000, b"c")
    files.replace("/s.txt", shorter)
    page = _page(files, cache, "/s.txt", 2000)
    assert page == render_page(shorter, "/s.txt", 2000, LIMIT)
    assert page.total_lines == 3000 and page.next_offset is None
    past_end = _page(files, cache, "/s.txt", 6000)
    assert past_end.error == "File '/s.txt': Line offset 6000 exceeds file length (3000 lines)"
    assert files.downloads == 3  # the first page, then once per new version


def test_a_small_file_grown_past_the_limit_is_paged_by_ranges() -> None:
    files, cache = PageFiles({"/s.txt": lines(8000, b"a")}), PageCache()
    _page(files, cache, "/s.txt", 0)
    big = lines(20_000, b"d")  # over 1 MiB now
    files.replace("/s.txt", big)

    async def ranged(path: str, offset: int, length: int) -> bytes:
        return files.files[path][offset : offset + length]

    files.read_range = ranged  # type: ignore[method-assign]
    page = _page(files, cache, "/s.txt", 2000)
    assert page.error is None
    assert page.file_data["content"].split("\n")[0] == f"d{2000:062d}"
    assert page.start_line == 2001 and page.end_line == 4000


def test_bytes_that_do_not_fit_the_version_are_not_kept() -> None:
    files, cache = PageFiles({"/s.txt": lines(8000, b"a")}), PageCache()
    stale = lines(7000, b"a")  # what a download saw before the file grew
    asyncio.run(keep_whole(cast(AsyncSandboxSession, files), cache, "/s.txt", stale))
    assert cache.get("/s.txt") is None
    page = _page(files, cache, "/s.txt", 0)
    assert page == render_page(files.files["/s.txt"], "/s.txt", 0, LIMIT)
