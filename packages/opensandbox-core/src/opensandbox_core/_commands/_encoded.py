"""`run_bytes`: a command's stdout as exact bytes, in one round trip on every execd generation.

execd v1.0.17 to v1.0.19 frame command output by lines and drop what a line cannot carry, so
output with NUL bytes, `\\r`, NEL or bytes that are not UTF-8 (a `find -print0` or `grep -Z`
listing, a binary) makes `run` read the command's raw output file: a second round trip. And
`run`'s result is text: bytes that are not UTF-8 become U+FFFD. `run_bytes` runs the command
in a subshell whose stdout and exit status the sandbox prints as one base64 line (`wrap`),
which comes back exact in the line events (`plain_lines=True`), and decodes it (`unwrap`).

The image needs `base64` (coreutils or busybox) and a POSIX shell, nothing else: the wrapper is
a subshell, `printf` and a pipe. stderr is not encoded: it comes back as the events carry it
(exact for text lines ended by `\\n`). A cut (the session's `max_output` applies to the encoded
line) raises `OutputLimitError`, a timeout `CommandTimeoutError` with the stdout decoded up to
where it was cut, and an answer that is not the encoding (no `base64` in the image) `ServerError`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Final

from opensandbox_core import _validate
from opensandbox_core._errors import CommandTimeoutError, OutputLimitError, ServerError
from opensandbox_core._types import BytesResult
from opensandbox_core._wire._framing import decode_output

from ._run import CommandRunner

__all__ = ["run_bytes", "unwrap", "wrap"]

_LINE: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}\n")
_STATUS: Final = re.compile(rb"[0-9]{1,3}")


def wrap(command: str) -> str:
    """`command` (a shell line) with its stdout and exit status printed as one base64 line
    (in a subshell, so that its own `exit` ends only the subshell and the status is printed)."""
    return f"{{ ( {command}\n); printf '\\n%s' \"$?\"; }} | base64 -w 0; echo"


def unwrap(stdout: str) -> tuple[bytes, int] | None:
    """(the command's stdout bytes, its exit status) from `wrap`'s output; None when it is not
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


def _partial(stdout: str) -> str:
    """What a cut base64 line holds, decoded (its whole 4-character groups)."""
    text = stdout.strip()
    try:
        return decode_output(base64.b64decode(text[: len(text) // 4 * 4], validate=True))
    except (binascii.Error, ValueError):
        return ""


async def run_bytes(
    commands: CommandRunner,
    command: str | Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
) -> BytesResult:
    """`session.commands.run_bytes` (`Commands.run_bytes`); `timeout` is already the effective limit."""
    text = _validate.command_text(command)
    try:
        result = await commands.run(
            wrap(text),
            cwd=cwd,
            env=env,
            timeout=timeout,
            on_output=None,
            max_output=None,
            plain_lines=True,
        )
    except CommandTimeoutError as exc:
        raise CommandTimeoutError(
            str(exc),
            timeout=exc.timeout,
            stdout=_partial(exc.stdout),
            stderr=exc.stderr,
            truncated=exc.truncated,
        ) from None
    if result.truncated:
        raise OutputLimitError(
            "The command printed more than the session's max_output allows (as base64); "
            "raise max_output or write the output to a file and read it with read_bytes().",
            limit=commands.max_output,
        )
    parsed = unwrap(result.stdout) if result.exit_code == 0 else None
    if parsed is None:
        raise ServerError(
            "Could not read the command's output back as one base64 line "
            f"({result.stderr.strip()[:200] or 'no error text'}): run_bytes needs `base64` "
            "(coreutils or busybox) in the sandbox image."
        )
    data, status = parsed
    return BytesResult(exit_code=status, stdout=data, stderr=result.stderr)
