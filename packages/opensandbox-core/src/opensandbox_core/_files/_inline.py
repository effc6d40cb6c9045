"""The atomic write of a small file in one request (pure: the command, its limits and what its
exit status means; `_atomic` runs it).

The content travels inside the command, as the format of the shell's own `printf` (a builtin of
bash, dash and busybox `sh`: no process is started for it): printable ASCII as it is, every other
byte, and `%`, `\\` and `'`, as a three-digit octal escape, so the command is ASCII, its bytes
exact (NUL and invalid UTF-8 included) and its text one single-quoted word. The script does what
the upload and the rename command (`_rename`) do together on the other ways:

- it inspects the target: a symlink is written through by the caller another way
  (`_rename.LINK`), a directory or a special file is refused; an existing file's mode is kept
  (one `stat`, only when the caller gave no mode) and so is its owner (a second look only when
  the shell is not the owner);
- a new file's parent directories are created, only when the parent is missing;
- `printf` writes the temporary sibling under a umask that gives it the final permission bits at
  once (no window with wider ones; `chmod` only for execute, setuid, setgid and sticky bits),
  with noclobber set, so nothing that already has the name is followed or truncated;
- it prints the final mode (the session then knows the file: the next read is one download) and
  replaces itself with `mv -f`, whose rename is atomic.

A command's text is one argument of `bash -c` in the sandbox: Linux refuses an argument over
128 KiB (`MAX_ARG_STRLEN`); the text is kept well under it (`TEXT_LIMIT`), and a bigger content
takes the upload. Arguments go through `set --`, each quoted: execd expands nothing in a command's
text, so `$` and spaces in paths are safe.
"""

from __future__ import annotations

import shlex
from typing import Final

from ._rename import INSPECT

__all__ = ["INLINE_LIMIT", "TEXT_LIMIT", "argv_text", "printf_format"]

TEXT_LIMIT: Final = 40_000
"""The most characters of the command text, the content's `printf` format included. A command
costs more with its length (text is about as long as its bytes, random bytes about 2.9 times);
measured on the testbed, one command beat the upload and rename up to about 40,000 characters
(a 32 KiB text, a 12 KiB binary), and lost beyond (docs/performance.md). Linux allows 131,071
bytes for one argument."""
INLINE_LIMIT: Final = TEXT_LIMIT
"""The most bytes of content that may be written in one command (its format is never shorter)."""

_PLAIN: Final = frozenset(
    b'\t\n !"#$&()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~'
)
"""Bytes `printf` prints as they are inside a single-quoted format (no `%`, `\\`, `'`)."""
_PLAIN_BYTES: Final = bytes(sorted(_PLAIN))
_TABLE: Final = tuple(chr(b) if b in _PLAIN else f"\\{b:03o}" for b in range(256))
_ESCAPES: Final = {b: _TABLE[b] for b in range(256) if b not in _PLAIN}

# $1 temp, $2 target, $3 the mode of a new target, $4 the mode asked for ("": keep the target's).
# Exit statuses as `_rename`'s: 83 a symlink, 84 a directory, 85 a special file.
_HEAD: Final = f"""export LC_ALL=C
t=$1 d=$2 w=$4 o=
{INSPECT}else w=${{w:-$3}} p=${{d%/*}}
if [ -n "$p" ] && [ ! -d "$p" ]; then
if [ -e "$p" ] || [ -L "$p" ]; then echo "$p: Not a directory" >&2; exit 1; fi
mkdir -p -- "$p" || exit 1; fi
fi
m=00$w; m=${{m#"${{m%???}}"}}; a=${{m%??}} b=${{m#?}} c=${{m#??}}; b=${{b%?}}
umask $((7-a))$((7-b))$((7-c)); set -C
printf '"""
_TAIL: Final = """' >"$t" || { rm -f -- "$t"; exit 1; }
[ -n "$o" ] && chown -- "$o" "$t" 2>/dev/null
case $w in ????*|*[1357]*) chmod -- "$w" "$t" || { rm -f -- "$t"; exit 1; };; esac
echo "$w"
exec mv -f -- "$t" "$d"
"""


def printf_format(data: bytes) -> str:
    """`data` as a `printf` format that prints exactly these bytes (see the module docstring)."""
    if len(data.translate(None, _PLAIN_BYTES)) * 16 < len(data):
        text = data.decode("latin-1").translate(_ESCAPES)  # mostly text: fast
    else:
        text = "".join(map(_TABLE.__getitem__, data))
    if text.startswith("-"):  # never taken for an option of printf
        text = "\\055" + text[1:]
    return text


def argv_text(
    temp: str, target: str, data: bytes, *, new_mode: int, mode: int | None
) -> str | None:
    """The command that writes `data` to `temp` and renames it over `target` (see the module
    docstring), or None when it would be too long (`INLINE_LIMIT`, `TEXT_LIMIT`).

    `new_mode`: the whole mode of a target that does not exist; `mode`: the one the caller asked
    for (None: keep an existing target's)."""
    if len(data) > INLINE_LIMIT:
        return None  # too long whatever its bytes
    args = [temp, target, format(new_mode, "o"), "" if mode is None else format(mode, "o")]
    head = "set -- " + " ".join(shlex.quote(arg) for arg in args) + "\n" + _HEAD
    text = head + printf_format(data) + _TAIL
    return text if len(text.encode()) <= TEXT_LIMIT else None
