"""`SandboxSession`: the blocking façade over `AsyncSandboxSession`.

There is one implementation (the async one); every public method and property of
`AsyncSandboxSession` has a twin here with the same parameters (a unit test,
`tests/unit/core/test_sync_parity.py`, fails when one is missing or differs). The read-only
properties are the same code on both (`SessionInfo`), and a method that only runs its async
twin is made from it by `_blocking`, so it cannot drift from the async signature. Blocking calls
run on the portal (`_portal`: a private event loop in a daemon thread shared by every blocking
caller of the process), so they work from plain scripts, from threads, and from inside a running
event loop alike. Ctrl-C (KeyboardInterrupt) during a blocking call cancels the operation, which
stops the remote command, then re-raises; in `with SandboxSession(...)` it waits for the create
to be cleaned up (`CreateGuard.start_blocking`).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import _defaults
from ._code._blocking import BlockingCode
from ._commands._background import DEFAULT_MAX_CHUNK, BackgroundProcess, OutputChunk, ProcessStatus
from ._config import Connection, SandboxSpec
from ._lifecycle._guard import CreateGuard
from ._portal import portal, run_blocking
from ._session import AsyncSandboxSession
from ._session_info import SessionInfo
from ._terminal._handle import Terminal

__all__ = ["BlockingBackgroundProcess", "BlockingTerminal", "SandboxSession", "run_blocking"]

T = TypeVar("T")
P = ParamSpec("P")


def _iterate(agen: AsyncIterator[T]) -> Iterator[T]:
    """A blocking iterator over an async one, each step run on the portal loop; closing the
    iterator (or leaving the loop early) closes the async one there too."""
    try:
        while True:
            try:
                yield portal.run(agen.__anext__())  # type: ignore[arg-type]
            except StopAsyncIteration:
                return
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                portal.run(closer())


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
        return portal.run(self._process.status())

    def read_output(
        self, cursor: int | None = None, *, max_bytes: int = DEFAULT_MAX_CHUNK
    ) -> OutputChunk:
        return portal.run(self._process.read_output(cursor, max_bytes=max_bytes))

    def wait(self, timeout: float | None = None, *, poll: float = 0.2) -> int:
        return portal.run(self._process.wait(timeout, poll=poll))

    def stop(self) -> None:
        portal.run(self._process.stop())

    def discard(self) -> None:
        portal.run(self._process.discard())


class BlockingTerminal:
    """Blocking twin of `Terminal` (what `SandboxSession.open_terminal` returns). The terminal
    lives on the portal loop, which keeps reading its output between calls."""

    def __init__(self, terminal: Terminal) -> None:
        self._terminal = terminal

    @property
    def id(self) -> str:
        """The terminal id (`SandboxSession.attach_terminal(id)` reaches it again)."""
        return self._terminal.id

    @property
    def exit_code(self) -> int | None:
        return self._terminal.exit_code

    @property
    def async_terminal(self) -> Terminal:
        """The async handle behind this one."""
        return self._terminal

    def __repr__(self) -> str:
        return f"Blocking{self._terminal!r}"

    def write(self, data: str | bytes) -> None:
        portal.run(self._terminal.write(data))

    def read(self, timeout: float = 1.0) -> bytes:
        return portal.run(self._terminal.read(timeout))

    def expect(
        self, pattern: str | bytes | re.Pattern[bytes], timeout: float = 30.0
    ) -> re.Match[bytes]:
        return portal.run(self._terminal.expect(pattern, timeout))

    def resize(self, cols: int, rows: int) -> None:
        portal.run(self._terminal.resize(cols, rows))

    def interrupt(self) -> None:
        portal.run(self._terminal.interrupt())

    def wait(self, timeout: float | None = None) -> int:
        return portal.run(self._terminal.wait(timeout))

    def detach(self) -> None:
        portal.run(self._terminal.detach())

    def close(self) -> None:
        portal.run(self._terminal.close())

    def __enter__(self) -> BlockingTerminal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _blocking(
    method: Callable[Concatenate[AsyncSandboxSession, P], Coroutine[Any, Any, T]],
    *,
    name: str | None = None,
    doc: str | None = None,
) -> Callable[Concatenate[SandboxSession, P], T]:
    """The blocking twin of a coroutine method of `AsyncSandboxSession`: it calls the method
    (by name) on the façade's async session, runs the coroutine on the portal loop and waits.

    The twin takes the method's parameters (for mypy through `P`; for `inspect.signature` and
    `help()` through `__wrapped__`) and its docstring, unless `doc` gives the façade's own;
    `name` renames it (`aclose` -> `close`)."""
    attribute = method.__name__

    @functools.wraps(method)
    def twin(self: SandboxSession, /, *args: P.args, **kwargs: P.kwargs) -> T:
        bound: Callable[P, Coroutine[Any, Any, T]] = getattr(self._async, attribute)
        return portal.run(bound(*args, **kwargs))

    twin.__name__ = name or attribute
    twin.__qualname__ = f"SandboxSession.{twin.__name__}"
    if doc is not None:
        twin.__doc__ = doc
    return twin


class SandboxSession(SessionInfo):
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
        # The state `SessionInfo`'s properties read: the async session's own objects.
        self._life = self._async._life
        self._env = self._async._env
        self.code = BlockingCode(self._async.code)
        """Blocking twin of `AsyncSandboxSession.code` (same methods and parameters)."""

    @classmethod
    def attach(cls, sandbox_id: str, **kwargs: Any) -> SandboxSession:
        """A blocking session on an existing sandbox. It never destroys it on its own."""
        return cls(sandbox_id=sandbox_id, **kwargs)

    @property
    def async_session(self) -> AsyncSandboxSession:
        """The async session behind this façade (same sandbox, same state)."""
        return self._async

    # -- lifecycle ----------------------------------------------------------------------------
    start = _blocking(AsyncSandboxSession.start)
    working_dir = _blocking(AsyncSandboxSession.working_dir)
    get_endpoint = _blocking(AsyncSandboxSession.get_endpoint)
    sandbox_gone = _blocking(AsyncSandboxSession.sandbox_gone)
    pause = _blocking(AsyncSandboxSession.pause)
    resume = _blocking(AsyncSandboxSession.resume)
    upload_dir = _blocking(AsyncSandboxSession.upload_dir)
    destroy = _blocking(
        AsyncSandboxSession.destroy,
        doc="Delete the sandbox (quiet when already gone) and close local clients.",
    )
    close = _blocking(
        AsyncSandboxSession.aclose,
        name="close",
        doc="Close local HTTP clients; the sandbox keeps running (twin of `aclose`).",
    )

    def set_lifetime(self, lifetime: float | None) -> None:
        self._async.set_lifetime(lifetime)

    def __enter__(self) -> SandboxSession:
        CreateGuard(self._async).start_blocking()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.owned:
            self.destroy()
        else:
            self.close()

    # -- commands -----------------------------------------------------------------------------
    run = _blocking(AsyncSandboxSession.run)
    run_bytes = _blocking(AsyncSandboxSession.run_bytes)
    run_offloaded = _blocking(AsyncSandboxSession.run_offloaded)

    def start_background(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> BlockingBackgroundProcess:
        process = portal.run(
            self._async.start_background(command, cwd=cwd, env=env, timeout=timeout)
        )
        return BlockingBackgroundProcess(process)

    def background(self, execution_id: str) -> BlockingBackgroundProcess:
        return BlockingBackgroundProcess(self._async.background(execution_id))

    # -- interactive terminals ----------------------------------------------------------------
    def open_terminal(
        self, command: str | None = None, *, cwd: str | None = None, cols: int = 80, rows: int = 24
    ) -> BlockingTerminal:
        terminal = portal.run(self._async.open_terminal(command, cwd=cwd, cols=cols, rows=rows))
        return BlockingTerminal(terminal)

    def attach_terminal(self, terminal_id: str) -> BlockingTerminal:
        return BlockingTerminal(portal.run(self._async.attach_terminal(terminal_id)))

    # -- files --------------------------------------------------------------------------------
    read_bytes = _blocking(AsyncSandboxSession.read_bytes)

    def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = _defaults.CHUNK_SIZE
    ) -> Iterator[bytes]:
        """The file's content in chunks, read as the caller iterates (blocking)."""
        return _iterate(self._async.iter_bytes(path, max_size=max_size, chunk_size=chunk_size))

    write_bytes = _blocking(AsyncSandboxSession.write_bytes)

    read_range = _blocking(AsyncSandboxSession.read_range)
    read_lines = _blocking(AsyncSandboxSession.read_lines)
    walk_files = _blocking(AsyncSandboxSession.walk_files)
    glob = _blocking(AsyncSandboxSession.glob)
    grep = _blocking(AsyncSandboxSession.grep)
    replace_text = _blocking(AsyncSandboxSession.replace_text)
    stat = _blocking(AsyncSandboxSession.stat)
    exists = _blocking(AsyncSandboxSession.exists)
    list_dir = _blocking(AsyncSandboxSession.list_dir)
    make_dir = _blocking(AsyncSandboxSession.make_dir)
    remove = _blocking(AsyncSandboxSession.remove)
    realpath = _blocking(AsyncSandboxSession.realpath)
    upload_files = _blocking(AsyncSandboxSession.upload_files)
    download_files = _blocking(AsyncSandboxSession.download_files)
