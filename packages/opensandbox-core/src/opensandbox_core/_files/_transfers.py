"""The files facet, content: `read_bytes`, `iter_bytes`, `read_range`, the atomic `write_bytes`,
`replace_text`, and the many-file `upload_files` / `download_files`.

Built on `_filesystem.FileSystem` (paths, inspection, helper commands) and the lifecycle's
`FileLink`. A write goes to a temporary sibling first and is renamed over the target, so a failed
write leaves the old content in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
import posixpath
from collections.abc import AsyncGenerator, AsyncIterable, Mapping, Sequence
from typing import Any, Final

from opensandbox_core import _errors, _validate
from opensandbox_core._commands._run import Commands
from opensandbox_core._defaults import CHUNK_SIZE
from opensandbox_core._errors import (
    ConfigurationError,
    OutputLimitError,
    SandboxUnavailableError,
    ServerError,
    new_path_error,
    os_error,
    path_error,
)
from opensandbox_core._types import TransferResult
from opensandbox_core._wire._execd import ExecdClient, ExecdError

from . import _fallback
from ._filesystem import FileLink, FileSystem, kind_of, mode_from_digits, octal_digits

__all__ = ["Transfers"]

_FILE_MODE_NEW: Final = 0o644
_TRANSFER_CONCURRENCY: Final = 8


class Transfers:
    """File content of one session's sandbox (see the module docstring)."""

    def __init__(self, life: FileLink, files: FileSystem, commands: Commands) -> None:
        self._life = life
        self._fs = files
        self._commands = commands

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        """The whole content of a file. A directory raises IsADirectoryError. A file that execd
        cannot serve by download (a /proc or /sys entry, a FIFO, a device) is read by a bounded
        command the way `cat` would (see `_read_special`)."""
        # BytesIO grows one buffer and hands it over without a copy; a list of chunks joined at
        # the end would briefly hold the file twice.
        buffer = io.BytesIO()
        async for chunk in self.iter_bytes(path, max_size=max_size):
            buffer.write(chunk)
        return buffer.getvalue()

    async def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = CHUNK_SIZE
    ) -> AsyncGenerator[bytes, None]:
        """Stream a file's content in chunks (bounded memory)."""
        execd = await self._fs.execd()
        target = await self._fs.target(path)
        info = await self._fs.lstat(execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        kind = kind_of(info.get("type"))
        size = int(info.get("size") or 0)
        if kind == "symlink":
            is_dir, is_file = await self._fs.kinds(target, info)
            if not is_dir and not is_file:
                real = await self._fs.realpath(target)
                if await self._fs.lstat(execd, real) is None:
                    raise new_path_error(FileNotFoundError, errno.ENOENT, target)
            kind = "directory" if is_dir else ("file" if is_file else "other")
            size = -1
        if kind == "directory":
            raise new_path_error(IsADirectoryError, errno.EISDIR, target)
        if kind == "other" or _fallback.read_by_command(target):
            # A FIFO, socket or device, or a /proc or /sys entry: read like `cat`, bounded.
            for chunk in _chunks(await self._read_special(target, max_size), chunk_size):
                yield chunk
            return
        if max_size is not None and size > max_size:
            raise OutputLimitError(
                f"{target} is {size} bytes, over the limit of {max_size} bytes.", limit=max_size
            )
        source, alias = target, None
        if not _fallback.download_safe(target):
            # execd would rewrite the name ($) or the server's proxy would refuse the download
            # (a control character in Content-Disposition): read through a plain symlink.
            alias = _fallback.alias_path()
            await self._fs.command_or_raise(["ln", "-s", "--", target, alias], target)
            source = alias
        total = 0
        unseekable = False
        try:
            async for chunk in execd.download(source, chunk_size=chunk_size):
                total += len(chunk)
                if max_size is not None and total > max_size:
                    raise OutputLimitError(
                        f"{target} is over the limit of {max_size} bytes.", limit=max_size
                    )
                yield chunk
        except (OutputLimitError, GeneratorExit):
            raise
        except Exception as exc:
            # execd cannot serve what it cannot seek in (a /proc file behind a symlink, such as
            # /etc/mtab): known from its answer, so a regular read costs nothing more.
            unseekable = total == 0 and _cannot_seek(exc)
            if not unseekable:
                await self._life.fail(exc, "read a file", execd=execd, path=target)
        finally:
            if alias is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(30):
                        await self._commands.run_argv(["rm", "-f", "--", alias], timeout=20)
        if unseekable:
            for chunk in _chunks(await self._read_special(target, max_size), chunk_size):
                yield chunk

    async def _read_special(self, target: str, max_size: int | None) -> bytes:
        """The content of a file that execd cannot serve by download, read by a command the way
        `cat` would: at most `max_size` bytes (else OutputLimitError, as for any file) and at
        most `SPECIAL_READ_LIMIT` (else EFBIG: a device such as /dev/zero has no end), within
        `SPECIAL_READ_SECONDS` (else TimeoutError: a FIFO without a writer)."""
        limit = _fallback.SPECIAL_READ_LIMIT
        capped = max_size is not None and max_size <= limit
        cap = max_size if max_size is not None and capped else limit
        data = await self._special_bytes(target, skip=0, count=cap + 1)
        if len(data) <= cap:
            return data
        if capped:
            raise OutputLimitError(f"{target} is over the limit of {max_size} bytes.", limit=cap)
        raise OSError(
            errno.EFBIG,
            f"File too large: this special file gives more than {limit} bytes, the most read "
            "from a file that execd cannot serve (a device may have no end); read a part of it "
            "with read_range",
            target,
        )

    async def _special_part(self, target: str, offset: int, length: int) -> bytes:
        """`read_range` of a file that execd cannot serve: up to `length` bytes from `offset`
        (fewer only at its end), at most `SPECIAL_READ_LIMIT` of them (else EFBIG)."""
        limit = _fallback.SPECIAL_READ_LIMIT
        if length <= limit:
            return await self._special_bytes(target, skip=offset, count=length)
        data = await self._special_bytes(target, skip=offset, count=limit + 1)
        if len(data) > limit:
            raise OSError(
                errno.EFBIG,
                f"File too large: a range over {limit} bytes of a file that execd cannot serve "
                "(read it in smaller parts)",
                target,
            )
        return data

    async def _special_bytes(self, target: str, *, skip: int, count: int) -> bytes:
        """Up to `count` bytes of `target` after its first `skip`, read by one bounded command."""
        seconds = _fallback.SPECIAL_READ_SECONDS
        result = await self._fs.file_command(
            _fallback.special_read_argv(target, skip=skip, count=count, seconds=seconds),
            timeout=seconds + 30,
            max_output=_fallback.base64_length(count) + 1024,
        )
        try:
            data, status, text = _fallback.parse_special_read(result.stdout, result.stderr)
        except ValueError as exc:
            raise ServerError(
                f"Could not read {target!r} in sandbox {self._life.sandbox_id}: {exc}."
            ) from None
        if status in (124, 137):  # timeout's own codes: the read was stopped
            raise TimeoutError(
                errno.ETIMEDOUT,
                f"No end of data within {seconds:g} s (a FIFO without a writer, or a device "
                "that keeps it open); not read",
                target,
            )
        if status != 0:
            code = _fallback.special_errno(text) or errno.EIO
            raise os_error(text, target, "could not read the file", code=code)
        return data

    async def write_bytes(
        self,
        path: str,
        data: bytes | bytearray | memoryview | AsyncIterable[bytes],
        *,
        mode: int | None = None,
        timeout: float | None = None,
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

    async def upload_files(
        self, files: Sequence[tuple[str, bytes]], *, mode: int | None = None
    ) -> list[TransferResult]:
        """Write several files; one result per file, in order. Never raises for one bad file."""
        await self._life.context()
        semaphore = asyncio.Semaphore(_TRANSFER_CONCURRENCY)

        async def one(path: str, content: bytes) -> TransferResult:
            async with semaphore:
                try:
                    await self.write_bytes(path, content, mode=mode)
                except Exception as exc:
                    return TransferResult(path=path, error=_transfer_error(exc), exception=exc)
                return TransferResult(path=path)

        return list(await asyncio.gather(*(one(p, c) for p, c in files)))

    async def download_files(self, paths: Sequence[str]) -> list[TransferResult]:
        """Read several files; one result per file, in order. Never raises for one bad file."""
        await self._life.context()
        semaphore = asyncio.Semaphore(_TRANSFER_CONCURRENCY)

        async def one(path: str) -> TransferResult:
            async with semaphore:
                try:
                    content = await self.read_bytes(path)
                except Exception as exc:
                    return TransferResult(path=path, error=_transfer_error(exc), exception=exc)
                return TransferResult(path=path, content=content)

        return list(await asyncio.gather(*(one(p) for p in paths)))

    async def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of a regular file from byte `offset`: fewer at its end, none
        past it. Costs one round trip: the path's inspection and the HTTP Range download run
        at once (symlinks are followed; a missing path or a directory raises like `read_bytes`).
        A /proc or /sys entry, a FIFO or a device is read by a bounded command, like
        `read_bytes`. Paths that execd would rewrite (`$`) or the server's proxy refuses are
        streamed from the start instead (correct, but costs `offset + length` bytes).
        """
        _validate.non_negative_int(offset, "offset")
        _validate.non_negative_int(length, "length")
        execd = await self._fs.execd()
        target = self._fs.resolve(path)
        if not _fallback.download_safe(target) or _fallback.dotdot_split(target) is not None:
            kept = bytearray()
            seen = 0
            async for chunk in self.iter_bytes(target):
                if seen + len(chunk) > offset:
                    kept += chunk[max(0, offset - seen) :][: length - len(kept)]
                seen += len(chunk)
                if len(kept) >= length:
                    break
            return bytes(kept)
        if _fallback.read_by_command(target):
            return await self._special_range(execd, target, offset, length)
        fetch = asyncio.ensure_future(execd.download_range(target, offset, length))
        try:
            info = await self._fs.lstat(execd, target)
            if info is None:
                raise new_path_error(FileNotFoundError, errno.ENOENT, target)
            is_dir, is_file = await self._fs.kinds(target, info)
            if is_dir:
                raise new_path_error(IsADirectoryError, errno.EISDIR, target)
            if not is_file:
                if kind_of(info.get("type")) == "symlink":
                    real = await self._fs.realpath(target)  # a loop raises ELOOP here
                    if await self._fs.lstat(execd, real) is None:  # dangling
                        raise new_path_error(FileNotFoundError, errno.ENOENT, target)
                raise _Special
        except BaseException as exc:
            fetch.cancel()
            await asyncio.wait([fetch])
            if not fetch.cancelled():
                fetch.exception()  # retrieved, so asyncio does not log it
            if isinstance(exc, _Special):  # a FIFO, socket or device: read like `cat`
                return await self._special_part(target, offset, length)
            raise
        try:
            return await fetch
        except Exception as exc:
            if _cannot_seek(exc):
                return await self._special_part(target, offset, length)
            await self._life.fail(exc, "read a file", execd=execd, path=target)
            raise

    async def _special_range(
        self, execd: ExecdClient, target: str, offset: int, length: int
    ) -> bytes:
        """`read_range` of a /proc or /sys path: inspected like any path, read by a command."""
        info = await self._fs.lstat(execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        is_dir, _ = await self._fs.kinds(target, info)
        if is_dir:
            raise new_path_error(IsADirectoryError, errno.EISDIR, target)
        return await self._special_part(target, offset, length)

    async def replace_text(self, path: str, old: str, new: str) -> None:
        """Replace every occurrence of `old` with `new` in a file, in place, in one request
        (execd's `/files/replace`: the file keeps its inode, mode and owner; a symlink is
        followed). `old` must not be empty. The path is taken literally: one that execd would
        rewrite (`$`, a leading `~`) or with `..` segments raises ConfigurationError (edit such
        files with a command). A missing file raises FileNotFoundError; a /proc or /sys entry
        OSError (EINVAL).
        """
        _validate.replacement(old, new)
        execd = await self._fs.execd()
        target = self._fs.resolve(path)
        if not _fallback.literal(target) or _fallback.dotdot_split(target) is not None:
            raise ConfigurationError(
                f"path {target!r} would be rewritten by execd ($, ~ or ..); edit it with a "
                "command instead."
            )
        if _fallback.read_by_command(target):
            raise OSError(
                errno.EINVAL,
                "Not a regular file: a /proc or /sys entry cannot be edited in place (write it "
                "with a command)",
                target,
            )
        try:
            await execd.replace(target, old, new)
        except Exception as exc:
            if isinstance(exc, ExecdError) and exc.from_execd:
                code = _fallback.special_errno(exc.message)
                if path_error(exc.message, target) is None and code is not None:
                    raise OSError(code, os.strerror(code), target) from None
            await self._life.fail(exc, "replace text in a file", execd=execd, path=target)
            raise


class _Retry(Exception):
    """Internal: the overlapped write found a symlink and is redone the sequential way."""


class _Special(Exception):
    """Internal: a range read found a FIFO, socket or device, to be read by a command."""


def _cannot_seek(exc: BaseException) -> bool:
    """Whether execd refused a download because it cannot seek in the file (/proc, FIFOs)."""
    return (
        isinstance(exc, ExecdError)
        and exc.status == 500
        and _fallback.CANNOT_SEEK in exc.message.lower()
    )


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), max(size, 1))]


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


def _transfer_error(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "file_not_found"
    if isinstance(exc, PermissionError):
        return "permission_denied"
    if isinstance(exc, IsADirectoryError):
        return "is_directory"
    if isinstance(exc, NotADirectoryError):
        return "not_a_directory"
    if isinstance(exc, ConfigurationError):
        return "invalid_path"
    if isinstance(exc, SandboxUnavailableError):
        return "unavailable"
    return "error"
