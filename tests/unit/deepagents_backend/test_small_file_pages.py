"""Paged `read()` of files up to 1 MiB: downloaded once per file version, not once per page.

The oracle is `render_page` on the file's current bytes (compared with BaseSandbox's script in
`test_read_port.py`); the fake session counts whole-file downloads and version checks.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from deepagents_opensandbox_backend._paging import (
    PAGED_ABOVE,
    PageCache,
    keep_whole,
    paged_read,
)
from deepagents_opensandbox_backend._read import render_page
from opensandbox_core import AsyncSandboxSession, FileInfo, OutputLimitError

LIMIT = 2000


def _lines(count: int, tag: bytes = b"a") -> bytes:
    return b"".join(b"%s%062d\n" % (tag, i) for i in range(count))


class _Files:
    """The calls the read path makes, over in-memory files, counting them."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.changed = datetime(2026, 12, 1, tzinfo=UTC)
        self.stats = 0
        self.downloads = 0

    def replace(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self.changed += timedelta(seconds=1)

    async def stat(self, path: str) -> FileInfo:
        self.stats += 1
        return FileInfo(
            path=path,
            kind="file",
            size=len(self.files[path]),
            mode=0o644,
            modified_at=self.changed,
            is_file=True,
        )

    async def read_bytes(self, path: str, *, max_size: int) -> bytes:
        self.downloads += 1
        data = self.files[path]
        if len(data) > max_size:
            raise OutputLimitError(f"{path} is over {max_size} bytes.")
        return data

    async def read_range(self, path: str, offset: int, length: int) -> bytes:
        raise AssertionError("a small file is never read by ranges")


def _page(files: _Files, cache: PageCache, path: str, offset: int) -> Any:
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

    return asyncio.run(run())


def test_pages_of_a_small_file_download_it_once() -> None:
    data = _lines(12_000)  # about 750 KiB: 6 pages
    assert len(data) <= PAGED_ABOVE
    files, cache = _Files({"/s.txt": data}), PageCache()
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
    old = _lines(8000, b"a")
    files, cache = _Files({"/s.txt": old}), PageCache()
    assert _page(files, cache, "/s.txt", 0) == render_page(old, "/s.txt", 0, LIMIT)
    assert _page(files, cache, "/s.txt", 2000) == render_page(old, "/s.txt", 2000, LIMIT)
    same_size = _lines(8000, b"b")  # same size, new mtime: a new version
    files.replace("/s.txt", same_size)
    page = _page(files, cache, "/s.txt", 4000)
    assert page == render_page(same_size, "/s.txt", 4000, LIMIT)
    assert page.file_data["content"].startswith("b")
    shorter = _lines(3000, b"c")
    files.replace("/s.txt", shorter)
    page = _page(files, cache, "/s.txt", 2000)
    assert page == render_page(shorter, "/s.txt", 2000, LIMIT)
    assert page.total_lines == 3000 and page.next_offset is None
    past_end = _page(files, cache, "/s.txt", 6000)
    assert past_end.error == "File '/s.txt': Line offset 6000 exceeds file length (3000 lines)"
    assert files.downloads == 3  # the first page, then once per new version


def test_a_small_file_grown_past_the_limit_is_paged_by_ranges() -> None:
    files, cache = _Files({"/s.txt": _lines(8000)}), PageCache()
    _page(files, cache, "/s.txt", 0)
    big = _lines(20_000, b"d")  # over 1 MiB now
    files.replace("/s.txt", big)

    async def ranged(path: str, offset: int, length: int) -> bytes:
        return files.files[path][offset : offset + length]

    files.read_range = ranged  # type: ignore[method-assign]
    page = _page(files, cache, "/s.txt", 2000)
    assert page.error is None
    assert page.file_data["content"].split("\n")[0] == f"d{2000:062d}"
    assert page.start_line == 2001 and page.end_line == 4000


def test_bytes_that_do_not_fit_the_version_are_not_kept() -> None:
    files, cache = _Files({"/s.txt": _lines(8000)}), PageCache()
    stale = _lines(7000)  # what a download saw before the file grew
    asyncio.run(keep_whole(cast(AsyncSandboxSession, files), cache, "/s.txt", stale))
    assert cache.get("/s.txt") is None
    page = _page(files, cache, "/s.txt", 0)
    assert page == render_page(files.files["/s.txt"], "/s.txt", 0, LIMIT)
