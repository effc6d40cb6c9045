"""The POSIX file commands (`_files._portable`, for images without GNU findutils/coreutils,
such as busybox) answer exactly as the GNU ones: both run here on the same tree of awkward names,
symlinks, loops and special files, the GNU commands on this machine's tools, the scripts on them
and on busybox's applets alone (`OSB_BUSYBOX`, or `busybox` on PATH).

(The live tests `tests/live/core/test_core_on_busybox.py` and
`tests/live/deepagents_backend/test_tools_on_busybox.py` run them on the busybox image.)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from opensandbox_core._files import _fallback, _portable

_APPLETS = ("sh", "env", "find", "stat", "readlink", "mkdir", "mv", "chmod", "chown")


@pytest.fixture(params=["system", "busybox"])
def posix_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """PATH for the POSIX scripts: this machine's tools (dash, GNU), or busybox's applets only
    (OSB_BUSYBOX, else `busybox` on PATH; Debian's busybox-static is the testbed's)."""
    if request.param == "system":
        return os.environ["PATH"]
    binary = os.environ.get("OSB_BUSYBOX") or shutil.which("busybox")
    if not binary:
        pytest.skip("no busybox binary here (set OSB_BUSYBOX)")
    bin_dir = tmp_path / "busybox-bin"
    bin_dir.mkdir()
    for applet in _APPLETS:
        (bin_dir / applet).symlink_to(binary)
    return str(bin_dir)


def _run(argv: list[str], path: str | None = None) -> tuple[int, bytes, str]:
    """exit code, stdout and the error text of a file command, run as the core runs them."""
    env = {"PATH": path or os.environ["PATH"], "LC_ALL": "C"}
    done = subprocess.run(["env", "LC_ALL=C", *argv], capture_output=True, env=env, check=False)
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
def test_stat_records_are_gnu_find_s(tree: Path, name: str, posix_path: str) -> None:
    path = f"{tree}/{name}"
    gnu = _run(_portable.stat_argv(path, gnu=True))
    posix = _run(_portable.stat_argv(path, gnu=False), posix_path)
    assert (gnu[0] == 0, gnu[2]) == (posix[0] == 0, posix[2])
    assert _records(gnu[1]) == _records(posix[1])


@pytest.mark.parametrize("name", LIST)
def test_listing_records_are_gnu_find_s(tree: Path, name: str, posix_path: str) -> None:
    path = f"{tree}/{name}" if name else str(tree)
    gnu = _run(_portable.list_argv(path, gnu=True))
    posix = _run(_portable.list_argv(path, gnu=False), posix_path)
    assert (gnu[0] == 0, gnu[2]) == (posix[0] == 0, posix[2])
    assert _records(gnu[1]) == _records(posix[1])
    if name == "":
        assert len(_records(posix[1])) == 23  # 22 entries, and the directory


RESOLVE = ["d/..", "ld/..", "a/..", "missing/..", "dang/..", "up/..", "loop1/..", "ld/../ld/.."]
REALPATH = ["la", "ld/x/../y", "dang", "missing/../a", "a/x/../y", "loop1", "loop1/z/../w"]
REALPATH += ["c1", "c2/z", "x", "up/../q", "//d//a/", "sp ace/../$HOME/.", "nl\nname"]


@pytest.mark.parametrize("name", RESOLVE)
@pytest.mark.parametrize("create", [False, True])
def test_resolving_dotdot_is_gnu_realpath_e(
    tree: Path, name: str, create: bool, posix_path: str
) -> None:
    path = f"{tree}/{name}"
    gnu = _run(_portable.resolve_argv(path, create=create, gnu=True))
    posix = _run(_portable.resolve_argv(path, create=create, gnu=False), posix_path)
    if create and name == "dang/.." and "busybox-bin" in posix_path:
        # `mkdir -p` through a dangling symlink fails with both, GNU's saying EEXIST, busybox's
        # ENOENT: that is mkdir's own message, the same command on both
        assert (gnu[:2], gnu[2], posix[:2], posix[2]) == (
            (1, b""),
            "File exists",
            (1, b""),
            "No such file or directory",
        )
        return
    assert gnu == posix


@pytest.mark.parametrize("name", [*REALPATH, ""])
def test_realpath_is_gnu_realpath_m(tree: Path, name: str, posix_path: str) -> None:
    path = f"{tree}/{name}" if name else "/"
    gnu = _run(_portable.realpath_argv(path, gnu=True))
    posix = _run(_portable.realpath_argv(path, gnu=False), posix_path)
    assert gnu == posix
    assert gnu[0] == 0 and gnu[1].endswith(b"\0")


def test_the_probe_finds_gnu_tools_here_and_not_in_busybox(posix_path: str) -> None:
    assert _run(_portable.GNU_PROBE)[0] == 0
    if "busybox-bin" in posix_path:
        assert _run(_portable.GNU_PROBE, posix_path)[0] != 0


def test_finish_copies_the_mode_and_owner_without_reference(tree: Path, posix_path: str) -> None:
    """The rename into place (`_fallback.finish_argv`) reads the target's mode with `stat`."""
    temp = tree / "new"
    temp.write_bytes(b"new")
    os.chmod(temp, 0o600)
    argv = _fallback.finish_argv(str(temp), f"{tree}/a", parent=str(tree), mode="=")
    assert _run(argv, posix_path)[0] == 0
    assert (tree / "a").read_bytes() == b"new"
    assert os.stat(tree / "a").st_mode & 0o7777 == 0o4755
    assert not temp.exists()
