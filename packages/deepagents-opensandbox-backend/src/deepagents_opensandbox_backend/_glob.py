"""Native `glob` for the Deep Agents backend: BaseSandbox's results, one command, no `python3`.

BaseSandbox's `glob` (`_GLOB_COMMAND_TEMPLATE` in `deepagents/backends/sandbox.py`) runs a
Python script in the sandbox that enters the search root, walks it with `os.walk` (symlinked
directories not entered), keeps the non-directory entries whose path relative to the root (a
`\\` read as `/`) matches the pattern, whose real path lies inside the root's real path and is a
regular file, and prints them sorted.

Here the walk is one argv command (`bash -c` with `find -P`, the path passed as an argument):
it prints the root's real path, every regular file and every symlink to one (as `-xtype f`
decides, like `os.path.isfile` of the real path), then the real paths of those symlinks
(`realpath`). The matching itself is BaseSandbox's own code: the pure functions of the
installed script (`_brace_expand`, `_normalize_classes`, `_include_match`) are compiled from
its source here, not copied, so the pattern dialect is the installed deepagents' exactly. If
that source ever lacks them, or the walk meets anything the script would report differently
(an unreadable subtree: `walk_errors`; the 5 s or 10,000-match budgets: `truncated`; an invalid
or too broad pattern), the caller runs the script.

The walk's output is printed as one base64 line, so the core can return it from line events
without reading the command's raw output file on line-framed execd (`plain_lines=True`), and
names keep every byte: they are decoded as the script's Python decodes them (UTF-8 with
`surrogateescape`), so names with `\r`, `\n`, NEL, U+2028 or non-UTF-8 bytes come out the same.
"""

from __future__ import annotations

import ast
import base64
import binascii
import fnmatch
import logging
import time
from collections.abc import Callable
from typing import Any, Final

from deepagents.backends.protocol import FileInfo, GlobResult
from deepagents.backends.sandbox import (
    _GLOB_COMMAND_TEMPLATE,
    _absolutize_glob_path,
    _glob_search_root,
)

from opensandbox_core import AsyncSandboxSession

__all__ = ["GLOB_WALK", "native_glob"]

logger = logging.getLogger(__name__)

_WANTED: Final = ("_find_group_end", "_split_alternatives", "_brace_expand", "_normalize_classes")
_WANTED_MATCH: Final = ("_basename_match", "_parts_match", "_path_match", "_include_match")
_CONSTANTS: Final = ("MAX_EXPANSIONS", "MAX_MATCHES", "TIME_BUDGET", "PRUNE_AT_ROOT")


def _load_matcher() -> dict[str, Any] | None:
    """The script's pure functions and limits, compiled from the installed template."""
    try:
        source = _GLOB_COMMAND_TEMPLATE.format(path_b64="", pattern_b64="")
        body = source[source.index('"') + 1 : source.rindex('"')]
        if any(c in body for c in ("\\", "$", "`")):
            return None  # the shell would rewrite these inside its double quotes
        tree = ast.parse(body)
        keep: list[ast.stmt] = []
        for node in tree.body:
            wanted_function = isinstance(node, ast.FunctionDef) and node.name in (
                *_WANTED,
                *_WANTED_MATCH,
            )
            wanted_constant = isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in _CONSTANTS for t in node.targets
            )
            if wanted_function or wanted_constant:
                keep.append(node)
        namespace: dict[str, Any] = {"fnmatch": fnmatch}
        code = compile(ast.Module(body=keep, type_ignores=[]), "<deepagents glob>", "exec")
        exec(code, namespace)  # noqa: S102  (deepagents' own installed source, functions only)
    except Exception as exc:  # an unexpected template: the script keeps answering
        logger.warning(
            "Native glob disabled: BaseSandbox's glob script was not understood (%s)", exc
        )
        return None
    if not all(name in namespace for name in (*_WANTED, *_WANTED_MATCH, *_CONSTANTS)):
        return None
    return namespace


_MATCHER: Final = _load_matcher()

GLOB_WALK: Final = r"""
walk() {
  cd -P -- "$1" || exit 3
  printf '%s\0' "$PWD"
  set --
  if [ "$PWD" = / ]; then set -- \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o; fi
  links="${TMPDIR:-/tmp}/.osb-glob-$$-$RANDOM"
  trap 'rm -f -- "$links"' EXIT
  find -P . -mindepth 1 "$@" \( -type f -printf 'f%P\0' \) -o \
    \( -type l -xtype f -printf 'l%P\0' -fprint0 "$links" \) || exit 4
  printf '=\0'
  [ -s "$links" ] || exit 0
  xargs -0 realpath -z -- < "$links" || exit 4
}
(walk "$1") | base64 -w 0
status=${PIPESTATUS[0]}
echo
exit "$status"
"""
"""The walk (one `find`): the root's real path, `f<path>`/`l<path>` records, `=`, then the
real paths of the `l` records, in the same order; NUL-separated, printed as one base64 line
(plain ASCII, so the core returns it from the line events: `plain_lines=True`)."""

_CD_ERRORS: Final = {
    "No such file or directory": "path_not_found",
    "Not a directory": "not_a_directory",
    "Permission denied": "permission_denied",
}
_C_LOCALE: Final = {"LC_ALL": "C"}


def _prepared(pattern: str) -> list[str] | None:
    """The script's candidate patterns, or None where it answers with an error code."""
    assert _MATCHER is not None
    if any(seg == ".." for seg in pattern.replace("\\", "/").split("/")):
        return None  # invalid_pattern
    expanded = _MATCHER["_brace_expand"](pattern)
    if expanded is None:
        return None  # pattern_too_broad
    normalize: Callable[[str], str] = _MATCHER["_normalize_classes"]
    return [normalize(item) for item in expanded]


def _records(stdout: str) -> list[str] | None:
    """The walk's NUL-separated records from its base64 line, each decoded as the script's
    Python decodes names (UTF-8, `surrogateescape`); None for output that is not one line of
    base64."""
    if not stdout.endswith("\n") or not stdout.isascii() or "\n" in stdout[:-1]:
        return None
    try:
        raw = base64.b64decode(stdout[:-1], validate=True)
    except binascii.Error:
        return None
    return [item.decode("utf-8", "surrogateescape") for item in raw.split(b"\0")]


async def native_glob(
    session: AsyncSandboxSession, pattern: str, path: str | None
) -> GlobResult | None:
    """BaseSandbox's `GlobResult` for this glob, from one command; None where only the script
    can answer exactly (the caller runs it)."""
    arguments: tuple[object, ...] = (pattern, path)
    if _MATCHER is None or not all(isinstance(a, str | None) for a in arguments) or not pattern:
        return None
    search_path = _glob_search_root(path)
    if "\0" in search_path or "\0" in pattern:
        return None
    candidates = _prepared(pattern)
    started = time.monotonic()
    result = await session.run(
        ["bash", "-c", GLOB_WALK, "glob", search_path], env=_C_LOCALE, plain_lines=True
    )
    if result.truncated or time.monotonic() - started > _MATCHER["TIME_BUDGET"] * 0.8:
        return None
    if result.exit_code == 3:
        message = result.stderr.strip()
        for text, code in _CD_ERRORS.items():
            if message.endswith(text):
                return GlobResult(matches=None, error=f"Path '{search_path}': {code}")
        return None
    if result.exit_code != 0 or candidates is None:
        return None  # walk errors, or a pattern error code: the script words them
    records = _records(result.stdout)
    if not records or records[-1] != "":
        return None
    real_root, rest = records[0], records[1:-1]
    try:
        split = rest.index("=")
    except ValueError:
        return None
    entries, link_targets = rest[:split], rest[split + 1 :]
    if sum(1 for e in entries if e.startswith("l")) != len(link_targets):
        return None  # the tree changed between the two walks
    root_prefix = real_root if real_root.endswith("/") else real_root + "/"
    include: Callable[[str, str, list[str]], bool] = _MATCHER["_include_match"]
    targets = iter(link_targets)
    matches: list[str] = []
    for entry in entries:
        kind, rel = entry[:1], entry[1:].replace("\\", "/")
        real = next(targets) if kind == "l" else None
        if not include(rel, pattern, candidates):
            continue
        if real is not None and real != real_root and not real.startswith(root_prefix):
            continue
        matches.append(rel)
    if len(matches) >= _MATCHER["MAX_MATCHES"]:
        return None  # the script stops at its cap, in its own walk order
    infos: list[FileInfo] = [
        {"path": _absolutize_glob_path(search_path, rel), "is_dir": False}
        for rel in sorted(matches)
    ]
    return GlobResult(matches=infos, truncated=False, truncation_reason=None)
