"""A literal grep that reads files as Python's universal newlines do, under a path glob with
Python's `glob.glob(pattern, recursive=True)` rules (hidden names only for a pattern part that
starts with `.`). On the core's literal grep: argv only, no shell, busybox is enough."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opensandbox_core._session import AsyncSandboxSession

__all__ = ["grep_universal", "python_glob", "universal_lines"]

_MAGIC = frozenset("*?[")


def python_glob(pattern: str) -> Callable[[str], bool]:
    """Whether Python's `glob.glob(pattern, recursive=True)` yields a regular file's path
    relative to the search root."""
    closes_dirs = pattern.endswith("/")
    parts = [p for p in pattern.split("/") if p and p != "."]

    def match(names: list[str], at: int) -> bool:
        if at == len(parts):
            return not names
        part = parts[at]
        if part == "**":
            if match(names, at + 1):
                return True
            return bool(names) and not names[0].startswith(".") and match(names[1:], at)
        if not names:
            return False
        name = names[0]
        if _MAGIC.intersection(part):
            if name.startswith(".") and not part.startswith("."):
                return False
            if not fnmatch.fnmatchcase(name, part):
                return False
        elif name != part:
            return False
        return match(names[1:], at + 1)

    return lambda relative: not closes_dirs and match(relative.split("/"), 0)


def universal_lines(lines: list[tuple[int, str]], pattern: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines Python's universal-newline reading finds and that hold
    `pattern`, from one file's `\\n`-lines that hold it or a `\\r` (invalid bytes dropped)."""
    needle, needs_end = (pattern[:-1], True) if pattern.endswith("\n") else (pattern, False)
    found: list[tuple[int, str]] = []
    extra = 0  # lines that lone `\r`s before this one added
    for number, text in lines:
        pieces = text.replace("\ufffd", "").split("\r")
        if len(pieces) > 1 and pieces[-1] == "":
            pieces.pop()  # `\r\n` (or a `\r` at the end of the file): one line break
        for offset, piece in enumerate(pieces):
            if piece.endswith(needle) if needs_end else needle in piece:
                found.append((number + extra + offset, piece))
        extra += len(pieces) - 1
    return found


async def grep_universal(
    session: AsyncSandboxSession,
    pattern: str,
    root: str,
    glob: str,
    *,
    exclude_dirs: Sequence[str] = (),
    timeout: Any = None,
) -> list[tuple[str, int, str]]:
    """(path, line number, text) of every line holding `pattern` in the files under `root`
    that `python_glob(glob)` matches, files in `glob.glob`'s sorted order, lines as Python's
    universal newlines split them. `timeout`: the core's (`DEFAULT`, seconds, or None)."""
    if "\r" in pattern or "\n" in pattern[:-1]:
        return []  # a line Python reads holds no `\r`, and one `\n` at most, at its end
    core = await session.files.grep(
        [pattern[:-1] if pattern.endswith("\n") else pattern, "\r"],
        root,
        include=python_glob(glob),
        exclude_dirs=exclude_dirs,
        env={"LC_ALL": "C"},  # every line as text, as Python reads them
        timeout=timeout,
    )
    by_file: dict[str, list[tuple[int, str]]] = {}
    for match in core.matches:
        by_file.setdefault(match.path, []).append((match.line, match.text))
    prefix = root.rstrip("/") + "/"
    records = []
    for shown in sorted(by_file, key=lambda p: p.removeprefix(prefix)):  # glob.glob's order
        records += [(shown, n, t) for n, t in universal_lines(by_file[shown], pattern)]
    return records
