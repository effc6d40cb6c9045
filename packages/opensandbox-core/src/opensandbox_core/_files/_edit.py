"""`edit`: replace a string in a text file in the sandbox, CRLF-aware, in place.

The decision is made on a download of the file: `old` as given, then with CRLF, then with LF
line endings (the first that occurs wins, and `new` gets the same endings). No match, or several
without `replace_all`, raises `EditError` and changes nothing. execd's `/files/replace` then
replaces the chosen variant in place (same inode, mode and owner; symlinks followed). No shell,
no python3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from opensandbox_core import _validate
from opensandbox_core._errors import EditError, NotTextError

if TYPE_CHECKING:
    from ._transfers import Transfers

__all__ = ["EDIT_READ_LIMIT", "choose_replacement", "edit"]

EDIT_READ_LIMIT: Final = 8 * 1024 * 1024
"""The largest file `edit` edits (it is downloaded first); a bigger one: `OutputLimitError`."""


def choose_replacement(text: str, old: str, new: str) -> tuple[str, str, int]:
    """The variant of (`old`, `new`) that occurs in `text` (as given, with CRLF, with LF line
    endings: the first that occurs) and how often; (`old`, `new`, 0) when none does."""
    lf_old, lf_new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    crlf = (lf_old.replace("\n", "\r\n"), lf_new.replace("\n", "\r\n"))
    for cand_old, cand_new in ((old, new), crlf, (lf_old, lf_new)):
        count = text.count(cand_old)
        if count:
            return cand_old, cand_new, count
    return old, new, 0


async def edit(
    transfers: Transfers, path: str, old: str, new: str, *, replace_all: bool = False
) -> int:
    """Replace `old` by `new` in the text file `path`; the number of occurrences replaced."""
    _validate.replacement(old, new)
    _validate.flag(replace_all, "replace_all")
    raw = await transfers.read_bytes(path, max_size=EDIT_READ_LIMIT)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotTextError(f"{path} is not a UTF-8 text file.", path=path, binary=True) from None
    matched_old, matched_new, count = choose_replacement(text, old, new)
    if count == 0:
        raise EditError(
            f"The text to replace was not found in {path}.",
            path=path,
            reason="not_found",
            occurrences=0,
        )
    if count > 1 and not replace_all:
        raise EditError(
            f"The text to replace occurs {count} times in {path}; give more context to make it "
            "unique, or pass replace_all=True.",
            path=path,
            reason="ambiguous",
            occurrences=count,
        )
    await transfers.replace_text(path, matched_old, matched_new)
    return count
