"""execd's event stream and command output: splitting, decoding and rebuilding, without I/O.

execd answers `POST /command` with a stream of JSON objects, each followed by a blank line
(`JSON\\n\\n`, no `data:` prefix). `EventSplitter` cuts that stream on its own separator only:
JSON never holds a raw line feed (encoding/json escapes control characters), so a line feed is
the only byte that may separate events, and text such as U+0085 (NEL), U+2028 and U+2029 inside an
event can never cut it in two (Python's `str.splitlines`, which httpx's `aiter_lines` uses,
does exactly that and loses the event).

How stdout/stderr travel depends on the execd generation. No endpoint tells the version, so it is
inferred once per sandbox from the events of a known command (`PROBE_COMMAND`):

- `MODERN` (the 1.1 generation that SDK 1.1.1 documents): each event carries raw text with its
  own line endings; output is the concatenation of the texts, exact.
- `LEGACY` (line-framed: the real v1.0.17 to v1.0.19): one event per line with its terminator
  stripped (`\\n`, `\\r\\n` and a bare `\\r` all end a line), a blank line sent as the text
  `"\\n"`. The events cannot tell a final newline from none, nor `\\r\\n` from `\\n`. The session
  therefore takes the exact output from the raw files execd keeps for each command
  (`<tmpdir>/<id>.stdout|.stderr`; bytes decoded by `decode_output`); `rebuild` is the fallback
  (and what streaming callbacks see): every line gets a `"\\n"`.
- `ANCIENT` (v1.0.5 to v1.0.16): like LEGACY but blank lines are dropped from the events; sessions
  refuse such sandboxes with `UnsupportedDaemonError`.
"""

from __future__ import annotations

import codecs
import enum
import json
import logging
from collections.abc import Sequence
from typing import Any, Final

__all__ = [
    "PROBE_COMMAND",
    "PROBE_OUTPUT",
    "SUPPORTED_EXECD_IMAGE",
    "UPGRADE_EXECD",
    "EventSplitter",
    "Framing",
    "OutputBuffer",
    "classify_probe",
    "decode_output",
    "describe",
    "rebuild",
    "whole_characters",
]

logger = logging.getLogger(__name__)


class Framing(enum.Enum):
    """How a sandbox's execd frames command output (its generation; see `describe`)."""

    MODERN = "modern"
    LEGACY = "legacy"
    ANCIENT = "ancient"


_DESCRIPTIONS: Final = {
    Framing.MODERN: (
        "execd 1.1 generation: events keep their own line endings; output is exact from the "
        "event stream"
    ),
    Framing.LEGACY: (
        "execd v1.0.17 to v1.0.19 (line-framed events): output is exact, read from the raw "
        "output files execd keeps per command; streaming callbacks see one line per event"
    ),
    Framing.ANCIENT: (
        "execd v1.0.16 or older: blank lines are dropped from command output, which cannot be "
        "rebuilt; sessions refuse it"
    ),
}


def describe(framing: Framing) -> str:
    """Which execd generation a framing stands for and what it means for a user."""
    return _DESCRIPTIONS[framing]


SUPPORTED_EXECD_IMAGE: Final = "opensandbox/execd:v1.0.19"
"""An upstream execd image whose output the packages read exactly (any v1.0.17 or newer works)."""
UPGRADE_EXECD: Final = (
    f'Set execd_image = "{SUPPORTED_EXECD_IMAGE}" (or any v1.0.17 or newer) under [runtime] in '
    "the server's config, restart the server and create a new sandbox. Upstream execd images "
    'are tagged vX.Y.Z; a "release-1.2.0" tag named in some older notes does not follow that '
    "pattern, so check the registry for the tag you choose."
)
"""The fix for a sandbox whose execd is too old (blank lines dropped), as a sentence."""

# Prints "osb", an empty line, then "probe" without a final newline, to stdout only.
PROBE_COMMAND: Final = "printf 'osb\\n\\nprobe'"
PROBE_OUTPUT: Final = b"osb\n\nprobe"
_MODERN_OUTPUT = PROBE_OUTPUT.decode()


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
    """The output that one event's text stands for (LEGACY: the line with a newline added)."""
    if framing is Framing.MODERN:
        return text
    if text == "\n":
        return "\n"
    return text + "\n"


# -- raw output bytes ---------------------------------------------------------------------------
_GO_REPLACE = "opensandbox-core-go-replace"


def _replace_each_byte(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "\ufffd" * (exc.end - exc.start), exc.end


codecs.register_error(_GO_REPLACE, _replace_each_byte)


def decode_output(data: bytes) -> str:
    """Decode command output as execd's JSON events would carry it: UTF-8, with every byte that
    is not part of a valid character replaced by U+FFFD (Go's `encoding/json` rule, one U+FFFD per
    byte, where Python's own "replace" would use one per broken sequence)."""
    return data.decode("utf-8", _GO_REPLACE)


def whole_characters(data: bytes) -> bytes:
    """`data` without a UTF-8 character cut short at its end (for output cut at a byte limit)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead byte
        need = (
            2
            if byte & 0xE0 == 0xC0
            else 3
            if byte & 0xF0 == 0xE0
            else 4
            if byte & 0xF8 == 0xF0
            else 1
        )
        return data[: len(data) - back] if need > back else data
    return data


# -- the event stream ---------------------------------------------------------------------------
class EventSplitter:
    """Cuts execd's event stream into events, fed bytes as they arrive.

    An event is a JSON object followed by a blank line. Since JSON text never holds a raw line
    feed, the stream is cut at line feeds only (never at U+0085, U+2028 or U+2029), and blank
    lines are skipped. A `data:` prefix (SSE style) is accepted, SSE comments and fields other
    than `data` are skipped, and the last object may come without its blank line (execd ends a
    timed-out session run that way): `close()` returns it.
    """

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        buffer = self._buffer
        if not buffer and data.endswith(b"\n\n") and data.count(b"\n") == 2:
            event = _parse_line(data[:-2])  # the usual case: one whole event per chunk
            return [] if event is None else [event]
        buffer += data
        end = buffer.rfind(b"\n")
        if end < 0:
            return []
        lines = bytes(buffer[:end]).split(b"\n")
        del buffer[: end + 1]
        events: list[dict[str, Any]] = []
        for line in lines:
            if line and line != b"\r":
                event = _parse_line(line)
                if event is not None:
                    events.append(event)
        return events

    def close(self) -> list[dict[str, Any]]:
        """Whatever is left when the stream ends (an object without its blank line)."""
        line = bytes(self._buffer)
        self._buffer.clear()
        event = _parse_line(line)
        return [] if event is None else [event]


_decode_json = json.JSONDecoder().decode


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    line = raw.strip(b"\r\t ")
    if not line or line[0] != 0x7B:  # not "{": an SSE field, a comment, or nothing
        if not line or line.startswith(b":"):
            return None
        if not line.startswith(b"data:"):
            return None  # "event:", "id:", "retry:" and anything else that is not an event
        line = line[5:].strip()
    try:
        value = _decode_json(decode_output(line))
    except ValueError:
        logger.debug("ignoring a malformed execd event line (%d bytes)", len(line))
        return None
    return value if isinstance(value, dict) else None


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
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
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
