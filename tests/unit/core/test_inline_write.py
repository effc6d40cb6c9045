"""The one-command write (`_files._inline`): its `printf` format and its script, run by the real
shells of this machine (bash, and dash as a POSIX `sh`) on real files.

The live suites run the same script in the sandboxes (bash; busybox `sh` in the busybox image);
the request-count tests pin that a small write is this one command.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from opensandbox_core._files import _inline
from opensandbox_core._files._rename import LINK

SHELLS = [s for s in ("bash", "dash") if shutil.which(s)] + ["busybox"]
"""The shells the script runs under: bash (execd's), dash, and busybox's `sh` with nothing but
busybox's applets on PATH (an image without bash or coreutils; OSB_BUSYBOX, else skipped)."""
_APPLETS = ("sh", "printf", "echo", "stat", "mv", "mkdir", "chmod", "chown", "rm")


@pytest.fixture(scope="module")
def busybox_path(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    binary = os.environ.get("OSB_BUSYBOX") or shutil.which("busybox")
    if not binary:
        return None
    bin_dir = tmp_path_factory.mktemp("busybox-bin")
    for applet in _APPLETS:
        (bin_dir / applet).symlink_to(binary)
    return str(bin_dir)


@pytest.fixture
def run(busybox_path: str | None) -> Callable[[str, str], subprocess.CompletedProcess[bytes]]:
    def run(shell: str, text: str) -> subprocess.CompletedProcess[bytes]:
        assert text.isascii()
        if shell != "busybox":
            return subprocess.run([shell, "-c", text], capture_output=True, check=False)
        if busybox_path is None:
            pytest.skip("no busybox binary here (set OSB_BUSYBOX)")
        env = {"PATH": busybox_path}
        return subprocess.run(["sh", "-c", text], capture_output=True, env=env, check=False)

    return run


Run = Callable[[str, str], subprocess.CompletedProcess[bytes]]

CONTENTS = [
    b"",
    bytes(range(256)),
    b"-n starts like an option",
    b"%s %d %% \\ \\n ' \" $HOME `x` !",
    b"\x00123\x00\x07",  # NUL then digits: an escape never takes a following digit
    "héllo wörld\r\n".encode() + b"\xff\xfe invalid utf-8",
    b"line 1\n\tline 2\n\n",
    os.urandom(4096),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("content", CONTENTS, ids=range(len(CONTENTS)))
def test_the_format_prints_the_exact_bytes(run: Run, shell: str, content: bytes) -> None:
    done = run(shell, f"printf '{_inline.printf_format(content)}'")
    assert (done.returncode, done.stdout) == (0, content), done.stderr


def _write(
    run: Run, shell: str, target: Path, content: bytes, *, mode: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    temp = target.parent / f".{target.name}.osb-test.tmp"
    text = _inline.argv_text(
        str(temp), str(target), content, new_mode=0o644 if mode is None else mode, mode=mode
    )
    assert text is not None
    return run(shell, text)


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("shell", SHELLS)
def test_a_new_file_gets_its_parents_and_0644(run: Run, shell: str, tmp_path: Path) -> None:
    target = tmp_path / "a b" / "p$HOME" / "new.bin"
    done = _write(run, shell, target, bytes(range(256)))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"644\n", b"")
    assert target.read_bytes() == bytes(range(256))
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _names(target.parent) == ["new.bin"]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_replacement_keeps_the_mode_and_is_a_new_inode(
    run: Run, shell: str, tmp_path: Path
) -> None:
    target = tmp_path / "old.txt"
    target.write_bytes(b"old")
    target.chmod(0o751)
    before = target.stat().st_ino
    done = _write(run, shell, target, b"new")
    assert (done.returncode, done.stdout) == (0, b"751\n"), done.stderr
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert target.stat().st_ino != before  # renamed over, never written in place
    assert _names(tmp_path) == ["old.txt"]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("mode", [0o600, 0o755, 0o1640])
def test_a_mode_asked_for_is_applied(run: Run, shell: str, tmp_path: Path, mode: int) -> None:
    for target in (tmp_path / "new", tmp_path / "existing"):
        if target.name == "existing":
            target.write_bytes(b"x")
        done = _write(run, shell, target, b"data", mode=mode)
        assert (done.returncode, done.stdout) == (0, f"{mode:o}\n".encode()), done.stderr
        assert stat.S_IMODE(target.stat().st_mode) == mode


@pytest.mark.parametrize("shell", SHELLS)
def test_what_cannot_be_replaced_is_refused_untouched(run: Run, shell: str, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "real").write_bytes(b"real")
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "dangling").symlink_to("nowhere")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_bytes(b"f")
    statuses = {
        name: _write(run, shell, tmp_path / name, b"x").returncode
        for name in ("dir", "link", "dangling", "fifo")
    }
    assert statuses == {"dir": 84, "link": LINK, "dangling": LINK, "fifo": 85}
    under_a_file = _write(run, shell, tmp_path / "file" / "child", b"x")
    assert under_a_file.returncode == 1
    assert under_a_file.stderr.decode().strip().endswith("Not a directory")
    assert (tmp_path / "real").read_bytes() == b"real"
    assert _names(tmp_path) == ["dangling", "dir", "fifo", "file", "link", "real"]


def test_the_text_stays_under_the_limits() -> None:
    text = _inline.argv_text("/t", "/d", b"\xff" * 9_000, new_mode=0o644, mode=None)
    assert text is not None and len(text) <= _inline.TEXT_LIMIT
    # Random bytes take about 4 characters each: too long for one command, uploaded instead.
    assert _inline.argv_text("/t", "/d", b"\xff" * 12_000, new_mode=0o644, mode=None) is None
    assert (
        _inline.argv_text("/t", "/d", b"a" * (_inline.INLINE_LIMIT + 1), new_mode=0o644, mode=None)
        is None
    )
    assert _inline.TEXT_LIMIT < 128 * 1024  # Linux's limit for one argument of `bash -c`
