"""The file operations of `OpenSandboxBackend`, native instead of `python3 -c` scripts.

Each has BaseSandbox's exact result (compared on the same sandbox by
`tests/live/deepagents_backend/test_native_tools.py`); where a native path cannot be exact it
hands the call to BaseSandbox's script. `write` is one native upload; `read` pages files over
1 MiB by HTTP Range reads (opensandbox-core's `read_lines`, `_read_glob.py`); `ls` is one argv `ls` command and `edit` a download and
execd's in-place `/files/replace` (`_tools.py`); `glob` one `find` command matched by
deepagents' public include-glob matcher (`_read_glob.py`); `delete` the core's `remove` (execd's
file API, recursive); `grep` the core's literal grep (`_grep.py`).

Only public deepagents names are used. Where the installed deepagents release answers a case
differently from others (a non-positive `limit`, an empty `old_string`, glob before 0.7.30,
file types by name), the call goes to BaseSandbox's own public method, so the result is always
the installed release's.

Uploads and downloads report per file, in order (`TRANSFER_ERRORS` in `_mapping.py`); one bad
path never fails the batch. A gone sandbox or a server failure raises, like Deep Agents' own
`FilesystemBackend` does for errors it cannot classify. Paths are absolute in every file
operation: a relative one is `invalid_path` for `read` as for `write`, uploads and downloads.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from deepagents.backends.protocol import (
    ASYNC_GREP_TIMEOUT,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import BaseSandbox

from opensandbox_core import DEFAULT, AsyncSandboxSession, run_blocking

from ._grep import native_grep
from ._mapping import check_transfer_path, transfer_error
from ._read_glob import native_glob, native_read
from ._texts import delete_error, delete_not_found, read_error, text_named, write_error
from ._tools import LsSupport, is_utf8, native_edit, native_ls

__all__ = ["NativeFiles", "plain_output", "plain_requested"]

T = TypeVar("T")

_PLAIN: ContextVar[bool] = ContextVar("osb_plain_output", default=False)


@contextmanager
def plain_output() -> Iterator[None]:
    """Within this block, the backend's `execute` returns stdout through one base64 line (the
    core's `run_bytes`), so line-framed execd needs no raw-file read for BaseSandbox's `grep`
    command (its `-Z` listing holds NUL bytes)."""
    token = _PLAIN.set(True)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def plain_requested() -> bool:
    return _PLAIN.get()


class NativeFiles(BaseSandbox):
    """BaseSandbox's file operations on `self._session` (the backend's core session).

    What the operations learn about the sandbox is kept per backend (so per session), never
    process-wide: the session's line indexes and read-ahead windows of recently paged files
    (opensandbox-core's `read_lines`, each checked against the file's version on every page),
    and `_ls`, whether the sandbox's `ls` can list natively (made empty here: no I/O).
    """

    def __init__(self, session: AsyncSandboxSession) -> None:
        self._session = session
        self._ls = LsSupport()

    @staticmethod
    def _run(coro: Coroutine[Any, Any, T]) -> T:
        return run_blocking(coro)

    # -- file transfer ----------------------------------------------------------------------
    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write files (parents created, existing files replaced); one result per file, in order."""
        return self._run(self.aupload_files(files))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """`upload_files()` on the caller's event loop."""
        responses: list[FileUploadResponse | None] = []
        batch: list[tuple[str, bytes]] = []
        for path, content in files:
            problem = check_transfer_path(path)
            if problem is None and not isinstance(content, bytes | bytearray | memoryview):
                raise TypeError(f"content for {path!r} must be bytes, got {type(content).__name__}")
            responses.append(FileUploadResponse(path=path, error=problem) if problem else None)
            if problem is None:
                batch.append((path, bytes(content)))
        results = iter(await self._session.upload_files(batch) if batch else [])
        return [
            response
            if response is not None
            else FileUploadResponse(path=(r := next(results)).path, error=transfer_error(r))
            for response in responses
        ]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read files as bytes; one result per file, in order."""
        return self._run(self.adownload_files(paths))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """`download_files()` on the caller's event loop."""
        responses: list[FileDownloadResponse | None] = []
        batch: list[str] = []
        for path in paths:
            problem = check_transfer_path(path)
            responses.append(FileDownloadResponse(path=path, error=problem) if problem else None)
            if problem is None:
                batch.append(path)
        results = iter(await self._session.download_files(batch) if batch else [])
        out: list[FileDownloadResponse] = []
        for response in responses:
            if response is None:
                result = next(results)
                error = transfer_error(result)
                response = FileDownloadResponse(
                    path=result.path, content=None if error else result.content, error=error
                )
            out.append(response)
        return out

    # -- native file operations -------------------------------------------------------------
    def write(self, file_path: str, content: str) -> WriteResult:
        """Create or overwrite a text file (parents created), in one native upload."""
        return self._run(self.awrite(file_path, content))

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """`write()` on the caller's event loop."""
        responses = await self.aupload_files([(file_path, content.encode("utf-8"))])
        if responses[0].error:
            return write_error(file_path, responses[0].error)
        return WriteResult(path=file_path)

    def ls(self, path: str) -> LsResult:
        """The entries of a directory in directory order, as BaseSandbox lists them (one argv
        command instead of a `python3 -c` script; see `_tools.py`)."""
        return self._run(self.als(path))

    async def als(self, path: str) -> LsResult:
        """`ls()` on the caller's event loop."""
        result = await native_ls(self._session, path, self._ls)
        if result is not None:
            return result
        return await BaseSandbox.als(self, path)

    def edit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Replace `old_string` in a text file, as BaseSandbox does (CRLF-aware, one match
        unless `replace_all`), natively: a download and execd's in-place replace."""
        return self._run(self.aedit(file_path, old_string, new_string, replace_all))

    async def aedit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """`edit()` on the caller's event loop."""
        if not old_string:
            # BaseSandbox's answer (its wording moved between releases), without a sandbox call.
            return await BaseSandbox.aedit(self, file_path, old_string, new_string, replace_all)
        result = await native_edit(
            self._session, file_path, old_string, new_string, replace_all=bool(replace_all)
        )
        if result is not None:
            return result
        return await BaseSandbox.aedit(self, file_path, old_string, new_string, replace_all)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Regular files under `path` matching `pattern`, as BaseSandbox finds them (one `find`
        command and BaseSandbox's own matcher instead of a `python3 -c` walk; `_read_glob.py`)."""
        result = self._run(native_glob(self._session, pattern, path))
        if result is not None:
            return result
        return BaseSandbox.glob(self, pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """`glob()` on the caller's event loop."""
        result = await native_glob(self._session, pattern, path)
        if result is not None:
            return result
        return await BaseSandbox.aglob(self, pattern, path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """A page of a text file (numbered by the tools), or a binary file as base64.

        Files up to 1 MiB are read whole, once per file version when paged (the bytes kept
        with the version, size and mtime, checked on every page); larger text files page by
        HTTP Range reads and a per-file index of line starts checked the same way, so a page
        costs about one page. Same results as BaseSandbox's script, which
        still answers the cases the port cannot reproduce (invalid UTF-8 the script decodes).
        """
        return self._run(self.aread(file_path, offset, limit))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """`read()` on the caller's event loop."""
        if isinstance(file_path, str) and not is_utf8(file_path):
            return await BaseSandbox.aread(self, file_path, offset, limit)  # raises, as it does
        problem = check_transfer_path(file_path)
        if problem is not None:
            # One rule for every file operation: paths are absolute (`write("rel.txt")` says the
            # same), never resolved against a working directory the agent cannot see.
            return read_error(file_path if isinstance(file_path, str) else repr(file_path), problem)
        if not (_plain_bounds(offset, limit) and text_named(file_path)):
            # Media and document types (a table that moves between releases) and degenerate
            # windows (answered differently by different releases): BaseSandbox's own read.
            return await BaseSandbox.aread(self, file_path, offset, limit)
        page = await native_read(self._session, file_path, offset, limit)
        if page is not None:
            return page
        return await BaseSandbox.aread(self, file_path, offset, limit)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Lines holding the literal `pattern`, as BaseSandbox's `grep` finds them, from the
        core's literal grep: one argv command, nothing read by a shell (`_grep.py`)."""
        return self._run(self._agrep_within(pattern, path, glob, max_count, DEFAULT))

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """`grep()` on the caller's event loop, stopped after BaseSandbox's `agrep` budget."""
        return await self._agrep_within(pattern, path, glob, max_count, ASYNC_GREP_TIMEOUT)

    async def _agrep_within(
        self,
        pattern: str,
        path: str | None,
        glob: str | None,
        max_count: int | None,
        timeout: Any,
    ) -> GrepResult:
        return await native_grep(
            self._session,
            pattern,
            path,
            glob,
            max_count=max_count,
            exclude_dirs=self.grep_exclude_dirs,
            timeout=timeout,
        )

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file, symlink (not its target) or directory tree, natively (the core's
        `remove`: execd's file API, no shell `rm`)."""
        return self._run(self.adelete(file_path))

    async def adelete(self, file_path: str) -> DeleteResult:
        """`delete()` on the caller's event loop."""
        if isinstance(file_path, str) and not is_utf8(file_path):
            return await BaseSandbox.adelete(self, file_path)  # not sendable to execd's file API
        problem = check_transfer_path(file_path)
        if problem is not None:
            shown = file_path if isinstance(file_path, str) else repr(file_path)
            return delete_error(shown, problem)
        try:
            await self._session.remove(file_path, recursive=True)
        except (FileNotFoundError, NotADirectoryError):  # BaseSandbox: `test -e` fails for both
            return delete_not_found(file_path)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return delete_error(file_path, reason)
        return DeleteResult(path=file_path)


def _plain_bounds(offset: object, limit: object) -> bool:
    """Whether a read window is one every release answers alike (ints, offset >= 0, limit > 0)."""
    return type(offset) is int and type(limit) is int and offset >= 0 and limit > 0
