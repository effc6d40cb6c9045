"""The files facet, the atomic write: `write_bytes` writes a temporary sibling and renames it
over the target, so a failed write leaves the old content in place.

Requests: a small content (`_inline`: up to 40,000 characters of command) is written by one
command, which carries it, inspects the target, writes the temporary sibling and renames it,
whatever the path and the execd generation. A bigger one is uploaded: a file this session knows
(it wrote it, or found it to be a regular file) is replaced with two requests, sent together:
the upload, which ends with a marker file, and the command that waits for the marker and renames
(`_rename`: execd's own move refuses an existing target). On execd v1.0.18, whose file API
cannot inspect a path without a command, every upload takes that way. On v1.0.19 an unknown path
is inspected while it is uploaded: a missing target then takes execd's move (two round trips in
all), an existing file the rename command. A target that turns out to be a symlink is written
through it the sequential way (`_write_sequential`), as are streams (consumed by their one
upload) and big contents for paths that execd would rewrite ($). Built on
`_filesystem.FileSystem` (paths, inspection, helper commands) and the lifecycle's `FileLink`;
`_transfers.Transfers` writes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import posixpath
from collections.abc import AsyncIterable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final

from opensandbox_core import _errors, _validate
from opensandbox_core._errors import CommandTimeoutError, new_path_error
from opensandbox_core._types import CommandResult, WriteData
from opensandbox_core._wire._execd import ExecdClient, ExecdError

from . import _fallback, _inline, _rename
from ._filesystem import FileLink, FileSystem, kind_of, mode_from_digits, octal_digits

__all__ = ["AtomicWriter"]

_FILE_MODE_NEW: Final = 0o644
_MARKER_WAIT: Final = 300.0
"""Seconds the rename command waits for an upload without a `timeout` of its own to land."""
_INLINE_WAIT: Final = 300.0
"""Seconds a one-command write without a `timeout` of its own may take."""


class AtomicWriter:
    """Atomic file writes in one session's sandbox (see the module docstring)."""

    def __init__(self, life: FileLink, files: FileSystem) -> None:
        self._life = life
        self._fs = files

    async def write_bytes(
        self, path: str, data: WriteData, *, mode: int | None = None, timeout: float | None = None
    ) -> None:
        """Write a file atomically: parents are created, an existing file keeps its mode (new
        files get 0o644 unless `mode` is given; setuid, setgid and sticky bits are applied too),
        writes through a symlink reach its target, and a failed write leaves the old content in
        place."""
        payload = _validate.write_data(data)
        mode = _validate.mode(mode)
        execd = await self._fs.execd()
        target = await self._fs.target(path, create=True)
        if target.endswith("/"):
            raise new_path_error(IsADirectoryError, errno.EISDIR, target)
        if isinstance(payload, bytes):
            # A small content: one command writes, inspects and renames (`_inline`).
            temp = _fallback.temp_name(*posixpath.split(target))
            new_mode = _FILE_MODE_NEW if mode is None else mode
            text = _inline.argv_text(temp, target, payload, new_mode=new_mode, mode=mode)
            if text is not None:
                if not await self._write_inline(execd, target, temp, text, timeout):
                    await self._write_sequential(execd, target, payload, mode, timeout)
                return
        # A stream is consumed by its upload: it takes the sequential way, which never uploads
        # twice (the fast ways may find a symlink after the upload and start again).
        if _fallback.literal(target) and isinstance(payload, bytes):
            known = self._fs.known_file(target)
            api = await self._fs.file_api(execd)
            job = _Job(execd, target, payload, mode, timeout)
            if known is not None or not api.lstat_info:
                # A file this session knows, or an execd that cannot inspect without a command:
                # the upload and the command that renames it go together (`_rename`).
                if await self._write_renamed(job, known):
                    return
            elif await self._write_inspected(job):
                return
        await self._write_sequential(execd, target, payload, mode, timeout)

    async def _write_inline(
        self, execd: ExecdClient, target: str, temp: str, text: str, timeout: float | None
    ) -> bool:
        """Run `_inline`'s command; False (nothing written) for a symlink, to be written
        through."""
        limit = timeout if timeout is not None else _INLINE_WAIT
        try:
            result = await self._fs.rename_command(text, timeout=limit, cleanup=None, after=None)
        except BaseException as exc:
            self._fs.forget_file(target)
            _discard_literal(execd, temp)
            if isinstance(exc, CommandTimeoutError):
                raise CommandTimeoutError(
                    f"Could not write {target!r} in sandbox {self._life.sandbox_id} within "
                    f"{limit:g} s.",
                    timeout=limit,
                    stdout="",
                    stderr=exc.stderr,
                    truncated=False,
                ) from None
            raise
        settled = self._settled(result, target)
        if settled is not None:
            return settled
        _discard_literal(execd, temp)  # the script removes it itself where it can
        raise _errors.os_error(
            _fallback.error_text(result.stderr), target, "could not write the file"
        )

    async def _write_sequential(
        self,
        execd: ExecdClient,
        target: str,
        payload: bytes | AsyncIterable[bytes],
        mode: int | None,
        timeout: float | None,
    ) -> None:
        """Inspect, upload, rename, one after the other: streams, paths that execd would
        rewrite ($), and writes through a symlink."""
        self._fs.forget_file(target)
        info = await self._fs.lstat(execd, target)
        if info is not None and kind_of(info.get("type")) == "symlink":
            link = target
            target = await self._fs.realpath(target)
            info = await self._fs.lstat(execd, target)
            if info is not None and kind_of(info.get("type")) == "symlink":
                # A symlink loop: `realpath -m` gives up on it. Replacing the link with a file
                # would not be a write "through" it; fail like open(2) does.
                raise new_path_error(OSError, errno.ELOOP, link)
        _check_replaceable(target, info)
        temp = _temp_for(target)
        await self._upload_temp(execd, temp, target, payload, mode, info, timeout)
        await self._place(execd, temp, target, mode, exists=info is not None)

    async def _write_inspected(self, job: _Job) -> bool:
        """A path this session does not know, on an execd that inspects without a command
        (v1.0.19): the inspection runs while the upload does; a missing target then takes
        execd's own move, an existing file the rename command. False (nothing written) for a
        symlink, to be written through."""
        execd, target, mode = job.execd, job.target, job.mode
        temp = _temp_for(target)
        bits = _FILE_MODE_NEW if mode is None else mode & 0o777
        upload = asyncio.ensure_future(
            self._upload_temp(execd, temp, target, job.payload, bits, None, job.timeout)
        )
        try:
            info = await self._fs.lstat(execd, target)
            if info is not None and kind_of(info.get("type")) == "symlink":
                raise _Retry
            _check_replaceable(target, info)
            await upload
        except BaseException as exc:
            # A refusal lets the upload end first: execd stores a request it has begun even
            # when the client gives up on it, and the temporary file must go after that.
            finish = isinstance(exc, _Retry | OSError)
            await self._abandon(execd, upload, [temp], cancel=not finish)
            if isinstance(exc, _Retry):
                return False
            raise
        if info is None and (mode is None or not _fallback.special_bits(mode)):
            await self._place(execd, temp, target, mode, exists=False)
            self._fs.learn_file(target, _FILE_MODE_NEW if mode is None else mode)
            return True
        return await self._rename(job, temp, None, None, bits)

    async def _write_renamed(self, job: _Job, known: int | None) -> bool:
        """Upload and rename by one command (`_rename`), sent together: the command waits for
        the upload's marker. False (nothing written) for a symlink, to be written through."""
        temp = _temp_for(job.target)
        if job.mode is not None:
            bits = job.mode & 0o777
        elif known is not None and known >= 0:
            bits = known & 0o777
        else:
            bits = _FILE_MODE_NEW
        # The marker goes where execd keeps command output (deleted with the command's files):
        # never into the target's directory, whose listing must not show it.
        scratch = await self._fs.scratch_dir()
        marker = _fallback.marker_name(scratch or posixpath.dirname(temp))
        # The command's way is the longer one (execd starts a shell): it is sent first.
        upload = asyncio.ensure_future(
            _second(
                self._upload_temp(
                    job.execd, temp, job.target, job.payload, bits, None, job.timeout, marker=marker
                )
            )
        )
        return await self._rename(job, temp, marker, upload, bits)

    async def _rename(
        self,
        job: _Job,
        temp: str,
        marker: str | None,
        upload: asyncio.Future[None] | None,
        bits: int,
    ) -> bool:
        """Run the rename command (while `upload`, when given, is still under way); False for
        a symlink target (temporary files discarded)."""
        execd, target, mode = job.execd, job.target, job.mode
        wait = job.timeout if job.timeout is not None else _MARKER_WAIT
        text = _rename.argv_text(
            temp,
            target,
            marker=marker,
            new_mode=_FILE_MODE_NEW if mode is None else mode,
            mode=mode,
            uploaded=bits,
            wait=wait,
        )
        leftovers = [temp, marker] if marker else [temp]
        renaming = asyncio.ensure_future(
            self._fs.rename_command(text, timeout=wait + 60, cleanup=marker, after=upload)
        )
        try:
            if upload is not None:
                await _both(upload, renaming)
            result = await renaming
        except BaseException:
            if upload is not None:
                await self._abandon(execd, upload, leftovers, cancel=True)
            await self._abandon(execd, renaming, [], cancel=True)
            raise
        if result.exit_code != 0:
            execd.discard_later(leftovers)
        settled = self._settled(result, target)
        if settled is not None:
            return settled
        if result.exit_code == _rename.TIMED_OUT:
            raise _errors.ServerError(
                f"Could not write {target!r} in sandbox {self._life.sandbox_id}: the upload did "
                f"not land within {wait:g} s."
            )
        raise _errors.os_error(
            _fallback.error_text(result.stderr), target, "could not put the file in place"
        )

    def _settled(self, result: CommandResult, target: str) -> bool | None:
        """What a writing script's end says: True (written; the session learns the file's mode),
        False (the target is a symlink: write through it another way), an OSError raised for a
        refusal (a directory, a special file), or None for another failure, for the caller."""
        if result.exit_code == 0:
            self._fs.learn_file(target, _rename.final_mode(result.stdout))
            return True
        self._fs.forget_file(target)
        if result.exit_code == _rename.LINK:
            return False
        refused = _rename.refusal(result.exit_code, target)
        if refused is not None:
            raise refused
        return None

    async def _abandon(
        self, execd: ExecdClient, task: asyncio.Future[Any], leftovers: list[str], *, cancel: bool
    ) -> None:
        """Stop `task` (or let it end), then delete `leftovers`: only then, as execd may still
        store an upload whose request was given up (it finishes a request it has begun)."""
        if cancel and not task.done():
            task.cancel()
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it
        if leftovers:
            await self._discard(execd, leftovers)

    async def _upload_temp(
        self,
        execd: ExecdClient,
        temp: str,
        target: str,
        payload: bytes | AsyncIterable[bytes],
        mode: int | None,
        info: Mapping[str, Any] | None,
        timeout: float | None,
        *,
        marker: str | None = None,
    ) -> None:
        """Upload to `temp` with the target's final 0o777 bits (and, when `info` of an existing
        target is known, its owner and group), and `marker` after it; errors name `target`,
        never `temp`."""
        if mode is not None:
            bits = mode
        elif info is not None:
            bits = mode_from_digits(info.get("mode"))
        else:
            bits = _FILE_MODE_NEW
        owner = info.get("owner") if info is not None else None
        group = info.get("group") if info is not None else None
        try:
            await execd.upload(
                temp,
                payload,
                mode=octal_digits(bits & 0o777),
                owner=str(owner) if owner else None,
                group=str(group) if group else None,
                timeout=timeout,
                marker=marker,
            )
        except Exception as exc:
            await self._discard(execd, temp if marker is None else [temp, marker])
            # Named by the path the caller gave, not the temporary name.
            await self._life.fail(exc, "write a file", execd=execd, path=target)

    async def _place(
        self,
        execd: ExecdClient,
        temp: str,
        target: str,
        mode: int | None,
        *,
        exists: bool,
    ) -> None:
        """Rename an uploaded temporary file over `target` (which `exists` or not) atomically.

        execd's upload applies only the 0o777 bits: setuid, setgid and sticky bits asked for,
        and for an overwrite the old file's owner, group and (without `mode`) whole mode, are
        applied by the command that renames the file into place.
        """
        if mode is not None and _fallback.special_bits(mode):
            chmod: str | None = format(mode, "o")
        else:
            chmod = "=" if exists and mode is None else None
        plain = _fallback.literal(target)
        parent = None if plain else posixpath.dirname(target)
        try:
            if exists or chmod is not None or not plain:
                await self._finish(temp, target, parent=parent, mode=chmod)
            else:
                try:
                    await execd.move(temp, target)
                except ExecdError as exc:
                    if "already exists" not in exc.message:
                        raise
                    # Someone created the target meanwhile: replace it atomically all the same.
                    await self._finish(temp, target, parent=None, mode=None)
        except BaseException as exc:
            await self._discard(execd, temp)
            if isinstance(exc, Exception) and not isinstance(
                exc, OSError | _errors.OpenSandboxError
            ):
                await self._life.fail(exc, "write a file", execd=execd, path=target)
            raise

    async def _finish(
        self, temp: str, target: str, *, parent: str | None, mode: str | None
    ) -> None:
        """Rename a written temporary file over its target atomically (execd's own move refuses
        an existing target), creating `parent` and applying owner and `mode` first (`_files`)."""
        await self._fs.command_or_raise(
            _fallback.finish_argv(temp, target, parent=parent, mode=mode), target
        )

    async def _discard(self, execd: ExecdClient, temp: str | list[str]) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await execd.remove_files([temp] if isinstance(temp, str) else temp)


@dataclass(frozen=True)
class _Job:
    """One `write_bytes` call on the fast ways: the content as bytes, the target literal."""

    execd: ExecdClient
    target: str
    payload: bytes
    mode: int | None
    timeout: float | None


class _Retry(Exception):
    """Internal: the overlapped write found a symlink and is redone the sequential way."""


async def _second(work: Coroutine[Any, Any, None]) -> None:
    """`work`, begun one turn of the loop later (after the task created next has sent)."""
    try:
        await asyncio.sleep(0)
    except BaseException:
        work.close()  # cancelled before it began
        raise
    await work


async def _both(first: asyncio.Future[Any], second: asyncio.Future[Any]) -> None:
    """Wait for both; the first failure is raised at once (the other is left to the caller)."""
    done, _ = await asyncio.wait([first, second], return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    await asyncio.gather(first, second)


def _discard_literal(execd: ExecdClient, temp: str) -> None:
    """Delete a temporary file in the background, when execd takes its path as it is (a `$` in
    it would make execd delete another path, or fail the whole batch)."""
    if _fallback.literal(temp):
        execd.discard_later([temp])


def _temp_for(target: str) -> str:
    """A fresh temporary name to upload `target`'s content to. A target that execd would
    rewrite ($) is written under a `$`-free name in its deepest `$`-free ancestor, then renamed
    by a command (which takes the name literally)."""
    directory, name = posixpath.split(target)
    plain = _fallback.literal(target)
    return _fallback.temp_name(directory if plain else _fallback.literal_anchor(target), name)


def _check_replaceable(target: str, info: Mapping[str, Any] | None) -> None:
    """Raise unless `target` (lstat `info`, None when missing) may be replaced by a file."""
    kind = kind_of(info.get("type")) if info is not None else None
    if kind == "directory":
        raise new_path_error(IsADirectoryError, errno.EISDIR, target)
    if kind == "other":
        raise OSError(errno.EINVAL, "Not a regular file; refusing to replace it", target)
