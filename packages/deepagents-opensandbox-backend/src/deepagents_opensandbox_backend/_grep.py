"""`grep` for the Deep Agents backend on the core's literal grep (argv only, no shell, no
python3), printing and reading BaseSandbox's records. Routes and limits: docs/deepagents.md#grep.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from deepagents.backends.protocol import GrepMatch, GrepResult

from opensandbox_core import AsyncSandboxSession, CommandTimeoutError
from opensandbox_core.adapters import grep_universal

from ._texts import grep_error, grep_timed_out

__all__ = ["native_grep", "parse", "render"]


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
            refused = (await session.stat(root)).is_dir  # the script refuses it in a directory
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
            core = await session.grep(
                pattern.split("\n"), root, glob=glob or None, exclude_dirs=excluded, timeout=timeout
            )
            records = [(m.path, m.line, m.text) for m in core.matches]
    except CommandTimeoutError as exc:
        return grep_timed_out(exc.timeout)
    except OSError:
        return GrepResult(matches=[])  # BaseSandbox discards grep's errors: no matches
    return parse(render(records, max_count), path, max_count)
