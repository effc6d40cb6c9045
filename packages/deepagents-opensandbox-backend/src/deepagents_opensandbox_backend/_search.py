"""BaseSandbox's `glob` and `grep` natively, on the core's `session.files.walk` and literal
`session.files.grep` (argv only, no shell, no python3, busybox is enough), translated to the
protocol's `GlobResult` and `GrepResult`. Routes and limits: docs/deepagents.md#grep and
docs/deepagents.md#read-and-glob.

glob: regular files under the root matched by deepagents' public include matcher, sorted,
absolute, within BaseSandbox's budgets. grep: without a `/` in the glob, the core's grep as
GNU `grep -r` would search; with one, Python's `glob.glob(pattern, recursive=True)` rules and
universal-newline lines, as BaseSandbox's `python3 -c` script reads them. Both routes' records
are printed and read as BaseSandbox's (`render`, `parse`).
"""

from __future__ import annotations

import errno
import fnmatch
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any, Final

from deepagents.backends import utils as deepagents_utils
from deepagents.backends.protocol import FileInfo, GlobResult, GrepMatch, GrepResult

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    ConfigurationError,
    OutputLimitError,
)

from ._texts import grep_error, grep_timed_out

__all__ = [
    "grep_universal",
    "native_glob",
    "native_grep",
    "parse",
    "python_glob",
    "render",
    "universal_lines",
]

_compile: Callable[[str], Callable[[str], bool]] | None = getattr(
    deepagents_utils, "compile_grep_include_glob", None
)
_refused: type[Exception] | None = getattr(deepagents_utils, "InvalidGlobPatternError", None)
SHARED_CONTRACT: Final = _compile is not None and _refused is not None
"""Whether the installed deepagents has the shared glob contract (0.7.30 on)."""
MAX_MATCHES: Final = 10_000
TIME_BUDGET: Final = 5.0
"""BaseSandbox's glob budgets: a walk near them is left to its own glob."""

ROOT_ERRORS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # errno of the walk's root error  ->  the glob's error code
        errno.ENOENT: "path_not_found",
        errno.ENOTDIR: "not_a_directory",
        errno.EACCES: "permission_denied",
    }
)


async def native_glob(
    session: AsyncSandboxSession, pattern: str, path: str | None
) -> GlobResult | None:
    """The protocol's glob (regular files under `path` matched by deepagents' public include
    matcher, sorted, absolute) from the core's walk; None where BaseSandbox's glob answers: a
    release before the contract, a pattern the matcher refuses, a relative root, a walk that
    fails below the root or comes near BaseSandbox's budgets."""
    if not SHARED_CONTRACT or not isinstance(pattern, str) or not pattern:
        return None
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path + pattern:
        return None
    assert _compile is not None and _refused is not None
    try:
        include = _compile(pattern)
    except _refused:
        return None  # BaseSandbox reports it, in its words
    started = time.monotonic()
    try:
        found = await session.files.walk(path)
    except OSError as exc:
        code = ROOT_ERRORS.get(exc.errno or 0) if exc.filename == path else None
        return GlobResult(matches=None, error=f"Path '{path}': {code}") if code else None
    except (OutputLimitError, ConfigurationError):
        return None
    if time.monotonic() - started > TIME_BUDGET * 0.8:
        return None
    relative = (entry.relative.replace("\\", "/") for entry in found)
    matches = sorted(rel for rel in relative if include(rel))
    if len(matches) >= MAX_MATCHES:
        return None
    base = path.rstrip("/")
    infos: list[FileInfo] = [{"path": f"{base}/{rel}", "is_dir": False} for rel in matches]
    return GlobResult(matches=infos, truncated=False, truncation_reason=None)


# -- grep ----------------------------------------------------------------------------------------

_MAGIC = frozenset("*?[")


def python_glob(pattern: str) -> Callable[[str], bool]:
    """Whether Python's `glob.glob(pattern, recursive=True)` yields a regular file's path
    relative to the search root (hidden names only for a pattern part that starts with `.`)."""
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


async def _python_route(
    session: AsyncSandboxSession, pattern: str, path: str | None, glob: str, **options: Any
) -> list[tuple[str, int, str]] | GrepResult:
    root = path or "."
    relative_glob = glob.lstrip("/")
    if ".." in relative_glob.replace("\\", "/").split("/"):
        try:
            refused = (await session.files.stat(root)).is_dir  # the script refuses it there
        except OSError:
            refused = False
        if refused:
            return grep_error(path, "exit code 2")
    return await grep_universal(session, pattern, root, relative_glob, **options)


async def native_grep(
    session: AsyncSandboxSession,
    pattern: str,
    path: str | None,
    glob: str | None,
    max_count: int | None,
    exclude_dirs: Sequence[str],
    timeout: Any,
) -> GrepResult:
    """BaseSandbox's `GrepResult` for this search. `timeout`: the core's (`DEFAULT`, seconds,
    or None)."""
    root = path or "."
    own_name = PurePosixPath(root).name
    excluded = tuple(name for name in exclude_dirs if name != own_name)
    try:
        if glob and "/" in glob:
            records = await _python_route(
                session, pattern, path, glob, exclude_dirs=excluded, timeout=timeout
            )
            if isinstance(records, GrepResult):
                return records
        else:
            core = await session.files.grep(
                pattern.split("\n"), root, glob=glob or None, exclude_dirs=excluded, timeout=timeout
            )
            records = [(m.path, m.line, m.text) for m in core.matches]
    except CommandTimeoutError as exc:
        return grep_timed_out(exc.timeout)
    except OSError:
        return GrepResult(matches=[])  # BaseSandbox discards grep's errors: no matches
    return parse(render(records, max_count), path, max_count)
