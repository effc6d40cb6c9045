"""The native `ls` command's output, run locally on hostile names.

It prints plain ASCII lines (so the core may return them from line events on line-framed
execd, `plain_lines=True`): names in C escapes. Decoded here, every name must come back as
Python's `os.scandir` names it, byte for byte, including names with line breaks of every kind
and bytes that are not UTF-8. (The glob walk is the core's: `tests/unit/core/test_file_walk.py`.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deepagents_opensandbox_backend._tools import ls_argv, parse_ls, unescape_name

NAMES = [
    b"plain.txt",
    b"with space",
    b"trail-space  ",
    b" lead",
    b"cr\rname",
    b"crlf\r\nname",
    b"nl\nname",
    b"tab\tname",
    b"vt\x0bff\x0cname",
    b"nel\xc2\x85name",
    b"ls\xe2\x80\xa8name",
    b"bad\xffname",
    b"back\\slash",
    b"q'uote\"",
    b"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89",
    b"-dash",
    b"$HOME",
    b"ctl\x01\x1b\x7fname",
]
_C = {"LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}

needs_gnu = pytest.mark.skipif(
    shutil.which("ls") is None or shutil.which("base64") is None, reason="no coreutils"
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    os.mkdir(root)
    for name in NAMES:
        with open(os.path.join(bytes(root), name), "wb") as f:
            f.write(b"x\n")
    os.mkdir(os.path.join(bytes(root), b"dir\nwith\rbreaks\xff"))
    os.symlink(b"plain.txt", os.path.join(bytes(root), b"link\rname"))
    return root


def _run(argv: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(argv, capture_output=True, env=_C, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@needs_gnu
def test_ls_names_come_back_as_scandir_gives_them(tree: Path) -> None:
    code, stdout, stderr = _run(ls_argv(str(tree)))
    assert stdout.isascii() and all(line for line in stdout[:-1].split("\n"))
    assert "\r" not in stdout and stdout.endswith("\n")
    listed = parse_ls(str(tree), code, stdout, stderr)
    assert listed is not None and listed.entries is not None
    expected = [
        {"path": os.path.join(str(tree), e.name), "is_dir": e.is_dir(follow_symlinks=False)}
        for e in os.scandir(str(tree))
    ]
    assert listed.entries == expected  # same names, same (directory) order


def test_unescape_refuses_what_it_does_not_know() -> None:
    assert unescape_name(r"a\ b\\c\r\n\302\205") == "a b\\c\r\n\x85"
    assert unescape_name(r"bad\377") == "bad\udcff"
    assert unescape_name(r"odd\q") is None  # not an escape `ls` prints: the script answers
    assert unescape_name("é") is None  # `ls` in the C locale never prints this raw
