"""The native tools' pure parts without a sandbox: `ls` output parsing, the edit decisions against
BaseSandbox's edit script run locally, and the glob matcher compiled from BaseSandbox's script."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from deepagents.backends.sandbox import _build_edit_inline_cmd, _parse_edit_output

from deepagents_opensandbox_backend import _glob
from deepagents_opensandbox_backend._tools import choose_replacement, ls_argv, parse_ls


def test_ls_argv_lists_the_directory_itself() -> None:
    assert ls_argv("/a b") == ["ls", "-f", "-p", "--quoting-style=escape", "--", "/a b/"]


def test_ls_output_becomes_base_sandbox_entries() -> None:
    out = "./\nsub/\nnl\\nname\n../\n-x\nsp\\ \\\\\n"
    assert parse_ls("/d/", 0, out, "") == parse_ls("/d", 0, out, "")
    result = parse_ls("/d", 0, out, "")
    assert result is not None
    assert result.entries == [
        {"path": "/d/sub", "is_dir": True},
        {"path": "/d/nl\nname", "is_dir": False},
        {"path": "/d/-x", "is_dir": False},
        {"path": "/d/sp \\", "is_dir": False},
    ]
    assert parse_ls("/d", 0, "unterminated", "") is None  # not the lines `ls` prints


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("ls: cannot access '/x/': No such file or directory\n", "Path '/x': path_not_found"),
        ("ls: cannot access '/x/': Not a directory\n", "Path '/x': not_a_directory"),
        ("ls: cannot open directory '/x/': Permission denied\n", "Path '/x': permission_denied"),
    ],
)
def test_ls_errors_are_the_scripts_codes(stderr: str, expected: str) -> None:
    result = parse_ls("/x", 2, "", stderr)
    assert result is not None and result.error == expected and result.entries is None


def test_ls_without_quoting_or_with_odd_errors_defers_or_is_empty() -> None:
    assert parse_ls("/x", 1, "", "ls: unrecognized option '--quoting-style=escape'\n") is None
    assert parse_ls("/x", 2, "a\n", "ls: something else\n") is None
    empty = parse_ls("/x", 2, "", "ls: cannot access '/x/': Too many levels of symbolic links\n")
    assert empty is not None and empty.entries == [] and empty.error is None


EDITS = [
    (b"hello world\n", "world", "there", False),
    (b"a x a x\n", "x", "y", False),
    (b"a x a x\n", "x", "y", True),
    (b"abc\n", "zzz", "y", False),
    (b"one\r\ntwo\r\n", "one\ntwo", "1\n2", False),
    (b"one\r\ntwo\r\n", "one\r\ntwo", "1\n2", False),
    (b"a\nb\r\na\nb\r\n", "a\nb", "c\nd", True),
    (b"a\r\nb\na\r\nb\n", "a\r\nb", "c\r\nd", False),
    ("héllo 世界\n".encode(), "世界", "wörld", False),
]


@pytest.mark.parametrize(("content", "old", "new", "replace_all"), EDITS)
def test_edit_decisions_match_the_script(
    tmp_path: Path, content: bytes, old: str, new: str, replace_all: bool
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(content)
    script = _build_edit_inline_cmd(str(path), old, new, replace_all=replace_all)
    script = script.replace("python3 -c", f"{shlex.quote(sys.executable)} -c", 1)
    run = subprocess.run(["bash", "-c", script], capture_output=True, check=False)
    expected = _parse_edit_output(run.stdout.decode(), str(path), old)
    choice = choose_replacement(content.decode(), old, new, replace_all=replace_all)
    if isinstance(choice, str):
        assert expected.error is not None and expected.path is None
        assert path.read_bytes() == content
        return
    matched_old, matched_new, count = choice
    assert expected.occurrences == count
    assert path.read_bytes() == content.replace(matched_old.encode(), matched_new.encode())


def test_the_glob_matcher_is_compiled_from_the_installed_script() -> None:
    matcher = _glob._MATCHER
    assert matcher is not None
    include = matcher["_include_match"]
    candidates = _glob._prepared("**/*.py")
    assert candidates is not None
    assert include("a/b/c.py", "**/*.py", candidates)
    assert not include("a/.hidden/c.py", "**/*.py", candidates)
    assert _glob._prepared("../x") is None
    assert _glob._prepared("{a,b}" * 12) is None
    assert matcher["MAX_MATCHES"] == 10_000
