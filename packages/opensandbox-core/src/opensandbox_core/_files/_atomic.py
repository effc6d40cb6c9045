"""The files facet, the atomic write: `write_bytes` uploads to a temporary sibling and renames
it over the target, so a failed write leaves the old content in place.

The inspection of the target and the upload run at once (`_write_overlapped`); a target that
turns out to be a symlink is written through it the sequential way. Built on
`_filesystem.FileSystem` (paths, inspection, helper commands) and the lifecycle's `FileLink`;
`_transfers.Transfers` writes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import posixpath
from collections.abc import AsyncIterable, Mapping
from typing import Any, Final

from opensandbox_core import _errors, _validate
from opensandbox_core._errors import new_path_error
from opensandbox_core._types import WriteData
from opensandbox_core._wire._execd import ExecdClient, ExecdError

from . import _fallback
from ._filesystem import FileLink, FileSystem, kind_of, mode_from_digits, octal_digits

__all__ = ["AtomicWriter"]

_FILE_MODE_NEW: Final = 0o644


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
        # The inspection and the upload to a temporary name run at once; the upload is redone
        # only when the target turns out to be a symlink (it may lead elsewhere).
        if isinstance(payload, bytes) and await self._write_overlapped(
            execd, target, payload, mode, timeout
        ):
            return
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

    async def _write_overlapped(
        self,
        execd: ExecdClient,
        target: str,
        payload: bytes,
        mode: int | None,
        timeout: float | None,
    ) -> bool:
        """Inspect `target` while uploading `payload` to a temporary sibling, then put it in
        place; False (nothing written) when the target is a symlink, to be written through.

        The temporary file gets the final 0o777 bits of a new file; an existing file's owner,
        group and whole mode are copied to it by the command that renames it into place.
        """
        temp = _temp_for(target)
        upload = asyncio.ensure_future(
            self._upload_temp(execd, temp, target, payload, mode, None, timeout)
        )
        try:
            info = await self._fs.lstat(execd, target)
            if info is not None and kind_of(info.get("type")) == "symlink":
                raise _Retry
            _check_replaceable(target, info)
        except BaseException as exc:
            # On a retry the upload ends by itself: one cancelled in flight may still land its
            # file after a removal sent at once (execd finishes a request it has begun).
            if not isinstance(exc, _Retry):
                upload.cancel()
            await asyncio.wait([upload])
            # A failed upload removed its own file; a finished or cancelled one may have left it.
            if upload.cancelled() or upload.exception() is None:
                await self._discard(execd, temp)
            if isinstance(exc, _Retry):
                return False
            raise
        await upload
        await self._place(execd, temp, target, mode, exists=info is not None)
        return True

    async def _upload_temp(
        self,
        execd: ExecdClient,
        temp: str,
        target: str,
        payload: bytes | AsyncIterable[bytes],
        mode: int | None,
        info: Mapping[str, Any] | None,
        timeout: float | None,
    ) -> None:
        """Upload to `temp` with the target's final 0o777 bits (and, when `info` of an existing
        target is known, its owner and group); errors name `target`, never `temp`."""
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
            )
        except Exception as exc:
            await self._discard(execd, temp)
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

    async def _discard(self, execd: ExecdClient, temp: str) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await execd.remove_files([temp])


class _Retry(Exception):
    """Internal: the overlapped write found a symlink and is redone the sequential way."""


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
