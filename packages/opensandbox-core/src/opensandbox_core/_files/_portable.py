"""The file commands for an image without GNU findutils and coreutils (busybox alone), and the
choice between them and the GNU ones, made once per sandbox.

The fallbacks of `_fallback` (execd v1.0.18's file API, paths with `$`, `..` in a path) stat
and list with GNU `find -printf` and resolve paths with GNU `realpath -z -e|-m`. busybox has
neither option. Where the sandbox's tools lack them (`GNU_PROBE` fails, learnt once per
sandbox: `gnu_tools_cache`), the same answers come from POSIX `sh` scripts that use only what
busybox has as well (`stat -c`, `readlink`, `find -maxdepth/-mindepth/-exec {} +`, `[ -L ]`):

- `_RECORD` prints `_fallback.RECORD_FORMAT` records, byte for byte what `find -printf` prints
  for the same path (type, type followed, size, mode, mtime to the nanosecond from `stat`'s
  `%Y` and `%y`, owner and group names or ids, depth, base name); the names are printed by
  `printf '%s'` from the shell's own arguments, so every byte of them is kept;
- `_REALPATH` resolves a path component by component like GNU `realpath` (symlinks followed with
  `readlink`; `..` removes the component before it, which is then already free of symlinks; a
  loop is found as gnulib finds it: from the 21st link on, a link met again is a loop): `-e` (every component exists: else "No such file or directory" or "Not a
  directory", as GNU words them) or `-m` (missing components kept).

Every path is an argument of the script, never part of it. On an image with GNU tools the GNU
commands run as before, so answers there stay exactly what they were.
"""

from __future__ import annotations

from typing import Final

from opensandbox_core._lifecycle._caches import SandboxCache

from . import _fallback

__all__ = [
    "GNU_PROBE",
    "gnu_tools_cache",
    "list_argv",
    "realpath_argv",
    "resolve_argv",
    "stat_argv",
]

gnu_tools_cache: SandboxCache[tuple[str, str], bool] = SandboxCache(
    "whether each sandbox has GNU find -printf and realpath -z"
)
"""True: the sandbox's `find` and `realpath` are GNU's (`GNU_PROBE` passed); False: use the
POSIX scripts of this module. Learnt once per sandbox, before the first command that needs it."""

GNU_PROBE: Final = [
    "sh",
    "-c",
    "find / -maxdepth 0 -printf '' && realpath -z -e -m -- / >/dev/null",
    "probe",
]
"""Exit status 0 where `find -printf` and `realpath -z -e/-m` work (GNU findutils, coreutils)."""

_RECORD: Final = r"""
set -f
rec() {
  if [ "$4" = L ]; then s=$(stat -L -c '%f %s %Y %y %u %g %U %G' -- "$1") || exit 1
  else s=$(stat -c '%f %s %Y %y %u %g %U %G' -- "$1") || exit 1; fi
  set -- "$@" $s
  m=$((0x$5))
  case $((m & 61440)) in
    32768) y=f;; 16384) y=d;; 40960) y=l;; 8192) y=c;; 24576) y=b;; 4096) y=p;; 49152) y=s;; *) y=U;;
  esac
  z=$y
  if [ $y = l ]; then
    if [ -d "$1" ]; then z=d; elif [ -f "$1" ]; then z=f; elif [ -e "$1" ]; then z=o
    else case $(stat -L -c . -- "$1" 2>&1) in *'Too many levels'*) z=L;; *) z=N;; esac; fi
  fi
  f=${9#*.}; if [ "$f" = "$9" ]; then f=0; fi
  u=${13}; if [ "$u" = UNKNOWN ]; then u=${11}; fi
  g=${14}; if [ "$g" = UNKNOWN ]; then g=${12}; fi
  printf '%s/%s/%s/%o/%s.%s/%s/%s/%s/%s\0' $y $z $6 $((m & 4095)) $7 "$f" "$u" "$g" $2 "$3"
}
"""
"""`rec PATH DEPTH NAME L|P`: the record of PATH (`L`: symlinks followed, `P`: not); exits 1 when `stat`
fails (its message on stderr)."""
_STAT: Final = _RECORD + 'rec "$1" 0 "${1##*/}" P\n'
_ENTRIES: Final = _RECORD + 'for p do rec "$p" 1 "${p##*/}" P; done\n'
_LIST: Final = (
    _RECORD
    + r"""
if [ -e "$1" ]; then rec "$1" 0 "${1##*/}" L
else
  case $(stat -L -c . -- "$1" 2>&1) in
    *'Too many levels'*) echo "list: $1: Too many levels of symbolic links" >&2; exit 1;;
  esac
  rec "$1" 0 "${1##*/}" P
fi
if [ ! -d "$1" ]; then exit 0; fi
exec find -H "$1" -mindepth 1 -maxdepth 1 -exec sh -c "$2" entries {} +
"""
)
"""The record of a directory (symlinks followed, as `find -H` does) and of each entry in it."""

_REALPATH: Final = r"""
set -f
err() { printf 'realpath: %s: %s\n' "$2" "$1" >&2; exit 1; }
m=$1 p=$2 o= t=$2 n=0
shift 2
while [ -n "$t" ]; do
  c=${t%%/*}
  case $t in */*) t=${t#*/};; *) t=;; esac
  case $c in
    ''|.) continue;;
    ..)
      if [ "$m" = e ] && [ -n "$o" ] && [ ! -d "$o" ]; then err 'Not a directory' "$p"; fi
      o=${o%/*}; continue;;
  esac
  if [ -L "$o/$c" ]; then
    n=$((n + 1))
    if [ "$n" -gt 20 ]; then
      for s do
        if [ "$s" = "$o/$c" ]; then
          if [ "$m" = e ]; then err 'Too many levels of symbolic links' "$p"; fi
          o=$o/$c; continue 2
        fi
      done
      set -- "$@" "$o/$c"
    fi
    l=$(readlink -- "$o/$c"; echo .); l=${l%??}
    case $l in /*) o=;; esac
    t=$l/$t
  elif [ "$m" = e ] && [ ! -e "$o/$c" ]; then
    if [ -z "$o" ] || [ -d "$o" ]; then err 'No such file or directory' "$p"; fi
    err 'Not a directory' "$p"
  else
    o=$o/$c
  fi
done
printf '%s\0' "${o:-/}"
"""
"""`sh -c REALPATH realpath e|m PATH`: the canonical PATH, NUL-terminated (see the docstring)."""


def stat_argv(path: str, *, gnu: bool) -> list[str]:
    """A command printing one record (`_fallback.RECORD_FORMAT`) for `path` itself (lstat)."""
    if gnu:
        return _fallback.stat_argv(path)
    return ["sh", "-c", _STAT, "stat", path]


def list_argv(path: str, *, gnu: bool) -> list[str]:
    """A command printing the record of `path` (symlinks followed) and of each entry in it."""
    if gnu:
        return _fallback.list_argv(path)
    return ["sh", "-c", _LIST, "list", path, _ENTRIES]


def realpath_argv(path: str, *, gnu: bool) -> list[str]:
    """`realpath -m`: the canonical path, missing components kept, NUL-terminated."""
    if gnu:
        return ["realpath", "-z", "-m", "--", path]
    return ["sh", "-c", _REALPATH, "realpath", "m", path]


def resolve_argv(head: str, *, create: bool, gnu: bool) -> list[str]:
    """`realpath -e` of `head` (every component exists), NUL-terminated; with `create`, after
    `mkdir -p` of it."""
    if gnu:
        if create:
            return ["sh", "-c", 'mkdir -p -- "$1" && exec realpath -z -e -- "$1"', "sh", head]
        return ["realpath", "-z", "-e", "--", head]
    script = ('mkdir -p -- "$2" || exit 1\n' if create else "") + _REALPATH
    return ["sh", "-c", script, "realpath", "e", head]
