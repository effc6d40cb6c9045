"""The client-side `read()` page renderer against BaseSandbox's own public `read`, run locally
(`LocalSandbox`: BaseSandbox with a local `execute`), on the installed deepagents release."""

from __future__ import annotations

from pathlib import Path

import pytest
from _local_sandbox import LocalSandbox
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend._read import render_page, text_named

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
WINDOWS = [
    (0, 2000),
    (1, 1),
    (2, 5),
    (3, 10),
    (0, 0),
    (-5, 2),
    (0, -1),
    (4999, 5),
    (5000, 1),
    (10_000, 3),
    (150_000, 100),
]


@pytest.mark.parametrize(("name", "data"), CASES, ids=[c[0] for c in CASES])
def test_page_matches_the_read_script(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    if not text_named(name):
        return  # the backend hands media and document names to BaseSandbox's read
    for offset, limit in WINDOWS:
        expected = BaseSandbox.read(LOCAL, str(path), offset, limit)
        got = render_page(data, str(path), offset, limit)
        if got is None:  # the backend runs BaseSandbox's read for this call
            assert offset < 0 or limit <= 0, (offset, limit)
        else:
            assert got == expected, (offset, limit)


def test_media_names_go_to_base_sandbox() -> None:
    assert text_named("/a/b.txt") and text_named("/a/Makefile") and text_named("/a/.env")
    assert not text_named("/a/b.png") and not text_named("/a/b.PDF") and not text_named("/x.mkv")


def test_late_invalid_utf8_is_left_to_the_script() -> None:
    data = b"ok\n" * 5000 + b"\xff\xfe\n"
    assert render_page(data, "/x/late.txt", 0, 10) is None
