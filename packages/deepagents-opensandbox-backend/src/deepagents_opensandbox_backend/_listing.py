"""BaseSandbox's `ls` natively: a directory's entries as Python's `os.scandir` gives them
(directory order, `is_dir` not following symlinks, names decoded as UTF-8 with
`surrogateescape`), from one argv command on `session.commands` (two where `ls` is busybox's),
without python3 in the image.

`ls -f -p --quoting-style=escape -- PATH/` (GNU coreutils: names in C escapes, so the output is
plain ASCII lines) runs as an argv command of its own, one process in the sandbox; where the
sandbox's `ls` refuses those options (busybox), a second command runs `FIND_LISTING`: two
`find -mindepth 1 -maxdepth 1` walks, NUL-separated and base64-encoded. Nothing is remembered
between calls (a thread backend builds a backend per call).
Why this and not the core's `files.list_dir` (sorted, symlinks followed): docs/deepagents.md#ls.
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

from opensandbox_core import AsyncSandboxSession

__all__ = [
    "FIND_LISTING",
    "DirectoryEntry",
    "DirectoryListing",
    "list_directory",
    "ls_argv",
    "parse_find_listing",
    "parse_ls",
    "refused_options",
    "unescape_name",
]

PATH_ERRORS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # strerror that `ls`, `find` and `cd` print (C locale)  ->  the listing's error code
        "No such file or directory": "path_not_found",
        "Not a directory": "not_a_directory",
        "Permission denied": "permission_denied",
    }
)
UNSUPPORTED: Final = ("unrecognized option", "invalid option")
"""What an `ls` without `-f` or `--quoting-style` says (busybox: "invalid option -- 'f'")."""
C_LOCALE: Final[Mapping[str, str]] = MappingProxyType({"LC_ALL": "C"})
"""The environment of the listing, whose messages are matched (`PATH_ERRORS`)."""
_LS_OPTIONS: Final = "-f -p --quoting-style=escape"

FIND_LISTING: Final = (
    # dash's `cd` does not say why it failed: `find` names the errno `scandir` would get
    'e=$(find "${1%/}/" -maxdepth 0 2>&1 >/dev/null); '
    'if [ -n "$e" ]; then echo "$e" >&2; exit 3; fi; '
    "cd -- \"$1\" 2>/dev/null || { echo 'Permission denied' >&2; exit 3; }; "
    "find . -mindepth 1 -maxdepth 1 -print0 | base64; echo =; "
    "find . -mindepth 1 -maxdepth 1 -type d -print0 | base64"
)
"""The listing where `ls` has no `--quoting-style` (busybox): every entry, `=`, the directories."""


@dataclass(frozen=True)
class DirectoryEntry:
    """One entry: `path` (the listed path joined with the name) and whether it is a directory
    (not following a symlink)."""

    path: str
    is_dir: bool


@dataclass(frozen=True)
class DirectoryListing:
    """The entries of `path` in directory order, or `error`: `path_not_found`,
    `not_a_directory` or `permission_denied` (then `entries` is None)."""

    path: str
    entries: tuple[DirectoryEntry, ...] | None
    error: str | None = None


def _path_error(message: str) -> str | None:
    """The error code (`PATH_ERRORS`) of a command's message that ends with a known strerror."""
    for text, code in PATH_ERRORS.items():
        if message.endswith(text):
            return code
    return None


def refused_options(stderr: str) -> bool:
    """Whether `ls` said it does not take the listing's options (`UNSUPPORTED`: busybox)."""
    return any(text in stderr for text in UNSUPPORTED)


def ls_argv(path: str) -> list[str]:
    """The listing's `ls` (GNU coreutils), an argv command: no shell."""
    return ["ls", *_LS_OPTIONS.split(), "--", path + "/"]


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
    """A name as `ls --quoting-style=escape` printed it (C locale), back to what `os.scandir`
    gives for it; None for a line that is not pure ASCII or holds an escape not known here."""
    if not line.isascii():
        return None
    try:
        raw = _ESCAPE.sub(_unescape_byte, line.encode("ascii"))
    except _UnknownEscape:
        return None
    return raw.decode("utf-8", "surrogateescape")


def _failed(path: str, code: str | None) -> DirectoryListing | None:
    return DirectoryListing(path, None, code) if code is not None else None


def parse_ls(path: str, exit_code: int | None, stdout: str, stderr: str) -> DirectoryListing | None:
    """The listing from `ls_argv(path)`'s outcome; None where it cannot tell."""
    if exit_code != 0:
        if refused_options(stderr):
            return None
        code = _path_error(stderr.strip())
        if code is not None or stdout:
            return _failed(path, code)  # a listing and an error: cannot tell
        return DirectoryListing(path, ())  # another failure: no entries (as `scandir` in a script)
    if stdout and not stdout.endswith("\n"):
        return None
    entries: list[DirectoryEntry] = []
    for line in stdout[:-1].split("\n") if stdout else []:
        if line in ("./", "../"):
            continue
        name = unescape_name(line)
        if not name:
            return None
        is_dir = name.endswith("/")
        entries.append(DirectoryEntry(posixpath.join(path, name.removesuffix("/")), is_dir))
    return DirectoryListing(path, tuple(entries))


def parse_find_listing(
    path: str, exit_code: int | None, stdout: str, stderr: str
) -> DirectoryListing | None:
    """The listing from `FIND_LISTING`'s outcome; None where it cannot tell."""
    if exit_code == 3 or stderr.strip():  # `cd` or `find` could not read the directory
        return _failed(path, _path_error(stderr.strip()))
    lines = stdout.split("\n")
    if exit_code != 0 or "=" not in lines or not stdout.isascii():
        return None
    split = lines.index("=")
    try:
        names = [n for n in base64.b64decode("".join(lines[:split])).split(b"\0") if n]
        directories = set(base64.b64decode("".join(lines[split + 1 :])).split(b"\0"))
    except (binascii.Error, ValueError):
        return None
    entries = tuple(
        DirectoryEntry(
            posixpath.join(path, raw.removeprefix(b"./").decode("utf-8", "surrogateescape")),
            raw in directories,
        )
        for raw in names
    )
    return DirectoryListing(path, entries)


async def list_directory(session: AsyncSandboxSession, path: str) -> DirectoryListing | None:
    """The entries of the directory `path` (absolute; a symlink to a directory is followed),
    or its error; None where the output could not be read exactly (a name escaped in a way
    not known here, a cut output). One argv `ls` where it takes the options (no shell: the
    cost of a bare command), else a second command, the `find` listing."""
    result = await session.commands.run(ls_argv(path), env=C_LOCALE, plain_lines=True)
    if result.truncated:
        return None
    listing = parse_ls(path, result.exit_code, result.stdout, result.stderr)
    if listing is not None or not refused_options(result.stderr):
        return listing
    argv = ["sh", "-c", FIND_LISTING, "ls", path]
    result = await session.commands.run(argv, env=C_LOCALE, plain_lines=True)
    if result.truncated:
        return None
    return parse_find_listing(path, result.exit_code, result.stdout, result.stderr)
