"""`SearchMethods`: the session's methods that page, walk and search files.

A mixin of `AsyncSandboxSession` (like `SessionInfo`): `read_lines` (the `_files._pages` facet,
`LineReader`), `walk_files` and `glob` (`_files._glob`) and the literal `grep` (`_files._grep`).
Each runs as commands through the commands facet; the session builds the facets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ._commands._run import Commands
from ._files import _glob
from ._files._grep import GrepResult, grep
from ._files._pages import MAX_PAGE_BYTES, LineReader
from ._session_commands import DEFAULT, _Default, resolve_timeout
from ._types import FileMatch, LinePage

__all__ = ["SearchMethods"]


class SearchMethods:
    """Paged reads, the file walk, glob and grep (facets set by `AsyncSandboxSession`)."""

    _commands: Commands
    _lines: LineReader

    async def read_lines(
        self, path: str, offset: int = 0, limit: int = 2000, *, max_bytes: int = MAX_PAGE_BYTES
    ) -> LinePage:
        """Lines `offset` to `offset + limit` (0-based) of a UTF-8 text file, as a `LinePage`
        (its `next_offset` is where the next page starts, None at the end), cut at `max_bytes`.

        Paging costs about one page, not one file: a file up to 1 MiB is downloaded once per
        version (size and mtime, checked on each later page), a bigger one read by HTTP Range
        reads from remembered line starts, with read-ahead. A file that is not UTF-8 raises
        `NotTextError` (`binary` when its first 8 KiB are not); path failures raise the builtin
        `OSError`s, as `read_bytes`. See docs/core.md, "Reading a file by pages".
        """
        return await self._lines.read_lines(path, offset, limit, max_bytes=max_bytes)

    async def walk_files(self, path: str = ".") -> list[FileMatch]:
        """Every regular file under `path`, and every symlink to one that stays inside it,
        sorted (`FileMatch`: `path`, `relative`, `is_symlink`); one command, exact on any name,
        no python3 needed (busybox is enough). Symlinked directories are not entered."""
        return await _glob.walk_files(self._commands, path)

    async def glob(self, pattern: str, *, path: str = ".") -> list[FileMatch]:
        """The files of `walk_files(path)` whose relative path matches `pattern`: `*.py` (a
        name at any depth), `src/**/*.ts`, `{a,b}`, `[!x]`; see docs/core.md, "Finding files"."""
        return await _glob.glob(self._commands, pattern, path)

    async def grep(
        self,
        pattern: str | Sequence[str],
        path: str = ".",
        *,
        glob: str | None = None,
        include: Callable[[str], bool] | None = None,
        exclude_dirs: Sequence[str] = (),
        max_matches: int | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | _Default | None = DEFAULT,
    ) -> GrepResult:
        """The lines holding the literal `pattern` (or any of several) in the regular files
        under `path` (or in `path`, a file), found in the sandbox by one argv command: nothing
        is read by a shell, and the image needs only busybox. Returns `GrepResult`: matches in
        walk order (depth first, directory order), each `GrepMatch(path, line, text)`.

        `glob` filters files: without `/` by base name (`*.py`), with `/` by the path relative
        to `path` (`src/**/*.py`); `include(relative_path)` is the same as a predicate.
        `exclude_dirs` are directory names skipped below `path` (`[".git"]`); `max_matches`
        cuts the result (`truncated=True`). Symlinks below `path` and binary files (NUL bytes)
        are not searched; the sandbox's locale applies as in GNU grep (`env={"LC_ALL": "C"}`
        takes every line as text). A missing `path` raises `FileNotFoundError`. See
        docs/core.md, "Literal grep".
        """
        return await grep(
            self._commands,
            pattern,
            path,
            glob=glob,
            include=include,
            exclude_dirs=exclude_dirs,
            max_matches=max_matches,
            env=env,
            timeout=resolve_timeout(self._commands, timeout),
        )
