"""The POSIX file commands (`_files._portable`, for images without GNU findutils/coreutils,
such as busybox) answer exactly as the GNU ones: both run here, on this machine's `sh` and GNU
tools, on the same tree of awkward names, symlinks, loops and special files.

(The live tests `tests/live/core/test_core_on_busybox.py` and
`tests/live/deepagents_backend/test_tools_on_busybox.py` run them on the busybox image.)
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from opensandbox_core._files import _fallback, _portable


def _run(argv: list[str]) -> tuple[int, bytes, str]:
    done = subprocess.run(["env", "LC_ALL=C", *argv], capture_output=True, check=False)
    return done.returncode, done.stdout, _fallback.error_text(done.stderr.decode())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    for name in ("d", "sp ace", "$HOME"):
        (root / name).mkdir(parents=True)
    for name in ("a", "it's", "nl\nname", "-e", "$x", 'q"uote', "é中文"):
        (root / name).write_bytes(b"x" * len(name))
    os.chmod(root / "a", 0o4755)  # noqa: S103 (setuid: the mode is copied whole)
    (root / os.fsdecode(b"bad\xff")).write_bytes(b"")
    os.mkfifo(root / "ff")
    links = {"la": "a", "dang": "/nowhere", "ld": "d", "loop1": "loop2", "loop2": "loop1"}
    links |= {"c1": "c2", "c2": "c3", "c3": "c1", "up": "d/../sp ace", "x": "c2/q"}
    for name, target in links.items():
        os.symlink(target, root / name)
    return root


def _records(output: bytes) -> list[tuple[object, ...]]:
    """The parsed records (what the core uses), sorted; the name of the path asked about is
    left out (`find` prints it as given, the script its base name; the core ignores it)."""
    parsed = _fallback.parse_records(output.decode("utf-8", "surrogateescape"))
    fields = [dataclasses.astuple(r) for r in parsed]
    return sorted(f if f[7] else f[:8] for f in fields)


STAT = ["a", "la", "dang", "d", "ld", "missing", "$HOME", "ff", "loop1", "it's", "nl\nname"]
LIST = ["", "ld", "dang", "a", "missing", "loop1", "sp ace", "up"]


@pytest.mark.parametrize("name", STAT)
def test_stat_records_are_gnu_find_s(tree: Path, name: str) -> None:
    path = f"{tree}/{name}"
    gnu = _run(_portable.stat_argv(path, gnu=True))
    posix = _run(_portable.stat_argv(path, gnu=False))
    assert (gnu[0] == 0, gnu[2]) == (posix[0] == 0, posix[2])
    assert _records(gnu[1]) == _records(posix[1])


@pytest.mark.parametrize("name", LIST)
def test_listing_records_are_gnu_find_s(tree: Path, name: str) -> None:
    path = f"{tree}/{name}" if name else str(tree)
    gnu = _run(_portable.list_argv(path, gnu=True))
    posix = _run(_portable.list_argv(path, gnu=False))
    assert (gnu[0] == 0, gnu[2]) == (posix[0] == 0, posix[2])
    assert _records(gnu[1]) == _records(posix[1])
    if name == "":
        assert len(_records(posix[1])) == 23  # 22 entries, and the directory


RESOLVE = ["d/..", "ld/..", "a/..", "missing/..", "dang/..", "up/..", "loop1/..", "ld/../ld/.."]
REALPATH = ["la", "ld/x/../y", "dang", "missing/../a", "a/x/../y", "loop1", "loop1/z/../w"]
REALPATH += ["c1", "c2/z", "x", "up/../q", "//d//a/", "sp ace/../$HOME/.", "nl\nname"]


@pytest.mark.parametrize("name", RESOLVE)
@pytest.mark.parametrize("create", [False, True])
def test_resolving_dotdot_is_gnu_realpath_e(tree: Path, name: str, create: bool) -> None:
    path = f"{tree}/{name}"
    gnu = _run(_portable.resolve_argv(path, create=create, gnu=True))
    posix = _run(_portable.resolve_argv(path, create=create, gnu=False))
    assert gnu == posix


@pytest.mark.parametrize("name", [*REALPATH, ""])
def test_realpath_is_gnu_realpath_m(tree: Path, name: str) -> None:
    path = f"{tree}/{name}" if name else "/"
    gnu = _run(_portable.realpath_argv(path, gnu=True))
    posix = _run(_portable.realpath_argv(path, gnu=False))
    assert gnu == posix
    assert gnu[0] == 0 and gnu[1].endswith(b"\0")


def test_the_probe_finds_gnu_tools_here() -> None:
    assert _run(_portable.GNU_PROBE)[0] == 0


def test_finish_copies_the_mode_and_owner_without_reference(tree: Path) -> None:
    """The rename into place (`_fallback.finish_argv`) reads the target's mode with `stat`."""
    temp = tree / "new"
    temp.write_bytes(b"new")
    os.chmod(temp, 0o600)
    argv = _fallback.finish_argv(str(temp), f"{tree}/a", parent=str(tree), mode="=")
    assert _run(argv)[0] == 0
    assert (tree / "a").read_bytes() == b"new"
    assert os.stat(tree / "a").st_mode & 0o7777 == 0o4755
    assert not temp.exists()
