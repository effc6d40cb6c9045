"""Native `grep` for the Deep Agents backend: BaseSandbox's own search, its output made plain.

BaseSandbox's `grep` (`_build_grep_cmd` in `deepagents/backends/sandbox.py`) is already one
command: `rg` or GNU `grep -rHnFZ` (or a `python3 -c` glob walk for a glob with a `/`), whose
records are `path NUL line:text` lines. That output holds NUL bytes and whatever a matched line
holds (`\\r`, NEL, U+2028, bytes that are not UTF-8), so on line-framed execd (v1.0.17 to
v1.0.19) the core must read the command's raw output file to return it exactly.

Here the very same command (built by BaseSandbox's `_build_grep_cmd`, so the search, its
options, the cap and the exit status are the installed deepagents' exactly) runs inside a group
whose output is piped through `base64 -w 0`, followed by a newline and the group's exit status.
That is one plain ASCII line, which the core returns from the line events
(`run(..., plain_lines=True)`: no raw-file read). The bytes are decoded as the core decodes any
command output (`decode_output`: UTF-8, one U+FFFD per invalid byte), and the result is parsed
by BaseSandbox's own `_parse_grep_output`, so matches, `truncated` and error strings are the
ones BaseSandbox returns.

The caller falls back to BaseSandbox's command where this cannot be exact: no `base64` in the
image, anything on the wrapper's stderr, output the core cut at its limit, a timeout, or an
output line that is not the expected encoding.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from deepagents.backends.protocol import ExecuteResponse, GrepResult
from deepagents.backends.sandbox import _build_grep_cmd, _parse_grep_output

from opensandbox_core import AsyncSandboxSession, CommandTimeoutError, Framing, decode_output

from ._tools import is_utf8

__all__ = ["grep_command", "native_grep", "parse_wrapped"]

_LINE: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}\n")
_STATUS: Final = re.compile(rb"[0-9]{1,3}")


def grep_command(
    pattern: str,
    path: str | None,
    glob: str | None,
    max_count: int | None,
    exclude_dirs: tuple[str, ...],
) -> str:
    """BaseSandbox's grep command, its output and exit status printed as one base64 line."""
    inner = _build_grep_cmd(pattern, path, glob, max_count, exclude_dirs=exclude_dirs)
    return f"{{ {{ {inner}\n}}; printf '\\n%s' \"$?\"; }} | base64 -w 0; echo"


def parse_wrapped(stdout: str) -> tuple[bytes, int] | None:
    """(the grep command's output bytes, its exit status) from the wrapper's output; None when
    the output is not one base64 line ending in a status."""
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


async def native_grep(
    session: AsyncSandboxSession,
    pattern: str,
    path: str | None,
    glob: str | None,
    max_count: int | None,
    exclude_dirs: tuple[str, ...],
) -> GrepResult | None:
    """The `GrepResult` BaseSandbox's grep gives, from its own command run with plain output;
    None where only running BaseSandbox's command as it is can answer exactly."""
    if session.framing is Framing.MODERN:
        # Events keep their line endings: BaseSandbox's command as it is costs one request,
        # and the base64 wrapper would only add work (measured 0.81x on the 1.1 profile).
        return None
    text = f"{pattern}{path or ''}{glob or ''}"
    if "\0" in text or (not text.isascii() and not is_utf8(text)):
        return None  # BaseSandbox's command decides (NUL, or text it cannot encode)
    try:
        command = grep_command(pattern, path, glob, max_count, exclude_dirs)
    except (TypeError, ValueError):
        return None  # BaseSandbox raises the same for the same arguments, as it will
    try:
        result = await session.run(command, plain_lines=True)
    except CommandTimeoutError:
        return None
    if result.truncated or result.stderr or result.exit_code != 0:
        return None
    parsed = parse_wrapped(result.stdout)
    if parsed is None:
        return None
    data, status = parsed
    response = ExecuteResponse(output=decode_output(data), exit_code=status, truncated=False)
    return _parse_grep_output(response, path, max_count)
