"""Rebuilding a command's output from execd's event stream.

execd has framed stdout/stderr in three ways over its history; the version is not exposed, so it is
inferred once per sandbox from the events of a known command (`PROBE_COMMAND`):

- `MODERN` (execd >= 1.1.1): each event carries raw text with its own line endings. Output is the
  concatenation of the texts, exact.
- `LEGACY` (execd 1.0.x after upstream PR #902): one event per line with the line ending stripped;
  an empty line arrives as the text `"\\n"`. Rebuilt by appending `"\\n"` to every line. What cannot
  be recovered: whether the last line ended with a newline (it is assumed it did), `"\\r\\n"` line
  endings (they arrive as `"\\n"`), and the order between stdout and stderr lines.
- `ANCIENT` (before PR #902): like LEGACY but empty lines are dropped, so output cannot be rebuilt;
  sessions refuse such sandboxes with `UnsupportedDaemonError`.

This module is pure: no I/O, fully unit-tested.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

__all__ = ["PROBE_COMMAND", "Framing", "OutputBuffer", "classify_probe"]


class Framing(enum.Enum):
    """How a sandbox's execd frames command output."""

    MODERN = "modern"
    LEGACY = "legacy"
    ANCIENT = "ancient"


# Prints "osb", an empty line, then "probe" without a final newline, to stdout only.
PROBE_COMMAND = "printf 'osb\\n\\nprobe'"
_MODERN_OUTPUT = "osb\n\nprobe"


def classify_probe(texts: Sequence[str]) -> Framing | None:
    """The framing that produced these stdout event texts for `PROBE_COMMAND`, or None if unknown."""
    if "".join(texts) == _MODERN_OUTPUT:
        return Framing.MODERN
    if list(texts) == ["osb", "\n", "probe"]:
        return Framing.LEGACY
    if list(texts) == ["osb", "probe"]:
        return Framing.ANCIENT
    return None


def rebuild(framing: Framing, text: str) -> str:
    """The output that one event's text stands for."""
    if framing is Framing.MODERN:
        return text
    if text == "\n":
        return "\n"
    return text + "\n"


class OutputBuffer:
    """Collects one stream's rebuilt output, keeping at most `limit` bytes (UTF-8).

    Memory stays bounded whatever a command prints: once the limit is reached further text is
    counted but dropped, and `truncated` becomes True. A character is never split.
    """

    __slots__ = ("_chunks", "_kept", "limit", "total_bytes", "truncated")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: list[str] = []
        self._kept = 0
        self.total_bytes = 0
        self.truncated = False

    def add(self, text: str) -> None:
        if not text:
            return
        size = len(text.encode("utf-8", "surrogatepass"))
        self.total_bytes += size
        room = self.limit - self._kept
        if size <= room:
            self._chunks.append(text)
            self._kept += size
            return
        self.truncated = True
        if room <= 0:
            return
        # Keep the longest prefix that fits in `room` bytes without splitting a character.
        prefix = text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
        self._chunks.append(prefix)
        self._kept += len(prefix.encode("utf-8", "surrogatepass"))
        self._kept = self.limit  # nothing more fits, even a shorter character

    def text(self) -> str:
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""
