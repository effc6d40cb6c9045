"""The file operations of `OpenSandboxBackend`, native instead of BaseSandbox's `python3 -c`
scripts, translated to the protocol's types; where a native path cannot be exact, BaseSandbox's
public method answers. Details: docs/deepagents.md#native-file-operations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any, Final

from deepagents.backends import utils as deepagents_utils
from deepagents.backends.protocol import (
    ASYNC_GREP_TIMEOUT,
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileInfo,
    FileOperationError,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import BaseSandbox

from opensandbox_core import (
    DEFAULT,
    AsyncSandboxSession,
    CommandTimeoutError,
    DirectoryLister,
    EditError,
    NotTextError,
    OutputLimitError,
)
from opensandbox_core import validation as _validate
from opensandbox_core.adapters import (
    FILE_ERRORS,
    SessionHandle,
    TransferCode,
    download_checked,
    execd_editable,
    grep_universal,
    is_utf8,
    match_files,
    sendable_path,
    upload_checked,
)

from ._texts import (
    BASE64_LIMIT,
    EFFECTIVE_LIMIT,
    as_base64,
    delete_error,
    delete_not_found,
    edit_error,
    grep_error,
    grep_timed_out,
    ls_result,
    read_error,
    read_result,
    text_named,
    write_error,
)

__all__ = [
    "TRANSFER_ERRORS",
    "NativeFiles",
    "check_transfer_path",
    "execute_timeout",
    "native_glob",
    "native_grep",
    "native_read",
    "parse",
    "render",
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


def _shown(path: object) -> str:
    return path if isinstance(path, str) else repr(path)


def _plain_bounds(offset: object, limit: object) -> bool:
    """Whether a read window is one every release answers alike (ints, offset >= 0, limit > 0)."""
    return type(offset) is int and type(limit) is int and offset >= 0 and limit > 0


EDIT_ERRORS: Final[Mapping[str, str]] = MappingProxyType(
    {"not_found": "string_not_found", "ambiguous": "multiple_occurrences"}
)
"""`EditError.reason` -> the error code of the edit tool."""

TRANSFER_ERRORS: Final[Mapping[TransferCode, FileOperationError]] = MappingProxyType(
    {
        # opensandbox-core's transfer code  ->  Deep Agents' FileOperationError (a failure not
        # about the file raises, as FilesystemBackend re-raises what it cannot classify)
        "file_not_found": FILE_NOT_FOUND,
        "permission_denied": PERMISSION_DENIED,
        "is_directory": IS_DIRECTORY,
        "invalid_path": INVALID_PATH,
        # A parent of the path is a regular file (FilesystemBackend says invalid_path too).
        "not_a_directory": INVALID_PATH,
    }
)
"""How each per-file code of the core's checked transfers is reported to Deep Agents."""


def check_transfer_path(path: object) -> FileOperationError | None:
    """`invalid_path` for a path that must not be sent at all (the core's `sendable_path`)."""
    return None if sendable_path(path) else INVALID_PATH


def _deep(code: TransferCode | None) -> FileOperationError | None:
    return None if code is None else TRANSFER_ERRORS[code]


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


async def native_glob(
    session: AsyncSandboxSession, pattern: str, path: str | None
) -> GlobResult | None:
    """The protocol's glob (regular files under `path` matched by deepagents' public include
    matcher, sorted, absolute) from the core's walk; None where BaseSandbox's glob answers: a
    release before the contract, a pattern the matcher refuses, a relative root, a walk that
    fails or comes near BaseSandbox's budgets."""
    if not SHARED_CONTRACT or not isinstance(pattern, str) or not pattern:
        return None
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path + pattern:
        return None
    assert _compile is not None and _refused is not None
    try:
        include = _compile(pattern)
    except _refused:
        return None  # BaseSandbox reports it, in its words
    found = await match_files(
        session, path, include, max_matches=MAX_MATCHES, time_budget=TIME_BUDGET * 0.8
    )
    if found is None or found.paths is None:
        return GlobResult(matches=None, error=f"Path '{path}': {found.error}") if found else None
    infos: list[FileInfo] = [{"path": p, "is_dir": False} for p in found.paths]
    return GlobResult(matches=infos, truncated=False, truncation_reason=None)


# -- grep: the core's literal grep (argv only, no shell, no python3), printing and reading
# BaseSandbox's records. Routes and limits: docs/deepagents.md#grep.


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
            refused = (
                await session.files.stat(root)
            ).is_dir  # the script refuses it in a directory
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


class NativeFiles(BaseSandbox, SessionHandle):
    """BaseSandbox's file operations on `self._session`, the backend's core session, which
    keeps what they learn (page indexes, read-ahead; `_lister`: whether `ls` can quote names)."""

    def __init__(self, session: AsyncSandboxSession) -> None:
        self._session = session
        self._lister = DirectoryLister(session)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return self._run(self.aupload_files(files))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        done = await upload_checked(self._session, files)
        return [FileUploadResponse(path=f.path, error=_deep(f.error)) for f in done]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self._run(self.adownload_files(paths))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        done = await download_checked(self._session, paths)
        return [
            FileDownloadResponse(path=f.path, content=f.content, error=_deep(f.error)) for f in done
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
        listing = await self._lister.list(path)
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
        result = self._run(native_glob(self._session, pattern, path))
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
        return self._run(
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


def install(cls: type, name: str, method: Callable[..., Any], wrapped: Any) -> None:
    """Define `cls.<name>` as `method`, with `wrapped`'s docstring and signature."""
    method.__name__ = name
    method.__qualname__ = f"{cls.__name__}.{name}"
    method.__doc__ = wrapped.__doc__
    method.__module__ = cls.__module__  # `inspect.getdoc` finds the protocol's docstring
    setattr(method, "__wrapped__", wrapped)  # noqa: B010 - `inspect.signature` follows it
    setattr(cls, name, method)


def blocking_twin(cls: type, name: str) -> None:
    """Define `cls.<name>` as the blocking twin of `cls.a<name>` (same signature and docs)."""

    def method(self: NativeFiles, *args: Any, **kwargs: Any) -> Any:
        return self._run(getattr(self, "a" + name)(*args, **kwargs))

    install(cls, name, method, getattr(cls, "a" + name))


for _name in ("write", "ls", "edit", "read", "delete"):
    blocking_twin(NativeFiles, _name)
del _name
