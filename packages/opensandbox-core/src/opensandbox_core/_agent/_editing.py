"""`FILE_ERRORS`: the errno of the core's path errors -> the error code of an agent's read or
edit tool."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["FILE_ERRORS"]

FILE_ERRORS: Final[Mapping[int, str]] = MappingProxyType(
    {
        # errno of the core's OSError  ->  the error code of a read or an edit
        errno.ENOENT: "file_not_found",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.EISDIR: "not_a_file",
        errno.EINVAL: "not_a_file",  # FIFO, socket or device: the core refuses to read it
    }
)
