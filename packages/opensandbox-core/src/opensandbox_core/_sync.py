"""`SandboxSession`: the blocking façade over `AsyncSandboxSession`.

There is one implementation (the async one). Blocking calls are run on a private event loop in
a daemon thread shared by every blocking session of the process, so they work from plain scripts,
from threads, and from inside a running event loop alike. Ctrl-C (KeyboardInterrupt) during a
blocking call cancels the operation, which stops the remote command, then re-raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from ._config import Connection, SandboxSpec
from ._framing import Framing
from ._session import DEFAULT, AsyncSandboxSession, OutputCallback, _Default
from ._types import CommandResult, FileInfo, TransferResult

__all__ = ["SandboxSession"]

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
        working_dir: str | None = "/workspace",
        env: Mapping[str, str] | None = None,
        default_timeout: float | None = 1800.0,
        max_output: int = 16 * 1024 * 1024,
        recover_timeout: float = 30.0,
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
    def framing(self) -> Framing | None:
        return self._async.framing

    def __repr__(self) -> str:
        return repr(self._async).replace("AsyncSandboxSession", "SandboxSession", 1)

    def start(self) -> str:
        return _portal.run(self._async.start())

    def working_dir(self) -> str:
        return _portal.run(self._async.working_dir())

    def run(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | _Default | None = DEFAULT,
        on_output: OutputCallback | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        return _portal.run(
            self._async.run(
                command,
                cwd=cwd,
                env=env,
                timeout=timeout,
                on_output=on_output,
                max_output=max_output,
            )
        )

    def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        return _portal.run(self._async.read_bytes(path, max_size=max_size))

    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        _portal.run(self._async.write_bytes(path, data, mode=mode))

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

    def get_endpoint(self, port: int) -> tuple[str, dict[str, str]]:
        return _portal.run(self._async.get_endpoint(port))

    def set_lifetime(self, lifetime: float | None) -> None:
        self._async.set_lifetime(lifetime)

    def destroy(self) -> None:
        """Delete the sandbox (quiet when already gone) and close local clients."""
        _portal.run(self._async.destroy())

    def close(self) -> None:
        """Close local HTTP clients; the sandbox keeps running."""
        _portal.run(self._async.aclose())

    def __enter__(self) -> SandboxSession:
        _portal.run(self._async.__aenter__())
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.owned:
            self.destroy()
        else:
            self.close()
