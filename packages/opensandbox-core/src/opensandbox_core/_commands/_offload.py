"""Output offload (`session.commands.run_offloaded`): a command whose output stays in the
sandbox, in a file the caller names, and only its size, line count, head and tail (or, when it
is small, the whole of it) come back.

It is the core's output capture (`_capture`) with the caller's file as its target: the command
goes in the environment variable `OSB_CAPTURED_COMMAND` (never expanded by execd) and the target
path in `OSB_OFFLOAD_PATH`, and a small POSIX shell wrapper runs the command as execd would
(`bash -c`, `sh` where there is no bash, same process group, same stdin) with stdout and stderr
going, as they interleave, through `head -c MAX_BYTES` into the file; the rest is drained, so the
command is never killed by a full pipe and keeps its exit status. The wrapper then prints one
marker line, `osb-offload: <status> <lines> <bytes>` (`wc -lc` of the file), and exits with the
command's status (a status of 128+N where signal N kills by default is raised again, as in
`_capture`). Needs only `sh`, `head`, `cat` and `wc` (busybox has them all).

Afterwards the caller reads what it needs by range (one request, or two for a head and a tail);
a small output is read whole and its file deleted before the call returns. A target the wrapper cannot write (a
directory, no permission) runs nothing and raises the builtin `OSError` for it. On a timeout
the command is stopped and `CommandTimeoutError` says so; the file keeps what was printed, but
for what `head` still held in its buffer when it was stopped (a few KiB at most).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from opensandbox_core import _validate
from opensandbox_core._errors import ServerError, os_error
from opensandbox_core._files import _fallback
from opensandbox_core._wire._framing import decode_output

from ._capture import _RERAISE, CAPTURE_ENV

if TYPE_CHECKING:
    from opensandbox_core._files._filesystem import FileSystem
    from opensandbox_core._files._transfers import Transfers
    from opensandbox_core._types import CommandResult

    from ._run import CommandRunner

__all__ = ["MARKER", "OFFLOAD_ENV", "OFFLOAD_MAX_BYTES", "OffloadedRun", "cap_of", "run_offloaded"]

OFFLOAD_ENV: Final = "OSB_OFFLOAD_PATH"
OFFLOAD_MAX_BYTES: Final = 10 * 1024 * 1024
"""The default cap of an offloaded output file."""
MARKER: Final = "osb-offload:"
_RESULT: Final = re.compile(re.escape(MARKER) + r" (-?[0-9]+) +([0-9]+) +([0-9]+)\n?")
_CAP: Final = re.compile(r"\bhead -c ([0-9]+) > ")
_UNWRITABLE: Final = re.compile(re.escape(MARKER) + r" unwritable ?(.*)\n?", re.DOTALL)

_SCRIPT: Final = (
    "__osb_c=$" + CAPTURE_ENV + "; __osb_f=$" + OFFLOAD_ENV + "; "
    "unset " + CAPTURE_ENV + " " + OFFLOAD_ENV + "; "
    'if [ -n "${{BASH_VERSION-}}" ]; then __osb_s=bash; else __osb_s=sh; fi; '
    'case $__osb_f in ?*/*) mkdir -p -- "${{__osb_f%/*}}" 2>/dev/null;; esac; '
    'if ! __osb_e=$( {{ : > "$__osb_f"; }} 2>&1 ); then '
    'printf "%s unwritable %s\\n" "' + MARKER + '" "$__osb_e"; exit 0; fi; '
    '[ "$__osb_s" = bash ] && SHLVL=$((${{SHLVL:-1}}-1)); '
    '__osb_r=$( {{ {{ "$__osb_s" -c "$__osb_c" 2>&1 3>&-; echo "$?" >&3; }} | '
    '{{ head -c {cap} > "$__osb_f"; cat > /dev/null; }}; }} 3>&1 ); '
    ': "${{__osb_r:=1}}"; '
    'printf "%s %s %s\\n" "' + MARKER + '" "$__osb_r" "$(wc -lc < "$__osb_f")"; '
    "case $__osb_r in " + _RERAISE + ") ulimit -c 0 2>/dev/null; "
    "kill -$((__osb_r-128)) $$ 2>/dev/null;; esac; exit $__osb_r"
)


@dataclass(frozen=True)
class OffloadedRun:
    """A finished command whose output went to a file in the sandbox (`run_offloaded`).

    - `exit_code`: the command's exit status (-1 when a signal killed it).
    - `path`: the file holding the output (absolute), or None when `output` holds all of it
      and the file was deleted.
    - `size`: bytes in the file: the output, up to `max_bytes`.
    - `truncated`: the output reached `max_bytes`; the file holds its first `max_bytes` bytes.
    - `lines`: line breaks (`"\\n"`) in the file (`wc -l`).
    - `output`: the whole output, decoded like any command output, when `size` is at most
      `inline_limit`; else None.
    - `head`, `tail`: the file's first and last bytes (at most `preview_bytes` each; `b""`
      when `output` is set), exactly as written.
    """

    exit_code: int
    path: str | None
    size: int
    truncated: bool
    lines: int
    output: str | None
    head: bytes = b""
    tail: bytes = b""
    duration: float = 0.0


async def run_offloaded(
    commands: CommandRunner,
    files: FileSystem,
    transfers: Transfers,
    command: str | Sequence[str],
    path: str,
    *,
    max_bytes: int,
    inline_limit: int,
    preview_bytes: int,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
) -> OffloadedRun:
    """`session.commands.run_offloaded` (`Commands.run_offloaded`); `timeout` is the effective limit."""
    text = _validate.command_text(command)
    cap = _validate.positive_int(max_bytes, "max_bytes")
    inline = _validate.non_negative_int(inline_limit, "inline_limit")
    preview = _validate.positive_int(preview_bytes, "preview_bytes")
    execd = await files.execd()  # the sandbox reached: relative paths resolve
    target = files.resolve(_validate.path(path))
    envs = {**_validate.env(env), CAPTURE_ENV: text, OFFLOAD_ENV: target}
    result = await commands.run(
        _SCRIPT.format(cap=cap),
        cwd=cwd,
        env=envs,
        timeout=timeout,
        on_output=None,
        max_output=None,
        plain_lines=True,
    )
    lines, size = _file_counts(result, target)
    exit_code = result.exit_code
    if size <= inline:
        data = await transfers.read_range(target, 0, size) if size else b""
        # Deleted before returning, never later: a caller may reuse the path at once (a
        # deferred delete would remove the next command's output, or a file written there).
        if _fallback.download_safe(target):
            await execd.discard_files([target])
        else:  # a path execd would rewrite: removed by the files facet, which keeps it literal
            await files.remove(target, recursive=False)
        return OffloadedRun(
            exit_code, None, size, size >= cap, lines, decode_output(data), duration=result.duration
        )
    head, tail = await _ends(transfers, target, size, preview)
    return OffloadedRun(
        exit_code, target, size, size >= cap, lines, None, head, tail, result.duration
    )


def _file_counts(result: CommandResult, target: str) -> tuple[int, int]:
    """The line and byte counts of the output file, as the wrapper's marker line gives them;
    a file that could not be written raises its `OSError`."""
    unwritable = _UNWRITABLE.fullmatch(result.stdout)
    if unwritable is not None:
        raise os_error(unwritable.group(1).strip(), target, "could not write the output file")
    marker = _RESULT.fullmatch(result.stdout)
    if marker is None:
        raise ServerError(
            f"The output of a command run with its output to {target} could not be told: its "
            f"wrapper printed {result.stdout[-200:]!r} (exit {result.exit_code}, stderr "
            f"{result.stderr[-200:]!r}). The command itself has finished.",
            retryable=False,
        )
    return int(marker.group(2)), int(marker.group(3))


async def _ends(transfers: Transfers, target: str, size: int, preview: int) -> tuple[bytes, bytes]:
    """The file's first and last `preview` bytes (one read when they overlap)."""
    if size <= 2 * preview:
        whole = await transfers.read_range(target, 0, size)
        return whole[:preview], whole[-preview:]
    head, tail = await asyncio.gather(
        transfers.read_range(target, 0, preview),
        transfers.read_range(target, size - preview, preview),
    )
    return head, tail


def cap_of(script: str) -> int | None:
    """The byte cap of an offload wrapper made here (for stand-in daemons), else None."""
    match = _CAP.search(script)
    return int(match.group(1)) if match and script.startswith("__osb_c=") else None
