"""Result values returned by sessions. Plain frozen dataclasses: safe to log, compare and pickle.

Also `FileKind`, and `WriteData`: what the sessions' `write_bytes` takes (one alias for every
signature that accepts it)."""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeAlias

__all__ = ["CommandResult", "FileInfo", "FileKind", "TransferResult", "WriteData"]

FileKind = Literal["file", "directory", "symlink", "other"]

WriteData: TypeAlias = bytes | bytearray | memoryview | AsyncIterable[bytes]
"""What `write_bytes` writes: bytes-like, or an async iterable of bytes (streamed)."""


@dataclass(frozen=True)
class CommandResult:
    """What a finished command printed and how it exited.

    `stdout` and `stderr` are exactly what the command wrote (bytes that were not UTF-8 appear as
    U+FFFD). `truncated` is True when the session's output cap cut either stream; the cut keeps
    the beginning. `output` joins them as agents usually want: stdout, then stderr.
    """

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool = False
    duration: float = 0.0
    execution_id: str | None = field(default=None, compare=False)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class FileInfo:
    """Metadata of one path in the sandbox.

    `kind` describes the path itself (a symlink is `"symlink"`); `is_dir` and `is_file` follow
    symlinks, like `os.path.isdir`. `mode` is the permission bits as an int (`0o644`).
    """

    path: str
    kind: FileKind
    size: int
    mode: int
    modified_at: datetime | None = None
    owner: str | None = None
    group: str | None = None
    is_dir: bool = False
    is_file: bool = False

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1] or "/"

    @property
    def is_symlink(self) -> bool:
        return self.kind == "symlink"


@dataclass(frozen=True)
class TransferResult:
    """The outcome for one file of a batch upload or download.

    `error` is None on success, else one of `"file_not_found"`, `"permission_denied"`,
    `"is_directory"`, `"not_a_directory"`, `"invalid_path"`, `"unavailable"`, `"error"`;
    `exception` holds the exception that caused it. `content` is set for successful downloads.
    """

    path: str
    error: str | None = None
    content: bytes | None = field(default=None, repr=False)
    exception: BaseException | None = field(default=None, repr=False, compare=False)
