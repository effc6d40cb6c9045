"""Native `ls` and `edit` for the Deep Agents backend: BaseSandbox's results without its
`python3 -c` scripts.

## ls

BaseSandbox's `ls` (`_build_ls_cmd` in `deepagents/backends/sandbox.py`) runs `os.scandir` in the
sandbox: entries in directory order (as the kernel returns them, unsorted), each
`os.path.join(path, name)` with `is_dir` not following symlinks; errors `path_not_found`,
`not_a_directory`, `permission_denied`; any other failure prints a traceback to a discarded
stderr, so the listing is empty without an error.

execd's `/directories/list` cannot stand in: it sorts by name, follows nothing the same way,
and v1.0.18 lacks it. One argv command does: `ls -f -p --quoting-style=escape -- PATH/` (GNU
coreutils) reads the directory with `readdir` like `scandir` (same order), marks directories
from the entry's type without following symlinks like `is_dir(follow_symlinks=False)`, and
prints one line per name in C escapes: in the C locale every byte that is not printable ASCII
(`\r`, `\n`, NEL, U+2028, any non-UTF-8 byte) is an escape, so the output is plain ASCII
lines and the core can return it from the line events (`run(..., plain_lines=True)`: no raw
output file read on line-framed execd). The names are unescaped here to their bytes and
decoded as the script's Python does (UTF-8, `surrogateescape`), so even non-UTF-8 names come
out the same. The trailing `/` makes `ls` list a directory or a symlink to one (as `scandir`
follows it) and fail on anything else with the errno `scandir` would get. Where `ls` lacks
the option (busybox: learnt once per sandbox, `LsSupport`), the listing is `FIND_LISTING`
instead: `cd` into the path (following a symlink, failing with the same errno), then two
`find . -mindepth 1 -maxdepth 1` walks in directory order, every entry and the directories
(`-type d`, not following symlinks), each NUL-separated and base64-encoded (plain lines, exact
bytes); busybox has every tool it needs. An `ls` escape not known here goes to the script.

## edit
BaseSandbox's `edit` (`_EDIT_COMMAND_TEMPLATE`) stats the file (not a regular file:
`not_a_file`), reads it, decodes it strictly (`not_a_text_file`), tries `old` as sent, then with
CRLF, then with LF line endings (the first that occurs wins, and `new` gets the same endings),
refuses none (`string_not_found`) or several without `replace_all` (`multiple_occurrences`),
and writes the result in place. Natively: the file is downloaded, the same decisions are made
here, and execd's `/files/replace` replaces the chosen variant in place (same inode, mode and
owner; symlinks followed) - every occurrence, which is the same as one when there is one.
Error messages are the ones `EditResult.error` carries for BaseSandbox (`_texts.edit_error`,
checked against BaseSandbox on the live sandbox). Left to the script: paths execd
would rewrite (`$`, `..`), relative paths, strings that are not encodable as UTF-8, files over
`EDIT_READ_LIMIT`, and OS errors the script does not name (it prints a traceback).
Between the download and the replace the file could change; the script has the same window
(between its read and its write), only shorter.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from deepagents.backends.protocol import EditResult, FileInfo, LsResult

from opensandbox_core import AsyncSandboxSession, OutputLimitError

from ._mapping import SCRIPT_ERRORS
from ._texts import edit_error, ls_error

__all__ = [
    "C_LOCALE",
    "EDIT_READ_LIMIT",
    "FIND_LISTING",
    "PATH_ERRORS",
    "LsSupport",
    "choose_replacement",
    "is_utf8",
    "ls_argv",
    "native_edit",
    "native_ls",
    "parse_find_listing",
    "parse_ls",
    "path_error",
    "unescape_name",
]

EDIT_READ_LIMIT: Final = 8 * 1024 * 1024
"""Larger files are edited by BaseSandbox's script, in the sandbox, not downloaded."""

PATH_ERRORS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # strerror that GNU `ls` and bash's `cd` print (C locale)  ->  the error code
        # BaseSandbox's ls and glob scripts give for the path
        "No such file or directory": "path_not_found",
        "Not a directory": "not_a_directory",
        "Permission denied": "permission_denied",
    }
)
UNSUPPORTED: Final = ("unrecognized option", "invalid option")
"""What an `ls` without `-f` or `--quoting-style` says (busybox: "invalid option -- 'f'")."""
C_LOCALE: Final[Mapping[str, str]] = MappingProxyType({"LC_ALL": "C"})
"""The environment of the commands whose messages are matched (`PATH_ERRORS`)."""


def unsupported(stderr: str) -> bool:
    """Whether `ls` said it lacks an option of `ls_argv` (`UNSUPPORTED`)."""
    return any(text in stderr for text in UNSUPPORTED)


def path_error(message: str) -> str | None:
    """The scripts' error code for a command's message that ends with a `PATH_ERRORS` text."""
    for text, code in PATH_ERRORS.items():
        if message.endswith(text):
            return code
    return None


def ls_argv(path: str) -> list[str]:
    return ["ls", "-f", "-p", "--quoting-style=escape", "--", path + "/"]


_ESCAPE: Final = re.compile(rb"\\([0-7]{3}|.)", re.DOTALL)
_ESCAPED: Final[Mapping[bytes, bytes]] = MappingProxyType(
    {
        b"a": b"\a",
        b"b": b"\b",
        b"f": b"\f",
        b"n": b"\n",
        b"r": b"\r",
        b"t": b"\t",
        b"v": b"\v",
        b"\\": b"\\",
        b" ": b" ",
    }
)


class _UnknownEscape(ValueError):
    pass


def _unescape_byte(match: re.Match[bytes]) -> bytes:
    code = match.group(1)
    if len(code) == 3:
        return bytes([int(code, 8) & 0xFF])
    known = _ESCAPED.get(code)
    if known is None:
        raise _UnknownEscape(code)
    return known


def unescape_name(line: str) -> str | None:
    """A name as `ls --quoting-style=escape` printed it (C locale), back to what Python's
    `os.scandir` gives for it (UTF-8 with `surrogateescape`); None for an output line that is
    not pure ASCII or holds an escape not known here."""
    if not line.isascii():
        return None
    try:
        raw = _ESCAPE.sub(_unescape_byte, line.encode("ascii"))
    except _UnknownEscape:
        return None
    return raw.decode("utf-8", "surrogateescape")


def parse_ls(path: str, exit_code: int | None, stdout: str, stderr: str) -> LsResult | None:
    """BaseSandbox's `LsResult` for `ls_argv(path)`'s outcome; None when `ls` cannot list this
    way (the caller runs the script)."""
    if exit_code != 0:
        if unsupported(stderr):
            return None
        code = path_error(stderr.strip())
        if code is not None:
            return ls_error(path, code)
        if stdout:
            return None  # a listing and an error: let the script decide
        return LsResult(entries=[])  # the script's traceback goes to /dev/null: no entries
    if stdout and not stdout.endswith("\n"):
        return None
    entries: list[FileInfo] = []
    for line in stdout[:-1].split("\n") if stdout else []:
        if line in ("./", "../"):
            continue
        unescaped = unescape_name(line)
        if unescaped is None or not unescaped:
            return None
        name = unescaped
        is_dir = name.endswith("/")
        entries.append(
            {"path": posixpath.join(path, name[:-1] if is_dir else name), "is_dir": is_dir}
        )
    return LsResult(entries=entries)


@dataclass
class LsSupport:
    """What one sandbox's `ls` can do, learnt from its answers; held by that sandbox's backend
    (so it lives and dies with it) and passed to `native_ls`."""

    quoting_style: bool = True
    """False once its `ls` said it has no `--quoting-style` (busybox): listings then go
    straight to `FIND_LISTING`, without asking `ls` again."""


async def native_ls(session: AsyncSandboxSession, path: str, support: LsSupport) -> LsResult | None:
    """The listing BaseSandbox's `ls` returns, from one argv command; None where only the
    script can answer (the caller runs it)."""
    if not isinstance(path, str) or "\0" in path or not is_utf8(path):
        return None  # BaseSandbox's script decides (a path it cannot encode raises there)
    if not path:
        return ls_error(path, "path_not_found")
    if support.quoting_style:
        result = await session.run(ls_argv(path), env=C_LOCALE, plain_lines=True)
        if result.truncated:
            return None
        parsed = parse_ls(path, result.exit_code, result.stdout, result.stderr)
        if parsed is not None or not unsupported(result.stderr):
            return parsed
        support.quoting_style = False
    result = await session.run(
        ["sh", "-c", FIND_LISTING, "ls", path], env=C_LOCALE, plain_lines=True
    )
    if result.truncated:
        return None
    return parse_find_listing(path, result.exit_code, result.stdout, result.stderr)


FIND_LISTING: Final = (
    # dash's `cd` does not say why it failed: `find` names the errno `scandir` would get
    'e=$(find "${1%/}/" -maxdepth 0 2>&1 >/dev/null); '
    'if [ -n "$e" ]; then echo "$e" >&2; exit 3; fi; '
    "cd -- \"$1\" 2>/dev/null || { echo 'Permission denied' >&2; exit 3; }; "
    "find . -mindepth 1 -maxdepth 1 -print0 | base64; echo =; "
    "find . -mindepth 1 -maxdepth 1 -type d -print0 | base64"
)
"""`ls` where `ls` has no `--quoting-style` (busybox): every entry, `=`, the directories."""


def parse_find_listing(
    path: str, exit_code: int | None, stdout: str, stderr: str
) -> LsResult | None:
    """BaseSandbox's `LsResult` from `FIND_LISTING`'s output; None where only the script can
    answer (an error it would word otherwise, output that is not the listing)."""
    if exit_code == 3 or stderr.strip():  # `cd` or `find` could not read the directory
        code = path_error(stderr.strip())
        return ls_error(path, code) if code is not None else None
    lines = stdout.split("\n")
    if exit_code != 0 or "=" not in lines or not stdout.isascii():
        return None
    split = lines.index("=")
    try:
        names = [n for n in base64.b64decode("".join(lines[:split])).split(b"\0") if n]
        directories = set(base64.b64decode("".join(lines[split + 1 :])).split(b"\0"))
    except (binascii.Error, ValueError):
        return None
    entries: list[FileInfo] = []
    for raw in names:
        name = raw.removeprefix(b"./").decode("utf-8", "surrogateescape")
        entries.append({"path": posixpath.join(path, name), "is_dir": raw in directories})
    return LsResult(entries=entries)


def is_utf8(text: str) -> bool:
    """Whether `text` can be encoded as UTF-8 (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def choose_replacement(
    text: str, old: str, new: str, *, replace_all: bool
) -> tuple[str, str, int] | str:
    """(old variant, new variant, occurrences) as the edit script picks them, or its error code."""
    old_crlf = old.replace("\r\n", "\n").replace("\n", "\r\n")
    old_lf = old.replace("\r\n", "\n")
    new_crlf = new.replace("\r\n", "\n").replace("\n", "\r\n")
    new_lf = new.replace("\r\n", "\n")
    count = 0
    matched_old, matched_new = old, new
    for cand_old, cand_new in ((old, new), (old_crlf, new_crlf), (old_lf, new_lf)):
        found = text.count(cand_old)
        if found >= 1:
            matched_old, matched_new, count = cand_old, cand_new, found
            break
    if count == 0:
        return "string_not_found"
    if count > 1 and not replace_all:
        return "multiple_occurrences"
    return matched_old, matched_new, count


def _editable(file_path: object, old: str, new: str) -> bool:
    if not isinstance(file_path, str) or not file_path.startswith("/") or "\0" in file_path:
        return False
    if "$" in file_path or ".." in file_path.split("/"):
        return False
    return is_utf8(file_path) and is_utf8(old) and is_utf8(new)


async def native_edit(
    session: AsyncSandboxSession, file_path: str, old: str, new: str, *, replace_all: bool
) -> EditResult | None:
    """BaseSandbox's `EditResult` for this edit (see the module docstring), or None where only
    the script can answer (the caller runs it). `old` is not empty (the caller checked)."""
    if not _editable(file_path, old, new):
        return None
    try:
        raw = await session.read_bytes(file_path, max_size=EDIT_READ_LIMIT)
    except OutputLimitError:
        return None
    except OSError as exc:
        code = SCRIPT_ERRORS.get(exc.errno or 0)
        return edit_error(code, file_path, old) if code is not None else None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return edit_error("not_a_text_file", file_path, old)
    choice = choose_replacement(text, old, new, replace_all=replace_all)
    if isinstance(choice, str):
        return edit_error(choice, file_path, old)
    matched_old, matched_new, count = choice
    try:
        await session.replace_text(file_path, matched_old, matched_new)
    except OSError as exc:
        code = SCRIPT_ERRORS.get(exc.errno or 0)
        if code is None:
            raise
        return edit_error(code, file_path, old)
    return EditResult(path=file_path, occurrences=count)
