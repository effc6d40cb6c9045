"""`walk_files` and `glob`: the regular files under a directory, in one command, exact names.

The walk is one argv command (`sh -c WALK walk PATH`: the path is an argument, never part of
the script), run through `run_bytes` (stdout as one base64 line: exact bytes, one round trip on
line-framed execd). It needs a POSIX `sh`, `find` (`-mindepth`, `-type`, `-path`, `-prune`,
`-print0`, `-exec {} +`), `readlink -f` and `base64`: GNU coreutils and findutils, or busybox
alone; no python3. It prints the root's real path (`cd -P`), every regular file, then every
symlink to a regular file with the link's real path, NUL-separated. In Python:

- a symlink counts only when its real path lies inside the root's real path (a link leading
  out of the tree is left out); symlinked directories are not entered; when the root is `/`,
  `/proc`, `/sys` and `/dev` are skipped;
- names keep every byte: decoded like `os.fsdecode` (UTF-8, `surrogateescape`);
- a root that cannot be entered raises the builtin error for it (`FileNotFoundError`,
  `NotADirectoryError`, `PermissionError`, filename = the path given); a part of the tree
  that cannot be read raises `OSError` (never a silently partial list).

`glob(pattern)` matches the walk's relative paths with `compile_glob` (the dialect is written
there). Deep Agents' glob tool matches the same walk with deepagents' own public matcher, so
its dialect stays the installed release's.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable
from typing import Final

from opensandbox_core import _validate
from opensandbox_core._commands._encoded import run_bytes
from opensandbox_core._commands._run import CommandRunner
from opensandbox_core._errors import new_path_error
from opensandbox_core._types import FileMatch

__all__ = ["WALK", "compile_glob", "glob", "name_patterns", "parse_walk", "walk_files"]

WALK: Final = r"""
if ! cd -P -- "$1" 2>/dev/null; then
  ls -d -- "$1/" >/dev/null || exit 3
  echo "walk: cd: $1: Permission denied" >&2
  exit 3
fi
printf '%s\0' "$PWD"
set --
if [ "$PWD" = / ]; then set -- \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o; fi
find . -mindepth 1 "$@" -type f -print0 || exit 4
printf '=\0'
exec find . -mindepth 1 "$@" -type l -exec sh -c '
for p do
  [ -f "$p" ] || continue
  t=$(readlink -f -- "$p" && echo .) || continue
  printf "%s\0%s\0" "$p" "${t%??}"
done' walk {} +
"""
"""The walk: the root's real path; `./<path>` of every regular file; `=`; then `./<path>`,
`<real path>` of every symlink to a regular file. Two `find`s (the files printed by `find`
itself, the few links resolved by `sh`), so the output never interleaves."""
_C_LOCALE: Final = {"LC_ALL": "C"}
_ROOT_ERRORS: Final = (
    # strerror in a shell's `cd` message (C locale)  ->  the builtin error for the root
    ("No such file or directory", FileNotFoundError, errno.ENOENT),
    ("Not a directory", NotADirectoryError, errno.ENOTDIR),
    ("Permission denied", PermissionError, errno.EACCES),
)


async def walk_files(commands: CommandRunner, path: str) -> list[FileMatch]:
    """Every regular file under `path` (see the module docstring), sorted by relative path."""
    root = _validate.path(path)
    result = await run_bytes(
        commands, ["sh", "-c", WALK, "walk", root], cwd=None, env=_C_LOCALE, timeout=600
    )
    return parse_walk(root, result.exit_code, result.stdout, result.stderr)


def parse_walk(root: str, exit_code: int, stdout: bytes, stderr: str) -> list[FileMatch]:
    """The files `WALK` found under `root`, from its exit code and output (or the error)."""
    message = stderr.strip()
    if exit_code == 3:
        for text, cls, code in _ROOT_ERRORS:
            if message.endswith(text):
                raise new_path_error(cls, code, root)
        raise OSError(errno.EIO, f"could not enter the directory ({message[-200:]})", root)
    if exit_code != 0:
        code = errno.EACCES if "Permission denied" in message else errno.EIO
        raise OSError(code, f"could not walk the whole tree ({message[-300:]})", root)
    records = [item.decode("utf-8", "surrogateescape") for item in stdout.split(b"\0")]
    if len(records) < 3 or records[-1] != "" or "=" not in records:
        raise OSError(errno.EIO, "the walk's output was cut short", root)
    real_root, rest = records[0], records[1:-1]
    split = rest.index("=")
    files, links = rest[:split], rest[split + 1 :]
    if len(links) % 2:
        raise OSError(errno.EIO, "the walk's output was cut short", root)
    inside = real_root if real_root.endswith("/") else real_root + "/"
    base = root.rstrip("/") or "/"
    found = [FileMatch(_join(base, name[2:]), name[2:]) for name in files]
    for name, real in zip(links[::2], links[1::2], strict=True):
        if real == real_root or real.startswith(inside):  # else it leads out of the tree
            found.append(FileMatch(_join(base, name[2:]), name[2:], is_symlink=True))
    found.sort(key=lambda match: match.relative)
    return found


def _join(base: str, relative: str) -> str:
    return base + relative if base.endswith("/") else f"{base}/{relative}"


async def glob(commands: CommandRunner, pattern: str, path: str) -> list[FileMatch]:
    """The files under `path` whose relative path matches `pattern` (`compile_glob`)."""
    matches = compile_glob(pattern)
    return [found for found in await walk_files(commands, path) if matches(found.relative)]


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A matcher for relative paths (`a/b/c.py`): the core's one glob dialect, that of
    `files.glob` and `files.grep` (docs/core.md, "Finding files"):

    - a pattern without `/` matches the file's name at any depth (`*.py`); one with `/`
      matches the whole relative path (`src/*.py`, `src/**/test_*.py`; a leading `/` is
      ignored);
    - `*` is any run of characters but `/`, `?` one character but `/`, `[abc]`, `[a-z]` and
      `[!abc]` (or `[^abc]`) one of (or none of) a set, `{a,b}` either alternative (not
      nested);
    - `**` as a whole segment is any number of directories, none included (`**/x`, `a/**/x`,
      `a/**`);
    - names starting with `.` are matched like any other; everything else is literal
      (`\\` too), and a `[` or `{` that is not closed is a literal character.
    """
    _validate.glob_pattern(pattern)
    body = _translate(pattern.lstrip("/")) if "/" in pattern else _translate(pattern)
    compiled = re.compile(body, re.DOTALL)
    if "/" in pattern:
        return lambda relative: compiled.fullmatch(relative) is not None
    return lambda relative: compiled.fullmatch(relative.rsplit("/", 1)[-1]) is not None


def name_patterns(pattern: str, *, most: int = 64) -> list[str] | None:
    """The same glob without `/` as shell patterns (`find -name`, `case`; braces expanded into
    alternatives): a name matches the glob when it matches any of them. Only `*`, braces and
    literal characters are written so; None for a glob with `/`, with `?` or a set (`[...]`:
    a shell without multibyte support, dash or busybox, would take one byte for one
    character), or with more than `most` alternatives: then only `compile_glob` decides."""
    _validate.glob_pattern(pattern)
    if "/" in pattern:
        return None
    out = [""]
    for token in _tokens(pattern):
        if isinstance(token, _Alternatives):
            shells = [_shell(option) for option in token.options]
            if None in shells:
                return None
            out = [done + more for done in out for more in shells if more is not None]
        else:
            piece = _shell([token])
            if piece is None:
                return None
            out = [done + piece for done in out]
        if len(out) > most:
            return None
    return out


# -- the dialect: a segment read as tokens, written as a regular expression or shell pattern --
class _Set:
    """`[...]`: one character of (or, `negate`, not of) `members` (as written)."""

    def __init__(self, members: str, negate: bool) -> None:
        self.members, self.negate = members, negate


class _Alternatives:
    """`{a,b}`: each option a token list (braces do not nest)."""

    def __init__(self, options: list[list[_Token]]) -> None:
        self.options = options


_Token = str | _Set | _Alternatives
_WILD = frozenset("*?")


def _tokens(segment: str) -> list[_Token]:
    """The tokens of one segment (no `/`); a wildcard is `"*"` or `"?"`, a literal character is
    `"=c"` (so that `*` and `=*` differ)."""
    out: list[_Token] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char in _WILD:
            out.append(char)
        elif char == "[" and (end := _class_end(segment, i)) > 0:
            inner = segment[i + 1 : end]
            negate = inner[:1] in ("!", "^")
            out.append(_Set(inner[1:] if negate else inner, negate))
            i = end
        elif char == "{" and (end := segment.find("}", i)) > 0:
            options = segment[i + 1 : end].split(",")
            out.append(_Alternatives([_tokens(option) for option in options]))
            i = end
        else:
            out.append("=" + char)
        i += 1
    return out


def _translate(pattern: str) -> str:
    """The regular expression of a glob (see `compile_glob`)."""
    parts: list[str] = []
    segments = pattern.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]*/)*")
            continue
        parts.append(_regex(_tokens(segment)) + ("" if last else "/"))
    return "".join(parts)


def _regex(tokens: list[_Token]) -> str:
    out: list[str] = []
    for token in tokens:
        if isinstance(token, _Set):
            escaped = token.members.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[{'^/' if token.negate else ''}{escaped}]")
        elif isinstance(token, _Alternatives):
            out.append("(?:" + "|".join(_regex(option) for option in token.options) + ")")
        elif token in _WILD:
            out.append("[^/]*" if token == "*" else "[^/]")  # noqa: S105 - not a password
        else:
            out.append(re.escape(token[1:]))
    return "".join(out)


def _shell(tokens: list[_Token]) -> str | None:
    """The shell pattern of tokens without alternatives, or None (see `name_patterns`)."""
    out: list[str] = []
    for item in tokens:
        if isinstance(item, _Alternatives | _Set) or item in _WILD - {"*"}:
            # Nested braces are literal text in this dialect, and `?` or a set is one
            # character, which byte-wise shells read as one byte: left to `compile_glob`.
            return None
        out.append(item if item == "*" else _escaped(item[1:]))
    return "".join(out)


def _escaped(char: str) -> str:
    return "\\" + char if char in "*?[\\" else char


def _class_end(segment: str, start: int) -> int:
    """The index of the `]` closing the class opened at `start`, or -1 (then `[` is literal)."""
    i = start + 1
    if i < len(segment) and segment[i] in "!^":
        i += 1
    if i < len(segment) and segment[i] == "]":
        i += 1  # a `]` first in the class is a member
    end = segment.find("]", i)
    return end
