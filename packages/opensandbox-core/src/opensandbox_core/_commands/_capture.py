"""Output capture: a command's stdout and stderr written to files of the core's own, read by
range once it has finished, instead of crossing execd's event stream line by line.

Line-framed execd (v1.0.17 to v1.0.19) tails each command's output files every 100 ms and
sends one JSON event per line, flushed on its own: 65,536 short lines cost seconds on both
sides, where the same bytes as a file cost milliseconds. When nobody streams the output (no
callbacks), the core therefore sends a small POSIX shell wrapper:

- the caller's command goes in the environment variable `OSB_CAPTURED_COMMAND` (execd never
  expands `envs` values) and runs as `bash -c "$OSB_CAPTURED_COMMAND"` (`sh` where execd itself
  uses `sh`), so it is parsed and run exactly as execd would run it (`$0`, syntax errors, `set -x`, traps,
  `exit`, `SHLVL` are as without the wrapper), with stdout and stderr redirected to two files in
  execd's temp dir;
- afterwards the wrapper prints one marker line, `osb-capture:` and which of the two files hold
  bytes (`o`, `e`, or `-`), and exits with the command's status. A status of 128+N where signal
  N terminates by default is raised again as that signal, so that a command killed by a signal
  reports what execd reports for it (exit code -1) with or without the wrapper.

The caller then downloads only the files that hold bytes (one request each, in parallel), up to
the output cap. A file the marker says holds bytes but that reads empty is read again and then
reported as an error: output is never silently empty. Without the marker (the wrapper itself
was killed: a timeout, an interrupt, a signal from outside), both files are read for what the
command printed; where neither exists (capture never started), execd's own raw output is used.
The files are deleted in the background with execd's raw files, in one request shared with
other operations' files (`ExecdClient.discard_later`).

Known difference: a command that itself exits with a status of 129 to 159 (other than 141, a
SIGPIPE, and the stop and ignore signals) is reported as killed by that signal (-1), as if it had
been.
"""

from __future__ import annotations

import posixpath
import re
import secrets
from dataclasses import dataclass
from typing import Final

__all__ = ["CAPTURE_ENV", "MARKER", "Capture", "parse_marker", "paths_of"]

CAPTURE_ENV: Final = "OSB_CAPTURED_COMMAND"
MARKER: Final = "osb-capture:"

# 128 + each signal whose default action ends the process, without SIGPIPE (a pipeline with
# `pipefail` ends 141 without any process being killed) and without the stop/ignore signals.
_RERAISE: Final = "|".join(
    str(128 + n) for n in (*range(1, 13), 14, 15, 16, 24, 25, 26, 27, 29, 30, 31)
)
_SAFE_DIR: Final = re.compile(r"/[A-Za-z0-9_./-]*")
_MARKER_LINE: Final = re.compile(re.escape(MARKER) + r"(o?e?|-)\n?")
_PATHS: Final = re.compile(r"if true >(/\S+) 2>/dev/null && true >(/\S+) 2>/dev/null; then ")

# {o} and {e} are the two capture files (absolute paths of safe characters only). The first
# test makes sure both can be written: if not, the command replaces the wrapper (`exec`) and runs
# with execd's own streams and no marker, which the reader takes as any command without capture.
_SCRIPT: Final = (
    "__osb_c=$" + CAPTURE_ENV + "; unset " + CAPTURE_ENV + "; "
    'if [ -n "${{BASH_VERSION-}}" ]; then __osb_s=bash; else __osb_s=sh; fi; '
    "if true >{o} 2>/dev/null && true >{e} 2>/dev/null; then "
    '[ "$__osb_s" = bash ] && SHLVL=$((${{SHLVL:-1}}-1)); '
    '"$__osb_s" -c "$__osb_c" >{o} 2>{e}; __osb_r=$?; '
    "__osb_f=; [ -s {o} ] && __osb_f=o; [ -s {e} ] && __osb_f=${{__osb_f}}e; "
    'printf "%s%s" "' + MARKER + '" "${{__osb_f:--}}"; '
    "case $__osb_r in " + _RERAISE + ") ulimit -c 0 2>/dev/null; "
    "kill -$((__osb_r-128)) $$ 2>/dev/null;; esac; exit $__osb_r; "
    'else exec "$__osb_s" -c "$__osb_c"; fi'
)


@dataclass(frozen=True)
class Capture:
    """The two files one command's output is captured in."""

    stdout_path: str
    stderr_path: str

    @classmethod
    def new(cls, directory: str | None) -> Capture | None:
        """Capture files in `directory` (execd's temp dir), or None where it is unknown or its
        name needs quoting (then the command runs without capture)."""
        if not directory or not _SAFE_DIR.fullmatch(directory) or "//" in directory:
            return None
        base = posixpath.join(directory, f".osbcap-{secrets.token_hex(8)}")
        return cls(base + ".out", base + ".err")

    @property
    def paths(self) -> list[str]:
        return [self.stdout_path, self.stderr_path]

    def script(self) -> str:
        """The wrapper command line to send; the caller's command goes in `CAPTURE_ENV`."""
        return _SCRIPT.format(o=self.stdout_path, e=self.stderr_path)


def parse_marker(stdout_text: str) -> tuple[bool, bool] | None:
    """Which capture files hold bytes, from the wrapper's own stdout (the events' text), or
    None when that is not exactly one marker line."""
    match = _MARKER_LINE.fullmatch(stdout_text)
    if match is None:
        return None
    flags = match.group(1)
    return "o" in flags, "e" in flags


def paths_of(script: str) -> tuple[str, str] | None:
    """The two capture files of a wrapper made by `Capture.script` (for stand-in daemons)."""
    match = _PATHS.search(script)
    return (match.group(1), match.group(2)) if match else None
