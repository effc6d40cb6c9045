"""The files facet, paths and metadata: `stat`, `exists`, `list_dir`, `make_dir`, `remove`,
`realpath`, and the path resolution that every file operation starts with.

It sees the lifecycle only through `FileLink` (a reachable sandbox, the error boundary, the
working directory) and runs its helper commands through the commands facet; `_transfers` reads
and writes file content on top of it.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import posixpath
from collections.abc import Awaitable, Mapping
from datetime import datetime
from typing import Any, Final, Protocol

from opensandbox_core._commands._output import Cleanup
from opensandbox_core._commands._run import CommandRunner, Lifecycle
from opensandbox_core._errors import (
    ConfigurationError,
    ServerError,
    new_path_error,
    os_error,
    path_error,
)
from opensandbox_core._lifecycle._caches import SandboxCache
from opensandbox_core._types import CommandResult, FileInfo, FileKind
from opensandbox_core._wire._execd import ExecdClient, ExecdError

from . import _fallback, _paths, _portable

__all__ = ["FileLink", "FileSystem", "file_api_cache"]

logger = logging.getLogger(__name__)

_DIR_MODE: Final = 0o755
_KNOWN_LIMIT: Final = 4096
"""How many paths a session remembers as regular files (`FileSystem.known_file`)."""

file_api_cache: SandboxCache[tuple[str, str], _fallback.FileApi] = SandboxCache(
    "what each sandbox's execd file API offers"
)
"""Learnt once per sandbox (the info of `/`): process-wide, keyed by (domain, sandbox id), like
every verdict about a sandbox (`_lifecycle._caches` says why that is safe)."""


class FileLink(Lifecycle, Protocol):
    """What the files facets need from the lifecycle on top of the commands' `Lifecycle`."""

    @property
    def domain(self) -> str: ...

    @property
    def working_dir(self) -> str:
        """The canonical working directory (the sandbox has been reached)."""
        ...

    @property
    def working_dir_config(self) -> str | None: ...


def octal_digits(mode: int) -> int:
    """execd reads `mode` as an integer written in octal digits: 0o644 must be sent as 644."""
    return int(format(mode & 0o7777, "o"))


def mode_from_digits(value: object) -> int:
    try:
        return int(str(value), 8)
    except ValueError:
        return 0


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def kind_of(value: object) -> FileKind:
    if value in ("file", "directory", "symlink", "other"):
        return value
    return "other"


class FileSystem:
    """Paths and metadata of one session's sandbox (see the module docstring)."""

    def __init__(self, life: FileLink, commands: CommandRunner) -> None:
        self._life = life
        self._commands = commands
        self._known: dict[str, int] = {}

    # -- what this session knows about paths ------------------------------------------------
    # A path this session wrote, or found to be a regular file, is read with one download and
    # replaced with one upload and one rename: the answers to those requests say when that
    # knowledge went stale (a missing path, a directory, a special file), and then the path is
    # inspected again. Unknown paths are inspected first, because a download of a FIFO would
    # take the data its writer sends (execd opens it before it finds it cannot serve it).
    def known_file(self, path: str) -> int | None:
        """The whole mode of `path` if this session knows it as a regular file (-1: mode
        unknown), else None."""
        return self._known.get(path)

    def learn_file(self, path: str, mode: int = -1) -> None:
        """Remember `path` as a regular file (of `mode`, -1 when unknown)."""
        if len(self._known) >= _KNOWN_LIMIT and path not in self._known:
            del self._known[next(iter(self._known))]
        self._known[path] = mode

    def forget_file(self, path: str) -> None:
        """Forget what this session knew about `path` and everything under it."""
        self._known.pop(path, None)
        prefix = path.rstrip("/") + "/"
        for known in [p for p in self._known if p.startswith(prefix)]:
            del self._known[known]

    def resolve(self, path: str) -> str:
        """The absolute path that `path` names (relative paths start at the working dir; the
        sandbox has been reached). Taken literally: see `_paths.resolve`."""
        return _paths.resolve(path, self._life.working_dir)

    async def target(self, path: str, *, create: bool = False) -> str:
        """The absolute path an operation works on, with `..` segments resolved like the kernel
        does: the part up to the last `..` is canonicalised in the sandbox (symlinks followed; a
        missing directory there is FileNotFoundError, or, with `create`, made first, as
        `mkdir -p` of the parent would). A path without `..` is returned as `_resolve` gives it.
        """
        target = self.resolve(path)
        split = _fallback.dotdot_split(target)
        if split is None:
            return target
        head, tail = split
        argv = _portable.resolve_argv(head, create=create, gnu=await self._gnu())
        result = await self._commands.file_command(argv, timeout=60)
        if result.exit_code != 0 or not result.stdout.endswith("\0"):
            text = _fallback.error_text(result.stderr)
            raise os_error(text, target, "could not resolve '..' in the path", code=errno.EINVAL)
        real = result.stdout[:-1]
        return posixpath.join(real, tail) if tail else real

    async def _gnu(self) -> bool:
        """Whether the sandbox has GNU `find -printf` and `realpath -z` (else the commands are
        `_portable`'s scripts); asked once per sandbox."""
        if self._life.sandbox_id is None:
            await self._life.context()
        assert self._life.sandbox_id is not None
        key = (self._life.domain, self._life.sandbox_id)
        gnu = _portable.gnu_tools_cache.get(key)
        if gnu is None:
            result = await self._commands.file_command(_portable.GNU_PROBE, timeout=60)
            gnu = _portable.gnu_tools_cache[key] = result.exit_code == 0
        return gnu

    async def execd(self) -> ExecdClient:
        """The execd client of this event loop, the sandbox started first."""
        return (await self._life.context()).execd

    async def scratch_dir(self) -> str | None:
        """execd's temp dir when its name is plain (it keeps command output there), else None."""
        directory = (await self._life.context()).output_dir
        return directory if directory and _fallback.plain_dir(directory) else None

    async def file_api(self, execd: ExecdClient) -> _fallback.FileApi:
        """What this sandbox's execd file API offers; asked once per sandbox (info of `/`)."""
        assert self._life.sandbox_id is not None
        key = (self._life.domain, self._life.sandbox_id)
        api = file_api_cache.get(key)
        if api is None:
            try:
                data = await execd.info(["/"])
            except Exception as exc:
                await self._life.fail(exc, "inspect the sandbox's file API", execd=execd)
            api = _fallback.FileApi.from_root_info(data)
            if not api.lstat_info:
                logger.info(
                    "Sandbox %s: execd has the file API of v1.0.18 or older; paths are inspected "
                    "and listed by commands",
                    self._life.sandbox_id,
                )
            file_api_cache[key] = api
        return api

    async def lstat(self, execd: ExecdClient, path: str) -> dict[str, Any] | None:
        """execd's FileInfo of a path (symlinks not followed), or None when it does not exist.

        Where execd cannot tell (v1.0.18 and older: its info follows symlinks and has no type) or
        would rewrite the path (`$`), one command answers instead; its answer also holds
        `follow`: (is_dir, is_file) with symlinks followed.
        """
        api = await self.file_api(execd)
        if not api.lstat_info or not _fallback.literal(path):
            return await self._lstat_by_command(path)
        try:
            data = await execd.info([path])
        except ExecdError as exc:
            if exc.from_execd and exc.status == 404:
                return None
            if exc.from_execd:
                mapped = path_error(exc.message, path)
                if isinstance(mapped, FileNotFoundError):
                    return None
            await self._life.fail(exc, "inspect a path", execd=execd, path=path)
        except Exception as exc:
            await self._life.fail(exc, "inspect a path", execd=execd, path=path)
        info = data.get(path) or next(iter(data.values()), None)
        return info if isinstance(info, dict) else None

    async def _lstat_by_command(self, path: str) -> dict[str, Any] | None:
        argv = _portable.stat_argv(path, gnu=await self._gnu())
        result = await self._commands.file_command(argv, timeout=60)
        if result.exit_code != 0:
            text = _fallback.error_text(result.stderr)
            error = os_error(text, path, "could not inspect the path")
            if isinstance(error, FileNotFoundError):
                return None
            raise error
        records = self._records(result, path)
        if len(records) != 1:
            raise ServerError(
                f"Could not inspect {path!r} in sandbox {self._life.sandbox_id}: the command printed "
                f"{len(records)} records instead of one."
            )
        return records[0].info(path)

    def _records(self, result: CommandResult, path: str) -> list[_fallback.Record]:
        if result.truncated:
            raise ServerError(
                f"Could not list {path!r} in sandbox {self._life.sandbox_id}: the listing is over "
                f"{_fallback.LISTING_LIMIT} bytes."
            )
        try:
            return _fallback.parse_records(result.stdout)
        except ValueError as exc:
            raise ServerError(
                f"Could not inspect {path!r} in sandbox {self._life.sandbox_id}: unexpected output "
                f"of find ({exc})."
            ) from None

    async def realpath(self, path: str) -> str:
        """The canonical absolute path (symlinks resolved, missing names kept), like `realpath -m`."""
        await self._life.context()
        target = self.resolve(path)
        argv = _portable.realpath_argv(target, gnu=await self._gnu())
        result = await self._commands.file_command(argv, timeout=60)
        if result.exit_code != 0 or not result.stdout.endswith("\0"):
            text = _fallback.error_text(result.stderr)
            raise os_error(text, target, "realpath failed", code=errno.EINVAL)
        return result.stdout[:-1]

    async def stat(self, path: str) -> FileInfo:
        """Metadata of a path; `is_dir`/`is_file` follow symlinks. Missing: FileNotFoundError."""
        execd = await self.execd()
        target = await self.target(path)
        info = await self.lstat(execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        is_dir, is_file = await self.kinds(target, info)
        if kind_of(info.get("type")) == "file":
            self.learn_file(target, mode_from_digits(info.get("mode")))
        return _file_info(target, info, is_dir=is_dir, is_file=is_file)

    async def kinds(self, path: str, info: Mapping[str, Any]) -> tuple[bool, bool]:
        """(is_dir, is_file) of a path whose lstat info is `info`, symlinks followed."""
        kind = kind_of(info.get("type"))
        if kind != "symlink":
            return kind == "directory", kind == "file"
        follow = info.get("follow")
        if isinstance(follow, tuple):
            return bool(follow[0]), bool(follow[1])
        return (await self._follow_kinds([path]))[0]

    async def _follow_kinds(self, paths: list[str]) -> list[tuple[bool, bool]]:
        """(is_dir, is_file) of each path with symlinks followed; broken links are neither."""
        script = 'for p; do if [ -d "$p" ]; then echo d; elif [ -f "$p" ]; then echo f; else echo o; fi; done'
        result = await self._commands.run_argv(["sh", "-c", script, "sh", *paths], timeout=60)
        kinds = result.stdout.split()
        if len(kinds) != len(paths):
            raise ServerError(f"Could not inspect symlinks in sandbox {self._life.sandbox_id}.")
        return [(k == "d", k == "f") for k in kinds]

    async def exists(self, path: str) -> bool:
        """Whether the path exists (a dangling symlink counts as existing). Like
        `os.path.lexists`, a path that cannot exist (a file used as a directory, a symlink loop
        on the way) is False; a permission error is raised."""
        execd = await self.execd()
        try:
            target = await self.target(path)
            return await self.lstat(execd, target) is not None
        except PermissionError:
            raise
        except OSError:
            return False

    async def list_dir(self, path: str = ".") -> list[FileInfo]:
        """The entries of a directory, sorted by name (symlinks followed for `is_dir`)."""
        execd = await self.execd()
        target = await self.target(path)
        entries = await self.entries(execd, target)
        links = [
            str(e.get("path"))
            for e in entries
            if e.get("type") == "symlink" and not isinstance(e.get("follow"), tuple)
        ]
        followed = dict(zip(links, await self._follow_kinds(links), strict=True)) if links else {}
        result = []
        for entry in entries:
            entry_path = str(entry.get("path"))
            if entry_path in followed:
                is_dir, is_file = followed[entry_path]
            else:
                is_dir, is_file = await self.kinds(entry_path, entry)
            result.append(_file_info(entry_path, entry, is_dir=is_dir, is_file=is_file))
        result.sort(key=lambda e: e.name)
        return result

    async def entries(self, execd: ExecdClient, target: str) -> list[dict[str, Any]]:
        """execd's FileInfo of each entry of a directory (a symlink to one lists its target's
        entries under the name given), from `/directories/list` where it can answer, else from
        one command."""
        api = await self.file_api(execd)
        if api.has_list and _fallback.literal(target):
            try:
                return await self._list_settled(execd, target)
            except ExecdError as exc:
                if exc.from_execd and exc.status == 400:
                    pass  # a symlink (execd refuses to traverse it) or not a directory
                elif exc.status == 404 and not exc.code:
                    # No such route ("404 page not found"): an execd without the endpoint.
                    assert self._life.sandbox_id is not None
                    key = (self._life.domain, self._life.sandbox_id)
                    file_api_cache[key] = dataclasses.replace(api, has_list=False)
                else:
                    await self._life.fail(exc, "list a directory", execd=execd, path=target)
            except Exception as exc:
                await self._life.fail(exc, "list a directory", execd=execd, path=target)
        return await self._entries_by_command(target)

    async def _list_settled(self, execd: ExecdClient, target: str) -> list[dict[str, Any]]:
        """`/directories/list`, asked again (at most twice) when an entry vanished between
        execd's readdir and its lstat of that entry: execd then fails the whole listing with a
        500 naming the entry (seen for the raw output files deleted in the background)."""
        for attempt in range(3):
            try:
                return await execd.list_dir(target)
            except ExecdError as exc:
                if attempt == 2 or not _entry_vanished(exc, target):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _entries_by_command(self, target: str) -> list[dict[str, Any]]:
        argv = _portable.list_argv(target, gnu=await self._gnu())
        result = await self._commands.file_command(
            argv, timeout=300, max_output=_fallback.LISTING_LIMIT
        )
        if result.exit_code != 0:
            text = _fallback.error_text(result.stderr)
            raise os_error(text, target, "could not list the directory")
        records = self._records(result, target)
        if not records or records[0].depth != 0:
            raise ServerError(
                f"Could not list {target!r} in sandbox {self._life.sandbox_id}: no record of the "
                "directory itself."
            )
        root = records[0]
        if root.kind == "l":  # `find -H` shows a symlink only when it leads nowhere
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        if root.kind != "d":
            raise new_path_error(NotADirectoryError, errno.ENOTDIR, target)
        # Named like execd names them (its paths are cleaned; `..` was resolved already).
        directory = posixpath.normpath(target)
        return [r.info(posixpath.join(directory, r.name)) for r in records[1:] if r.depth == 1]

    async def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a directory (and its parents). Over a file: FileExistsError."""
        execd = await self.execd()
        target = await self.target(path, create=parents)
        info = await self.lstat(execd, target)
        if info is not None:
            if exist_ok and (await self.kinds(target, info))[0]:
                return
            raise new_path_error(FileExistsError, errno.EEXIST, target)
        if not parents:
            parent = posixpath.dirname(target.rstrip("/")) or "/"
            if await self.lstat(execd, parent) is None:
                raise new_path_error(FileNotFoundError, errno.ENOENT, parent)
        if not _fallback.literal(target):
            argv = _fallback.mkdir_argv(target, parents=parents, mode=_DIR_MODE)
            await self.command_or_raise(argv, target)
            return
        try:
            await execd.make_dirs({target: octal_digits(_DIR_MODE)})
        except Exception as exc:
            await self._life.fail(exc, "create a directory", execd=execd, path=target)

    async def command_or_raise(self, argv: list[str], path: str) -> CommandResult:
        """Run a file command; a failure is raised as the path error its message names."""
        result = await self._commands.file_command(argv, timeout=300)
        if result.exit_code != 0:
            text = _fallback.error_text(result.stderr)
            raise os_error(text, path, f"{argv[0]} failed")
        return result

    async def rename_command(
        self, text: str, *, timeout: float, cleanup: str | None, after: Awaitable[object] | None
    ) -> CommandResult:
        """Run `_rename`'s command (its output is one short line: read from the events, no
        capture files); `cleanup` is deleted with the command's own files once `after` ended."""
        return await self._commands.run(
            text,
            cwd="/",
            env=None,
            timeout=timeout,
            on_output=None,
            max_output=64 * 1024,
            plain_lines=True,
            read_timeout=self._life.stall_timeout,
            cleanup=Cleanup((cleanup,) if cleanup else (), after),
        )

    async def file_command(
        self, argv: list[str], *, timeout: float, max_output: int | None = None
    ) -> CommandResult:
        """Run one file command (`CommandRunner.file_command`); its result as it is."""
        return await self._commands.file_command(argv, timeout=timeout, max_output=max_output)

    def _protected(self, target: str) -> bool:
        norm = posixpath.normpath(target)
        workdir = self._life.working_dir
        configured = self._life.working_dir_config or workdir
        for wd in {workdir, configured}:
            if norm == "/" or norm == wd or wd.startswith(norm.rstrip("/") + "/"):
                return True
        return False

    def _refuse_protected(self, target: str) -> None:
        if self._protected(target):
            raise ConfigurationError(
                f"Refusing to remove {target!r}: it is the working directory or one of its "
                "ancestors."
            )

    async def remove(self, path: str, *, recursive: bool = True) -> None:
        """Delete a file, symlink or directory tree. Refuses the working dir and its ancestors."""
        execd = await self.execd()
        self._refuse_protected(self.resolve(path))
        target = await self.target(path)
        self._refuse_protected(target)
        self.forget_file(target)
        info = await self.lstat(execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        kind = kind_of(info.get("type"))
        if not _fallback.literal(target):
            argv = _fallback.remove_argv(target, directory=kind == "directory", recursive=recursive)
            await self.command_or_raise(argv, target)
            return
        try:
            if kind == "directory":
                if not recursive and await self.entries(execd, target):
                    raise new_path_error(OSError, errno.ENOTEMPTY, target)
                await execd.remove_dirs([target])
            elif kind == "symlink":
                await execd.remove_dirs([target])  # RemoveAll removes the link, not its target
            else:
                await execd.remove_files([target])
        except OSError:
            raise
        except Exception as exc:
            await self._life.fail(exc, "remove a path", execd=execd, path=target)


def _file_info(path: str, info: Mapping[str, Any], *, is_dir: bool, is_file: bool) -> FileInfo:
    return FileInfo(
        path=path,
        kind=kind_of(info.get("type")),
        size=int(info.get("size") or 0),
        mode=mode_from_digits(info.get("mode", 0)),
        modified_at=_parse_time(info.get("modified_at")),
        owner=str(info["owner"]) if info.get("owner") is not None else None,
        group=str(info["group"]) if info.get("group") is not None else None,
        is_dir=is_dir,
        is_file=is_file,
    )


def _entry_vanished(exc: ExecdError, directory: str) -> bool:
    """Whether execd's error says an entry *inside* `directory` no longer exists."""
    if exc.status != 500 or "no such file" not in exc.message.lower():
        return False
    prefix = directory.rstrip("/") + "/"
    marker = f"lstat {prefix}"
    return marker in exc.message
