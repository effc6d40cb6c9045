"""The file operations of `OpenSandboxBackend`, native instead of BaseSandbox's `python3 -c`
scripts, translated to the protocol's types; where a native path cannot be exact, BaseSandbox's
public method answers. Details: docs/deepagents.md#native-file-operations.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from deepagents.backends.protocol import (
    ASYNC_GREP_TIMEOUT,
    INVALID_PATH,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileOperationError,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import BaseSandbox

from opensandbox_core import AsyncSandboxSession, EditError, NotTextError, OutputLimitError
from opensandbox_core import validation as _validate
from opensandbox_core.adapters import run_blocking, twin
from opensandbox_core.defaults import DEFAULT

from ._handle import BackendHandle
from ._listing import list_directory
from ._search import native_glob, native_grep
from ._texts import (
    BASE64_LIMIT,
    EFFECTIVE_LIMIT,
    as_base64,
    delete_error,
    delete_not_found,
    edit_error,
    ls_result,
    read_error,
    read_result,
    text_named,
    write_error,
)
from ._transfers import download_checked, execd_editable, is_utf8, sendable_path, upload_checked

__all__ = [
    "EDIT_ERRORS",
    "FILE_ERRORS",
    "NativeFiles",
    "check_transfer_path",
    "execute_timeout",
    "native_read",
]

FILE_ERRORS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # errno of the core's OSError  ->  the error code of BaseSandbox's read or edit script
        errno.ENOENT: "file_not_found",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.EISDIR: "not_a_file",
        errno.EINVAL: "not_a_file",  # FIFO, socket or device: the core refuses to read it
    }
)


def _shown(path: object) -> str:
    return path if isinstance(path, str) else repr(path)


def _plain_bounds(offset: object, limit: object) -> bool:
    """Whether a read window is one every release answers alike (ints, offset >= 0, limit > 0)."""
    return type(offset) is int and type(limit) is int and offset >= 0 and limit > 0


EDIT_ERRORS: Final[Mapping[str, str]] = MappingProxyType(
    {"not_found": "string_not_found", "ambiguous": "multiple_occurrences"}
)
"""`EditError.reason` -> the error code of the edit tool."""


def check_transfer_path(path: object) -> FileOperationError | None:
    """`invalid_path` for a path that must not be sent at all (the core's `sendable_path`)."""
    return None if sendable_path(path) else INVALID_PATH


def execute_timeout(value: object) -> float | None:
    """`execute(timeout=)` as the core wants it (`None` handled by the caller): `0` is no limit,
    anything but a non-negative number a `ValueError` (the execute tool shows it to the model)."""
    return _validate.zero_is_none(value, "timeout")


async def native_read(
    session: AsyncSandboxSession, file_path: str, offset: int, limit: int
) -> ReadResult | None:
    """BaseSandbox's `ReadResult` for a text-named file; None where only its script can
    answer (invalid UTF-8 it decodes, errors it words itself)."""
    try:
        page = await session.files.read_lines(file_path, offset, limit, max_bytes=EFFECTIVE_LIMIT)
    except NotTextError as exc:
        if not exc.binary:
            return None
        try:  # not UTF-8 in the first 8 KiB: the whole file as base64, as the script does
            return as_base64(await session.files.read_bytes(file_path, max_size=BASE64_LIMIT))
        except (OSError, OutputLimitError):
            return None
    except OutputLimitError:
        return None
    except OSError as exc:
        code = FILE_ERRORS.get(exc.errno or 0)
        return read_error(file_path, code) if code is not None else None
    return read_result(page)


class NativeFiles(BaseSandbox, BackendHandle):
    """BaseSandbox's file operations on `self._session`, the backend's core session, which
    keeps what they learn (page indexes, read-ahead). Each blocking method is the `twin` of
    its async one, run on the core's portal loop, but `glob` and `grep`, which differ."""

    def __init__(self, session: AsyncSandboxSession) -> None:
        self._session = session

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        done = await upload_checked(self._session, files)
        return [FileUploadResponse(path=f.path, error=f.deep_error) for f in done]

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        done = await download_checked(self._session, paths)
        return [
            FileDownloadResponse(path=f.path, content=f.content, error=f.deep_error) for f in done
        ]

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        responses = await self.aupload_files([(file_path, content.encode("utf-8"))])
        if responses[0].error:
            return write_error(file_path, responses[0].error)
        return WriteResult(path=file_path)

    async def als(self, path: str) -> LsResult:
        if not isinstance(path, str) or "\0" in path or not is_utf8(path):
            return await BaseSandbox.als(self, path)  # its script decides (or raises)
        if not path:
            return ls_result(path, None, "path_not_found")
        listing = await list_directory(self._session, path)
        if listing is None:
            return await BaseSandbox.als(self, path)
        return ls_result(path, listing.entries, listing.error)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        if old_string and execd_editable(file_path, old_string, new_string):
            try:
                count = await self._session.files.edit(
                    file_path, old_string, new_string, replace_all=bool(replace_all)
                )
            except EditError as exc:
                return edit_error(EDIT_ERRORS[exc.reason], file_path, old_string)
            except NotTextError:
                return edit_error("not_a_text_file", file_path, old_string)
            except OSError as exc:
                code = FILE_ERRORS.get(exc.errno or 0)
                if code is not None:
                    return edit_error(code, file_path, old_string)
            except OutputLimitError:
                pass  # too big to edit from a download: BaseSandbox's script does it
            else:
                return EditResult(path=file_path, occurrences=count)
        # An empty `old_string` included: its wording moved between releases.
        return await BaseSandbox.aedit(self, file_path, old_string, new_string, replace_all)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        result = run_blocking(native_glob(self._session, pattern, path))
        return result if result is not None else BaseSandbox.glob(self, pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        result = await native_glob(self._session, pattern, path)
        return result if result is not None else await BaseSandbox.aglob(self, pattern, path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        if isinstance(file_path, str) and not is_utf8(file_path):
            return await BaseSandbox.aread(self, file_path, offset, limit)  # raises, as it does
        problem = check_transfer_path(file_path)
        if problem is not None:  # paths are absolute, in every file operation
            return read_error(_shown(file_path), problem)
        page = None
        if _plain_bounds(offset, limit) and text_named(file_path):
            page = await native_read(self._session, file_path, offset, limit)
        # Other file types, degenerate windows (answered differently by different releases),
        # what only the script can answer: BaseSandbox's own read.
        return page if page is not None else await BaseSandbox.aread(self, file_path, offset, limit)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        excluded = self.grep_exclude_dirs
        return run_blocking(
            native_grep(self._session, pattern, path, glob, max_count, excluded, DEFAULT)
        )

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Stopped after BaseSandbox's `agrep` budget (`ASYNC_GREP_TIMEOUT`)."""
        excluded, timeout = self.grep_exclude_dirs, ASYNC_GREP_TIMEOUT
        return await native_grep(self._session, pattern, path, glob, max_count, excluded, timeout)

    async def adelete(self, file_path: str) -> DeleteResult:
        if isinstance(file_path, str) and not is_utf8(file_path):
            return await BaseSandbox.adelete(self, file_path)  # not sendable to execd's file API
        problem = check_transfer_path(file_path)
        if problem is not None:
            return delete_error(_shown(file_path), problem)
        try:
            await self._session.files.remove(file_path, recursive=True)
        except (FileNotFoundError, NotADirectoryError):  # BaseSandbox: `test -e` fails for both
            return delete_not_found(file_path)
        except OSError as exc:
            return delete_error(file_path, exc.strerror or type(exc).__name__)
        return DeleteResult(path=file_path)

    upload_files = twin(aupload_files, name="upload_files", on_self=True)
    download_files = twin(adownload_files, name="download_files", on_self=True)
    write = twin(awrite, name="write", on_self=True)
    ls = twin(als, name="ls", on_self=True)
    edit = twin(aedit, name="edit", on_self=True)
    read = twin(aread, name="read", on_self=True)
    delete = twin(adelete, name="delete", on_self=True)
