"""Literal grep (`AsyncSandboxSession.grep`): the lines of the files under a path that hold a
literal string, found in the sandbox by one argv command.

The command is a fixed POSIX `sh` script; the pattern, the path, the glob and the excluded
directory names are its arguments, never part of a command line, so no shell ever reads them
(`it's`, `$(touch x)`, `` `id` ``, `-e`, `a\\b` are text to find). It needs only `sh`, `find`,
`grep -F -f`, `grep -z`, `xargs -0 -r`, `cat`, `printf` and `rm`, which busybox has, like GNU:

1. the patterns go to a file (`grep -F -f`: each line a literal; any one matches);
2. `find` walks the path (`cd` into it; a path that is a file, or a symlink to one, is itself
   the list) and prints each regular file NUL-terminated, depth first in directory order (the
   order `grep -r` reads them), skipping symlinks, special files and directories named in
   `exclude_dirs` below the path (`/proc`, `/sys` and `/dev` too when the path is `/`), and
   keeping only base names matching a `glob` without `/` (`find -name`);
3. the list is printed, then `xargs -0` feeds it to `grep -H -n -F`, whose `name:line:text`
   records are read against the list: names are known exactly, so `:` and line breaks in them
   cannot mislead. A name in which `:<digits>` ends or is followed by `:` could read as another
   name's record; such files are left out of step 3 and searched one `grep -n` each.

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

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from opensandbox_core import _validate
from opensandbox_core._errors import ServerError, os_error

from . import _fallback

if TYPE_CHECKING:
    from opensandbox_core._commands._run import Commands

__all__ = ["GrepMatch", "GrepResult", "grep"]

_SCRIPT: Final = r"""
root=$1 glob=$2 n=$3; shift 3
t="${TMPDIR:-/tmp}/.osb-grep-$$"
: > "$t.p" || exit 5
while [ "$n" -gt 0 ]; do printf '%s\n' "$1" >> "$t.p"; shift; n=$((n-1)); done
m=$#; while [ "$m" -gt 0 ]; do set -- "$@" -name "$1" -prune -o; shift; m=$((m-1)); done
if [ -d "$root" ]; then
  cd -- "$root" || exit 4
  if [ "$PWD" = / ]; then
    set -- \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o "$@"
  fi
  if [ -n "$glob" ]; then set -- "$@" -type f -name "$glob"; else set -- "$@" -type f; fi
  find . "$@" -print0 > "$t.l"
elif [ -f "$root" ]; then
  if [ -n "$glob" ]; then
    find "$root" -maxdepth 0 \( -path "$glob" -o -path "*/$glob" \) -print0 > "$t.l"
  else
    printf '%s\0' "$root" > "$t.l"
  fi
elif [ -e "$root" ] || [ -L "$root" ]; then
  : > "$t.l"
else
  echo "grep: $root: No such file or directory" >&2; rm -f -- "$t.p" "$t.l"; exit 3
fi
printf '%s\n' "${LC_ALL:-${LC_CTYPE:-${LANG-}}}"; cat "$t.l"; printf '\0'
LC_ALL=C grep -z -v -e ':[0-9][0-9]*:' -e ':[0-9][0-9]*$' < "$t.l" |
  xargs -0 -r grep -H -n -F -f "$t.p" --
rm -f -- "$t.p" "$t.l"
"""
_RISKY: Final = re.compile(r":[0-9]+(:|$)")
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
    commands: Commands,
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
    argv = ["sh", "-c", _SCRIPT, "grep", root, by_name or "", str(len(patterns))]
    result = await commands.run(
        [*argv, *patterns, *excluded],
        cwd=None,
        env=env,
        timeout=timeout,
        on_output=None,
        max_output=None,
        plain_lines=False,
    )
    if result.exit_code != 0:
        raise os_error(_fallback.error_text(result.stderr), root, "could not search the path")
    if result.truncated:
        raise ServerError(
            f"grep under {root} found more than the session's output cap holds (files listed "
            "and lines found): search a narrower path or a longer pattern.",
            retryable=False,
        )
    locale, _, out = result.stdout.partition("\n")
    listed, sep, rest = out.partition("\0\0")
    if out.startswith("\0"):
        listed, rest = "", out[1:]
    elif not sep:
        raise ServerError(f"grep in the sandbox printed no file list: {result.stdout[-200:]!r}")
    names = listed.split("\0") if listed else []
    safe = [n for n in names if not _RISKY.search(n)]
    found: dict[str, list[tuple[int, str]]] = {}
    for name, line, text in _records(rest, safe, max(map(len, safe), default=0)):
        found.setdefault(name, []).append((line, text))
    for name in names:
        if name not in found and _RISKY.search(name):
            found[name] = await _one_file(commands, root, name, patterns, env, timeout)
    utf8 = "utf-8" in locale.lower().replace("utf8", "utf-8")
    return _collect(root, names, found, by_path, max_matches, utf8=utf8)


async def _one_file(
    commands: Commands,
    root: str,
    name: str,
    patterns: list[str],
    env: Mapping[str, str] | None,
    timeout: float | None,
) -> list[tuple[int, str]]:
    """The matching lines of one file, by its own `grep -n` (no names in its output)."""
    options = [arg for p in patterns for arg in ("-e", p)]
    where = None if name == root else root
    result = await commands.run(
        ["grep", "-n", "-F", *options, "--", name],
        cwd=where,
        env=env,
        timeout=timeout,
        on_output=None,
        max_output=None,
        plain_lines=False,
    )
    lines = result.stdout[:-1].split("\n") if result.stdout.endswith("\n") else []
    return [(int(n), text) for n, _, text in (line.partition(":") for line in lines)]


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
