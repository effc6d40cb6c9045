"""`GET /files/search`: walks without following links (filepath.Walk: lstat, directories in
name order) and matches base names with doublestar-style globs (`*`, `**`, `?`, `[!x]`,
`{a,b}`, backslash escapes, `!(p)`); a bad pattern (a bare `!`, `[`) is a 500.

Not reproduced: upstream's lazy glob validation (a malformed part of a pattern that the matcher
never reaches is still an error here).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from typing import TYPE_CHECKING

from . import config
from .fileinfo import file_error, file_info, file_route, query_abs, query_path
from .goenc import ApiError, path_error
from .gopath import go_base
from .handler import q1

if TYPE_CHECKING:
    from .handler import Handler


@file_route
def search_files(h: Handler, q: dict) -> None:
    ap = query_abs(query_path(q))
    try:
        os.stat(ap)
    except OSError as e:
        raise file_error(path_error("stat", ap, e), isinstance(e, FileNotFoundError)) from None
    pattern = q1(q, "pattern") or "**"
    out: list[dict] = []

    def visit(path: str, st: os.stat_result) -> None:
        # filepath.Walk: lstat info, directories entered in name order, links not followed.
        if not stat.S_ISDIR(st.st_mode):
            try:
                hit = glob_match(pattern, go_base(path))
            except GlobSyntaxError as e:
                raise ValueError(f"invalid pattern {pattern}: {e}") from None
            if hit:
                out.append(file_info(path, st, strict_owner=config.LEGACY_FILE_API))
            return
        try:
            names = sorted(os.listdir(path), key=os.fsencode)
        except FileNotFoundError:
            return
        except OSError as e:
            raise ValueError(
                f"error accessing path {path}: {path_error('open', path, e)}"
            ) from None
        for name in names:
            full = path.rstrip("/") + "/" + name
            try:
                est = os.lstat(full)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise ValueError(
                    f"error accessing path {full}: {path_error('lstat', full, e)}"
                ) from None
            visit(full, est)

    try:
        with contextlib.suppress(FileNotFoundError):
            visit(ap, os.lstat(ap))
    except ValueError as e:
        raise ApiError(500, "RUNTIME_ERROR", f"error searching files. {e}") from None
    h.send_json(200, out)


class GlobSyntaxError(ValueError):
    """A /files/search pattern execd's glob package rejects ("syntax error in pattern")."""

    def __init__(self) -> None:
        super().__init__("syntax error in pattern")


def _glob_closing(pattern: str, i: int, left: str, right: str) -> int:
    """Index of the `right` that closes the `left` at pattern[i], backslash escapes skipped."""
    depth = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == left:
            depth += 1
        elif c == right:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _glob_split_alternatives(body: str) -> list[str]:
    out, depth, cur, i = [], 0, [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            cur.append(body[i : i + 2])
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _glob_regex(pattern: str) -> str:
    """Translate a doublestar-style glob on one base name to a regex; GlobSyntaxError if bad.

    `*` and `**` match any run of characters of the name (a name has no `/`; `**/` may match
    nothing), `?` one character, `[...]` a class (`!`/`^` negates, `a-z` ranges, `\\`
    escapes), `{a,b}` alternatives (nested), `\\x` the character x, `!(p)` a name whose rest
    does not match p followed by the rest of the pattern.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            at_segment_start = i == 0 or pattern[i - 1] == "/"
            if j - i >= 2 and at_segment_start and j < n and pattern[j] == "/":
                out.append("(?:.*/)?")
                i = j + 1
                continue
            out.append(".*" if j - i >= 2 and at_segment_start and j == n else "[^/]*")
            i = j
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            regex, i = _glob_class(pattern, i)
            out.append(regex)
        elif c == "{":
            close = _glob_closing(pattern, i, "{", "}")
            if close < 0:
                raise GlobSyntaxError
            alts = _glob_split_alternatives(pattern[i + 1 : close])
            out.append("(?:" + "|".join(_glob_regex(a) for a in alts) + ")")
            i = close
        elif c == "}":
            raise GlobSyntaxError
        elif c == "!":
            if i + 1 >= n or pattern[i + 1] != "(":
                raise GlobSyntaxError
            close = _glob_closing(pattern, i + 1, "(", ")")
            if close < 0:
                raise GlobSyntaxError
            inner = _glob_regex(pattern[i + 2 : close] + pattern[close + 1 :])
            out.append("(?!(?:" + inner + r")\Z).*")
            return "".join(out)
        elif c == "\\":
            i += 1
            if i >= n:
                raise GlobSyntaxError
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _glob_class(pattern: str, i: int) -> tuple[str, int]:
    """The `[...]` class that opens at pattern[i] as a regex, and the index of its `]`."""
    n = len(pattern)
    k = i + 1
    negate = k < n and pattern[k] in "!^"
    if negate:
        k += 1
    if k >= n or pattern[k] == "]":
        raise GlobSyntaxError
    items: list[str] = []
    while k < n and pattern[k] != "]":
        ch = pattern[k]
        if ch == "\\":
            k += 1
            if k >= n:
                raise GlobSyntaxError
            ch = pattern[k]
        k += 1
        if k + 1 < n and pattern[k] == "-" and pattern[k + 1] != "]":
            k += 1
            hi = pattern[k]
            if hi == "\\":
                k += 1
                if k >= n:
                    raise GlobSyntaxError
                hi = pattern[k]
            k += 1
            items.append(re.escape(ch) + "-" + re.escape(hi))
        else:
            items.append(re.escape(ch))
    if k >= n:
        raise GlobSyntaxError
    return "[" + ("^" if negate else "") + "".join(items) + "]", k


def glob_match(pattern: str, name: str) -> bool:
    """Does the base name match the /files/search pattern? GlobSyntaxError for a bad one."""
    return re.fullmatch(_glob_regex(pattern), name, re.DOTALL) is not None
