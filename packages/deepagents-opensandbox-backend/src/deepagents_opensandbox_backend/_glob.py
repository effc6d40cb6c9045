"""Native `glob` for the Deep Agents backend: the protocol's glob contract, one command, no `python3`.

`BackendProtocol.glob` documents the contract (deepagents 0.7.30 on): regular files only, under
the search root, matched by the shared include-glob rules that deepagents publishes as
`deepagents.backends.utils.compile_grep_include_glob` ("the single source of truth for both
grep(..., glob=...) and backend glob()"): a pattern without `/` matches the basename at any
depth, one with `/` the path relative to the root, `**` not entering dot-directories; results
sorted, as absolute paths; symlinks to regular files inside the root's real path count, symlinked
directories are not entered, `/proc`, `/sys` and `/dev` are skipped when the root is `/`.

Here the walk is one argv command (`bash -c` with `find -P`, the path passed as an argument):
it prints the root's real path, every regular file and every symlink to one (as `-xtype f`
decides), then the real paths of those symlinks (`realpath`), as one base64 line (so the core
returns it from line events: `plain_lines=True`), and names keep every byte: they are decoded
as Python's `os` functions decode them (UTF-8, `surrogateescape`). The matching is the public
matcher above, so the pattern dialect is the installed release's.

BaseSandbox's own `glob` answers (the caller runs it) where this cannot: a release without
that contract (before 0.7.30 `glob` was Python's `glob.glob`, with directories; detected by
the public `InvalidGlobPatternError` the contract brought), a pattern the matcher refuses (its
error wording is BaseSandbox's), no search root or a relative one, an unreadable subtree, and a
walk near BaseSandbox's budgets (5 s, 10,000 matches), where it reports `truncated`.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Callable
from typing import Final

from deepagents.backends import utils as deepagents_utils
from deepagents.backends.protocol import FileInfo, GlobResult

from opensandbox_core import AsyncSandboxSession

from ._tools import C_LOCALE, is_utf8, path_error

__all__ = ["GLOB_WALK", "SHARED_CONTRACT", "native_glob"]

logger = logging.getLogger(__name__)

_compile: Callable[[str], Callable[[str], bool]] | None = getattr(
    deepagents_utils, "compile_grep_include_glob", None
)
_refused: type[Exception] | None = getattr(deepagents_utils, "InvalidGlobPatternError", None)
SHARED_CONTRACT: Final = _compile is not None and _refused is not None
"""Whether the installed deepagents has the shared glob contract (0.7.30 on)."""
MAX_MATCHES: Final = 10_000
TIME_BUDGET: Final = 5.0

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


def _matcher(pattern: str) -> Callable[[str], bool] | None:
    """The installed release's matcher for `pattern`; None where it refuses the pattern."""
    if _compile is None or _refused is None:
        return None
    try:
        return _compile(pattern)
    except _refused:
        return None  # BaseSandbox reports it, in its words


async def native_glob(
    session: AsyncSandboxSession, pattern: str, path: str | None
) -> GlobResult | None:
    """The `GlobResult` of the protocol's glob, from one command; None where BaseSandbox's own
    glob must answer (the caller runs it)."""
    if not SHARED_CONTRACT or not isinstance(pattern, str) or not pattern:
        return None
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    if "\0" in path or "\0" in pattern or not is_utf8(path + pattern):
        return None
    search_path = path
    include = _matcher(pattern)
    if include is None:
        return None
    started = time.monotonic()
    result = await session.run(
        ["bash", "-c", GLOB_WALK, "glob", search_path], env=C_LOCALE, plain_lines=True
    )
    if result.truncated or time.monotonic() - started > TIME_BUDGET * 0.8:
        return None
    if result.exit_code == 3:
        code = path_error(result.stderr.strip())
        if code is not None:
            return GlobResult(matches=None, error=f"Path '{search_path}': {code}")
        return None
    if result.exit_code != 0:
        return None  # walk errors: BaseSandbox words them
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
    targets = iter(link_targets)
    matches: list[str] = []
    for entry in entries:
        kind, rel = entry[:1], entry[1:].replace("\\", "/")
        real = next(targets) if kind == "l" else None
        if not include(rel):
            continue
        if real is not None and real != real_root and not real.startswith(root_prefix):
            continue
        matches.append(rel)
    if len(matches) >= MAX_MATCHES:
        return None  # BaseSandbox stops at its cap, in its own walk order
    base = search_path.rstrip("/")
    infos: list[FileInfo] = [{"path": f"{base}/{rel}", "is_dir": False} for rel in sorted(matches)]
    return GlobResult(matches=infos, truncated=False, truncation_reason=None)
