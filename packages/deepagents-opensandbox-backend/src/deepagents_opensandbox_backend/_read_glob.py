"""`read` and `glob` of the Deep Agents backend: opensandbox-core's pages and file walk,
translated to the protocol's `ReadResult` and `GlobResult` (texts in `_texts.py`).

read: `AsyncSandboxSession.read_lines` pages a file (one download per version up to 1 MiB,
Range reads with a line index and read-ahead above) and `_texts.read_result` renders the page.
A file whose first 8 KiB are not UTF-8 is returned whole as base64 (up to 8 MiB), as the script
does. The script answers what the core refuses: invalid UTF-8 in what the script decodes,
errors it words itself.

glob: `BackendProtocol.glob` documents the contract (deepagents 0.7.30 on): regular files only,
under the search root, matched by the shared include-glob rules that deepagents publishes as
`deepagents.backends.utils.compile_grep_include_glob` ("the single source of truth for both
grep(..., glob=...) and backend glob()"); results sorted, as absolute paths; symlinks to regular
files inside the root's real path count, symlinked directories are not entered, `/proc`, `/sys`
and `/dev` are skipped when the root is `/`. That is the core's `walk_files` (one command, exact
names, busybox is enough); the matching is the public matcher above, so the pattern dialect is
the installed release's. BaseSandbox's own `glob` answers (the caller runs it) where this
cannot: a release without that contract (detected by the public `InvalidGlobPatternError` the
contract brought), a pattern the matcher refuses (its error wording is BaseSandbox's), a relative
root, an unreadable subtree, and a walk near BaseSandbox's budgets (5 s, 10,000 matches).
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

from deepagents.backends import utils as deepagents_utils
from deepagents.backends.protocol import FileInfo, GlobResult, ReadResult

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    NotTextError,
    OutputLimitError,
)

from ._mapping import SCRIPT_ERRORS
from ._texts import BASE64_LIMIT, EFFECTIVE_LIMIT, as_base64, read_error, read_result

__all__ = ["SHARED_CONTRACT", "native_glob", "native_read"]

_compile: Callable[[str], Callable[[str], bool]] | None = getattr(
    deepagents_utils, "compile_grep_include_glob", None
)
_refused: type[Exception] | None = getattr(deepagents_utils, "InvalidGlobPatternError", None)
SHARED_CONTRACT: Final = _compile is not None and _refused is not None
"""Whether the installed deepagents has the shared glob contract (0.7.30 on)."""
MAX_MATCHES: Final = 10_000
TIME_BUDGET: Final = 5.0
ROOT_ERRORS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # errno of the walk's root error  ->  the code BaseSandbox's glob script gives
        errno.ENOENT: "path_not_found",
        errno.ENOTDIR: "not_a_directory",
        errno.EACCES: "permission_denied",
    }
)


async def native_read(
    session: AsyncSandboxSession, file_path: str, offset: int, limit: int
) -> ReadResult | None:
    """The script's `ReadResult` for a text-named file and a window every release answers
    alike; None where only the script can answer (the caller runs it)."""
    try:
        page = await session.read_lines(file_path, offset, limit, max_bytes=EFFECTIVE_LIMIT)
    except NotTextError as exc:
        if not exc.binary:
            return None
        try:
            return as_base64(await session.read_bytes(file_path, max_size=BASE64_LIMIT))
        except (OSError, OutputLimitError):
            return None
    except OutputLimitError:
        return None
    except OSError as exc:
        code = SCRIPT_ERRORS.get(exc.errno or 0)
        return read_error(file_path, code) if code is not None else None
    return read_result(page)


def _matcher(pattern: str) -> Callable[[str], bool] | None:
    """The installed release's matcher for `pattern`; None where it refuses the pattern."""
    if _compile is None or _refused is None:
        return None
    try:
        return _compile(pattern)
    except _refused:
        return None  # BaseSandbox reports it, in its words


async def native_glob(
    session: AsyncSandboxSession, pattern: str, path: str | None
) -> GlobResult | None:
    """The `GlobResult` of the protocol's glob, from the core's walk; None where BaseSandbox's
    own glob must answer (the caller runs it)."""
    if not SHARED_CONTRACT or not isinstance(pattern, str) or not pattern:
        return None
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path + pattern:
        return None
    include = _matcher(pattern)
    if include is None:
        return None
    started = time.monotonic()
    try:
        found = await session.walk_files(path)
    except OSError as exc:
        code = ROOT_ERRORS.get(exc.errno or 0) if exc.filename == path else None
        return GlobResult(matches=None, error=f"Path '{path}': {code}") if code else None
    except (OutputLimitError, ConfigurationError):
        return None  # a cut walk, a path the core refuses: BaseSandbox's walk decides
    if time.monotonic() - started > TIME_BUDGET * 0.8:
        return None
    matches = sorted(
        relative
        for relative in (entry.relative.replace("\\", "/") for entry in found)
        if include(relative)
    )
    if len(matches) >= MAX_MATCHES:
        return None  # BaseSandbox stops at its cap, in its own walk order
    base = path.rstrip("/")
    infos: list[FileInfo] = [{"path": f"{base}/{rel}", "is_dir": False} for rel in matches]
    return GlobResult(matches=infos, truncated=False, truncation_reason=None)
