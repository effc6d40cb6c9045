"""`Files`: the session's files facet, `session.files`.

It composes the pieces that do the work: `FileSystem` (stat, list, make, remove, realpath),
`Transfers` (read, write, batches, ranges, in-place replace), `LineReader` (paged reads), the
walk and glob (`_glob`), the literal grep (`_grep`), `edit` (`_edit`) and directory uploads
(`_upload`). Each method checks nothing itself that its piece checks; the session builds it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Unpack

from opensandbox_core._defaults import CHUNK_SIZE, DEFAULT, _Default
from opensandbox_core._types import FileInfo, FileMatch, LinePage, TransferResult, WriteData

from . import _glob
from ._edit import edit
from ._grep import GrepResult, grep
from ._pages import MAX_PAGE_BYTES, LineReader
from ._upload import DirectoryUpload, UploadOptions, upload_directory

if TYPE_CHECKING:
    from opensandbox_core._commands._run import CommandRunner

    from ._filesystem import FileSystem
    from ._transfers import Transfers

__all__ = ["Files"]


class Files:
    """Files in the session's sandbox: `session.files.read_bytes(...)` and its kin.

    Relative paths resolve against the session's working directory. Path failures raise the
    builtin `OSError` subclasses (`FileNotFoundError`, `IsADirectoryError`, ...) with `errno`
    set, as local files do.
    """

    def __init__(self, runner: CommandRunner, fs: FileSystem, transfers: Transfers) -> None:
        self._runner = runner
        self._fs = fs
        self._transfers = transfers
        self._lines = LineReader(self)

    def __repr__(self) -> str:
        return "Files()"

    # -- metadata and directories (`FileSystem`) ---------------------------------------------
    async def realpath(self, path: str) -> str:
        """The canonical absolute path (symlinks resolved, missing names kept), like `realpath -m`."""
        return await self._fs.realpath(path)

    async def stat(self, path: str) -> FileInfo:
        """Metadata of a path; `is_dir`/`is_file` follow symlinks. Missing: FileNotFoundError."""
        return await self._fs.stat(path)

    async def exists(self, path: str) -> bool:
        """Whether the path exists (a dangling symlink counts)."""
        return await self._fs.exists(path)

    async def list_dir(self, path: str = ".") -> list[FileInfo]:
        """The entries of a directory, sorted by name (symlinks followed for `is_dir`)."""
        return await self._fs.list_dir(path)

    async def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a directory (and its parents). Over a file: FileExistsError."""
        await self._fs.make_dir(path, parents=parents, exist_ok=exist_ok)

    async def remove(self, path: str, *, recursive: bool = True) -> None:
        """Delete a file, symlink or directory tree. Refuses the working dir and its ancestors."""
        await self._fs.remove(path, recursive=recursive)

    # -- content (`Transfers`) ---------------------------------------------------------------
    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        """The whole content of a file. Directories, FIFOs and devices raise instead of blocking;
        more than `max_size` bytes raises `OutputLimitError`."""
        return await self._transfers.read_bytes(path, max_size=max_size)

    async def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = CHUNK_SIZE
    ) -> AsyncIterator[bytes]:
        """Stream a file's content in chunks (bounded memory)."""
        chunks = self._transfers.iter_bytes(path, max_size=max_size, chunk_size=chunk_size)
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                yield chunk

    async def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of a regular file from byte `offset` (one HTTP Range read)."""
        return await self._transfers.read_range(path, offset, length)

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

    async def write_bytes(
        self, path: str, data: WriteData, *, mode: int | None = None, timeout: float | None = None
    ) -> None:
        """Write a file atomically: parents are created, an existing file keeps its mode, writes
        through a symlink reach its target, and a failed write leaves the old content in place.
        `data` is bytes or an async iterable of bytes (streamed)."""
        await self._transfers.write_bytes(path, data, mode=mode, timeout=timeout)

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace the text `old` by `new` in the UTF-8 file `path`, in place (inode, mode and
        owner kept); returns how many occurrences were replaced.

        `old` is matched as given, then with CRLF, then with LF line endings (the first that
        occurs wins, and `new` gets the same endings). No match raises `EditError` (`reason`
        "not_found"); several without `replace_all=True` raise `EditError` ("ambiguous"),
        the file unchanged either way. A file that is not UTF-8 raises `NotTextError`, one over
        8 MiB `OutputLimitError`, path failures the builtin `OSError`s.
        """
        return await edit(self._transfers, path, old, new, replace_all=replace_all)

    # -- batches and trees -------------------------------------------------------------------
    async def upload_files(
        self, files: Sequence[tuple[str, bytes]], *, mode: int | None = None
    ) -> list[TransferResult]:
        """Write several files; one result per file, in order. Never raises for one bad file."""
        return await self._transfers.upload_files(files, mode=mode)

    async def download_files(self, paths: Sequence[str]) -> list[TransferResult]:
        """Read several files; one result per file, in order. Never raises for one bad file."""
        return await self._transfers.download_files(paths)

    async def upload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        """Copy the local tree `local_dir` into `remote_dir`, its secrets left behind (`.env`,
        keys, cloud credentials; see docs/core.md, "Uploading a directory")."""
        return await upload_directory(self, local_dir, remote_dir, **options)

    # -- finding files and text ---------------------------------------------------------------
    async def walk(self, path: str = ".") -> list[FileMatch]:
        """Every regular file under `path`, and every symlink to one that stays inside it,
        sorted (`FileMatch`: `path`, `relative`, `is_symlink`); one command, exact on any name,
        no python3 needed (busybox is enough). Symlinked directories are not entered."""
        return await _glob.walk_files(self._runner, path)

    async def glob(self, pattern: str, *, path: str = ".") -> list[FileMatch]:
        """The files of `walk(path)` whose relative path matches `pattern`: `*.py` (a name at any
        depth), `src/**/*.ts`, `{a,b}`, `[!x]`; see docs/core.md, "Finding files"."""
        return await _glob.glob(self._runner, pattern, path)

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
            self._runner,
            pattern,
            path,
            glob=glob,
            include=include,
            exclude_dirs=exclude_dirs,
            max_matches=max_matches,
            env=env,
            timeout=self._runner.limit(timeout),
        )
