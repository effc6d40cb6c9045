"""The translation tables between opensandbox-core and Deep Agents.

Everything here is pure (no I/O), so the unit tests cover it without a server.

Verified against deepagents 0.7.32 (`deepagents.backends.protocol`, `deepagents.backends.sandbox`
and the `FilesystemBackend` error mapping), opensandbox-core 0.1.0 and opensandbox-server 1.1.1,
on 2026-11-29.
"""

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

__all__ = [
    "SCRIPT_ERRORS",
    "TRANSFER_ERRORS",
    "check_transfer_path",
    "combined_output",
    "execute_timeout",
    "transfer_error",
]

# -- file transfer outcomes ------------------------------------------------------------------

TRANSFER_ERRORS: Final[Mapping[str, FileOperationError | None]] = MappingProxyType(
    {
        # opensandbox-core's TransferResult.error  ->  Deep Agents' FileOperationError
        "file_not_found": FILE_NOT_FOUND,
        "permission_denied": PERMISSION_DENIED,
        "is_directory": IS_DIRECTORY,
        "invalid_path": INVALID_PATH,
        # A parent of the path is a regular file: the path cannot name anything. Deep Agents' own
        # FilesystemBackend reports NotADirectoryError as invalid_path too.
        "not_a_directory": INVALID_PATH,
        # Not about the file: the sandbox is gone, or the server failed. These raise (None).
        "unavailable": None,
        "error": None,
    }
)
"""How each per-file outcome of the core's batch transfer is reported to Deep Agents.

`None` means "not a per-file condition": the exception is raised instead, exactly like Deep
Agents' `FilesystemBackend` re-raises what it cannot classify.
"""

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


SCRIPT_ERRORS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # errno of the core's OSError  ->  the error code BaseSandbox's read and edit scripts
        # print for the same file (both scripts use the same codes).
        errno.ENOENT: "file_not_found",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.EISDIR: "not_a_file",
        errno.EINVAL: "not_a_file",  # FIFO, socket or device: the core refuses to read it
    }
)


def check_transfer_path(path: object) -> FileOperationError | None:
    """`invalid_path` for a path that must not be sent at all, else None.

    Deep Agents' contract: paths are absolute. A relative path would otherwise be resolved
    against the sandbox's working directory by the core, and a NUL byte can never be part of a
    POSIX path. A str that is not UTF-8 (a lone surrogate, as `surrogateescape` names a
    non-UTF-8 byte) cannot be sent to execd at all.
    """
    if not isinstance(path, str) or not path or not path.startswith("/") or "\0" in path:
        return INVALID_PATH
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return INVALID_PATH
    return None


def transfer_error(result: TransferResult) -> FileOperationError | None:
    """The Deep Agents error code of one core transfer result (None on success).

    Raises the underlying exception when the failure is not about that file.
    """
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


# -- time values and output -----------------------------------------------------------------


def execute_timeout(value: object) -> float | None:
    """The `timeout` of `execute()` as the core wants it: a positive number, or None (no limit).

    The caller handles `None` (the backend default) before calling this; `0` means no limit.
    Anything that is not a non-negative number is a `ValueError` (the execute tool reports that
    to the model).
    """
    return _validate.zero_is_none(value, "timeout")


def combined_output(stdout: str, stderr: str, stderr_prefix: str | None) -> str:
    """`execute()`'s output: stdout, then stderr with every line starting with `stderr_prefix`.

    Without a prefix (the default) the two are joined as printed. With one, stderr starts on a
    line of its own, so a marker is never glued to the end of stdout's last line.
    """
    if stderr_prefix is None or not stderr:
        return stdout + stderr
    head = stdout if not stdout or stdout.endswith("\n") else stdout + "\n"
    lines = stderr.split("\n")
    tail = lines.pop() if lines[-1] == "" else None  # stderr ended with a line break
    marked = "\n".join(stderr_prefix + line for line in lines)
    return head + marked + ("\n" if tail is not None else "")
