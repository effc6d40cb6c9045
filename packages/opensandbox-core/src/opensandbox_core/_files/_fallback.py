"""File operations that execd's HTTP file API cannot do as asked: the pure parts of the fallback.

Three reasons to leave execd's file API for one command with an argv (which execd hands to the
shell quoted item by item, so no item is ever expanded):

- Generations: execd v1.0.18 and older have no `/directories/list`, and their `/files/info`
  follows symlinks, has no `type`, and answers a missing path or a dangling symlink with HTTP 500.
  What a sandbox's execd has is learnt once per sandbox (`FileApi.from_root_info`, from the
  answer for `/`); where it lacks something, `stat` and listings run `find -printf` instead and
  parse its records exactly (`parse_records`); an image without GNU findutils (busybox) prints
  the same records with `_portable`'s script.
- `$` in paths: execd expands every file path like a shell without a shell (`$NAME`, `${NAME}`
  become values, `$1`, `$$`, `${}` ... are removed, an undefined name is an error), and a leading
  `~` becomes HOME. A path that is not `literal()` is therefore never sent to the HTTP file API:
  it is inspected, listed, created and removed by commands, written through a `$`-free temporary
  name that a command then renames, and read through a `$`-free symlink.
- Names with control characters: execd puts the raw base name into the download's
  `Content-Disposition`, which the OpenSandbox server's proxy refuses (HTTP 502). Such files are
  read through a `$`-free, plain symlink as well (`download_safe()`).

`..` segments are resolved like the kernel does (`dotdot_split`: the part up to the last `..`
is canonicalised in the sandbox with `realpath`, which follows symlinks; the rest is kept; where
`realpath` is not GNU's, `_portable` resolves it the same way).

Nothing here does I/O; the session runs the commands built here.
"""

from __future__ import annotations

import base64
import binascii
import errno
import posixpath
import re
import shlex
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__: list[str] = []

# One record per path: type, type with symlinks followed (N: dangling, L: loop), size, mode in
# octal, mtime in seconds, owner, group, depth, base name; fields end with "/", records with NUL.
# Nothing but the base name can hold a "/" or a NUL, and the base name holds neither.
RECORD_FORMAT = "%y/%Y/%s/%m/%T@/%u/%g/%d/%f\\0"
_RECORD_FIELDS = 9
_KINDS = {"f": "file", "d": "directory", "l": "symlink"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Bytes of command output kept for a listing; a bigger one is refused, never silently cut.
LISTING_LIMIT = 256 * 1024 * 1024


@dataclass(frozen=True)
class FileApi:
    """What a sandbox's execd file API offers (learnt once per sandbox)."""

    lstat_info: bool
    """`/files/info` reports `type` and does not follow symlinks (v1.0.19); else it follows them,
    has no `type` and answers 500 for missing paths (v1.0.18 and older)."""
    has_list: bool
    """`/directories/list` exists (v1.0.19); v1.0.18 answers a plain-text 404."""

    @classmethod
    def from_root_info(cls, info: object) -> FileApi:
        """The file API of an execd, from its `/files/info` answer for the path `/`."""
        entry = next(iter(info.values()), None) if isinstance(info, dict) else None
        modern = isinstance(entry, dict) and isinstance(entry.get("type"), str)
        return cls(lstat_info=modern, has_list=modern)


def literal(path: str) -> bool:
    """Whether execd takes this path as it is (no `$` anywhere, no leading `~`)."""
    return "$" not in path and not path.startswith("~")


def download_safe(path: str) -> bool:
    """Whether a download of this path works through the server's proxy as it is."""
    return literal(path) and _CONTROL.search(posixpath.basename(path.rstrip("/"))) is None


def cwd_is_literal(cwd: str) -> bool:
    """Whether execd takes a command's `cwd` as it is (it expands `$` and `~` there too)."""
    return literal(cwd)


def with_cwd(command: str, cwd: str) -> str:
    """A shell command that enters `cwd` first, for a cwd that must not go into the request's
    `cwd` field (`cwd_is_literal` is False); send the result without a `cwd`. A cwd that cannot
    be entered fails like execd's own check does: exit code 1 and the shell's message."""
    return f"cd -- {shlex.quote(cwd)} || exit 1\n{command}"


def dotdot_split(path: str) -> tuple[str, str] | None:
    """For an absolute path with `..` segments: the part up to and including the last `..`
    (to canonicalise in the sandbox) and the rest; None when there is no `..` segment."""
    parts = path.split("/")
    last = max((i for i, part in enumerate(parts) if part == ".."), default=-1)
    if last < 0:
        return None
    return "/".join(parts[: last + 1]) or "/", "/".join(p for p in parts[last + 1 :] if p != ".")


def literal_anchor(path: str) -> str:
    """The deepest ancestor directory of an absolute path whose own path is `literal()`."""
    parts = [p for p in path.split("/") if p]
    kept: list[str] = []
    for part in parts[:-1]:
        if "$" in part:
            break
        kept.append(part)
    return "/" + "/".join(kept)


def temp_name(directory: str, name: str) -> str:
    """A fresh temporary sibling name for writing `name` atomically in `directory`."""
    stem = name[:200] if literal(name) else ""
    return posixpath.join(directory, f".{stem}.osb-{uuid.uuid4().hex[:12]}.tmp")


_PLAIN_DIR = re.compile(r"/[A-Za-z0-9_./-]*")


def plain_dir(path: str) -> bool:
    """Whether an absolute directory name needs no quoting anywhere (letters, digits, `_./-`)."""
    return _PLAIN_DIR.fullmatch(path) is not None and "//" not in path


def marker_name(directory: str) -> str:
    """A fresh name in `directory` for the empty file that marks an upload as landed."""
    return posixpath.join(directory, f".osbmark-{uuid.uuid4().hex[:16]}")


def alias_path() -> str:
    """A fresh, plain path for a temporary symlink (read through it, then removed)."""
    # A path inside the sandbox; `ln -s` refuses to replace anything already there.
    return f"/tmp/.osb-link-{uuid.uuid4().hex[:16]}"  # noqa: S108


def stat_argv(path: str) -> list[str]:
    """A command printing one record (`RECORD_FORMAT`) for `path` itself (lstat)."""
    return ["find", path, "-maxdepth", "0", "-printf", RECORD_FORMAT]


def list_argv(path: str) -> list[str]:
    """A command printing the record of `path` (symlinks followed) and of each entry in it."""
    return ["find", "-H", path, "-maxdepth", "1", "-printf", RECORD_FORMAT]


# Renames a temporary file into place: creates the parent (arg 3, when given), gives it the
# owner and group of an existing target (best effort: only root may give a file away; chown
# comes first because it clears setuid/setgid), applies a mode (arg 4: octal digits, or "=" to
# copy the target's whole mode, setuid/setgid/sticky included, when it exists) and renames
# atomically (mv within one directory tree). The target's owner and mode are read with
# `stat -L -c` (what `--reference` reads: symlinks followed), which GNU coreutils and busybox
# both have; busybox's chown and chmod have no `--reference`.
_FINISH = (
    'if [ -n "$3" ]; then mkdir -p -- "$3" || exit 1; fi; '
    'if [ -e "$2" ]; then o=$(stat -L -c %u:%g -- "$2") && chown -- "$o" "$1" 2>/dev/null; fi; '
    'if [ "$4" = "=" ]; then if [ -e "$2" ]; then '
    'm=$(stat -L -c %a -- "$2") && chmod -- "$m" "$1" || exit 1; fi; '
    'elif [ -n "$4" ]; then chmod -- "$4" "$1" || exit 1; fi; '
    'exec mv -f -- "$1" "$2"'
)


def finish_argv(temp: str, target: str, *, parent: str | None, mode: str | None) -> list[str]:
    """The command that moves a written temporary file to its target (see `_FINISH`)."""
    return ["sh", "-c", _FINISH, "sh", temp, target, parent or "", mode or ""]


def special_bits(mode: int) -> bool:
    """Whether a mode has setuid, setgid or sticky bits, which execd's upload drops."""
    return bool(mode & 0o7000)


def mkdir_argv(path: str, *, parents: bool, mode: int) -> list[str]:
    return ["mkdir", *(["-p"] if parents else []), "-m", format(mode, "o"), "--", path]


def remove_argv(path: str, *, directory: bool, recursive: bool) -> list[str]:
    if directory and not recursive:
        return ["rmdir", "--", path]
    return ["rm", "-rf" if directory else "-f", "--", path]


# -- special files: read by a bounded command ---------------------------------------------------
# execd serves a download with Go's http.ServeContent, which first seeks to the end of the file to
# learn its size: /proc files and FIFOs refuse that (HTTP 500 "seeker can't seek"), sysfs files
# claim 4096 bytes whatever they hold (a short, broken body), devices claim 0 (/dev/zero downloads
# empty). Such files are read the way `cat` would, by `dd` under `timeout`, the bytes printed as
# one base64 line (exact on every output framing).

SPECIAL_READ_LIMIT = 16 * 1024 * 1024
"""The most bytes a read of a special file returns (the caller's `max_size` can only lower it)."""
SPECIAL_READ_SECONDS = 5.0
"""How long a read of a special file may take (a FIFO without a writer ends here)."""
CANNOT_SEEK = "seeker can't seek"
"""execd's answer (HTTP 500, plain text) to a download of a file it cannot seek in."""
_STATUS = "osb-read-status "
_SPECIAL_READ = (
    '{ timeout -k 1 "$1" dd if="$2" iflag=skip_bytes,count_bytes,fullblock skip="$3" '
    f'count="$4" bs=65536 status=none || echo "{_STATUS}$?" >&2; }} | base64 -w 0'
)
_SPECIAL_TREES = ("/proc/", "/sys/")
_SPECIAL_ERRNOS = {
    "input/output error": errno.EIO,  # /proc/self/mem at an unmapped address
    "no such device or address": errno.ENXIO,  # a unix socket
}


def read_by_command(path: str) -> bool:
    """Whether a file at `path` is read by a command, never downloaded: /proc and /sys entries
    (their size says nothing about their content)."""
    return posixpath.normpath(path).startswith(_SPECIAL_TREES)


def special_read_argv(path: str, *, skip: int, count: int, seconds: float) -> list[str]:
    """A command printing, as one base64 line, up to `count` bytes of `path` after its first
    `skip` bytes, killed after `seconds`; a failure adds `osb-read-status N` to stderr."""
    return ["sh", "-c", _SPECIAL_READ, "sh", f"{seconds:g}", path, str(skip), str(count)]


def base64_length(count: int) -> int:
    """Characters of the base64 text of `count` bytes."""
    return 4 * ((count + 2) // 3)


def parse_special_read(stdout: str, stderr: str) -> tuple[bytes, int, str]:
    """(bytes read, exit status of the read, its error text) of `special_read_argv`'s output;
    ValueError when stdout is not base64."""
    status = 0
    lines = []
    for line in stderr.splitlines():
        if line.startswith(_STATUS) and line[len(_STATUS) :].strip().isdigit():
            status = int(line[len(_STATUS) :])
        else:
            lines.append(line)
    try:
        data = base64.b64decode("".join(stdout.split()), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"the output is not base64 ({exc})") from None
    return data, status, error_text("\n".join(lines))


def special_errno(text: str) -> int | None:
    """The errno of a read error text that `_errors.path_error` does not know, or None."""
    lowered = text.lower()
    return next((code for needle, code in _SPECIAL_ERRNOS.items() if needle in lowered), None)


def error_text(stderr: str) -> str:
    """The system's error text in a tool's message (`find: '/x': No such file or directory`)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1].rsplit(": ", 1)[-1].strip()


@dataclass(frozen=True)
class Record:
    """One path as `find -printf RECORD_FORMAT` describes it."""

    kind: str
    followed: str
    size: int
    mode: int
    mtime: datetime | None
    owner: str
    group: str
    depth: int
    name: str

    def info(self, path: str) -> dict[str, Any]:
        """The record in the shape of execd's FileInfo (v1.0.19), plus `follow` (is_dir, is_file
        with symlinks followed)."""
        return {
            "path": path,
            "type": _KINDS.get(self.kind, "other"),
            "size": self.size,
            # execd reports only the permission bits, as an int written in octal digits.
            "mode": int(format(self.mode & 0o777, "o")),
            "modified_at": self.mtime.isoformat() if self.mtime else None,
            "owner": self.owner,
            "group": self.group,
            "follow": (self.followed == "d", self.followed == "f"),
        }


def parse_records(output: str) -> list[Record]:
    """The records in a command's output; ValueError when it is not a sequence of them."""
    if not output:
        return []
    if not output.endswith("\0"):
        raise ValueError("the listing does not end with a complete record")
    records = []
    for raw in output[:-1].split("\0"):
        fields = raw.split("/", _RECORD_FIELDS - 1)
        if len(fields) != _RECORD_FIELDS:
            raise ValueError(f"a record has {len(fields)} fields instead of {_RECORD_FIELDS}")
        kind, followed, size, mode, mtime, owner, group, depth, name = fields
        records.append(
            Record(
                kind=kind,
                followed=followed,
                size=int(size),
                mode=int(mode, 8),
                mtime=_mtime(mtime),
                owner=owner,
                group=group,
                depth=int(depth),
                name=name,
            )
        )
    return records


def _mtime(text: str) -> datetime | None:
    """`%T@` (seconds with up to 10 fractional digits) as execd's time, to the microsecond."""
    whole, _, fraction = text.partition(".")
    try:
        seconds = int(whole)
        micros = int((fraction + "000000")[:6]) if fraction else 0
    except ValueError:
        return None
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)
