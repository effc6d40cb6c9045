"""The translation tables between opensandbox-core and Deep Agents (pure, no I/O)."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from deepagents.backends.protocol import (
    FILE_NOT_FOUND,
    INVALID_PATH,
    IS_DIRECTORY,
    PERMISSION_DENIED,
    FileOperationError,
)

from opensandbox_core import TransferResult
from opensandbox_core import validation as _validate

__all__ = ["TRANSFER_ERRORS", "check_transfer_path", "execute_timeout", "transfer_error"]

TRANSFER_ERRORS: Final[Mapping[str, FileOperationError | None]] = MappingProxyType(
    {
        # opensandbox-core's TransferResult.error  ->  Deep Agents' FileOperationError
        "file_not_found": FILE_NOT_FOUND,
        "permission_denied": PERMISSION_DENIED,
        "is_directory": IS_DIRECTORY,
        "invalid_path": INVALID_PATH,
        # A parent of the path is a regular file (FilesystemBackend says invalid_path too).
        "not_a_directory": INVALID_PATH,
        # Not about the file: the sandbox is gone, or the server failed. These raise (None),
        # as Deep Agents' FilesystemBackend re-raises what it cannot classify.
        "unavailable": None,
        "error": None,
    }
)
"""How each per-file outcome of the core's batch transfer is reported to Deep Agents."""

_ERRNO_ERRORS: Final[Mapping[int, FileOperationError]] = MappingProxyType(
    {
        # Path-level failures the core reports as a plain OSError (`error == "error"`).
        errno.ELOOP: INVALID_PATH,
        errno.ENAMETOOLONG: INVALID_PATH,
        errno.EINVAL: INVALID_PATH,  # e.g. a FIFO or device where a regular file is expected
        errno.EEXIST: INVALID_PATH,
        errno.EROFS: PERMISSION_DENIED,
        # A special file the core read like `cat` and could not give whole: a FIFO without a
        # writer (ETIMEDOUT), a device without an end (EFBIG), /proc/self/mem (EIO), a socket (ENXIO).
        errno.ETIMEDOUT: INVALID_PATH,
        errno.EFBIG: INVALID_PATH,
        errno.EIO: INVALID_PATH,
        errno.ENXIO: INVALID_PATH,
    }
)


def check_transfer_path(path: object) -> FileOperationError | None:
    """`invalid_path` for a path that must not be sent at all (not absolute, a NUL byte, not
    encodable as UTF-8), else None."""
    if not isinstance(path, str) or not path or not path.startswith("/") or "\0" in path:
        return INVALID_PATH
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return INVALID_PATH
    return None


def transfer_error(result: TransferResult) -> FileOperationError | None:
    """The Deep Agents error code of one core transfer result (None on success); raises the
    underlying exception when the failure is not about that file."""
    if result.error is None:
        return None
    code = TRANSFER_ERRORS.get(result.error)
    if code is not None:
        return code
    exc = result.exception
    if isinstance(exc, OSError) and exc.errno is not None and exc.errno in _ERRNO_ERRORS:
        return _ERRNO_ERRORS[exc.errno]
    if exc is not None:
        raise exc
    raise RuntimeError(f"Transfer of {result.path!r} failed without a reason ({result.error}).")


def execute_timeout(value: object) -> float | None:
    """`execute(timeout=)` as the core wants it (`None` handled by the caller): `0` is no limit,
    anything but a non-negative number a `ValueError` (the execute tool shows it to the model)."""
    return _validate.zero_is_none(value, "timeout")
