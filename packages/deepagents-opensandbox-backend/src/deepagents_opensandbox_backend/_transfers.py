"""Batch uploads and downloads as Deep Agents' file tools report them: each path checked before
anything is sent, the sendable ones in one batch of the core's `session.files`, one outcome per
file in the caller's order, each failure a code about that file (`TRANSFER_ERRORS` gives its
`FileOperationError`); a failure that is not about the file (the sandbox is gone, the server
failed) raises, as `FilesystemBackend` re-raises what it cannot classify. Also which paths and
strings execd's file API takes as they are (pure)."""

from __future__ import annotations

import errno
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, cast, get_args

from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    FileOperationError,
)

from opensandbox_core import AsyncSandboxSession, TransferResult
from opensandbox_core import validation as _validate

__all__ = [
    "TRANSFER_CODES",
    "TRANSFER_ERRNOS",
    "TRANSFER_ERRORS",
    "CheckedTransfer",
    "TransferCode",
    "download_checked",
    "execd_editable",
    "is_utf8",
    "sendable_path",
    "transfer_code",
    "upload_checked",
]

TransferCode = Literal[
    "file_not_found", "permission_denied", "is_directory", "not_a_directory", "invalid_path"
]
"""What went wrong with one file of a batch (`transfer_code`); the core's `TransferResult.error`
uses the same words where it knows them."""
TRANSFER_CODES: Final[frozenset[str]] = frozenset(get_args(TransferCode))

TRANSFER_ERRNOS: Final[Mapping[int, TransferCode]] = MappingProxyType(
    {
        # Path-level failures the core reports as a plain OSError (`TransferResult.error ==
        # "error"`)  ->  the code of the file operation.
        errno.ELOOP: "invalid_path",
        errno.ENAMETOOLONG: "invalid_path",
        errno.EINVAL: "invalid_path",  # e.g. a FIFO or device where a regular file is expected
        errno.EEXIST: "invalid_path",
        errno.EROFS: "permission_denied",
        # A special file the core read like `cat` and could not give whole: a FIFO without a
        # writer (ETIMEDOUT), a device without an end (EFBIG), /proc/self/mem (EIO), a socket (ENXIO).
        errno.ETIMEDOUT: "invalid_path",
        errno.EFBIG: "invalid_path",
        errno.EIO: "invalid_path",
        errno.ENXIO: "invalid_path",
    }
)

TRANSFER_ERRORS: Final[Mapping[TransferCode, FileOperationError]] = MappingProxyType(
    {
        "file_not_found": FILE_NOT_FOUND,
        "permission_denied": PERMISSION_DENIED,
        "is_directory": IS_DIRECTORY,
        "invalid_path": INVALID_PATH,
        # A parent of the path is a regular file (FilesystemBackend says invalid_path too).
        "not_a_directory": INVALID_PATH,
    }
)
"""How each per-file code is reported to Deep Agents."""


def is_utf8(text: str) -> bool:
    """Whether `text` can be encoded as UTF-8 (no lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sendable_path(path: object) -> bool:
    """Whether `path` may be sent to execd at all: an absolute string, no NUL byte, UTF-8."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        return False
    return is_utf8(path)


def execd_editable(file_path: object, old: str, new: str) -> bool:
    """Whether execd's replace takes this path as it is (no `$`, no `..`) and the strings."""
    if not sendable_path(file_path) or "$" in str(file_path):
        return False
    return ".." not in str(file_path).split("/") and is_utf8(old) and is_utf8(new)


@dataclass(frozen=True)
class CheckedTransfer:
    """One file of `upload_checked` / `download_checked`: the path as the caller gave it, the
    error code (None on success) and, for a download that succeeded, the content."""

    path: str
    error: TransferCode | None = None
    content: bytes | None = field(default=None, repr=False)

    @property
    def deep_error(self) -> FileOperationError | None:
        """The error as Deep Agents reports it (`TRANSFER_ERRORS`)."""
        return None if self.error is None else TRANSFER_ERRORS[self.error]


def transfer_code(result: TransferResult) -> TransferCode | None:
    """The code of one core transfer result: None on success; its `error` when that is about
    the file; for a plain OSError (`error == "error"`) the `TRANSFER_ERRNOS` code of its errno.
    Anything else (`"unavailable"`, a server error, a full disk) raises the exception itself."""
    if result.error is None:
        return None
    if result.error in TRANSFER_CODES:
        return cast(TransferCode, result.error)
    exc = result.exception
    if isinstance(exc, OSError) and exc.errno is not None and exc.errno in TRANSFER_ERRNOS:
        return TRANSFER_ERRNOS[exc.errno]
    if exc is not None:
        raise exc
    raise RuntimeError(f"Transfer of {result.path!r} failed without a reason ({result.error}).")


async def upload_checked(
    session: AsyncSandboxSession, files: Sequence[tuple[str, bytes]]
) -> list[CheckedTransfer]:
    """Write `files` (path, content) in one batch; one outcome per file, in order. A path that
    `sendable_path` refuses is `"invalid_path"` and not sent; content that is not bytes (for a
    sendable path) raises `ArgumentTypeError` (a TypeError) before anything is sent. Other
    errors: `transfer_code`."""
    outcomes: list[tuple[str, CheckedTransfer | None]] = []  # None: sent, answer to come
    batch: list[tuple[str, bytes]] = []
    for path, content in files:
        if not sendable_path(path):
            outcomes.append((path, CheckedTransfer(path, "invalid_path")))
            continue
        data = _validate.byte_data(content, f"content for {path!r}")  # raises ArgumentTypeError
        outcomes.append((path, None))
        batch.append((path, data))
    results = iter(await session.files.upload_files(batch) if batch else [])
    return [
        CheckedTransfer(path, transfer_code(next(results))) if known is None else known
        for path, known in outcomes
    ]


async def download_checked(
    session: AsyncSandboxSession, paths: Sequence[str]
) -> list[CheckedTransfer]:
    """Read `paths` in one batch; one outcome per path, in order, with the content where it
    succeeded. A path that `sendable_path` refuses is `"invalid_path"` and not sent; other
    errors: `transfer_code`."""
    checked = [(path, sendable_path(path)) for path in paths]
    batch = [path for path, sendable in checked if sendable]
    results = iter(await session.files.download_files(batch) if batch else [])
    out: list[CheckedTransfer] = []
    for path, sendable in checked:
        if not sendable:
            out.append(CheckedTransfer(path, "invalid_path"))
            continue
        result = next(results)
        code = transfer_code(result)
        out.append(CheckedTransfer(path, code, None if code else result.content))
    return out
