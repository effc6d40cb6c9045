"""`ForwardingBackend`: every operation of Deep Agents' sandbox protocol, forwarded to the
`OpenSandboxBackend` that the subclass picks for the call (`_current()` / `_acurrent()`).

`ThreadSandboxBackend` picks the current LangGraph thread's sandbox, `TimeTravelSandboxBackend`
the one holding the current branch's files. Every protocol method is defined here, sync and
async, so none of them falls back to BaseSandbox's `python3 -c` scripts through `execute`: each
runs the native implementation of `OpenSandboxBackend` on the chosen sandbox.
`tests/unit/deepagents_backend/test_protocol_coverage.py` fails when a protocol method of any
exported class comes from BaseSandbox.
"""

from __future__ import annotations

from deepagents.backends.protocol import (
    DeleteResult,
    EditResult,
    ExecuteOffloadResult,
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import BaseSandbox

from ._backend import OpenSandboxBackend

__all__ = ["ForwardingBackend"]


class ForwardingBackend(BaseSandbox):
    """A Deep Agents backend whose every operation runs on the `OpenSandboxBackend` that
    `_current()` (blocking) or `_acurrent()` (async) returns for the call."""

    enable_capture_offload = True
    """`execute_with_offload` leaves a large output in the sandbox (see `OpenSandboxBackend`)."""

    def _current(self) -> OpenSandboxBackend:
        raise NotImplementedError

    async def _acurrent(self) -> OpenSandboxBackend:
        raise NotImplementedError

    # -- commands ---------------------------------------------------------------------------
    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run a shell command (see `OpenSandboxBackend.execute`)."""
        return self._current().execute(command, timeout=timeout)

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """`execute()` on the caller's event loop."""
        return await (await self._acurrent()).aexecute(command, timeout=timeout)

    def execute_with_offload(
        self,
        command: str,
        capture_path: str,
        *,
        max_inline_bytes: int,
        max_capture_bytes: int | None = None,
        timeout: int | None = None,
    ) -> ExecuteOffloadResult:
        """Run a command, leaving a large output at `capture_path` (see `OpenSandboxBackend`)."""
        return self._current().execute_with_offload(
            command,
            capture_path,
            max_inline_bytes=max_inline_bytes,
            max_capture_bytes=max_capture_bytes,
            timeout=timeout,
        )

    async def aexecute_with_offload(
        self,
        command: str,
        capture_path: str,
        *,
        max_inline_bytes: int,
        max_capture_bytes: int | None = None,
        timeout: int | None = None,
    ) -> ExecuteOffloadResult:
        """`execute_with_offload()` on the caller's event loop."""
        return await (await self._acurrent()).aexecute_with_offload(
            command,
            capture_path,
            max_inline_bytes=max_inline_bytes,
            max_capture_bytes=max_capture_bytes,
            timeout=timeout,
        )

    # -- file transfer ----------------------------------------------------------------------
    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write files; one result per file, in order."""
        return self._current().upload_files(files)

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """`upload_files()` on the caller's event loop."""
        return await (await self._acurrent()).aupload_files(files)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read files; one result per file, in order."""
        return self._current().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """`download_files()` on the caller's event loop."""
        return await (await self._acurrent()).adownload_files(paths)

    # -- file operations --------------------------------------------------------------------
    def ls(self, path: str) -> LsResult:
        """The entries of a directory (see `OpenSandboxBackend.ls`)."""
        return self._current().ls(path)

    async def als(self, path: str) -> LsResult:
        """`ls()` on the caller's event loop."""
        return await (await self._acurrent()).als(path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """A page of a file (see `OpenSandboxBackend.read`)."""
        return self._current().read(file_path, offset, limit)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """`read()` on the caller's event loop."""
        return await (await self._acurrent()).aread(file_path, offset, limit)

    def write(self, file_path: str, content: str) -> WriteResult:
        """Create or overwrite a text file (native upload)."""
        return self._current().write(file_path, content)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """`write()` on the caller's event loop."""
        return await (await self._acurrent()).awrite(file_path, content)

    def edit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """Replace text in a file (see `OpenSandboxBackend.edit`)."""
        return self._current().edit(file_path, old_string, new_string, replace_all)

    async def aedit(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> EditResult:
        """`edit()` on the caller's event loop."""
        return await (await self._acurrent()).aedit(file_path, old_string, new_string, replace_all)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Files matching a glob (see `OpenSandboxBackend.glob`)."""
        return self._current().glob(pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """`glob()` on the caller's event loop."""
        return await (await self._acurrent()).aglob(pattern, path)

    def grep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """Lines holding a literal string (see `OpenSandboxBackend.grep`)."""
        return self._current().grep(pattern, path, glob, max_count=max_count)

    async def agrep(
        self,
        pattern: str,
        path: str | None = None,
        glob: str | None = None,
        *,
        max_count: int | None = None,
    ) -> GrepResult:
        """`grep()` on the caller's event loop."""
        backend = await self._acurrent()
        return await backend.agrep(pattern, path, glob, max_count=max_count)

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file or directory tree (see `OpenSandboxBackend.delete`)."""
        return self._current().delete(file_path)

    async def adelete(self, file_path: str) -> DeleteResult:
        """`delete()` on the caller's event loop."""
        return await (await self._acurrent()).adelete(file_path)
