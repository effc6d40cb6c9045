"""A `BaseSandbox` that runs its commands on this machine: BaseSandbox's own public methods
(`BaseSandbox.read(local, ...)`, `.edit`, `.glob`, ...) as the oracle of offline differential
tests, on the installed deepagents release, with no private deepagents name."""

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

__all__ = ["LocalSandbox"]

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
