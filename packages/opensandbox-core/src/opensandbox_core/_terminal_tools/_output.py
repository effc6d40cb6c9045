"""A terminal's bytes as text for a model, piece by piece, with nothing dropped unsaid.

- Bytes are decoded as UTF-8 across pieces: a character split between two reads is whole in the
  second; a byte that is not UTF-8 becomes U+FFFD (one per bad byte or truncated sequence).
- The terminal's line endings (`\\r\\n`; the line discipline turns a program's `\\n` into them)
  become `\\n`, also when the `\\r` and the `\\n` arrive in different pieces. Every other
  character is kept as the terminal sent it: a lone `\\r`, tabs, escape sequences.
- A piece over the cap keeps its last `limit` bytes, starting at a character; the result says
  how many bytes were left out before it (`skip` leaves bytes out the same way, for a caller
  that cannot hold them all).

The bytes held back between pieces (at most three of an unfinished character, and a `\\r` that a
`\\n` may follow) come out with the next piece, or with `final=True` when no piece follows.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from opensandbox_core import _validate

__all__ = ["OutputText", "Rendered"]


@dataclass(frozen=True)
class Rendered:
    """One piece of output as text; `elided` bytes before it were left out (the cap)."""

    text: str
    elided: int = 0


class OutputText:
    """Turns one terminal's output into text, piece by piece (module docstring)."""

    def __init__(self, limit: int) -> None:
        self.limit = _validate.positive_int(limit, "max_output")
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._carriage_return = False
        self._skipped = 0

    def skip(self, count: int) -> None:
        """Leave out `count` bytes of output (and what earlier pieces left pending): the next
        piece says so."""
        pending, _ = self._decoder.getstate()
        self._skipped += count + len(pending) + int(self._carriage_return)
        self._decoder.reset()
        self._carriage_return = False

    def render(self, data: bytes, *, final: bool = False) -> Rendered:
        """The text of `data`, the next bytes of the terminal's output; `final` when no more
        will follow (the process ended or the terminal is let go)."""
        if len(data) > self.limit:
            start = cut = len(data) - self.limit
            # Start at a character, not inside one (at most 3 continuation bytes).
            while cut < min(start + 3, len(data)) and 0x80 <= data[cut] < 0xC0:
                cut += 1
            self.skip(cut)
            data = data[cut:]
        elided, self._skipped = self._skipped, 0
        text = self._decoder.decode(data, final)
        if self._carriage_return:
            text = "\r" + text
        self._carriage_return = not final and text.endswith("\r")
        if self._carriage_return:
            text = text[:-1]
        return Rendered(text.replace("\r\n", "\n"), elided)
