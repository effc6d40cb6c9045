"""The frames of execd's `/pty` WebSocket, both ways (pure: no I/O).

What the daemons send (recorded frame by frame from execd v1.0.18 and v1.0.19, see
`tests/data/execd-recordings/`, cases `pty_*`):

- binary frames: one type byte, then bytes: `0x01` stdout (in pty mode everything the terminal
  printed), `0x02` stderr (pipe mode only), `0x03` replay: an 8-byte big-endian byte offset,
  then the kept output from that offset (sent once, before `connected`, on a reconnection);
- text frames: a JSON object and a newline: `connected` (`session_id`, `mode`), `exit`
  (`exit_code`, -1 when a signal ended the shell, whichever it was), `pong`, `error` (`code`,
  `error`).

What a client sends: stdin as a binary frame (`0x00` + bytes), `resize` and `ping` as JSON text
frames. (execd also takes a `signal` frame, for the shell's process group only: the core does not
send it; Ctrl-C is stdin 0x03.) Anything else the daemon ignores (an unknown JSON `type` gets an
`error`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "PING",
    "Control",
    "Output",
    "Replay",
    "decode",
    "resize_frame",
    "stdin_frame",
]

STDIN: Final = 0x00
STDOUT: Final = 0x01
STDERR: Final = 0x02
REPLAY: Final = 0x03
_OFFSET_BYTES: Final = 8

PING: Final = '{"type":"ping"}'
"""The keep-alive a client sends (execd ends a connection whose client is silent for 60 s)."""


@dataclass(frozen=True)
class Output:
    """Bytes the terminal printed, live (`channel` 1 stdout, 2 stderr)."""

    data: bytes
    channel: int = STDOUT


@dataclass(frozen=True)
class Replay:
    """Kept output from byte `offset` of the terminal's output, sent before `connected`."""

    offset: int
    data: bytes


@dataclass(frozen=True)
class Control:
    """A JSON text frame: `kind` is its `type` (`connected`, `exit`, `pong`, `error`, ...)."""

    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int | None:
        """The exit code of an `exit` frame; None when execd does not know it: -1 (a signal
        ended the process, execd does not say which), missing or not a number."""
        code = self.fields.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and code >= 0:
            return code
        return None


def decode(message: bytes | str) -> Output | Replay | Control | None:
    """What one server message says; None for a message no daemon sends (it is ignored)."""
    if isinstance(message, str):
        try:
            data = json.loads(message)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            return None
        return Control(data["type"], data)
    if not message:
        return None
    kind = message[0]
    if kind in (STDOUT, STDERR):
        return Output(bytes(message[1:]), kind)
    if kind == REPLAY and len(message) >= 1 + _OFFSET_BYTES:
        offset = int.from_bytes(message[1 : 1 + _OFFSET_BYTES], "big")
        return Replay(offset, bytes(message[1 + _OFFSET_BYTES :]))
    return None


def stdin_frame(data: bytes) -> bytes:
    """Keystrokes for the terminal's process."""
    return bytes((STDIN,)) + data


def resize_frame(cols: int, rows: int) -> str:
    """A new window size (execd applies it before the next stdin frame)."""
    return json.dumps({"type": "resize", "cols": cols, "rows": rows}, separators=(",", ":"))
