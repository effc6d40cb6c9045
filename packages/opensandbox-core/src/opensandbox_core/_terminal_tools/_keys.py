"""The key notation of the terminal tools: how a model writes keys it cannot type.

A model sends text; a terminal reads bytes, and many keys (Enter, Ctrl-C, the arrows) are control
bytes or escape sequences that text in a tool call cannot carry reliably. So the tools read key
names in angle brackets, as Vim and Emacs spell them: `<Enter>`, `<Ctrl-C>`, `<Up>`, `<F5>`.
Anything else is typed as it is, a `<` that does not start a known name included
(`cat <file>` and `diff <(ls) <(ls -a)` mean what they say); `<lt>` types a `<` where it would.
A line break in the text is Enter (`\\r`), as a real terminal sends when text is pasted.

The bytes are what xterm-compatible terminals send (and readline, Python's REPL and `less`
understand): the arrows in normal cursor mode (`ESC [ A`), Backspace as DEL (0x7f, the `stty
erase` default), F1-F4 as `ESC O P`..`S`, the rest as `ESC [ n ~`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from opensandbox_core import _validate

__all__ = ["KEYS", "keystrokes"]

KEYS: Final[Mapping[str, bytes]] = MappingProxyType(
    {
        "enter": b"\r",
        "return": b"\r",
        "cr": b"\r",
        "tab": b"\t",
        "esc": b"\x1b",
        "escape": b"\x1b",
        "backspace": b"\x7f",
        "bs": b"\x7f",
        "space": b" ",
        "up": b"\x1b[A",
        "down": b"\x1b[B",
        "right": b"\x1b[C",
        "left": b"\x1b[D",
        "home": b"\x1b[H",
        "end": b"\x1b[F",
        "pageup": b"\x1b[5~",
        "pgup": b"\x1b[5~",
        "pagedown": b"\x1b[6~",
        "pgdn": b"\x1b[6~",
        "insert": b"\x1b[2~",
        "ins": b"\x1b[2~",
        "delete": b"\x1b[3~",
        "del": b"\x1b[3~",
        "f1": b"\x1bOP",
        "f2": b"\x1bOQ",
        "f3": b"\x1bOR",
        "f4": b"\x1bOS",
        "f5": b"\x1b[15~",
        "f6": b"\x1b[17~",
        "f7": b"\x1b[18~",
        "f8": b"\x1b[19~",
        "f9": b"\x1b[20~",
        "f10": b"\x1b[21~",
        "f11": b"\x1b[23~",
        "f12": b"\x1b[24~",
        "lt": b"<",
    }
)
"""Key names (lower case; the notation ignores case) and the bytes they type. Besides these:
`<Ctrl-X>` (also `<Ctrl+X>`, `<C-x>`, `<^X>`) for X a letter or one of `@ [ \\ ] ^ _ ?`."""

_NAME: Final = re.compile(r"<([^<>\s]{1,12})>")
_CONTROL: Final = re.compile(r"(?:ctrl[-+]|control[-+]|c-|\^)(.)")
_CONTROL_PUNCTUATION: Final = {"@": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31, "?": 127}


def _key(name: str) -> bytes | None:
    """The bytes of a key name (without brackets), or None when it names no key."""
    lower = name.lower()
    known = KEYS.get(lower)
    if known is not None:
        return known
    control = _CONTROL.fullmatch(lower)
    if control is None:
        return None
    char = control.group(1)
    if "a" <= char <= "z":
        return bytes([ord(char) - ord("a") + 1])
    code = _CONTROL_PUNCTUATION.get(char)
    return None if code is None else bytes([code])


def _typed(text: str) -> bytes:
    """Plain text as typed: a line break (`\\n`, `\\r\\n` or `\\r`) is Enter."""
    return text.replace("\r\n", "\r").replace("\n", "\r").encode("utf-8")


def keystrokes(keys: str) -> bytes:
    """The bytes a terminal gets for `keys` in the tools' key notation (module docstring).

    `keystrokes("6*7<Enter>") == b"6*7\\r"`; `keystrokes("<Ctrl-C>") == b"\\x03"`;
    `keystrokes("echo <b>") == b"echo <b>"` (no key is named b).
    """
    text = _validate.keys_text(keys)
    out = bytearray()
    done = 0
    for match in _NAME.finditer(text):
        key = _key(match.group(1))
        if key is None:
            continue
        out += _typed(text[done : match.start()])
        out += key
        done = match.end()
    out += _typed(text[done:])
    return bytes(out)
