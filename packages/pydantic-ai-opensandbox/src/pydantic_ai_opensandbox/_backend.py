"""An OpenSandbox sandbox behind Pydantic AI's `WorkspaceBackend` protocol.

The work is done by `opensandbox_core.AsyncSandboxSession`: lazy create or attach, per-event-loop HTTP
clients, commands through execd with their output rebuilt from its framing, and the native file API.
This module only checks arguments, shields a create from cancellation so its ref is kept, and
translates the core's errors into the workspace errors with one table (`_ERROR_TABLE`).

Verified on 2026-11-29 with pydantic-ai-slim 2.62.0 (its `WorkspaceBackendSuite`, all optional
fixtures given), pydantic-ai-harness 0.62.0 (`Coder`, `Shell`), opensandbox-server 1.1.1 and the
opensandbox SDK 1.1.1, against the project's testbed (Docker runtime):

- a create records the sandbox id as soon as the server answers, and five concurrent first
  operations share one sandbox;
- a sandbox killed while a command runs, or before an attach, raises `WorkspaceUnavailableError`;
- a command whose working directory was deleted raises `WorkspaceError`;
- an 8 MiB file moves in a few native requests, not as shell chunks;
- `Sandbox.connect(id, skip_health_check=True)` reaches the same sandbox for `get_sandbox()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import posixpath
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

from pydantic_ai.exceptions import UserError
from pydantic_ai.workspaces import (
    CommandResult,
    FileEntry,
    SupportsCommands,
    SupportsFilesystem,
    SupportsRealpath,
    WorkspaceBackend,
    WorkspaceError,
    WorkspaceOutputLimitError,
    WorkspaceRef,
    WorkspaceTimeoutError,
    WorkspaceUnavailableError,
)

from opensandbox_core import (
    AsyncSandboxSession,
    AuthenticationError,
    CommandTimeoutError,
    ConfigurationError,
    Connection,
    OutputLimitError,
    SandboxSpec,
    SandboxUnavailableError,
    destroy_sandbox,
)

if TYPE_CHECKING:
    from opensandbox import Sandbox
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.workspaces import WorkspaceCommand

__all__ = ["CREATE_METADATA_KEY", "PROVIDER", "OpenSandboxBackend"]

logger = logging.getLogger(__name__)

PROVIDER: Final = "opensandbox"
"""`WorkspaceRef.provider` of every sandbox this package creates or attaches to."""
CREATE_METADATA_KEY: Final = "pydantic-ai-create"
"""Metadata entry on every sandbox this package creates, to find ones left without a stored ref."""
_CREATE_METADATA: Final = {CREATE_METADATA_KEY: "true"}
DEFAULT_WORKING_DIR: Final = "/workspace"
DEFAULT_SANDBOX_TIMEOUT: Final = 1800
"""Default `sandbox_timeout`: 30 minutes of disuse, the idle lifetime every package here uses."""
_MAX_OUTPUT: Final = 16 * 1024 * 1024
"""Bytes of stdout and of stderr a command may print; past that `run` raises instead of cutting."""

_T = TypeVar("_T")

_sniffio: Any
try:
    import sniffio as _sniffio
except (
    ModuleNotFoundError
):  # pragma: no cover - Trio depends on sniffio, so without it no Trio runs
    _sniffio = None


def _running_on_asyncio() -> bool:
    if _sniffio is not None:
        try:
            return bool(_sniffio.current_async_library() == "asyncio")
        except _sniffio.AsyncLibraryNotFoundError:
            return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def require_asyncio() -> None:
    """Raise `UserError` unless the caller runs on asyncio (the OpenSandbox SDK needs it)."""
    if not _running_on_asyncio():
        raise UserError(
            "OpenSandbox needs the asyncio event loop: the OpenSandbox SDK and its HTTP clients run "
            "on asyncio only, so it cannot be used under Trio. Run the agent with asyncio."
        )


# -- the error table ------------------------------------------------------------------------------
# One place turns the core's errors into the workspace protocol's. Anything not listed propagates
# unchanged: the builtin path errors (FileNotFoundError, IsADirectoryError, ...), and the core's
# `ServerError`, which durable engines retry as transient.
#
# | core error                                  | raised as                                          |
# |---------------------------------------------|----------------------------------------------------|
# | SandboxUnavailableError (UnsupportedDaemon) | WorkspaceUnavailableError, same message            |
# | CommandTimeoutError                         | WorkspaceTimeoutError, with the partial output     |
# | OutputLimitError                            | WorkspaceOutputLimitError                          |
# | ConfigurationError, refused API key         | WorkspaceUnavailableError (no retry can fix it)    |
# | ConfigurationError while starting           | WorkspaceError (e.g. working_dir not creatable)    |
# | ConfigurationError in an operation          | ValueError (a bad argument, such as removing '/')  |
# | FileNotFoundError from `run`                | WorkspaceError: the working directory is gone      |
#
# Every execd generation whose output can be rebuilt exactly works (1.1, and line-framed v1.0.17 to
# v1.0.19, whose output the core reads from execd's raw output files); only v1.0.16 and older,
# which drop blank lines, raise UnsupportedDaemonError, whose message names the image to use.


def _unavailable(exc: BaseException, *, starting: bool) -> Exception:
    return WorkspaceUnavailableError(str(exc))


def _timeout(exc: BaseException, *, starting: bool) -> Exception:
    assert isinstance(exc, CommandTimeoutError)
    return WorkspaceTimeoutError(str(exc), stdout=exc.stdout, stderr=exc.stderr)


def _output_limit(exc: BaseException, *, starting: bool) -> Exception:
    assert isinstance(exc, OutputLimitError)
    return WorkspaceOutputLimitError(str(exc), limit=exc.limit)


def _configuration(exc: BaseException, *, starting: bool) -> Exception:
    if starting:
        return WorkspaceError(str(exc))
    return ValueError(str(exc))


_ERROR_TABLE: Final[tuple[tuple[type[BaseException], Callable[..., Exception]], ...]] = (
    (SandboxUnavailableError, _unavailable),
    (AuthenticationError, _unavailable),
    (CommandTimeoutError, _timeout),
    (OutputLimitError, _output_limit),
    (ConfigurationError, _configuration),
)


def translate(exc: BaseException, *, starting: bool = False) -> NoReturn:
    """Raise the workspace error the table gives for `exc`, or `exc` itself."""
    for core_type, convert in _ERROR_TABLE:
        if isinstance(exc, core_type):
            raise convert(exc, starting=starting) from exc
    raise exc


async def _run_to_completion(start: Callable[[], Awaitable[_T]]) -> _T:
    """Await `start()` in its own task and see it finish even if the caller is cancelled meanwhile.

    Used for a create, so that a sandbox the server made is always recorded; the caller's
    cancellation is re-raised once it has.
    """
    task: asyncio.Future[_T] = asyncio.ensure_future(start())
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError as error:
            cancelled = error
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved
        raise cancelled
    return task.result()


# -- argument checks (before any I/O) -------------------------------------------------------------


def _command_line(command: WorkspaceCommand, shell: bool) -> str | list[str]:
    if isinstance(command, str):
        if not shell:
            raise TypeError("a string command requires shell=True; pass an argv sequence otherwise")
        return command
    given: object = command
    if isinstance(given, bytes | bytearray):
        raise TypeError("a bytes command is not supported; pass a string or an argv sequence")
    if shell:
        raise TypeError(
            "an argv sequence cannot be combined with shell=True; pass a single command string"
        )
    argv = list(command)
    if not argv:
        raise TypeError("an argv sequence needs at least the program to run")
    for item in argv:
        if type(item) is not str:
            raise TypeError("argv items must be strings")
        if "\0" in item:
            raise ValueError("argv items must not contain NUL characters")
    return argv


def _check_timeout(timeout: float | None) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ValueError(f"timeout must be a positive finite number or None, got {timeout!r}.")
    if not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive finite number or None, got {timeout!r}.")


def check_env(env: Mapping[str, str] | None) -> None:
    """`TypeError` unless `env` maps strings to strings; `ValueError` for names a shell can't take."""
    if env is None:
        return
    if not isinstance(env, Mapping):
        raise TypeError("env must be a mapping of strings to strings")
    for key, value in env.items():
        if type(key) is not str or type(value) is not str:
            raise TypeError("env keys and values must be strings")
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ValueError(
                "env names must be non-empty without '=' or NUL, and values must not contain NUL"
            )


def check_working_dir(working_dir: str | None) -> None:
    if working_dir is None:
        return
    if not isinstance(working_dir, str) or not posixpath.isabs(working_dir) or "\0" in working_dir:
        raise ValueError(
            f"working_dir must be an absolute POSIX path or None, got {working_dir!r}."
        )


def check_sandbox_timeout(sandbox_timeout: int | None) -> None:
    if sandbox_timeout is None:
        return
    if type(sandbox_timeout) is not int or sandbox_timeout < 1:
        raise ValueError(
            f"sandbox_timeout must be an integer of at least 1 second or None, got {sandbox_timeout!r}."
        )


def check_ref(ref: WorkspaceRef) -> None:
    if not isinstance(ref, WorkspaceRef):
        raise TypeError(f"ref must be a WorkspaceRef, got {type(ref).__name__}.")
    if ref.provider != PROVIDER:
        raise ValueError(f"unsupported workspace provider {ref.provider!r}; expected 'opensandbox'")
    if not ref.id.strip():
        raise ValueError("OpenSandbox workspace ref id cannot be empty")


def core_connection(connection: ConnectionConfig | None) -> Connection:
    """The core's `Connection` for an SDK config used as given, or for the environment."""
    if connection is None:
        return Connection()
    from opensandbox.config import ConnectionConfig

    if not isinstance(connection, ConnectionConfig):
        raise TypeError(
            "connection must be an opensandbox.config.ConnectionConfig or None, "
            f"got {type(connection).__name__}."
        )
    return Connection.from_sdk_config(connection)


async def destroy_by_id(sandbox_id: str, connection: ConnectionConfig | None) -> None:
    """Delete a sandbox by id; quiet when it is already gone."""
    require_asyncio()
    try:
        await destroy_sandbox(sandbox_id, core_connection(connection))
    except Exception as exc:
        translate(exc, starting=True)


def _entry(info: Any, path: str) -> FileEntry:
    return FileEntry(
        name=posixpath.basename(path.rstrip("/")) or "/",
        path=path,
        is_dir=bool(info.is_dir),
        size=None if info.is_dir else int(info.size),
    )


class OpenSandboxBackend(WorkspaceBackend, SupportsCommands, SupportsFilesystem, SupportsRealpath):
    """Run commands and file operations in an OpenSandbox sandbox, created on first use.

    Built with `image`, the first operation creates a sandbox from it; built with `ref`, it attaches
    to that sandbox and raises `WorkspaceUnavailableError` if it is gone, never creating a
    replacement. Building does no I/O. The backend never deletes the sandbox: call
    `OpenSandbox().destroy(ref)`; left unused, it expires after `sandbox_timeout` (30 minutes by
    default).

    File operations use execd's native file API (a file moves in one or two requests). The
    OpenSandbox SDK runs on asyncio only, so under Trio every operation raises `UserError`.

    Args:
        image: The image for a new sandbox, such as `'python:3.13-slim'`. Pass it or `ref`.
        ref: `WorkspaceRef(provider='opensandbox', id=<sandbox id>)` to attach to instead.
        connection: The SDK's `opensandbox.config.ConnectionConfig`, used as given (a transport in
            it stays yours to close). `None` reads `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY`.
        working_dir: Absolute directory commands start in and relative paths resolve against,
            created on first use if missing; `None` uses the image's own.
        env: Variables every command gets; a command's `env` goes on top. Kept out of `repr()`.
        resource: Limits for a new sandbox, such as `{'cpu': '500m', 'memory': '1Gi'}`; `None`
            keeps one CPU and 2 GiB.
        allow_internet_access: `False` asks the server for deny-all egress on a new sandbox.
        secure_access: Ask the server to turn on Secure Access for a new sandbox (Kubernetes with
            the ingress gateway only; Docker rejects it).
        sandbox_timeout: Seconds the sandbox may go unused before the server deletes it (default
            1800, 30 minutes); every operation renews it and a running command keeps renewing it,
            on an attached sandbox too. `None` keeps it until destroyed.
    """

    def __init__(
        self,
        *,
        image: str | None = None,
        ref: WorkspaceRef | None = None,
        connection: ConnectionConfig | None = None,
        working_dir: str | None = DEFAULT_WORKING_DIR,
        env: Mapping[str, str] | None = None,
        resource: Mapping[str, str] | None = None,
        allow_internet_access: bool = True,
        secure_access: bool = False,
        sandbox_timeout: int | None = DEFAULT_SANDBOX_TIMEOUT,
    ) -> None:
        if (image is None) == (ref is None):
            raise ValueError(
                "Pass image= to create a sandbox or ref= to attach to one, "
                + ("not both." if image is not None else "not neither.")
            )
        if ref is not None:
            check_ref(ref)
        if image is not None and (not isinstance(image, str) or not image.strip()):
            raise ValueError(
                "image must be a non-empty image reference such as 'python:3.13-slim'."
            )
        check_working_dir(working_dir)
        check_env(env)
        check_sandbox_timeout(sandbox_timeout)
        if resource is not None and (
            not isinstance(resource, Mapping)
            or any(type(k) is not str or type(v) is not str for k, v in resource.items())
        ):
            raise TypeError("resource must map strings to strings, such as {'cpu': '500m'}")
        self._image = image
        self._given_ref = ref
        self._created_ref: WorkspaceRef | None = None
        self._connection_config = connection
        try:
            spec = (
                SandboxSpec(
                    image=image,
                    resource=dict(resource) if resource is not None else None,
                    allow_internet_access=bool(allow_internet_access),
                    secure_access=bool(secure_access),
                    lifetime=sandbox_timeout,
                    metadata=_CREATE_METADATA,
                )
                if image is not None
                else None
            )
            self._session = AsyncSandboxSession(
                spec,
                sandbox_id=ref.id if ref is not None else None,
                connection=core_connection(connection),
                working_dir=working_dir,
                env=env,
                default_timeout=None,
                max_output=_MAX_OUTPUT,
            )
            if ref is not None and sandbox_timeout is not None:
                self._session.set_lifetime(sandbox_timeout)
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None
        self._logged_create = False
        self._operations = 0
        # Set while nothing will call `aclose()`: the clients then close when the last operation
        # in flight ends (the capability's backends until a run claims them).
        self._close_after_operation = False
        self._sdk_configs: dict[asyncio.AbstractEventLoop, ConnectionConfig] = {}

    def __repr__(self) -> str:
        target = f"ref={self.ref!r}" if self.ref is not None else f"image={self._image!r}"
        return f"{type(self).__name__}({target})"

    @property
    def ref(self) -> WorkspaceRef | None:
        """`WorkspaceRef(provider='opensandbox', id=<sandbox id>)`, or `None` before a create."""
        if self._given_ref is not None:
            return self._given_ref
        if self._created_ref is None and self._session.id is not None:
            self._created_ref = WorkspaceRef(provider=PROVIDER, id=self._session.id)
        return self._created_ref

    @property
    def session(self) -> AsyncSandboxSession:
        """The `opensandbox_core.AsyncSandboxSession` doing the work (shared with other frameworks)."""
        return self._session

    # -- lifecycle ----------------------------------------------------------------------------
    async def _start(self) -> None:
        """Create or attach (once), or only renew; a create finishes even if the caller is cancelled."""
        try:
            if self._session.id is None:
                await _run_to_completion(self._session.start)
            else:
                await self._session.start()
        except Exception as exc:
            translate(exc, starting=True)
        finally:
            self._log_create()

    def _log_create(self) -> None:
        if not self._logged_create and self._session.owned and self._session.id is not None:
            self._logged_create = True
            logger.info("Created OpenSandbox sandbox %s", self._session.id)

    @contextlib.asynccontextmanager
    async def _operation(self) -> AsyncIterator[None]:
        require_asyncio()
        self._operations += 1
        try:
            await self._start()
            try:
                yield
            except Exception as exc:
                translate(exc)
        finally:
            self._operations -= 1
            if self._operations == 0 and self._close_after_operation:
                await self._close_now()

    async def get_sandbox(self) -> Sandbox:
        """The `opensandbox.Sandbox`, for features the workspace API does not cover.

        On a backend with no sandbox yet this creates one, or attaches to the one `ref` names. It
        shares the backend's transport, so it stops working once the backend closes.
        """
        from opensandbox import Sandbox

        async with self._operation():
            sandbox_id = self._session.id
            assert sandbox_id is not None
            return await Sandbox.connect(
                sandbox_id, connection_config=self._shared_sdk_config(), skip_health_check=True
            )

    def _shared_sdk_config(self) -> ConnectionConfig:
        """This loop's SDK config: its transport is the backend's, so a `Sandbox` never closes it."""
        loop = asyncio.get_running_loop()
        owned = self._sdk_configs.get(loop)
        if owned is None:
            owned = self._session.connection.build_sdk_config().with_transport_if_missing()
            self._sdk_configs[loop] = owned
        shared = owned.model_copy()
        shared._owns_transport = False
        return shared

    async def aclose(self) -> None:
        """Close the HTTP clients this backend opened on this event loop; the sandbox keeps running.

        A transport passed in `connection` stays open. An operation in flight keeps the clients
        open until the last one ends. A later operation opens new ones and attaches again by ref.
        """
        if not _running_on_asyncio():
            return
        if self._operations:
            self._close_after_operation = True
            return
        await self._close_now()

    async def _close_now(self) -> None:
        async def close() -> None:
            loop = asyncio.get_running_loop()
            config = self._sdk_configs.pop(loop, None)
            for other in [lp for lp in self._sdk_configs if lp.is_closed()]:
                self._sdk_configs.pop(other, None)
            if config is not None:
                await config.close_transport_if_owned()
            await self._session.aclose()

        with contextlib.suppress(Exception):
            await _run_to_completion(close)

    # -- WorkspaceBackend ---------------------------------------------------------------------
    async def working_dir(self) -> str:
        """The canonical directory commands start in (absolute, symlinks resolved)."""
        async with self._operation():
            return await self._session.working_dir()

    # -- SupportsCommands ---------------------------------------------------------------------
    async def run(
        self,
        command: WorkspaceCommand,
        *,
        shell: bool = False,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        """Run a command to completion; a non-zero exit is a result. See `SupportsCommands.run`."""
        require_asyncio()
        line = _command_line(command, shell)
        _check_timeout(timeout)
        check_env(env)
        async with self._operation():
            try:
                result = await self._session.run(line, env=env, timeout=timeout)
            except FileNotFoundError as exc:
                raise WorkspaceError(
                    f"The working directory {exc.filename or ''} no longer exists in sandbox "
                    f"{self._session.id}, so the command could not start. Create it again, or "
                    "start a new sandbox."
                ) from exc
            if result.truncated:
                raise WorkspaceOutputLimitError(
                    f"The command printed more than {_MAX_OUTPUT // (1024 * 1024)} MiB on stdout or "
                    "stderr. Redirect its output to a file and read part of it instead.",
                    limit=_MAX_OUTPUT,
                    stdout=result.stdout[:65536],
                    stderr=result.stderr[:65536],
                )
            return CommandResult(
                exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr
            )

    # -- SupportsFilesystem -------------------------------------------------------------------
    async def read_bytes(self, path: str) -> bytes:
        async with self._operation():
            return await self._session.read_bytes(path)

    async def write_bytes(self, path: str, data: bytes) -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        async with self._operation():
            await self._session.write_bytes(path, bytes(data))

    async def stat(self, path: str) -> FileEntry:
        async with self._operation():
            info = await self._session.stat(path)
            return _entry(info, path)

    async def list_dir(self, path: str) -> Sequence[FileEntry]:
        async with self._operation():
            entries = await self._session.list_dir(path)
            return [_entry(e, posixpath.join(path, e.name)) for e in entries]

    async def make_dir(self, path: str) -> None:
        async with self._operation():
            await self._session.make_dir(path, parents=True, exist_ok=True)

    async def remove(self, path: str) -> None:
        async with self._operation():
            await self._session.remove(path, recursive=True)

    async def exists(self, path: str) -> bool:
        async with self._operation():
            return await self._session.exists(path)

    # -- SupportsRealpath ---------------------------------------------------------------------
    async def realpath(self, path: str) -> str:
        async with self._operation():
            return await self._session.realpath(path)
