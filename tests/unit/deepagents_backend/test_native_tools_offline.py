"""The native tools' pure parts without a sandbox: `ls` output parsing, and the edit decisions and
error messages against BaseSandbox's public `edit` run locally (`LocalSandbox`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _local_sandbox import LocalSandbox
from deepagents.backends.protocol import LsResult
from deepagents.backends.sandbox import BaseSandbox

from deepagents_opensandbox_backend._filesystem import EDIT_ERRORS
from deepagents_opensandbox_backend._texts import edit_error, ls_result
from opensandbox_core import adapters
from opensandbox_core._files._edit import choose_replacement
from opensandbox_core.adapters import ls_argv


def parse_ls(path: str, code: int, out: str, err: str) -> LsResult | None:
    """The core's parse, as the Deep Agents backend reports it."""
    listing = adapters.parse_ls(path, code, out, err)
    return None if listing is None else ls_result(listing.path, listing.entries, listing.error)


LOCAL = LocalSandbox()


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
    expected = BaseSandbox.edit(LOCAL, str(path), old, new, replace_all)
    matched_old, matched_new, count = choose_replacement(content.decode(), old, new)
    if count == 0 or (count > 1 and not replace_all):
        reason = EDIT_ERRORS["not_found" if count == 0 else "ambiguous"]
        assert expected == edit_error(reason, str(path), old)
        assert path.read_bytes() == content
        return
    assert expected.occurrences == count
    assert path.read_bytes() == content.replace(matched_old.encode(), matched_new.encode())


def test_edit_errors_are_base_sandboxs(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.txt")
    assert edit_error("file_not_found", missing, "x") == BaseSandbox.edit(LOCAL, missing, "x", "y")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe x")
    got = BaseSandbox.edit(LOCAL, str(binary), "x", "y")
    assert edit_error("not_a_text_file", str(binary), "x") == got
    assert edit_error("not_a_file", str(tmp_path), "x") == BaseSandbox.edit(
        LOCAL, str(tmp_path), "x", "y"
    )
