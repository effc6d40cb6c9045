"""`grep` for the Deep Agents backend, on the core's literal grep (`AsyncSandboxSession.grep`):
one argv command, no shell reading the pattern or the paths, no python3, busybox is enough.

BaseSandbox's `grep` (deepagents 0.7.30 - 0.7.32) has two routes, and the agent sees their
answers, so both are reproduced:

- no glob, or a glob without `/`: GNU `grep -rHnFZ [--include=GLOB] --exclude-dir=.git -e P
  PATH` (ripgrep when the image has it and the path is a directory), its errors discarded: the
  core's grep walks and matches the same way (directory order, symlinks below the path skipped,
  base-name globs with `find -name`, binary files not searched, a pattern's lines as
  alternatives);
- a glob with `/`: a `python3 -c` script: `glob.glob(GLOB, recursive=True)` under the path
  (hidden names only for a pattern part starting with `.`, sorted), each file read as UTF-8 with
  invalid bytes dropped and universal newlines (`\\r`, `\\r\\n`, `\\n` end a line), a line
  matching when `P in line` (its `\\n` included). Here the core's grep finds the lines holding
  the pattern or a `\\r` (so the line numbers after lone `\\r`s are known), and they are split
  and numbered as Python reads them.

Both routes print `path\\0line:text` records; `render` builds that text and `parse` reads it the
way BaseSandbox does (line by line, `max_count` as `head -n max_count+1`), so even names with
line breaks give BaseSandbox's answer. Not reproduced, in the python route only: symlinks
(followed by `glob.glob`, skipped here), binary files (searched by the script), a match that
appears only once invalid bytes are dropped, a pattern ending in `\\n` against a last line
without one. Neither route uses ripgrep's order.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Any

from deepagents.backends.protocol import GrepMatch, GrepResult

from opensandbox_core import AsyncSandboxSession, CommandTimeoutError

from ._texts import grep_error, grep_timed_out

__all__ = ["native_grep", "parse", "python_glob", "render"]

_MAGIC = frozenset("*?[")


def render(records: Sequence[tuple[str, int, str]], max_count: int | None) -> str:
    """The text BaseSandbox's grep command prints for these records (`max_count`: its
    `head -n max_count+1`)."""
    text = "".join(f"{path}\0{line}:{body}\n" for path, line, body in records)
    if max_count is None:
        return text
    kept = text.split("\n")[: int(max_count) + 1]
    return "\n".join(kept) + ("\n" if len(kept) > int(max_count) else "")


def parse(output: str, path: str | None, max_count: int | None) -> GrepResult:
    """BaseSandbox's reading of its grep command's output (exit status 0): a record per line,
    a line that is not one is skipped, or is the error when no line is a record."""
    output = output.rstrip("\n")
    if not output:
        return GrepResult(matches=[])
    matches: list[GrepMatch] = []
    unreadable: str | None = None
    for line in output.split("\n"):
        try:
            name, rest = line.split("\0", 1)
            number, body = rest.split(":", 1)
            matches.append({"path": name, "line": int(number), "text": body})
        except ValueError:
            unreadable = line
    if unreadable is not None and not matches:
        return grep_error(path, unreadable)
    if max_count is not None and len(matches) > max_count:
        return GrepResult(matches=matches[:max_count], truncated=True)
    return GrepResult(matches=matches)


def python_glob(pattern: str) -> Callable[[str], bool]:
    """Whether Python's `glob.glob(pattern, recursive=True)` yields a regular file's path
    relative to the search root (hidden names only for a part starting with `.`)."""
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


def _python_lines(lines: list[tuple[int, str]], pattern: str) -> list[tuple[int, str]]:
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


async def _python_route(
    session: AsyncSandboxSession,
    pattern: str,
    path: str | None,
    glob: str,
    excluded: tuple[str, ...],
    timeout: Any,
) -> list[tuple[str, int, str]] | GrepResult:
    root = path or "."
    relative_glob = glob.lstrip("/")
    if ".." in relative_glob.replace("\\", "/").split("/"):
        try:
            refused = (await session.stat(root)).is_dir  # the script refuses it in a directory
        except OSError:
            refused = False
        if refused:
            return grep_error(path, "exit code 2")
    if "\r" in pattern or "\n" in pattern[:-1]:
        return []  # a line Python reads holds no `\r`, and one `\n` at most, at its end
    core = await session.grep(
        [pattern[:-1] if pattern.endswith("\n") else pattern, "\r"],
        root,
        include=python_glob(relative_glob),
        exclude_dirs=excluded,
        env={"LC_ALL": "C"},  # every line as text, as the script reads them
        timeout=timeout,
    )
    by_file: dict[str, list[tuple[int, str]]] = {}
    for match in core.matches:
        by_file.setdefault(match.path, []).append((match.line, match.text))
    prefix = root.rstrip("/") + "/"
    records = []
    for shown in sorted(by_file, key=lambda p: p.removeprefix(prefix)):  # glob.glob's order
        records += [(shown, n, t) for n, t in _python_lines(by_file[shown], pattern)]
    return records


async def native_grep(
    session: AsyncSandboxSession,
    pattern: str,
    path: str | None,
    glob: str | None,
    *,
    max_count: int | None,
    exclude_dirs: Sequence[str],
    timeout: Any,
) -> GrepResult:
    """BaseSandbox's `GrepResult` for this search (see the module docstring). `timeout`: the
    core's (`DEFAULT`, seconds, or None)."""
    root = path or "."
    own_name = PurePosixPath(root).name
    excluded = tuple(name for name in exclude_dirs if name != own_name)
    try:
        if glob and "/" in glob:
            records = await _python_route(session, pattern, path, glob, excluded, timeout)
            if isinstance(records, GrepResult):
                return records
        else:
            core = await session.grep(
                pattern.split("\n"), root, glob=glob or None, exclude_dirs=excluded, timeout=timeout
            )
            records = [(m.path, m.line, m.text) for m in core.matches]
    except CommandTimeoutError as exc:
        return grep_timed_out(exc.timeout)
    except OSError:
        return GrepResult(matches=[])  # BaseSandbox discards grep's errors: no matches
    return parse(render(records, max_count), path, max_count)
