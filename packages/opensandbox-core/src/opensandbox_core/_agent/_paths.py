"""Which paths and strings can be sent to execd's file API as they are, and the error code of a
path-level failure of a transfer (pure, no I/O; the adapters translate the codes)."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["TRANSFER_ERRNOS", "execd_editable", "is_utf8", "sendable_path"]

TRANSFER_ERRNOS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # Path-level failures the core reports as a plain OSError (`TransferResult.error ==
        # "error"`)  ->  the error code of the file operation.
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
