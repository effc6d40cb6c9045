"""`walk_files` and `glob`: the walk command run locally on hostile names, through the same
`run_bytes` wrapper the session sends (one base64 line), and the pattern dialect.

The walk must work with GNU tools under dash or bash, and with busybox alone (no python3, no
GNU tools): the busybox case runs where a busybox binary is found (`OSB_BUSYBOX`, else PATH),
with a PATH holding nothing but busybox's applets.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from opensandbox_core import ConfigurationError, FileMatch
from opensandbox_core._commands._encoded import unwrap, wrap
from opensandbox_core._files._glob import WALK, compile_glob, parse_walk
from opensandbox_core._validate import command_text

NAMES = [
    b"plain.txt",
    b"with space",
    b"trail-space  ",
    b" lead",
    b"cr\rname",
    b"crlf\r\nname",
    b"nl\nname",
    b"tab\tname",
    b"nel\xc2\x85name",
    b"bad\xffname",
    b"back\\slash",
    b"q'uote\"",
    b"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x8e\x89",
    b"-dash",
    b"$HOME",
    b"$(touch x)",
    b"`id`",
    b"ctl\x01\x1b\x7fname",
    b".hidden",
]
BUSYBOX = os.environ.get("OSB_BUSYBOX") or shutil.which("busybox")
APPLETS = ("sh", "find", "readlink", "printf", "ls", "echo", "base64", "[", "test")


def _shells(tmp_path: Path) -> list[tuple[str, dict[str, str]]]:
    system = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    shells = [(shell, system) for shell in ("sh", "bash") if shutil.which(shell)]
    if BUSYBOX:
        applets = tmp_path / "busybox-bin"
        applets.mkdir()
        for applet in APPLETS:
            (applets / applet).symlink_to(BUSYBOX)
        shells.append((str(applets / "sh"), {"PATH": str(applets)}))
    return shells


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    sub = root / "dir\nwith\rbreaks"
    sub.mkdir(parents=True)
    for name in NAMES:
        (root / os.fsdecode(name)).write_bytes(b"x\n")
    (sub / "deep.py").write_bytes(b"x\n")
    (root / "link\rname").symlink_to("plain.txt")
    (root / "to-dir").symlink_to(sub.name)  # a directory link: not entered, not listed
    (root / "dangling").symlink_to("missing")
    (root / "out").symlink_to(tmp_path / "outside.txt")  # leads out of the tree
    (root / "up").symlink_to("..")
    (tmp_path / "outside.txt").write_bytes(b"x\n")
    os.mkfifo(root / "fifo")
    return root


def _walk(shell: str, env: dict[str, str], root: str) -> list[FileMatch]:
    """`walk_files(root)` as the session runs it: the argv through `run_bytes`' wrapper."""
    text = command_text(["sh", "-c", WALK, "walk", root])
    done = subprocess.run(
        [shell, "-c", wrap(text)], capture_output=True, env={**env, "LC_ALL": "C"}, check=False
    )
    assert done.returncode == 0
    stdout = done.stdout.decode()
    assert stdout.isascii() and stdout.count("\n") == 1  # one line: exact on line-framed execd
    parsed = unwrap(stdout)
    assert parsed is not None
    return parse_walk(root, parsed[1], parsed[0], done.stderr.decode())


def test_every_name_comes_back_byte_for_byte(tree: Path, tmp_path: Path) -> None:
    expected = sorted(
        [
            *(FileMatch(f"{tree}/{os.fsdecode(n)}", os.fsdecode(n)) for n in NAMES),
            FileMatch(f"{tree}/dir\nwith\rbreaks/deep.py", "dir\nwith\rbreaks/deep.py"),
            FileMatch(f"{tree}/link\rname", "link\rname", is_symlink=True),
        ],
        key=lambda match: match.relative,
    )
    shells = _shells(tmp_path)
    assert shells
    for shell, env in shells:
        assert _walk(shell, env, str(tree)) == expected, shell
        assert _walk(shell, env, f"{tree}/") == [  # the root as given, joined once
            FileMatch(f"{tree}/{m.relative}", m.relative, m.is_symlink) for m in expected
        ]


def test_a_root_that_cannot_be_walked_raises_its_error(tree: Path, tmp_path: Path) -> None:
    for shell, env in _shells(tmp_path):
        with pytest.raises(FileNotFoundError) as missing:
            _walk(shell, env, str(tree / "missing"))
        assert missing.value.filename == str(tree / "missing")
        with pytest.raises(NotADirectoryError):
            _walk(shell, env, str(tree / "plain.txt"))
        linked = _walk(shell, env, str(tree / "to-dir"))  # a link to a directory as the root
        assert [m.relative for m in linked] == ["deep.py"], shell


def test_output_cut_short_or_a_failed_walk_is_an_error() -> None:
    for cut in (b"/r\0./a", b"/r\0./a\0", b"/r\0./a\0=\0./l\0"):
        with pytest.raises(OSError, match="cut short"):
            parse_walk("/r", 0, cut, "")
    with pytest.raises(PermissionError):
        parse_walk("/r", 4, b"/r\0./a\0", "find: ./x: Permission denied")
    assert parse_walk("/", 0, b"/\0./etc/hostname\0=\0./l\0/etc/hostname\0", "") == [
        FileMatch("/etc/hostname", "etc/hostname"),
        FileMatch("/l", "l", is_symlink=True),
    ]


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", "src/deep/b.py", ".hidden.py"], ["a.pyc", "py", "src/a.txt"]),
        ("src/*.py", ["src/a.py"], ["src/deep/a.py", "a.py", "x/src/a.py"]),
        ("src/**/*.py", ["src/a.py", "src/x/y/a.py"], ["a.py", "lib/src/a.py"]),
        ("**/test_*.py", ["test_a.py", "x/test_b.py"], ["x/a_test.py"]),
        ("src/**", ["src/a", "src/x/y"], ["srcx/a"]),
        ("*.{ts,tsx}", ["a.ts", "b/c.tsx"], ["a.js", "a.t"]),
        ("[!a]?.txt", ["bx.txt"], ["ax.txt", "b.txt"]),
        ("[ab]*", ["a1", "b"], ["c"]),
        ("$(touch x)", ["$(touch x)"], ["x"]),
        ("it's [", ["it's ["], ["it's"]),
        ("a\\b", ["a\\b"], ["ab"]),
        ("/src/*.py", ["src/a.py"], ["a.py"]),
    ],
)
def test_the_pattern_dialect(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    matches = compile_glob(pattern)
    assert all(matches(path) for path in matching), pattern
    assert not any(matches(path) for path in not_matching), pattern


def test_bad_patterns_are_refused() -> None:
    for bad in ("", "a\0b"):
        with pytest.raises(ConfigurationError):
            compile_glob(bad)
