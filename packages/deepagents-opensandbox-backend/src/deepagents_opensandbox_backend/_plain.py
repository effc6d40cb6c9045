"""Command output as plain lines: one base64 line, so line-framed execd needs no raw-file read.

execd v1.0.17 to v1.0.19 frame command output by lines and drop what a line cannot carry, so
output with NUL bytes, `\\r`, NEL or bytes that are not UTF-8 (a `grep -Z` listing) makes the
core read the command's raw output file: a second round trip. `BaseSandbox.grep` runs one such
command. While `plain_output()` is active, the backend's `execute` runs the command inside a
group whose output (and exit status) is printed as one base64 line, which the core returns
from the line events (`run(..., plain_lines=True)`), and decodes it back to the very output the
command printed. The command itself is whatever the caller (BaseSandbox's public `grep`) built:
no deepagents internals are read here. Anything unexpected (stderr output, a cut, a timeout, a
line that is not the encoding, 1.1-style execd whose events keep every byte) runs the command
as it is instead.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

__all__ = ["plain_output", "plain_requested", "unwrap", "wrap"]

_PLAIN: ContextVar[bool] = ContextVar("osb_plain_output", default=False)
_LINE: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}\n")
_STATUS: Final = re.compile(rb"[0-9]{1,3}")


@contextmanager
def plain_output() -> Iterator[None]:
    """Within this block, the backend's `execute` returns output through one base64 line."""
    token = _PLAIN.set(True)
    try:
        yield
    finally:
        _PLAIN.reset(token)


def plain_requested() -> bool:
    return _PLAIN.get()


def wrap(command: str) -> str:
    """`command` with its output and exit status printed as one base64 line."""
    return f"{{ {{ {command}\n}}; printf '\\n%s' \"$?\"; }} | base64 -w 0; echo"


def unwrap(stdout: str) -> tuple[bytes, int] | None:
    """(the command's output bytes, its exit status) from `wrap`'s output; None when it is not
    one base64 line ending in a status."""
    if not _LINE.fullmatch(stdout):
        return None
    try:
        raw = base64.b64decode(stdout[:-1], validate=True)
    except (binascii.Error, ValueError):
        return None
    data, sep, status = raw.rpartition(b"\n")
    if not sep or not _STATUS.fullmatch(status):
        return None
    return data, int(status)
