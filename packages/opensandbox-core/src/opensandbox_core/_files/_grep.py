"""Literal grep (`AsyncSandboxSession.grep`): the lines of the files under a path that hold a
literal string, found in the sandbox by one argv command.

The command is a fixed POSIX `sh` script; the pattern, the path, the glob and the excluded
directory names are its arguments, never part of a command line, so no shell ever reads them
(`it's`, `$(touch x)`, `` `id` ``, `-e`, `a\\b` are text to find). It needs only `sh`, `find`,
`grep -F` and `base64 -w 0`, which busybox has, like GNU:

1. `find` walks the path (`cd` into it; a path that is a file, or a symlink to one, is searched
   by itself) depth first in directory order (the order `grep -r` reads files), printing each
   regular file NUL-terminated: symlinks, special files and directories named in
   `exclude_dirs` below the path (`/proc`, `/sys` and `/dev` too when the path is `/`) are
   skipped, and a `glob` without `/` keeps base names it matches (`find -name`);
2. the same walk runs `grep -H -n -F -e PATTERN... -- FILES +` on those files, and the
   `name:line:text` records are read against the list of step 1: names are known exactly, so
   `:` and line breaks in them cannot mislead. A path in which `:` precedes a digit could read
   as another name's record (`a:12:x` beside `a`): such files are left out of step 2 and
   searched one by one in a second command (each file's `grep -n` records, then a `/` line);
3. everything is printed as one base64 line (plain text, so line-framed execd needs no output
   file read), after a first line giving the locale.

A glob with `/` (or an `include` predicate) is matched here, against each path relative to the
searched path, component by component (`**` alone spans any number of directories; `*`, `?`,
`[...]` stay within one, Python's `fnmatch` rules). When the path is a file it is searched
whatever a path glob says; a glob without `/` takes it when it matches the file's path or any
tail of it after a `/` (as GNU grep's `--include` treats a file named on its command line). Binary files (NUL bytes) are not searched as text: GNU grep reports
none of their lines (it says "binary file matches" on stderr); busybox grep compares only the part
of a line before a NUL and prints the line whole, so a file one of whose matching lines holds a
NUL is dropped here. The search runs in the sandbox's locale, as the commands of `run` do: in a
UTF-8 locale (`LANG=C.UTF-8`) GNU grep 3.x does not print a matching line that is not valid
UTF-8 ("binary file matches"), and the same is done here with busybox's lines (a line holding
U+FFFD counts as such); `env={"LC_ALL": "C"}` compares bytes and takes every line. Text
is decoded as any command output (invalid UTF-8 becomes U+FFFD), names too; lines split at
`\\n` only.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from opensandbox_core import _validate
from opensandbox_core._errors import ServerError, os_error
from opensandbox_core._types import CommandResult
from opensandbox_core._wire._framing import decode_output

from . import _fallback

if TYPE_CHECKING:
    from opensandbox_core._commands._run import CommandRunner

__all__ = ["GrepMatch", "GrepResult", "grep"]

_SCRIPT: Final = r"""
root=$1 glob=$2 n=$3 m=$4; shift 4
i=0; while [ "$i" -lt "$m" ]; do set -- "$@" -name "$1" -prune -o; shift; i=$((i+1)); done
if [ -d "$root" ]; then
  cd -- "$root" || exit 4
  if [ "$PWD" = / ]; then set -- "$@" \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o; fi
  set -- "$@" -type f; if [ -n "$glob" ]; then set -- "$@" -name "$glob"; fi
  k=$(($# - n)); set -- "$@" ! -path '*:[0-9]*' -exec grep -H -n -F
  i=0; while [ "$i" -lt "$n" ]; do set -- "$@" -e "$1"; shift; i=$((i+1)); done
  walk() { c=$1; shift; i=0; for a; do shift; if [ "$i" -lt "$c" ]; then set -- "$@" "$a"; fi; i=$((i+1)); done; find . "$@" -print0; }
  { echo "d ${LC_ALL:-${LC_CTYPE:-${LANG-}}}"; walk "$k" "$@"; printf '\0'; find . "$@" -- {} +; } | base64 -w 0
elif [ -f "$root" ]; then
  i=0; while [ "$i" -lt "$n" ]; do set -- "$@" -e "$1"; shift; i=$((i+1)); done
  shift $((4 * m))
  if [ -n "$glob" ] && [ -z "$(find "$root" -maxdepth 0 \( -path "$glob" -o -path "*/$glob" \) -print)" ]; then
    skip=1
  fi
  { echo "f ${LC_ALL:-${LC_CTYPE:-${LANG-}}}"; printf '%s\0\0' "${skip:+-}"; [ -n "${skip-}" ] || grep -n -F "$@" -- "$root"; } | base64 -w 0
elif [ -e "$root" ] || [ -L "$root" ]; then
  echo "e ${LC_ALL:-${LC_CTYPE:-${LANG-}}}" | base64 -w 0
else
  echo "grep: $root: No such file or directory" >&2; exit 3
fi
echo
"""
_EACH: Final = r"""
t="${TMPDIR:-/tmp}/.osb-grep-$$"; n=$1; shift
: > "$t" || exit 5
while [ "$n" -gt 0 ]; do printf '%s\n' "$1" >> "$t"; shift; n=$((n-1)); done
{ for f; do grep -n -F -f "$t" -- "$f"; echo /; done; } | base64 -w 0; echo
rm -f -- "$t"
"""
_RISKY: Final = re.compile(r":[0-9]")
"""Names grep -H could print ambiguously (`a:12:x` beside `a`), and more: the script's
`-path '*:[0-9]*'`. Their files are searched one by one (`_EACH`)."""
_RECORD_HEAD: Final = re.compile(r"([0-9]+):")


@dataclass(frozen=True)
class GrepMatch:
    """One matching line: the file's path (the searched path joined with the file's name below
    it, or the searched path itself when it is a file), its 1-based line number, its text
    without the line break."""

    path: str
    line: int
    text: str


@dataclass(frozen=True)
class GrepResult:
    """What `grep` found: the matching lines in walk order (file by file, each in line order),
    whether `max_matches` cut them, and how many files were searched."""

    matches: list[GrepMatch]
    truncated: bool = False
    files: int = 0


def path_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher of relative paths for a glob with `/` (see the module docstring)."""
    parts = [p for p in pattern.strip("/").split("/") if p]

    def match(names: list[str], at: int) -> bool:
        if at == len(parts):
            return not names
        if parts[at] == "**":
            return any(match(names[skip:], at + 1) for skip in range(len(names) + 1))
        return bool(names) and fnmatch.fnmatchcase(names[0], parts[at]) and match(names[1:], at + 1)

    return lambda relative: match(relative.split("/"), 0)


def _records(rest: str, names: Sequence[str], longest: int) -> list[tuple[str, int, str]]:
    """(name, line, text) of each `name:line:text` record of `grep -H -n`, read against the
    names grep was given (none ambiguous: see the module docstring)."""
    known = set(names)
    out: list[tuple[str, int, str]] = []
    pos = 0
    while pos < len(rest):
        colon = rest.find(":", pos)
        found = None
        while 0 <= colon <= pos + longest:
            head = _RECORD_HEAD.match(rest, colon + 1)
            if rest[pos:colon] in known and head is not None:
                found = (rest[pos:colon], head)
                break
            colon = rest.find(":", colon + 1)
        if found is None:
            raise ServerError(
                "The output of grep in the sandbox could not be read at "
                f"{rest[pos : pos + 120]!r}: a record that names no file it was given."
            )
        name, head = found
        end = rest.find("\n", head.end())
        end = len(rest) if end < 0 else end
        out.append((name, int(head.group(1)), rest[head.end() : end]))
        pos = end + 1
    return out


async def grep(
    commands: CommandRunner,
    pattern: str | Sequence[str],
    path: str,
    *,
    glob: str | None,
    include: Callable[[str], bool] | None,
    exclude_dirs: Sequence[str],
    max_matches: int | None,
    env: Mapping[str, str] | None,
    timeout: float | None,
) -> GrepResult:
    """`AsyncSandboxSession.grep` (see there); `timeout` is the effective limit."""
    patterns = _validate.grep_patterns(pattern)
    root = _validate.path(path)
    excluded = _validate.grep_filters(glob, exclude_dirs, max_matches)
    by_name = glob if glob is not None and "/" not in glob else None
    by_path = include or (path_glob(glob) if glob is not None and by_name is None else None)
    counts = [str(len(patterns)), str(len(excluded))]
    argv = ["sh", "-c", _SCRIPT, "grep", root, by_name or "", *counts, *excluded, *patterns]
    result = await commands.run(
        argv,
        cwd=None,
        env=env,
        timeout=timeout,
        on_output=None,
        max_output=None,
        plain_lines=True,  # one base64 line: no output file to read on line-framed execd
    )
    if result.exit_code != 0:
        raise os_error(_fallback.error_text(result.stderr), root, "could not search the path")
    head, _, out = _decoded(result, root).partition("\n")
    mode, _, locale = head.partition(" ")
    utf8 = "utf-8" in locale.lower().replace("utf8", "utf-8")
    if mode == "e":  # a special file: nothing to search
        return GrepResult([], truncated=False, files=0)
    listed, sep, rest = out.partition("\0\0")
    if mode == "d" and out.startswith("\0"):
        listed, sep, rest = "", "\0", out[1:]
    if not sep:
        raise ServerError(f"grep in the sandbox printed no file list: {result.stdout[-200:]!r}")
    if mode == "f":  # the path is a file: its lines, without a name
        if listed == "-":
            return GrepResult([], truncated=False, files=0)
        found = {root: _numbered(rest)}
        return _collect(root, [root], found, None, max_matches, utf8=utf8)
    names = listed.split("\0") if listed else []
    safe = [n for n in names if not _RISKY.search(n)]
    found = {}
    for name, line, text in _records(rest, safe, max(map(len, safe), default=0)):
        found.setdefault(name, []).append((line, text))
    risky = [n for n in names if _RISKY.search(n)]
    if risky:
        found.update(await _each(commands, root, risky, patterns, env, timeout))
    return _collect(root, names, found, by_path, max_matches, utf8=utf8)


def _decoded(result: CommandResult, root: str) -> str:
    """The script's base64 line, decoded as any command output (invalid UTF-8 as U+FFFD)."""
    if result.truncated:
        raise ServerError(
            f"grep under {root} found more than the session's output cap holds (files listed "
            "and lines found): search a narrower path or a longer pattern.",
            retryable=False,
        )
    try:
        return decode_output(base64.b64decode(result.stdout, validate=False))
    except (binascii.Error, ValueError):
        raise ServerError(f"grep in the sandbox printed {result.stdout[-200:]!r}") from None


def _numbered(lines: str) -> list[tuple[int, str]]:
    """(line, text) of `grep -n` records (one a line: a line never holds a line break)."""
    records = lines[:-1].split("\n") if lines.endswith("\n") else []
    return [(int(n), text) for n, _, text in (r.partition(":") for r in records)]


async def _each(
    commands: CommandRunner,
    root: str,
    names: list[str],
    patterns: list[str],
    env: Mapping[str, str] | None,
    timeout: float | None,
) -> dict[str, list[tuple[int, str]]]:
    """The matching lines of each of these files, by a `grep -n` each (no names in the
    output: each file's records end at a `/` line), in one command per 500 files."""
    found: dict[str, list[tuple[int, str]]] = {}
    for start in range(0, len(names), 500):
        batch = names[start : start + 500]
        result = await commands.run(
            ["sh", "-c", _EACH, "grep", str(len(patterns)), *patterns, *batch],
            cwd=root,
            env=env,
            timeout=timeout,
            on_output=None,
            max_output=None,
            plain_lines=True,
        )
        if result.exit_code != 0:
            raise os_error(_fallback.error_text(result.stderr), root, "could not search a file")
        blocks: list[list[tuple[int, str]]] = [[]]
        for line in _decoded(result, root).split("\n")[:-1]:
            if line == "/":  # a record starts with its line number, never with `/`
                blocks.append([])
            else:
                number, _, text = line.partition(":")
                blocks[-1].append((int(number), text))
        if len(blocks) != len(batch) + 1:
            raise ServerError(f"grep in the sandbox printed {result.stdout[-200:]!r}")
        found.update(zip(batch, blocks, strict=False))
    return found


def _collect(
    root: str,
    names: list[str],
    found: dict[str, list[tuple[int, str]]],
    by_path: Callable[[str], bool] | None,
    max_matches: int | None,
    *,
    utf8: bool,
) -> GrepResult:
    """The result, in walk order: files dropped by a path glob or as binary, cut at the cap."""
    base = root.rstrip("/") or "/"
    matches: list[GrepMatch] = []
    for name in names:
        lines = found.get(name)
        if not lines or any("\0" in text for _, text in lines):
            continue
        if utf8:  # GNU grep's rule in a UTF-8 locale, also where busybox's grep found the lines
            lines = [(n, text) for n, text in lines if "\ufffd" not in text]
            if not lines:
                continue
        relative = name[2:] if name.startswith("./") else None  # None: the path is a file
        if by_path is not None and relative is not None and not by_path(relative):
            continue
        shown = name if relative is None else base.rstrip("/") + "/" + relative
        matches += [GrepMatch(shown, line, text) for line, text in lines]
        if max_matches is not None and len(matches) > max_matches:
            return GrepResult(matches[:max_matches], truncated=True, files=len(names))
    return GrepResult(matches, truncated=False, files=len(names))
