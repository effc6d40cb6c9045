"""`SandboxSession`: the blocking façade over `AsyncSandboxSession`.

There is one implementation (the async one); every public method and property of
`AsyncSandboxSession` has a twin here with the same parameters (a unit test,
`tests/unit/core/test_sync_parity.py`, fails when one is missing or differs). Blocking calls are run on a private event loop in
a daemon thread shared by every blocking session of the process, so they work from plain scripts,
from threads, and from inside a running event loop alike. Ctrl-C (KeyboardInterrupt) during a
blocking call cancels the operation, which stops the remote command, then re-raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Unpack

from . import _defaults
from ._commands._background import DEFAULT_MAX_CHUNK, BackgroundProcess, OutputChunk, ProcessStatus
from ._config import Connection, SandboxSpec
from ._files._upload import DirectoryUpload, UploadOptions
from ._session import DEFAULT, AsyncSandboxSession, OutputCallback, _Default
from ._types import CommandResult, FileInfo, TransferResult, WriteData
from ._wire._framing import Framing

__all__ = ["BlockingBackgroundProcess", "SandboxSession", "run_blocking"]

T = TypeVar("T")


class _Portal:
    """A background event loop that blocking callers submit coroutines to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def runner() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(
                    target=runner, name="opensandbox-core-portal", daemon=True
                )
                thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], *, cancel_wait: float = 15.0) -> T:
        loop = self.loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError(
                "A blocking SandboxSession method was called from its own portal loop; "
                "use AsyncSandboxSession in async code."
            )
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            # Give the cancellation a moment to stop the remote command.
            with contextlib.suppress(BaseException):
                future.result(timeout=cancel_wait)
            raise
        except concurrent.futures.CancelledError:
            raise


_portal = _Portal()


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the shared portal loop and wait for it (for adapters' sync methods)."""
    return _portal.run(coro)


def _iterate(agen: AsyncIterator[T]) -> Iterator[T]:
    """A blocking iterator over an async one, each step run on the portal loop; closing the
    iterator (or leaving the loop early) closes the async one there too."""
    try:
        while True:
            try:
                yield _portal.run(agen.__anext__())  # type: ignore[arg-type]
            except StopAsyncIteration:
                return
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                _portal.run(closer())


class BlockingBackgroundProcess:
    """Blocking twin of `BackgroundProcess` (what `SandboxSession.start_background` returns)."""

    def __init__(self, process: BackgroundProcess) -> None:
        self._process = process

    @property
    def id(self) -> str:
        """The execution id (keep it to find the process again with `session.background(id)`)."""
        return self._process.id

    @property
    def async_process(self) -> BackgroundProcess:
        """The async handle behind this one."""
        return self._process

    def __repr__(self) -> str:
        return f"BlockingBackgroundProcess({self._process.id!r})"

    keep_running = staticmethod(BackgroundProcess.keep_running)

    def status(self) -> ProcessStatus:
        return _portal.run(self._process.status())

    def read_output(
        self, cursor: int | None = None, *, max_bytes: int = DEFAULT_MAX_CHUNK
    ) -> OutputChunk:
        return _portal.run(self._process.read_output(cursor, max_bytes=max_bytes))

    def wait(self, timeout: float | None = None, *, poll: float = 0.2) -> int:
        return _portal.run(self._process.wait(timeout, poll=poll))

    def stop(self) -> None:
        _portal.run(self._process.stop())

    def discard(self) -> None:
        _portal.run(self._process.discard())


class SandboxSession:
    """Blocking twin of `AsyncSandboxSession`, with the same arguments and behaviour.

    ```python
    with SandboxSession(SandboxSpec(image="python:3.13-slim")) as sb:
        print(sb.run("echo hello").stdout)
    ```
    """

    def __init__(
        self,
        spec: SandboxSpec | None = None,
        *,
        sandbox_id: str | None = None,
        connection: Connection | None = None,
        working_dir: str | None = _defaults.WORKING_DIR,
        env: Mapping[str, str] | None = None,
        default_timeout: float | None = _defaults.COMMAND_TIMEOUT,
        max_output: int = _defaults.MAX_OUTPUT,
        recover_timeout: float = _defaults.RECOVER_TIMEOUT,
    ) -> None:
        self._async = AsyncSandboxSession(
            spec,
            sandbox_id=sandbox_id,
            connection=connection,
            working_dir=working_dir,
            env=env,
            default_timeout=default_timeout,
            max_output=max_output,
            recover_timeout=recover_timeout,
        )

    @classmethod
    def attach(cls, sandbox_id: str, **kwargs: Any) -> SandboxSession:
        """A blocking session on an existing sandbox. It never destroys it on its own."""
        return cls(sandbox_id=sandbox_id, **kwargs)

    @property
    def async_session(self) -> AsyncSandboxSession:
        """The async session behind this façade (same sandbox, same state)."""
        return self._async

    @property
    def id(self) -> str | None:
        return self._async.id

    @property
    def owned(self) -> bool:
        return self._async.owned

    @property
    def owner_token(self) -> str:
        return self._async.owner_token

    @property
    def spec(self) -> SandboxSpec | None:
        return self._async.spec

    @property
    def connection(self) -> Connection:
        return self._async.connection

    @property
    def env(self) -> Mapping[str, str]:
        return self._async.env

    @property
    def framing(self) -> Framing | None:
        return self._async.framing

    def __repr__(self) -> str:
        return repr(self._async).replace("AsyncSandboxSession", "SandboxSession", 1)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> str:
        return _portal.run(self._async.start())

    def working_dir(self) -> str:
        return _portal.run(self._async.working_dir())

    def get_endpoint(self, port: int) -> tuple[str, dict[str, str]]:
        return _portal.run(self._async.get_endpoint(port))

    def set_lifetime(self, lifetime: float | None) -> None:
        self._async.set_lifetime(lifetime)

    def sandbox_gone(self) -> bool:
        return _portal.run(self._async.sandbox_gone())

    def pause(self, *, timeout: float = 60.0) -> None:
        _portal.run(self._async.pause(timeout=timeout))

    def resume(self, *, timeout: float = 60.0) -> None:
        _portal.run(self._async.resume(timeout=timeout))

    def upload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        return _portal.run(self._async.upload_dir(local_dir, remote_dir, **options))

    def destroy(self) -> None:
        """Delete the sandbox (quiet when already gone) and close local clients."""
        _portal.run(self._async.destroy())

    def close(self) -> None:
        """Close local HTTP clients; the sandbox keeps running (twin of `aclose`)."""
        _portal.run(self._async.aclose())

    def __enter__(self) -> SandboxSession:
        _portal.run(self._async.__aenter__())
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.owned:
            self.destroy()
        else:
            self.close()

    # -- commands -----------------------------------------------------------------------------
    def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | _Default | None = DEFAULT,
        on_output: OutputCallback | None = None,
        max_output: int | None = None,
        plain_lines: bool = False,
    ) -> CommandResult:
        return _portal.run(
            self._async.run(
                command,
                cwd=cwd,
                env=env,
                timeout=timeout,
                on_output=on_output,
                max_output=max_output,
                plain_lines=plain_lines,
            )
        )

    def start_background(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> BlockingBackgroundProcess:
        process = _portal.run(
            self._async.start_background(command, cwd=cwd, env=env, timeout=timeout)
        )
        return BlockingBackgroundProcess(process)

    def background(self, execution_id: str) -> BlockingBackgroundProcess:
        return BlockingBackgroundProcess(self._async.background(execution_id))

    # -- files --------------------------------------------------------------------------------
    def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        return _portal.run(self._async.read_bytes(path, max_size=max_size))

    def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = _defaults.CHUNK_SIZE
    ) -> Iterator[bytes]:
        """The file's content in chunks, read as the caller iterates (blocking)."""
        return _iterate(self._async.iter_bytes(path, max_size=max_size, chunk_size=chunk_size))

    def write_bytes(
        self, path: str, data: WriteData, *, mode: int | None = None, timeout: float | None = None
    ) -> None:
        _portal.run(self._async.write_bytes(path, data, mode=mode, timeout=timeout))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        return _portal.run(self._async.read_range(path, offset, length))

    def replace_text(self, path: str, old: str, new: str) -> None:
        _portal.run(self._async.replace_text(path, old, new))

    def stat(self, path: str) -> FileInfo:
        return _portal.run(self._async.stat(path))

    def exists(self, path: str) -> bool:
        return _portal.run(self._async.exists(path))

    def list_dir(self, path: str = ".") -> list[FileInfo]:
        return _portal.run(self._async.list_dir(path))

    def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        _portal.run(self._async.make_dir(path, parents=parents, exist_ok=exist_ok))

    def remove(self, path: str, *, recursive: bool = True) -> None:
        _portal.run(self._async.remove(path, recursive=recursive))

    def realpath(self, path: str) -> str:
        return _portal.run(self._async.realpath(path))

    def upload_files(
        self, files: Sequence[tuple[str, bytes]], *, mode: int | None = None
    ) -> list[TransferResult]:
        return _portal.run(self._async.upload_files(files, mode=mode))

    def download_files(self, paths: Sequence[str]) -> list[TransferResult]:
        return _portal.run(self._async.download_files(paths))
