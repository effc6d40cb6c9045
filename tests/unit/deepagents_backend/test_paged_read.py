"""Paged `read()` (the core's Range reads and line index, rendered by `_texts.read_result`)
against BaseSandbox's public `read`, run locally.

Every page the backend renders from byte ranges must equal what the script prints for the
same file; where the paging gives up (`NotTextError`: invalid UTF-8 the script would decode)
the script is the answer, so that is accepted only when the script itself fails.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _local_sandbox import LocalSandbox
from deepagents.backends.protocol import ReadResult
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend._texts import EFFECTIVE_LIMIT, read_result
from opensandbox_core import NotTextError
from opensandbox_core._files._page_index import LineIndex
from opensandbox_core._files._pages import WHOLE_LIMIT as PAGED_ABOVE
from opensandbox_core._files._pages import read_page

MIB = 1024 * 1024


LOCAL = LocalSandbox()


def _script(path: Path, offset: int, limit: int) -> ReadResult:
    return BaseSandbox.read(LOCAL, str(path), offset, limit)


class _Counting:
    """A fetch over bytes that records how many bytes each page cost."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.moved = 0
        self.calls = 0

    async def __call__(self, start: int, length: int) -> bytes:
        self.calls += 1
        chunk = self.data[start : start + length]
        self.moved += len(chunk)
        return chunk


def _page(fetch: _Counting, index: LineIndex, path: Path, offset: int, limit: int) -> object:
    """The backend's page, or None where it hands the read to the script."""
    try:
        page = asyncio.run(read_page(fetch, index, str(path), offset, limit, EFFECTIVE_LIMIT))
    except NotTextError:
        return None
    return read_result(page)


def _straddling_crlf() -> bytes:
    # "\r\n" pairs split by every power-of-two window boundary the paging reads at.
    line = b"y" * 1021 + b"\r\n"  # 1023 bytes: boundaries fall at every position in turn
    return line * (PAGED_ABOVE // len(line) + 600)


FILES: dict[str, bytes] = {
    "lines64.txt": b"".join(b"%063d\n" % i for i in range(PAGED_ABOVE // 64 + 3000)),
    "crlf.txt": _straddling_crlf(),
    "cr_only.txt": b"".join(b"r%d\r" % i for i in range(300_000)),
    "mixed_unterminated.txt": b"".join(b"a%d\r\r\nb\n\n" % i for i in range(150_000)) + b"tail",
    "unicode.txt": "".join(f"{i} héllo 世界 🎉\n" for i in range(80_000)).encode(),
    "one_long_line.txt": b"z" * (2 * MIB) + b"\nafter\n",
    "long_lines.txt": b"".join(b"%d" % i + b"w" * 200_000 + b"\n" for i in range(12)),
    "empty_lines.txt": b"\n" * (PAGED_ABOVE + 10),
    "late_invalid.txt": b"ok line\n" * 200_000 + b"\xff\xfe\n" + b"more\n" * 1000,
}
WINDOWS = [
    (0, 2000),
    (1, 1),
    (5, 3),
    (131_000, 2000),
    (150_000, 100),
    (199_990, 50),
    (299_999, 5),
    (300_000, 1),
    (10_000_000, 3),
    (0, 100_000),
]


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_window_matches_the_script(tmp_path: Path, name: str) -> None:
    data = FILES[name]
    assert len(data) > PAGED_ABOVE
    path = tmp_path / name
    path.write_bytes(data)
    index = LineIndex(version=(len(data),), size=len(data))
    fetch = _Counting(data)
    for offset, limit in WINDOWS:  # one index for all: later windows start from checkpoints
        got = _page(fetch, index, path, offset, limit)
        expected = _script(path, offset, limit)
        if got is None:  # BaseSandbox's read answers: a late invalid byte
            assert expected.error and "unexpected server response" in expected.error, expected
        else:
            assert got == expected, (offset, limit)
        fresh = _page(_Counting(data), LineIndex(version=(0,), size=len(data)), path, offset, limit)
        assert fresh == got, ("a fresh index answers the same", offset, limit)


def test_sequential_pages_cost_one_page_each(tmp_path: Path) -> None:
    data = FILES["lines64.txt"] * 6  # about 7 MiB
    path = tmp_path / "seq.txt"
    path.write_bytes(data)
    index = LineIndex(version=(len(data),), size=len(data))
    offset, pages, limit = 0, 0, 6000
    expected_lines = data.count(b"\n")
    while True:
        fetch = _Counting(data)
        page = _page(fetch, index, path, offset, limit)
        assert isinstance(page, ReadResult) and page.error is None
        pages += 1
        # The page's own bytes plus the slack, never the file up to it.
        assert fetch.moved <= 64 * limit * 1.2 + 2 * 64 * 1024, (offset, fetch.moved)
        if pages in (1, 2, 40):
            assert page == _script(path, offset, limit)
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert pages == -(-expected_lines // limit)
    assert page.total_lines == expected_lines


def test_new_version_starts_a_new_index(tmp_path: Path) -> None:
    """The caller keys indexes by (size, mtime); a changed file gets a new one."""
    first = FILES["lines64.txt"]
    second = b"changed\n" + first
    path = tmp_path / "v.txt"
    path.write_bytes(first)
    old = LineIndex(version=(len(first), 1), size=len(first))
    assert _page(_Counting(first), old, path, 20_000, 10) == _script(path, 20_000, 10)
    path.write_bytes(second)
    new = LineIndex(version=(len(second), 2), size=len(second))
    assert _page(_Counting(second), new, path, 20_000, 10) == _script(path, 20_000, 10)
    assert old.version != new.version
