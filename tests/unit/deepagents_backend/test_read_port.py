"""The client-side `read()` page renderer against BaseSandbox's own read script, run locally."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from deepagents.backends.sandbox import _build_read_cmd, _parse_read_output

from deepagents_opensandbox_backend._read import render_page

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
    for offset, limit in WINDOWS:
        script = _build_read_cmd(str(path), offset, limit)
        # The pyenv shim behind `python3` is slow to start; run the same interpreter directly.
        script = script.replace("python3 -c", f"{shlex.quote(sys.executable)} -c", 1)
        run = subprocess.run(["bash", "-c", script], capture_output=True, check=False)
        expected = _parse_read_output(run.stdout.decode(), str(path))
        assert render_page(data, str(path), offset, limit) == expected, (offset, limit)


def test_late_invalid_utf8_is_left_to_the_script() -> None:
    data = b"ok\n" * 5000 + b"\xff\xfe\n"
    assert render_page(data, "/x/late.txt", 0, 10) is None
