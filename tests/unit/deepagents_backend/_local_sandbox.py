"""A `BaseSandbox` that runs its commands on this machine: BaseSandbox's own public methods
(`BaseSandbox.read(local, ...)`, `.edit`, `.glob`, ...) as the oracle of offline differential
tests, on the installed deepagents release, with no private deepagents name. And `LocalFiles`:
the session calls of opensandbox-core's `read_lines` on this machine's files, with the core's
own `LineReader`, so the backend's read path (`native_read`) runs offline as it does live."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from deepagents.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)
from deepagents.backends.sandbox import BaseSandbox

from opensandbox_core import FileInfo, LinePage, OutputLimitError
from opensandbox_core._files._pages import LineReader

__all__ = ["LocalFiles", "LocalSandbox"]

_BIN = Path(tempfile.gettempdir()) / f"osb-local-sandbox-bin-{os.getpid()}"


def _path_with_python() -> str:
    """PATH with `python3` as this interpreter (the pyenv shim is slow to start)."""
    _BIN.mkdir(exist_ok=True)
    link = _BIN / "python3"
    if not link.exists():
        link.symlink_to(sys.executable)
    return f"{_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


class LocalSandbox(BaseSandbox):
    """Only `execute`, `upload_files` and `download_files`: every tool is BaseSandbox's."""

    def __init__(self) -> None:
        self._env = {**os.environ, "PATH": _path_with_python()}

    @property
    def id(self) -> str:
        return "local"

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        run = subprocess.run(
            ["bash", "-c", command],
            capture_output=True,
            env=self._env,
            timeout=timeout or 120,
            check=False,
        )
        output = (run.stdout + run.stderr).decode("utf-8", "replace")
        return ExecuteResponse(output=output, exit_code=run.returncode, truncated=False)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        out = []
        for path, content in files:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(content)
            out.append(FileUploadResponse(path=path, error=None))
        return out

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        out = []
        for path in paths:
            try:
                out.append(FileDownloadResponse(path=path, content=Path(path).read_bytes()))
            except FileNotFoundError:
                out.append(FileDownloadResponse(path=path, content=None, error="file_not_found"))
        return out


class LocalFiles:
    """`stat`, `realpath`, `read_bytes`, `read_range` and `read_lines` on local files."""

    def __init__(self) -> None:
        self._lines = LineReader(self)
        self.files = self  # the session's `files` facet, as `native_read` reaches it

    async def stat(self, path: str) -> FileInfo:
        st = os.stat(path)
        is_dir = Path(path).is_dir()
        kind = "directory" if is_dir else "file"
        return FileInfo(
            path, kind, st.st_size, st.st_mode & 0o777, None, is_dir=is_dir, is_file=not is_dir
        )

    async def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        data = Path(path).read_bytes()
        if max_size is not None and len(data) > max_size:
            raise OutputLimitError(f"{path} is over {max_size} bytes.", limit=max_size)
        return data

    async def read_range(self, path: str, offset: int, length: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    async def read_lines(self, path: str, offset: int, limit: int, *, max_bytes: int) -> LinePage:
        return await self._lines.read_lines(path, offset, limit, max_bytes=max_bytes)
