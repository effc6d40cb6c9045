"""The files facet, content: `read_bytes`, `iter_bytes`, `read_range`, the atomic `write_bytes`,
`replace_text`, and the many-file `upload_files` / `download_files`.

Built on `_filesystem.FileSystem` (paths, inspection, helper commands) and the lifecycle's
`FileLink`. A write goes to a temporary sibling first and is renamed over the target, so a failed
write leaves the old content in place (`_atomic.AtomicWriter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Final

import httpx

from opensandbox_core import _validate
from opensandbox_core._commands._run import CommandRunner
from opensandbox_core._defaults import CHUNK_SIZE
from opensandbox_core._errors import (
    ConfigurationError,
    OpenSandboxError,
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
from ._atomic import AtomicWriter
from ._filesystem import FileLink, FileSystem, kind_of, mode_from_digits

__all__ = ["Transfers"]

_TRANSFER_CONCURRENCY: Final = 8
_SLOW_ANSWER: Final = 0.25
"""Seconds a download of a known regular file may take to begin before it is given up and the
path inspected (a path that became a FIFO keeps execd's download waiting for a writer)."""
_WHOLE_BODY: Final = 1 << 20
"""A download whose declared length is at most this is read in one piece by `read_bytes` (no
chunk loop); a longer one, or one of unknown length, streams into one buffer, counted."""
_NO_FILE_LENGTH: Final = 1 << 62
"""A declared length this large is no file's: execd's answer for a directory (Go seeks to the
end of it: 9223372036854775807 on ext4)."""


class Transfers:
    """File content of one session's sandbox (see the module docstring)."""

    def __init__(self, life: FileLink, files: FileSystem, commands: CommandRunner) -> None:
        self._life = life
        self._fs = files
        self._commands = commands
        self.write_bytes = AtomicWriter(life, files).write_bytes
        """Write a file atomically (`_atomic.AtomicWriter.write_bytes`)."""

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        """The whole content of a file. A directory raises IsADirectoryError. A file that execd
        cannot serve by download (a /proc or /sys entry, a FIFO, a device) is read by a bounded
        command the way `cat` would (see `_read_special`)."""
        execd = await self._fs.execd()
        target = await self._fs.target(path)
        if self._fs.known_file(target) is not None and _fallback.download_safe(target):
            response = await self._open_known(execd, target, max_size)
            if response is not None:
                length = _declared_length(response)
                if length is not None and length <= _WHOLE_BODY:
                    return await self._whole(execd, target, response)
                return await _joined(self._stream(execd, target, response, max_size, CHUNK_SIZE))
        return await _joined(self._iter_inspected(execd, target, max_size, CHUNK_SIZE))

    async def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = CHUNK_SIZE
    ) -> AsyncGenerator[bytes, None]:
        """Stream a file's content in chunks (bounded memory). A file this session knows as a
        regular file costs one download (`_open_known`); any other is inspected first."""
        execd = await self._fs.execd()
        target = await self._fs.target(path)
        if self._fs.known_file(target) is not None and _fallback.download_safe(target):
            response = await self._open_known(execd, target, max_size)
            if response is not None:
                async for chunk in self._stream(execd, target, response, max_size, chunk_size):
                    yield chunk
                return
        async for chunk in self._iter_inspected(execd, target, max_size, chunk_size):
            yield chunk

    async def _whole(self, execd: ExecdClient, target: str, response: httpx.Response) -> bytes:
        """The body of an open download whose declared length is small (and within the caller's
        `max_size`, checked by `_open_known`), read in one piece; closed at the end."""
        try:
            return await response.aread()
        except Exception as exc:
            self._fs.forget_file(target)
            await self._life.fail(exc, "read a file", execd=execd, path=target)
        finally:
            await response.aclose()

    async def _open_known(
        self, execd: ExecdClient, target: str, max_size: int | None
    ) -> httpx.Response | None:
        """The download of a path known as a regular file, once its answer has begun; None when
        the answer says the path is something else now, or when it has not begun within
        `_SLOW_ANSWER` (the path is then inspected like any path: one that became a FIFO blocks
        execd's download until a writer comes, and is read like `cat` instead). One request,
        awaited in the caller's task: no task or wait of its own."""
        try:
            async with asyncio.timeout(_SLOW_ANSWER):
                response = await execd.open_download(target)
        except TimeoutError:
            self._fs.forget_file(target)
            return None
        except ExecdError as exc:
            self._fs.forget_file(target)
            if exc.from_execd and exc.status == 404:
                raise new_path_error(FileNotFoundError, errno.ENOENT, target) from None
            if _cannot_seek(exc) or path_error(exc.message, target) is None:
                return None  # a FIFO, a device, a socket: the inspection says which
            await self._life.fail(exc, "read a file", execd=execd, path=target)
        except (OSError, OpenSandboxError):
            self._fs.forget_file(target)
            raise
        except Exception as exc:
            await self._life.fail(exc, "read a file", execd=execd, path=target)
        length = _declared_length(response)
        if length is not None and length >= _NO_FILE_LENGTH:
            # What execd declares for a directory on ext4 (Go seeks to its end): inspect it.
            await response.aclose()
            self._fs.forget_file(target)
            return None
        if max_size is not None and length is not None and length > max_size:
            await response.aclose()
            raise OutputLimitError(
                f"{target} is {length} bytes, over the limit of {max_size} bytes.", limit=max_size
            )
        return response

    async def _stream(
        self,
        execd: ExecdClient,
        target: str,
        response: httpx.Response,
        max_size: int | None,
        chunk_size: int,
    ) -> AsyncGenerator[bytes, None]:
        """The body of an open download, checked against `max_size`; closed at the end."""
        capped = _Capped(target, max_size)
        try:
            async for chunk in capped.counted(response.aiter_bytes(chunk_size)):
                yield chunk
        except (OutputLimitError, GeneratorExit):
            raise
        except Exception as exc:
            self._fs.forget_file(target)
            await self._life.fail(exc, "read a file", execd=execd, path=target)
        finally:
            await response.aclose()

    async def _iter_inspected(
        self, execd: ExecdClient, target: str, max_size: int | None, chunk_size: int
    ) -> AsyncGenerator[bytes, None]:
        """`iter_bytes` of a path inspected first (`_readable`)."""
        info, is_file = await self._readable(execd, target)
        size = -1 if kind_of(info.get("type")) == "symlink" else int(info.get("size") or 0)
        if not is_file or _fallback.read_by_command(target):
            # A FIFO, socket or device, or a /proc or /sys entry: read like `cat`, bounded.
            for chunk in _chunks(await self._read_special(target, max_size), chunk_size):
                yield chunk
            return
        if max_size is not None and size > max_size:
            raise OutputLimitError(
                f"{target} is {size} bytes, over the limit of {max_size} bytes.", limit=max_size
            )
        if kind_of(info.get("type")) == "file" and _fallback.download_safe(target):
            self._fs.learn_file(target, mode_from_digits(info.get("mode")))
        source, alias = target, None
        if not _fallback.download_safe(target):
            # execd would rewrite the name ($) or the server's proxy would refuse the download
            # (a control character in Content-Disposition): read through a plain symlink.
            alias = _fallback.alias_path()
            await self._fs.command_or_raise(["ln", "-s", "--", target, alias], target)
            source = alias
        capped = _Capped(target, max_size)
        unseekable = False
        try:
            async for chunk in capped.counted(execd.download(source, chunk_size=chunk_size)):
                yield chunk
        except (OutputLimitError, GeneratorExit):
            raise
        except Exception as exc:
            # execd cannot serve what it cannot seek in (a /proc file behind a symlink, such as
            # /etc/mtab): known from its answer, so a regular read costs nothing more.
            unseekable = capped.total == 0 and _cannot_seek(exc)
            if not unseekable:
                await self._life.fail(exc, "read a file", execd=execd, path=target)
        finally:
            if alias is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(30):
                        await self._commands.run_argv(["rm", "-f", "--", alias], timeout=20)
        if unseekable:
            self._fs.forget_file(target)
            for chunk in _chunks(await self._read_special(target, max_size), chunk_size):
                yield chunk

    async def _readable(
        self, execd: ExecdClient, target: str, *, check_link: bool = True
    ) -> tuple[Mapping[str, Any], bool]:
        """`target`'s lstat info and whether it is a regular file, symlinks followed. A missing
        path raises FileNotFoundError, a directory IsADirectoryError; with `check_link`, a
        symlink that leads nowhere raises FileNotFoundError too (a symlink loop, ELOOP)."""
        info = await self._fs.lstat(execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        is_dir, is_file = await self._fs.kinds(target, info)
        if is_dir:
            raise new_path_error(IsADirectoryError, errno.EISDIR, target)
        if check_link and not is_file and kind_of(info.get("type")) == "symlink":
            real = await self._fs.realpath(target)  # a loop raises ELOOP here
            if await self._fs.lstat(execd, real) is None:  # dangling
                raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        return info, is_file

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
            _, is_file = await self._readable(execd, target)
            if not is_file:
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
        """`read_range` of a /proc or /sys path: inspected like any path (a symlink is not looked
        up further: the command reads it), read by a command."""
        await self._readable(execd, target, check_link=False)
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


class _Capped:
    """Counts the bytes of a download as they pass, and stops it with OutputLimitError once
    they are over `max_size`."""

    def __init__(self, target: str, max_size: int | None) -> None:
        self.target = target
        self.max_size = max_size
        self.total = 0

    async def counted(self, chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        """`chunks`, counted (`total`)."""
        async for chunk in chunks:
            self.total += len(chunk)
            if self.max_size is not None and self.total > self.max_size:
                raise OutputLimitError(
                    f"{self.target} is over the limit of {self.max_size} bytes.",
                    limit=self.max_size,
                )
            yield chunk


class _Special(Exception):
    """Internal: a range read found a FIFO, socket or device, to be read by a command."""


def _cannot_seek(exc: BaseException) -> bool:
    """Whether execd refused a download because it cannot seek in the file (/proc, FIFOs)."""
    return (
        isinstance(exc, ExecdError)
        and exc.status == 500
        and _fallback.CANNOT_SEEK in exc.message.lower()
    )


def _declared_length(response: httpx.Response) -> int | None:
    """The answer's Content-Length, or None where it has none (chunked through a proxy)."""
    value = response.headers.get("content-length", "")
    return int(value) if value.isdigit() else None


async def _joined(chunks: AsyncIterator[bytes]) -> bytes:
    """All of `chunks` in one bytes object. BytesIO grows one buffer and hands it over without
    a copy; a list of chunks joined at the end would briefly hold the file twice."""
    buffer = io.BytesIO()
    async for chunk in chunks:
        buffer.write(chunk)
    return buffer.getvalue()


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), max(size, 1))]


_TRANSFER_ERRORS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (FileNotFoundError, "file_not_found"),
    (PermissionError, "permission_denied"),
    (IsADirectoryError, "is_directory"),
    (NotADirectoryError, "not_a_directory"),
    (ConfigurationError, "invalid_path"),
    (SandboxUnavailableError, "unavailable"),
)
"""A failed transfer's `TransferResult.error`: the first entry whose type it is, else "error"."""


def _transfer_error(exc: BaseException) -> str:
    return next((code for kind, code in _TRANSFER_ERRORS if isinstance(exc, kind)), "error")
