"""Result values returned by sessions. Plain frozen dataclasses: safe to log, compare and pickle.

Also `FileKind`, and `WriteData`: what the sessions' `write_bytes` takes (one alias for every
signature that accepts it)."""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, TypeAlias

__all__ = [
    "BytesResult",
    "CommandResult",
    "FileInfo",
    "FileKind",
    "FileMatch",
    "LinePage",
    "TransferResult",
    "WriteData",
]

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
class BytesResult:
    """What `run_bytes` returns: the command's exit code, its stdout exactly as printed (bytes),
    and its stderr as text (lines as the daemon's events carry them)."""

    exit_code: int
    stdout: bytes = field(repr=False)
    stderr: str = ""

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


@dataclass(frozen=True)
class LinePage:
    """A page of a text file's lines (`read_lines`).

    `text` holds the lines `offset` to `end` (0-based, `end` excluded) joined by `"\\n"`, without
    their endings (`\\r\\n`, `\\r` and `\\n` each end a line). `truncated`: `max_bytes` cut the
    text, which then ends with the beginning of line `end`; the next page starts with that line
    again, unless it was the page's only line (it then counts as read, so paging moves on).
    `total_lines` is the file's line count where known: the page reached the end of the file,
    or the file (at most 1 MiB) was read whole. A page past the end of the file has no text,
    `end == offset` and `total_lines` set. `size` is the file's size in bytes as read.
    """

    path: str
    text: str
    offset: int
    end: int
    total_lines: int | None
    truncated: bool
    size: int

    @property
    def next_offset(self) -> int | None:
        """The `offset` of the next page, or None when this page reached the end of the file."""
        if self.total_lines is not None and self.end >= self.total_lines:
            return None
        return self.end


@dataclass(frozen=True)
class FileMatch:
    """A file found by `glob`: a regular file, or a symlink to one that stays inside the tree.

    `relative` is its path below the search root, exactly as named there (names that are not
    UTF-8 are decoded like `os.fsdecode`: UTF-8 with `surrogateescape`); `path` is the search
    root as given joined with it.
    """

    path: str
    relative: str
    is_symlink: bool = False
