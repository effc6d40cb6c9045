"""`SandboxSession`: the blocking façade over `AsyncSandboxSession`, its facets and handles.

There is one implementation (the async one), and one mechanism that makes every blocking twin:
`twin(AsyncClass.method)`. A twin calls the method (by name, at call time) on the async object
its blocking owner wraps (`_async`), runs what it returns on the portal (`_portal`: a private
event loop in a daemon thread shared by every blocking caller of the process) and waits: a
coroutine or any awaitable is awaited there, an async iterator is stepped there (a blocking
iterator; leaving the loop early closes it), and `wrap=` turns a returned async handle into its
blocking one. A twin takes the method's parameters (for mypy through `ParamSpec`, for
`inspect.signature` and `help()` through `__wrapped__`) and its docstring, so it cannot drift
from the async signature (`tests/unit/core/test_sync_parity.py` checks every pair). An adapter
makes the blocking twins of its own async methods with it too (`twin(amethod, name="method",
on_self=True)`, public as `opensandbox_core.adapters.twin`).

Blocking calls work from plain scripts, from threads, and from inside a running event loop
alike. Ctrl-C (KeyboardInterrupt) during a blocking call cancels the operation, which stops the
remote command, then re-raises; in `with SandboxSession(...)` it waits for the create to be
cleaned up (`CreateGuard.start_blocking`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from . import _defaults
from ._code._facet import CodeInterpreter
from ._commands._background import BackgroundProcess
from ._commands._facet import Commands
from ._config import Connection, SandboxSpec
from ._files._facet import Files
from ._lifecycle._guard import CreateGuard
from ._portal import portal, run_blocking
from ._session import AsyncSandboxSession
from ._session_info import SessionInfo
from ._terminal._facet import Terminals
from ._terminal._handle import Terminal

__all__ = [
    "BlockingBackgroundProcess",
    "BlockingCode",
    "BlockingCommands",
    "BlockingFiles",
    "BlockingTerminal",
    "BlockingTerminals",
    "SandboxSession",
    "run_blocking",
    "twin",
]

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A")
P = ParamSpec("P")


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _iterate(agen: AsyncIterator[T]) -> Iterator[T]:
    """A blocking iterator over an async one, each step run on the portal loop; closing the
    iterator (or leaving the loop early) closes the async one there too."""
    try:
        while True:
            try:
                yield portal.run(_awaited(agen.__anext__()))
            except StopAsyncIteration:
                return
    finally:
        closer = getattr(agen, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                portal.run(closer())


@overload
def twin(
    method: Callable[Concatenate[A, P], AsyncIterator[T]],
    *,
    name: str | None = ...,
    on_self: bool = ...,
) -> Callable[Concatenate[Any, P], Iterator[T]]: ...
@overload
def twin(
    method: Callable[Concatenate[A, P], Awaitable[T]],
    *,
    name: str | None = ...,
    doc: str | None = ...,
    on_self: bool = ...,
    callbacks: Sequence[str] = ...,
) -> Callable[Concatenate[Any, P], T]: ...
@overload
def twin(
    method: Callable[Concatenate[A, P], Awaitable[T]],
    *,
    wrap: Callable[[T], R],
) -> Callable[Concatenate[Any, P], R]: ...
def twin(
    method: Callable[..., Any],
    *,
    wrap: Callable[[Any], Any] | None = None,
    name: str | None = None,
    doc: str | None = None,
    on_self: bool = False,
    callbacks: Sequence[str] = (),
) -> Callable[..., Any]:
    """The blocking twin of `method`, an async method of the class whose instance the twin's
    owner keeps as `_async` (see the module docstring), or, with `on_self=True`, of the twin's
    own class (an adapter's `write = twin(awrite, name="write", on_self=True)`). `name` renames
    it (`aclose` -> `close`); `doc` replaces its docstring. `callbacks` names keyword arguments
    that take the caller's functions: a plain (not async) one is called off the portal loop
    (`_OffLoop`), so a slow one stalls only its own call, never the other blocking sessions of
    the process or a terminal's keep-alive."""
    attribute = method.__name__
    iterates = inspect.isasyncgenfunction(method)

    @functools.wraps(method)
    def blocking(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        with _OffLoop(kwargs, callbacks) as kwargs:
            result = getattr(self if on_self else self._async, attribute)(*args, **kwargs)
            if iterates:
                return _iterate(result)
            value = portal.run(_awaited(result))
        return value if wrap is None else wrap(value)

    if name is not None:
        blocking.__name__ = name
        blocking.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.{name}".lstrip(".")
    if doc is not None:
        blocking.__doc__ = doc
    return blocking


class _OffLoop:
    """The caller's plain callbacks of one blocking call, each made an async function that
    runs it in this call's own worker thread and waits for it: the portal loop stays free
    while it runs, calls keep their order (one thread, each awaited before the next event is
    read), and what a callback raises reaches the call as before. The thread ends with the
    call."""

    def __init__(self, kwargs: dict[str, Any], names: Sequence[str]) -> None:
        self._kwargs = kwargs
        self._names = [n for n in names if callable(kwargs.get(n)) and not _is_async(kwargs[n])]
        self._worker: concurrent.futures.ThreadPoolExecutor | None = None

    def __enter__(self) -> dict[str, Any]:
        if not self._names:
            return self._kwargs
        self._worker = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="opensandbox-core-callback"
        )
        return {**self._kwargs, **{n: self._off_loop(self._kwargs[n]) for n in self._names}}

    def __exit__(self, *exc_info: object) -> None:
        if self._worker is not None:
            # A call that ended early (timeout, Ctrl-C) does not wait for a callback still
            # running; it finishes in its thread.
            self._worker.shutdown(wait=exc_info[0] is None, cancel_futures=True)

    def _off_loop(self, function: Callable[..., Any]) -> Callable[..., Awaitable[None]]:
        worker = self._worker
        assert worker is not None

        async def call(*args: Any) -> None:
            returned = await asyncio.get_running_loop().run_in_executor(
                worker, functools.partial(function, *args)
            )
            if inspect.isawaitable(returned):
                await returned

        return call


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


class _Blocking(Generic[A]):
    """A blocking twin of an async object (`_async`), its methods made by `twin`."""

    def __init__(self, async_object: A) -> None:
        self._async = async_object

    def __repr__(self) -> str:
        return f"Blocking{self._async!r}"


class _Identified(Protocol):
    id: str


H = TypeVar("H", bound=_Identified)


class _BlockingHandle(_Blocking[H]):
    """The blocking twin of an async handle on something in the sandbox, which has an id."""

    def __init__(self, async_object: H) -> None:
        super().__init__(async_object)
        self.id = async_object.id
        """The id that reaches the same process or terminal again, from any session on the
        sandbox (`session.commands.background(id)`, `session.terminals.attach(id)`)."""


class BlockingBackgroundProcess(_BlockingHandle[BackgroundProcess]):
    """Blocking twin of `BackgroundProcess` (what `session.commands.start_background` returns)."""

    @property
    def async_process(self) -> BackgroundProcess:
        """The async handle behind this one."""
        return self._async

    keep_running = staticmethod(BackgroundProcess.keep_running)
    status = twin(BackgroundProcess.status)
    read_output = twin(BackgroundProcess.read_output)
    wait = twin(BackgroundProcess.wait)
    stop = twin(BackgroundProcess.stop)
    discard = twin(BackgroundProcess.discard)


class BlockingTerminal(_BlockingHandle[Terminal]):
    """Blocking twin of `Terminal` (what `session.terminals.open` returns). The terminal lives
    on the portal loop, which keeps reading its output between calls."""

    @property
    def exit_code(self) -> int | None:
        """As `Terminal.exit_code`: `-N` for signal N, None while running or when unknown."""
        return self._async.exit_code

    @property
    def ended(self) -> bool:
        """Whether the process has ended (`close()` included)."""
        return self._async.ended

    @property
    def async_terminal(self) -> Terminal:
        """The async handle behind this one."""
        return self._async

    write = twin(Terminal.write)
    read = twin(Terminal.read)
    expect = twin(Terminal.expect)
    resize = twin(Terminal.resize)
    interrupt = twin(Terminal.interrupt)
    wait = twin(Terminal.wait)
    detach = twin(Terminal.detach)
    close = twin(Terminal.close)

    def __enter__(self) -> BlockingTerminal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class BlockingCommands(_Blocking[Commands]):
    """Blocking twin of `Commands` (`SandboxSession.commands`)."""

    run = twin(Commands.run, callbacks=("on_output",))
    run_bytes = twin(Commands.run_bytes)
    run_offloaded = twin(Commands.run_offloaded)
    start_background = twin(Commands.start_background, wrap=BlockingBackgroundProcess)

    def background(self, execution_id: str) -> BlockingBackgroundProcess:
        """A handle on a background process started earlier (by this or another session)."""
        return BlockingBackgroundProcess(self._async.background(execution_id))


class BlockingFiles(_Blocking[Files]):
    """Blocking twin of `Files` (`SandboxSession.files`); `iter_bytes` is a blocking iterator."""

    realpath = twin(Files.realpath)
    stat = twin(Files.stat)
    exists = twin(Files.exists)
    list_dir = twin(Files.list_dir)
    make_dir = twin(Files.make_dir)
    remove = twin(Files.remove)
    read_bytes = twin(Files.read_bytes)
    iter_bytes = twin(Files.iter_bytes)
    read_range = twin(Files.read_range)
    read_lines = twin(Files.read_lines)
    write_bytes = twin(Files.write_bytes)
    edit = twin(Files.edit)
    upload_files = twin(Files.upload_files)
    download_files = twin(Files.download_files)
    upload_dir = twin(Files.upload_dir)
    walk = twin(Files.walk)
    glob = twin(Files.glob)
    grep = twin(Files.grep)


class BlockingTerminals(_Blocking[Terminals]):
    """Blocking twin of `Terminals` (`SandboxSession.terminals`): `open` returns a
    `BlockingTerminal`, which `with` closes at the end of the block."""

    open = twin(Terminals.open, wrap=BlockingTerminal)
    attach = twin(Terminals.attach, wrap=BlockingTerminal)


class BlockingCode(_Blocking[CodeInterpreter]):
    """Blocking twin of `CodeInterpreter` (`SandboxSession.code`)."""

    run = twin(CodeInterpreter.run, callbacks=("on_output",))
    create_context = twin(CodeInterpreter.create_context)
    contexts = twin(CodeInterpreter.contexts)
    delete_context = twin(CodeInterpreter.delete_context)
    interrupt = twin(CodeInterpreter.interrupt)


class SandboxSession(SessionInfo):
    """Blocking twin of `AsyncSandboxSession`, with the same arguments, facets and behaviour.

    ```python
    with SandboxSession(SandboxSpec(image="python:3.13-slim")) as sb:
        print(sb.commands.run("echo hello").stdout)
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
        self.commands = BlockingCommands(self._async.commands)
        """Commands: `run`, `run_bytes`, `run_offloaded`, `start_background`, `background`."""
        self.files = BlockingFiles(self._async.files)
        """Files: read, write, stat, list, walk, glob, grep, edit, batches and uploads."""
        self.terminals = BlockingTerminals(self._async.terminals)
        """Interactive terminals: `open` and `attach`."""
        self.code = BlockingCode(self._async.code)
        """Code in Jupyter kernels: `run`, `create_context`, `contexts`, `delete_context`,
        `interrupt`."""

    @classmethod
    def attach(cls, sandbox_id: str, **kwargs: Any) -> SandboxSession:
        """A blocking session on an existing sandbox. It never destroys it on its own."""
        return cls(sandbox_id=sandbox_id, **kwargs)

    @property
    def async_session(self) -> AsyncSandboxSession:
        """The async session behind this façade (same sandbox, same state)."""
        return self._async

    start = twin(AsyncSandboxSession.start)
    working_dir = twin(AsyncSandboxSession.working_dir)
    get_endpoint = twin(AsyncSandboxSession.get_endpoint)
    sandbox_gone = twin(AsyncSandboxSession.sandbox_gone)
    pause = twin(AsyncSandboxSession.pause)
    resume = twin(AsyncSandboxSession.resume)
    destroy = twin(
        AsyncSandboxSession.destroy,
        doc="Delete the sandbox (quiet when already gone) and close local clients.",
    )
    close = twin(
        AsyncSandboxSession.aclose,
        name="close",
        doc="Close local HTTP clients; the sandbox keeps running (twin of `aclose`).",
    )

    def set_lifetime(self, lifetime: float | None) -> None:
        """As :meth:`AsyncSandboxSession.set_lifetime` (no I/O: it applies from the next call)."""
        self._async.set_lifetime(lifetime)

    def __enter__(self) -> SandboxSession:
        CreateGuard(self._async).start_blocking()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.owned:
            self.destroy()
        else:
            self.close()
