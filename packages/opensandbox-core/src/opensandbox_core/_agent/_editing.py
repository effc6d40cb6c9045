"""`edit_file`: replace a string in a text file in the sandbox, CRLF-aware, in place.

The decisions are made here on a download of the file: `old` as given, then with CRLF, then
with LF line endings (the first that occurs wins, and `new` gets the same endings); none found
or several without `replace_all` is an error. execd's `/files/replace` then replaces the chosen
variant in place (same inode, mode and owner; symlinks followed). No shell, no python3.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from opensandbox_core._errors import OutputLimitError

if TYPE_CHECKING:
    from opensandbox_core._session import AsyncSandboxSession

__all__ = ["EDIT_READ_LIMIT", "FILE_ERRORS", "EditOutcome", "choose_replacement", "edit_file"]

EDIT_READ_LIMIT: Final = 8 * 1024 * 1024
"""The largest file `edit_file` edits (it is downloaded first)."""

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


@dataclass(frozen=True)
class EditOutcome:
    """`occurrences` replaced, or `error`: a `FILE_ERRORS` code, `not_a_text_file`,
    `string_not_found` or `multiple_occurrences`."""

    occurrences: int = 0
    error: str | None = None


def choose_replacement(
    text: str, old: str, new: str, *, replace_all: bool
) -> tuple[str, str, int] | str:
    """(old variant, new variant, occurrences) for this edit, or its error code."""
    lf_old, lf_new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    crlf = (lf_old.replace("\n", "\r\n"), lf_new.replace("\n", "\r\n"))
    for cand_old, cand_new in ((old, new), crlf, (lf_old, lf_new)):
        count = text.count(cand_old)
        if count > 1 and not replace_all:
            return "multiple_occurrences"
        if count >= 1:
            return cand_old, cand_new, count
    return "string_not_found"


async def edit_file(
    session: AsyncSandboxSession, path: str, old: str, new: str, *, replace_all: bool = False
) -> EditOutcome | None:
    """Replace `old` by `new` in the text file `path`; None where it cannot be done this way
    (an empty `old`, a file over `EDIT_READ_LIMIT`, an OS error without a code here)."""
    if not old:
        return None
    try:
        raw = await session.read_bytes(path, max_size=EDIT_READ_LIMIT)
    except OutputLimitError:
        return None
    except OSError as exc:
        code = FILE_ERRORS.get(exc.errno or 0)
        return EditOutcome(error=code) if code is not None else None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return EditOutcome(error="not_a_text_file")
    choice = choose_replacement(text, old, new, replace_all=replace_all)
    if isinstance(choice, str):
        return EditOutcome(error=choice)
    matched_old, matched_new, count = choice
    try:
        await session.replace_text(path, matched_old, matched_new)
    except OSError as exc:
        code = FILE_ERRORS.get(exc.errno or 0)
        if code is None:
            raise
        return EditOutcome(error=code)
    return EditOutcome(occurrences=count)
