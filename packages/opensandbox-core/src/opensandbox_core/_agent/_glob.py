"""`match_files`: the regular files under a directory that a caller's matcher accepts, sorted,
as absolute paths, from the core's walk (one command, exact names, busybox is enough), within
a time and a count budget."""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from opensandbox_core._errors import ConfigurationError, OutputLimitError
from opensandbox_core._session import AsyncSandboxSession

__all__ = ["ROOT_ERRORS", "FileMatches", "match_files"]

ROOT_ERRORS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # errno of the walk's root error  ->  the error code
        errno.ENOENT: "path_not_found",
        errno.ENOTDIR: "not_a_directory",
        errno.EACCES: "permission_denied",
    }
)


@dataclass(frozen=True)
class FileMatches:
    """The matching `paths`, or `error` (a `ROOT_ERRORS` code; then `paths` is None)."""

    paths: tuple[str, ...] | None
    error: str | None = None


async def match_files(
    session: AsyncSandboxSession,
    root: str,
    include: Callable[[str], bool],
    *,
    max_matches: int | None = None,
    time_budget: float | None = None,
) -> FileMatches | None:
    """The files under `root` whose path relative to it (with `/`) `include` accepts; None
    where the walk cannot answer whole: it failed below the root or was cut, the core refuses
    the path, it took longer than `time_budget` seconds, or found `max_matches` or more."""
    started = time.monotonic()
    try:
        found = await session.files.walk(root)
    except OSError as exc:
        code = ROOT_ERRORS.get(exc.errno or 0) if exc.filename == root else None
        return FileMatches(None, code) if code else None
    except (OutputLimitError, ConfigurationError):
        return None
    if time_budget is not None and time.monotonic() - started > time_budget:
        return None
    relative = (entry.relative.replace("\\", "/") for entry in found)
    matches = sorted(rel for rel in relative if include(rel))
    if max_matches is not None and len(matches) >= max_matches:
        return None
    base = root.rstrip("/")
    return FileMatches(tuple(f"{base}/{rel}" for rel in matches))
