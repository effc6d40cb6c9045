"""Batch uploads and downloads as an agent's file tools report them: each path checked before
anything is sent, the sendable ones in one core batch, one outcome per file in the caller's
order, each failure classified as a code about that file; a failure that is not about the file
(the sandbox is gone, the server failed) raises. The adapters translate the codes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, cast, get_args

from opensandbox_core import _validate
from opensandbox_core._session import AsyncSandboxSession
from opensandbox_core._types import TransferResult

from ._paths import TRANSFER_ERRNOS, sendable_path

__all__ = [
    "TRANSFER_CODES",
    "CheckedTransfer",
    "TransferCode",
    "download_checked",
    "transfer_code",
    "upload_checked",
]

TransferCode = Literal[
    "file_not_found", "permission_denied", "is_directory", "not_a_directory", "invalid_path"
]
"""What went wrong with one file of a batch (`transfer_code`)."""
TRANSFER_CODES: Final[frozenset[str]] = frozenset(get_args(TransferCode))


@dataclass(frozen=True)
class CheckedTransfer:
    """One file of `upload_checked` / `download_checked`: the path as the caller gave it, the
    error code (None on success) and, for a download that succeeded, the content."""

    path: str
    error: TransferCode | None = None
    content: bytes | None = field(default=None, repr=False)


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
        return cast(TransferCode, TRANSFER_ERRNOS[exc.errno])
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
