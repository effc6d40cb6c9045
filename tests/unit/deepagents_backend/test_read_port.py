"""The backend's `read` path (opensandbox-core's `read_lines` rendered by `_texts.read_result`)
against BaseSandbox's own public `read`, both run locally (`LocalFiles`, `LocalSandbox`), on the
installed deepagents release."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest
from _local_sandbox import LocalFiles, LocalSandbox
from deepagents.backends.protocol import ReadResult
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend._filesystem import native_read
from deepagents_opensandbox_backend._texts import text_named

LOCAL = LocalSandbox()

CASES: list[tuple[str, bytes]] = [
    ("plain.txt", b"Line 1\nLine 2\nLine 3"),
    ("trailing.txt", b"a\nb\n"),
    ("crlf.txt", b"a\r\nb\r\nc\r\n"),
    ("cr.txt", b"a\rb\rc"),
    ("mixed.txt", b"a\r\r\nb\n\nc\r"),
    ("only_newlines.txt", b"\n\n\n"),
    ("unicode.txt", "héllo\n世界\n🎉 emoji\n".encode()),
    ("bom.txt", "\ufeffbom first\nsecond".encode()),
    ("long_line.txt", b"x" * 600_000),
    ("many_lines.txt", b"".join(b"line %d\n" % i for i in range(5000))),
    ("wide.txt", b"".join(b"%06d " % i + b"y" * 300 + b"\n" for i in range(4000))),
    ("big.txt", b"".join(b"row %d\n" % i for i in range(200_000))),
    ("binary_prefix.txt", bytes(range(256)) * 3),
    ("image.png", bytes(range(256)) * 10),
    ("big_image.png", b"\x89PNG" + b"\0" * 600_000),
    ("empty.txt", b""),
    ("empty.png", b""),
    ("vt.txt", b"a\x0bb\x0cc\x1cd\xe2\x80\xa8e\nf"),
]
WINDOWS = [(0, 2000), (1, 1), (2, 5), (3, 10), (4999, 5), (5000, 1), (10_000, 3), (150_000, 100)]


def _native(path: Path, offset: int, limit: int) -> ReadResult | None:
    return asyncio.run(native_read(cast(Any, LocalFiles()), str(path), offset, limit))


@pytest.mark.parametrize(("name", "data"), CASES, ids=[c[0] for c in CASES])
def test_page_matches_the_read_script(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    if not text_named(name):
        return  # the backend hands media and document names to BaseSandbox's read
    for offset, limit in WINDOWS:  # a fresh reader each time: the first page's path
        assert _native(path, offset, limit) == BaseSandbox.read(LOCAL, str(path), offset, limit)


def test_later_pages_of_one_reader_match_the_read_script(tmp_path: Path) -> None:
    """The same reader for every page: the bytes kept with the file's version answer them."""
    path = tmp_path / "pages.txt"
    path.write_bytes(b"".join(b"line %d\r\n" % i for i in range(9000)))
    files = cast(Any, LocalFiles())
    offset: int | None = 0
    while offset is not None:
        page = asyncio.run(native_read(files, str(path), offset, 2000))
        assert page == BaseSandbox.read(LOCAL, str(path), offset, 2000), offset
        assert page is not None
        offset = page.next_offset


def test_media_names_go_to_base_sandbox() -> None:
    assert text_named("/a/b.txt") and text_named("/a/Makefile") and text_named("/a/.env")
    assert not text_named("/a/b.png") and not text_named("/a/b.PDF") and not text_named("/x.mkv")


def test_late_invalid_utf8_is_left_to_the_script(tmp_path: Path) -> None:
    path = tmp_path / "late.txt"
    path.write_bytes(b"ok\n" * 5000 + b"\xfe\xff\n")
    assert _native(path, 0, 10) is None
    assert _native(tmp_path / "missing.txt", 0, 10) == BaseSandbox.read(
        LOCAL, str(tmp_path / "missing.txt"), 0, 10
    )
