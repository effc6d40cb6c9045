"""The native `ls` command's output, run locally on hostile names.

It prints plain ASCII lines (so the core may return them from line events on line-framed
execd, `plain_lines=True`): names in C escapes, or the find listing where `ls` has no
`--quoting-style` (busybox). Decoded here, every name must come back as Python's `os.scandir`
names it, byte for byte, including names with line breaks of every kind and bytes that are not
UTF-8. (The glob walk is the core's: `tests/unit/core/test_file_walk.py`.)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from deepagents.backends.protocol import LsResult

from deepagents_opensandbox_backend._listing import (
    FIND_LISTING,
    DirectoryListing,
    list_directory,
    ls_argv,
    parse_find_listing,
    parse_ls,
    unescape_name,
)
from deepagents_opensandbox_backend._texts import ls_result
from opensandbox_core import CommandResult


def _as_ls(listing: DirectoryListing | None) -> LsResult | None:
    """A native listing as the Deep Agents backend reports it."""
    return None if listing is None else ls_result(listing.path, listing.entries, listing.error)


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
    listed = _as_ls(parse_ls(str(tree), code, stdout, stderr))
    assert listed is not None and listed.entries is not None
    expected = [
        {"path": os.path.join(str(tree), e.name), "is_dir": e.is_dir(follow_symlinks=False)}
        for e in os.scandir(str(tree))
    ]
    assert listed.entries == expected  # same names, same (directory) order


def _busybox_path(tmp_path: Path) -> str | None:
    """PATH with only busybox's applets (OSB_BUSYBOX, else `busybox` on PATH), or None."""
    binary = os.environ.get("OSB_BUSYBOX") or shutil.which("busybox")
    if not binary:
        return None
    bin_dir = tmp_path / "busybox-bin"
    bin_dir.mkdir()
    for applet in ("sh", "find", "base64", "echo"):
        (bin_dir / applet).symlink_to(binary)
    return str(bin_dir)


@pytest.mark.parametrize("tools", ["system", "busybox"])
def test_the_find_listing_gives_scandirs_entries(tree: Path, tmp_path: Path, tools: str) -> None:
    """Where `ls` has no `--quoting-style` (busybox), `FIND_LISTING` lists: the same entries,
    in the same order, as `os.scandir` (and so as the `ls` listing above)."""
    path = _C["PATH"] if tools == "system" else _busybox_path(tmp_path)
    if path is None:
        pytest.skip("no busybox binary here (set OSB_BUSYBOX)")
    link = tmp_path / "link-to-tree"
    link.symlink_to(tree)

    def listing(target: str) -> object:
        done = subprocess.run(
            ["sh", "-c", FIND_LISTING, "ls", target],
            capture_output=True,
            env={**_C, "PATH": path},
            check=False,
        )
        out, err = done.stdout.decode(), done.stderr.decode()
        return _as_ls(parse_find_listing(target, done.returncode, out, err))

    for target in (str(tree), str(tree) + "/", str(link)):
        expected = [
            {"path": os.path.join(target, e.name), "is_dir": e.is_dir(follow_symlinks=False)}
            for e in os.scandir(target)
        ]
        assert listing(target) == LsResult(entries=expected), target
    assert listing(str(tmp_path / "none")) == LsResult(
        entries=None, error=f"Path '{tmp_path / 'none'}': path_not_found"
    )
    for not_a_directory in (str(tree / "plain.txt"), str(tree / "plain.txt") + "/"):
        assert listing(not_a_directory) == LsResult(
            entries=None, error=f"Path '{not_a_directory}': not_a_directory"
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert listing(str(empty)) == LsResult(entries=[])


def test_unescape_refuses_what_it_does_not_know() -> None:
    assert unescape_name(r"a\ b\\c\r\n\302\205") == "a b\\c\r\n\x85"
    assert unescape_name(r"bad\377") == "bad\udcff"
    assert unescape_name(r"odd\q") is None  # not an escape `ls` prints: the script answers
    assert unescape_name("é") is None  # `ls` in the C locale never prints this raw


REFUSING_LS = """#!/bin/sh
for a; do case $a in --quoting-style=*) echo "ls: unrecognized option: ${a#--}" >&2; exit 1;; esac; done
exec /bin/ls "$@"
"""


class _LocalCommands:
    """`session.commands.run` on this machine: each argv command run here (with `PATH`),
    recorded."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.runs: list[list[str]] = []
        self.commands = self

    async def run(
        self, command: Sequence[str], *, env: Mapping[str, str], plain_lines: bool
    ) -> CommandResult:
        self.runs.append(list(command))
        done = subprocess.run(
            list(command), capture_output=True, env={**env, "PATH": self.path}, check=False
        )
        return CommandResult(done.returncode, done.stdout.decode(), done.stderr.decode())


@needs_gnu
@pytest.mark.parametrize("ls", ["gnu", "without-quoting-style"])
def test_the_listing_takes_the_find_route_where_ls_refuses(
    tree: Path, tmp_path: Path, ls: str
) -> None:
    """`list_directory` runs `ls` as one argv command (no shell) where it takes
    `--quoting-style`; where `ls` refuses it as busybox's does (such an `ls` comes first on
    PATH), a second command lists with `find`. Either way the entries are `os.scandir`'s."""
    path = _C["PATH"]
    if ls != "gnu":
        bin_dir = tmp_path / "refusing-bin"
        bin_dir.mkdir()
        (bin_dir / "ls").write_text(REFUSING_LS)
        (bin_dir / "ls").chmod(0o755)
        path = f"{bin_dir}:{path}"
    session: Any = _LocalCommands(path)

    def listing(target: str) -> DirectoryListing | None:
        return asyncio.run(list_directory(session, target))

    listed = listing(str(tree))
    find = ["sh", "-c", FIND_LISTING, "ls", str(tree)]
    assert session.runs == [ls_argv(str(tree))] + ([find] if ls != "gnu" else [])
    expected = [
        {"path": os.path.join(str(tree), e.name), "is_dir": e.is_dir(follow_symlinks=False)}
        for e in os.scandir(str(tree))
    ]
    assert _as_ls(listed) == LsResult(entries=expected)
    missing = str(tmp_path / "none")
    assert listing(missing) == DirectoryListing(missing, None, "path_not_found")
