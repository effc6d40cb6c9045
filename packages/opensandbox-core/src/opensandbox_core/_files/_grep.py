"""Literal grep (`session.files.grep`): the lines of the files under a path that hold a
literal string, found in the sandbox by one argv command.

The command is a fixed POSIX `sh` script; the pattern, the path, the glob and the excluded
directory names are its arguments, never part of a command line, so no shell ever reads them
(`it's`, `$(touch x)`, `` `id` ``, `-e`, `a\\b` are text to find). It needs only `sh`, `find`,
`grep -F` (`-m`), `env`, `head` and `base64 -w 0`, which busybox has, like GNU:

1. `find` walks the path (`cd` into it; a path that is a file, or a symlink to one, is searched
   by itself) depth first in directory order (the order `grep -r` reads files), printing each
   regular file NUL-terminated: symlinks, special files and directories named in
   `exclude_dirs` below the path (`/proc`, `/sys` and `/dev` too when the path is `/`) are
   skipped, and a glob without `/` keeps the base names it matches (`find -name` with the
   glob's shell patterns, braces expanded, when it has only `*` wildcards:
   `_glob.name_patterns`; else the names are matched here);
2. the same walk runs `grep -H -n -F -e PATTERN... -- FILES +` (in the C locale: every line
   comes back, the locale's rule is applied here) on those files, and the `name:line:text`
   records are read against the list of step 1: names are known exactly, so `:` cannot
   mislead. A name in which `:` precedes a digit could read as another name's record
   (`a:12:x` beside `a`), and one holding a line break would span two lines: such files are
   left out of step 2 and searched one by one in a second command (each file's `grep -n`
   records, then a `/` line);
3. everything is printed as one base64 line (plain text, so line-framed execd needs no output
   file read), after a first line giving the locale.

The glob is the core's one dialect (`_glob.compile_glob`, docs/core.md "Finding files"): with
`/` (and `include`) it is matched here against each path relative to the searched path. When
the path is a file it is searched whatever a glob with `/` says, and when its base name
matches a glob without `/`.

The cap: with `max_matches`, grep stops in the sandbox after `max_matches + 1` lines of each
file (`grep -m`) and the records stop after as many lines in all (`head -n`; the greps still
running end on SIGPIPE), so five matches in a file of millions of lines cost one command and a
few hundred bytes. What is dropped here after the cut (files a glob with `/` or `include`
refuses, lines that are not valid text in a UTF-8 locale) could leave fewer lines than the cap
while more exist: then the search runs again without the cut in all (per file still), and
again without any cut if a file cut short lost lines. A binary file whose first NUL in a
matching line comes after the cut is searched as text. An output over the session's
`max_output` raises `OutputLimitError`.

Binary files (NUL bytes) are not searched as text: GNU grep reports none of their lines (it says
"binary file matches" on stderr); busybox grep compares only the part of a line before a NUL
and prints the line whole, so a file one of whose matching lines holds a NUL is dropped here.
The search follows the sandbox's locale as the commands of `run` do: in a UTF-8 locale
(`LANG=C.UTF-8`) a matching line that is not valid UTF-8 is left out (GNU grep 3.x says "binary
file matches" for it); `env={"LC_ALL": "C"}` takes every line. Text is decoded as any command
output (invalid UTF-8 becomes U+FFFD), names too; lines split at `\\n` only.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from opensandbox_core import _validate
from opensandbox_core._errors import OutputLimitError, ServerError, os_error
from opensandbox_core._types import CommandResult

from . import _fallback
from ._glob import compile_glob, name_patterns

if TYPE_CHECKING:
    from opensandbox_core._commands._run import CommandRunner

__all__ = ["GrepMatch", "GrepResult", "grep"]

_SCRIPT: Final = r"""
root=$1 n=$2 m=$3 k=$4 cap=$5 total=$6; shift 6
loc=${LC_ALL:-${LC_CTYPE:-${LANG-}}}
i=0; while [ "$i" -lt "$m" ]; do set -- "$@" -name "$1" -prune -o; shift; i=$((i+1)); done
if [ -d "$root" ]; then
  cd -- "$root" || exit 4
  if [ "$PWD" = / ]; then set -- "$@" \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o; fi
  set -- "$@" -type f
  if [ "$k" -gt 0 ]; then
    set -- "$@" \(; i=0
    while [ "$i" -lt "$k" ]; do
      if [ "$i" -gt 0 ]; then set -- "$@" -o; fi
      set -- "$@" -name "$1"; shift; i=$((i+1))
    done
    set -- "$@" \)
  fi
  c=$(($# - n)); set -- "$@" ! -path '*:[0-9]*' ! -path '*
*' -exec env LC_ALL=C grep -H -n -F
  if [ "$cap" -gt 0 ]; then set -- "$@" -m "$cap"; fi
  i=0; while [ "$i" -lt "$n" ]; do set -- "$@" -e "$1"; shift; i=$((i+1)); done
  walk() { c=$1; shift; i=0; for a; do shift; if [ "$i" -lt "$c" ]; then set -- "$@" "$a"; fi; i=$((i+1)); done; find . "$@" -print0; }
  {
    echo "d $loc"; walk "$c" "$@"; printf '\0'
    if [ "$total" -gt 0 ]; then find . "$@" -- {} + | head -n "$total"; else find . "$@" -- {} +; fi
  } | base64 -w 0
elif [ -f "$root" ]; then
  skip=; if [ "$k" -gt 0 ]; then skip=1; fi
  i=0; while [ "$i" -lt "$k" ]; do case ${root##*/} in $1) skip= ;; esac; shift; i=$((i+1)); done
  i=0; while [ "$i" -lt "$n" ]; do set -- "$@" -e "$1"; shift; i=$((i+1)); done
  shift $((4 * m))
  if [ "$cap" -gt 0 ]; then set -- -m "$cap" "$@"; fi
  { echo "f $loc"; printf '%s\0\0' "${skip:+-}"; [ -n "$skip" ] || LC_ALL=C grep -n -F "$@" -- "$root"; } | base64 -w 0
elif [ -e "$root" ] || [ -L "$root" ]; then
  echo "e $loc" | base64 -w 0
else
  echo "grep: $root: No such file or directory" >&2; exit 3
fi
echo
"""
_EACH: Final = r"""
t="${TMPDIR:-/tmp}/.osb-grep-$$"; n=$1 cap=$2; shift 2
: > "$t" || exit 5
while [ "$n" -gt 0 ]; do printf '%s\n' "$1" >> "$t"; shift; n=$((n-1)); done
m=; if [ "$cap" -gt 0 ]; then m="-m $cap"; fi
{ for e; do f=$(printf '%bx' "$e"); f=${f%x}; LC_ALL=C grep -n -F $m -f "$t" -- "$f"; echo /
done; } | base64 -w 0; echo
rm -f -- "$t"
"""
_RISKY: Final = re.compile(r":[0-9]|\n")
"""Names grep -H could print ambiguously (`a:12:x` beside `a`), and more: the script's
`-path '*:[0-9]*'`; and names holding a line break, whose records would span two lines (the
cap counts lines). Their files are searched one by one (`_EACH`)."""
_RECORD_HEAD: Final = re.compile(r"([0-9]+):")
_INVALID: Final = re.compile("[\udc80-\udcff]")
"""A byte that is not part of valid UTF-8, as `surrogateescape` decodes it."""


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
    search = _Search(commands, patterns, root, excluded, env, timeout)
    if glob is not None:
        search.matcher = compile_glob(glob)
        if "/" not in glob:
            search.names = name_patterns(glob)
            search.by_name = True
    search.include = include
    # The sandbox stops at `max_matches + 1` lines per file and in all (0: no cut). When what
    # is dropped here after that cut (a glob with `/`, `include`, lines that are not valid
    # text) leaves the answer unsure, the search runs again with less cut (docstring, "The
    # cap"); an uncut search is always sure.
    cap = total = 0 if max_matches is None else max_matches + 1
    while True:
        found = await search.run(cap, total)
        if found is None:
            return GrepResult([], truncated=False, files=0)
        outcome = _collect(search, found, max_matches)
        if isinstance(outcome, GrepResult):
            return outcome
        total = 0  # "total": the cut in all hid files; "file": a file's cut hid lines too
        cap = 0 if outcome == "file" else cap


@dataclass
class _Found:
    """What one run of the script found: the files walked (`names`, walk order), the records
    of each, whether the path is a file, the locale's UTF-8 rule, and where a cut in all
    (`total`) stopped the records (`cut`: the name of the file of the last one), per file
    (`cap`)."""

    names: list[str]
    lines: dict[str, list[tuple[int, str]]]
    is_file: bool
    utf8: bool
    cap: int
    cut: str | None


@dataclass
class _Search:
    """One grep's fixed arguments; `run` runs the script with a cut."""

    commands: CommandRunner
    patterns: list[str]
    root: str
    excluded: tuple[str, ...]
    env: Mapping[str, str] | None
    timeout: float | None
    matcher: Callable[[str], bool] | None = None
    names: list[str] | None = None  # the glob as shell patterns for `find -name`, if it can be
    by_name: bool = False  # the glob has no `/`: it matches base names
    include: Callable[[str], bool] | None = None

    async def run(self, cap: int, total: int) -> _Found | None:
        """The script's answer with `cap` lines at most per file and `total` in all (0: no
        cut); None for a special file (nothing to search)."""
        shell_names = self.names or []
        counts = [str(len(self.patterns)), str(len(self.excluded)), str(len(shell_names))]
        argv = ["sh", "-c", _SCRIPT, "grep", self.root, *counts, str(cap), str(total)]
        argv += [*self.excluded, *shell_names, *self.patterns]
        result = await self.commands.run(
            argv,
            cwd=None,
            env=self.env,
            timeout=self.timeout,
            on_output=None,
            max_output=None,
            plain_lines=True,  # one base64 line: no output file to read on line-framed execd
        )
        root = self.root
        if result.exit_code != 0:
            raise os_error(_fallback.error_text(result.stderr), root, "could not search the path")
        head, _, out = _decoded(result, root, self.commands).partition("\n")
        mode, _, locale = head.partition(" ")
        utf8 = "utf-8" in locale.lower().replace("utf8", "utf-8")
        if mode == "e":  # a special file: nothing to search
            return None
        listed, sep, rest = out.partition("\0\0")
        if mode == "d" and out.startswith("\0"):
            listed, sep, rest = "", "\0", out[1:]
        if not sep:
            raise ServerError(f"grep in the sandbox printed no file list: {result.stdout[-200:]!r}")
        if mode == "f":  # the path is a file: its lines, without a name
            if listed == "-":
                return _Found([], {}, is_file=True, utf8=utf8, cap=cap, cut=None)
            return _Found([root], {root: _numbered(rest)}, True, utf8, cap, cut=None)
        names = listed.split("\0") if listed else []
        safe = [n for n in names if not _RISKY.search(n)]
        found: dict[str, list[tuple[int, str]]] = {}
        records = _records(rest, safe, max(map(len, safe), default=0))
        for name, line, text in records:
            found.setdefault(name, []).append((line, text))
        cut = records[-1][0] if total and len(records) >= total else None
        risky = [n for n in names if _RISKY.search(n)]
        if risky:
            found.update(await self._each(risky, cap))
        return _Found(names, found, is_file=False, utf8=utf8, cap=cap, cut=cut)

    async def _each(self, names: list[str], cap: int) -> dict[str, list[tuple[int, str]]]:
        """The matching lines of each of these files, by a `grep -n` each (no names in the
        output: each file's records end at a `/` line), in one command per 500 files. The names
        travel as octal escapes, decoded by the script's `printf %b`."""
        found: dict[str, list[tuple[int, str]]] = {}
        for start in range(0, len(names), 500):
            batch = names[start : start + 500]
            head = ["sh", "-c", _EACH, "grep", str(len(self.patterns)), str(cap)]
            # Each name as octal escapes for the script's `printf %b`: any byte reaches it
            # (not UTF-8, line breaks), and the argv stays ASCII.
            escaped = ["".join(f"\\0{b:03o}" for b in os.fsencode(name)) for name in batch]
            result = await self.commands.run(
                [*head, *self.patterns, *escaped],
                cwd=self.root,
                env=self.env,
                timeout=self.timeout,
                on_output=None,
                max_output=None,
                plain_lines=True,
            )
            if result.exit_code != 0:
                message = _fallback.error_text(result.stderr)
                raise os_error(message, self.root, "could not search a file")
            blocks: list[list[tuple[int, str]]] = [[]]
            decoded = _decoded(result, self.root, self.commands)
            for line in decoded.split("\n")[:-1]:
                if line == "/":  # a record starts with its line number, never with `/`
                    blocks.append([])
                else:
                    number, _, text = line.partition(":")
                    blocks[-1].append((int(number), text))
            if len(blocks) != len(batch) + 1:
                raise ServerError(f"grep in the sandbox printed {result.stdout[-200:]!r}")
            found.update(zip(batch, blocks, strict=False))
        return found


def _decoded(result: CommandResult, root: str, commands: CommandRunner) -> str:
    """The script's base64 line, decoded as UTF-8 with each invalid byte kept as a lone
    surrogate (`surrogateescape`; `_text` makes it U+FFFD, as any command output)."""
    if result.truncated:
        limit = commands.max_output
        raise OutputLimitError(
            f"grep under {root} found more than the session's output cap ({limit} bytes) holds "
            "(files listed and lines found): set max_matches, or search a narrower path or a "
            "longer pattern.",
            limit=limit,
        )
    try:
        return base64.b64decode(result.stdout, validate=False).decode("utf-8", "surrogateescape")
    except (binascii.Error, ValueError):
        raise ServerError(f"grep in the sandbox printed {result.stdout[-200:]!r}") from None


def _text(decoded: str) -> str:
    """Text decoded with `surrogateescape` as any command output is (invalid bytes U+FFFD)."""
    return _INVALID.sub("\ufffd", decoded)


def _numbered(lines: str) -> list[tuple[int, str]]:
    """(line, text) of `grep -n` records (one a line: a line never holds a line break)."""
    records = lines[:-1].split("\n") if lines.endswith("\n") else []
    return [(int(n), text) for n, _, text in (r.partition(":") for r in records)]


def _collect(search: _Search, found: _Found, max_matches: int | None) -> GrepResult | str:
    """The result, in walk order: files dropped by the glob, `include` or as binary, lines
    that are not valid text in a UTF-8 locale, cut at `max_matches`. "total" or "file" when a
    cut in the sandbox may have hidden lines that count (see `grep`)."""
    base = search.root.rstrip("/") or "/"
    matches: list[GrepMatch] = []
    for name in found.names:
        raw = found.lines.get(name) or []
        if not _wanted(search, name, found.is_file) or any("\0" in text for _, text in raw):
            raw = []
        lines = raw
        if found.utf8:  # GNU grep's rule in a UTF-8 locale: a line that is not valid text
            lines = [(n, text) for n, text in raw if not _INVALID.search(text)]
        shown = _text(name if found.is_file else base.rstrip("/") + "/" + name[2:])
        matches += [GrepMatch(shown, line, _text(text)) for line, text in lines]
        if max_matches is not None and len(matches) > max_matches:
            return GrepResult(matches[:max_matches], truncated=True, files=len(found.names))
        if name == found.cut:
            return "total"  # the records stopped in this file: the later files are unknown
        if found.cap and len(raw) >= found.cap and len(lines) < len(raw):
            return "file"  # lines after this file's cut might have counted
    return GrepResult(matches, truncated=False, files=len(found.names))


def _wanted(search: _Search, name: str, is_file: bool) -> bool:
    """Whether the file `name` (`./relative`, or the searched path when it is a file) passes
    the glob and `include`. A searched file passes a glob with `/` whatever it says, and a
    glob without `/` when its base name matches."""
    if is_file:
        return search.matcher is None or not search.by_name or search.matcher(name)
    relative = _text(name[2:])
    if search.matcher is not None and not search.matcher(relative):
        return False
    return search.include is None or search.include(relative)
