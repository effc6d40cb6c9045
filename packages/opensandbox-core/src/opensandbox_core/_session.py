"""`AsyncSandboxSession`: one sandbox, created or attached on first use.

Verified against opensandbox-server 1.1.1 and the opensandbox SDK 1.1.1 (November 2026), with
recorded exchanges of the real execd v1.0.19 and v1.0.18 (tests/data/execd-recordings) and the
project's testbed daemon in its generation profiles (1.0.19, 1.0.18, 1.1, 1.0.16).

Rules this module keeps:
- Construction does no I/O. The first operation creates the sandbox (built from a `SandboxSpec`)
  or attaches (built with a sandbox id); concurrent first operations, from one or several event
  loops, share one start.
- The id is recorded the moment the server answers the create, and never changes. If the answer
  is lost (timeout, dropped connection, 502/503/504), the sandbox is found again by the ownership
  tag that this session put in its metadata, instead of creating a second one.
- HTTP clients are per event loop (httpx's async clients are bound to the loop that opened them),
  so one session serves the blocking façade's loop and the caller's loop alike.
- A session destroys its sandbox only when asked (`destroy()`), or on leaving `async with` when
  it created the sandbox itself. Closing (`aclose()`) only releases local connections.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import errno
import inspect
import io
import logging
import os
import posixpath
import shlex
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, NoReturn, Unpack

import httpx

from . import _background, _errors, _files, _validate
from ._background import start_background
from ._commands import COMMAND_ID, WARNED_REBUILT, Commands, OutputCallback
from ._config import DEFAULT_LIFETIME, Connection, SandboxSpec, validate_env
from ._create import create_arguments
from ._errors import (
    ConfigurationError,
    OutputLimitError,
    SandboxUnavailableError,
    ServerError,
    UnsupportedDaemonError,
    new_path_error,
    path_error,
)
from ._execd import EXECD_PORT, ExecdClient, ExecdEndpoint, ExecdError
from ._framing import (
    PROBE_COMMAND,
    PROBE_OUTPUT,
    UPGRADE_EXECD,
    Framing,
    classify_probe,
    rebuild,
)
from ._types import CommandResult, FileInfo, FileKind, TransferResult
from ._upload import DirectoryUpload, UploadOptions, upload_directory
from ._wire import Context, command_body, read_events

if TYPE_CHECKING:
    from opensandbox.config import ConnectionConfig
    from opensandbox.services.sandbox import Sandboxes

    from ._background import BackgroundProcess

__all__ = [
    "DEFAULT",
    "LIBRARY_KEY",
    "OWNER_KEY",
    "AsyncSandboxSession",
    "OutputCallback",
]

logger = logging.getLogger(__name__)

OWNER_KEY: Final = "opensandbox-agents.owner"
"""Metadata key whose value is unique to the session object that created the sandbox."""
LIBRARY_KEY: Final = "opensandbox-agents.library"
"""Metadata key naming this library on every sandbox it creates."""
LIBRARY_VALUE: Final = "opensandbox-core"

DEFAULT_WORKING_DIR: Final = "/workspace"
DEFAULT_TIMEOUT: Final = 1800.0
DEFAULT_MAX_OUTPUT: Final = 16 * 1024 * 1024
_READY_POLL = 0.025
_RECOVER_POLL = 0.5
_STATUS_POLL = 0.5  # how often a new sandbox's state is read while waiting for execd
_FILE_MODE_NEW = 0o644
_DIR_MODE = 0o755
_TRANSFER_CONCURRENCY = 8
_GONE_STATES: Final = frozenset(
    {"terminated", "failed", "stopping", "deleted", "deleting", "error"}
)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default()
"""Sentinel: use the session's default (e.g. its default command timeout)."""


# Verdicts that hold for a sandbox whatever session asks: keyed by (domain, sandbox id).
_framing_cache: dict[tuple[str, str], Framing] = {}
_workdir_cache: dict[tuple[str, str, str | None], str] = {}
_file_api_cache: dict[tuple[str, str], _files.FileApi] = {}
_output_dir_cache: dict[tuple[str, str], str | None] = {}


def _octal_digits(mode: int) -> int:
    """execd reads `mode` as an integer written in octal digits: 0o644 must be sent as 644."""
    return int(format(mode & 0o7777, "o"))


def _mode_from_digits(value: object) -> int:
    try:
        return int(str(value), 8)
    except ValueError:
        return 0


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text)
    return None


def _kind(value: object) -> FileKind:
    if value in ("file", "directory", "symlink", "other"):
        return value
    return "other"


@dataclass
class _LoopClients:
    """The HTTP clients of one event loop."""

    sdk_config: ConnectionConfig
    sandboxes: Sandboxes
    execd: ExecdClient | None = None


@dataclass
class _Ready:
    """Everything known once the sandbox is reachable; shared by all loops."""

    endpoint: ExecdEndpoint
    framing: Framing
    working_dir: str


@dataclass
class _Renewal:
    last: float = field(default_factory=time.monotonic)


class _Link:
    """The lifecycle's side of the facets' interface (`_commands.Lifecycle`): what the commands
    facet and background handles may ask of the session, and nothing else.

    It holds the session weakly: background handles find it through a weak registry, which a
    strong reference back would keep alive forever.
    """

    def __init__(self, session: AsyncSandboxSession) -> None:
        self._ref = weakref.ref(session)

    @property
    def _session(self) -> AsyncSandboxSession:
        session = self._ref()
        if session is None:
            raise SandboxUnavailableError("The session of this sandbox no longer exists.")
        return session

    @property
    def sandbox_id(self) -> str | None:
        return self._session._sandbox_id

    @property
    def lifetime(self) -> float | None:
        return self._session._lifetime

    @property
    def stall_timeout(self) -> float:
        return max(1.0, float(self._session._connection.request_timeout)) + 3.5

    async def context(self) -> Context:
        session = self._session
        clients = await session._ensure()
        ready = session._ready
        assert ready is not None and clients.execd is not None
        return Context(clients.execd, ready.framing, ready.working_dir, session._output_dir)

    async def fail(
        self,
        exc: BaseException,
        action: str,
        *,
        execd: ExecdClient | None = None,
        path: str | None = None,
    ) -> NoReturn:
        session = self._session
        await session._fail(session._clients(), exc, action, execd=execd, path=path)

    def resolve(self, path: str) -> str:
        return self._session._resolve(path)

    async def renew_once(self) -> None:
        session = self._session
        if session._sandbox_id is None or session._destroyed:
            return
        await session._maybe_renew(session._clients())


class AsyncSandboxSession:
    """A session on one OpenSandbox sandbox: commands and files, created or attached lazily.

    Build it with a `SandboxSpec` to create a sandbox on first use, or with `sandbox_id=` to
    attach to an existing one (`AsyncSandboxSession.attach(id)`). Pass the id (`session.id`) to
    another process or framework to share the sandbox.

    ```python
    async with AsyncSandboxSession(SandboxSpec(image="python:3.13-slim")) as sb:
        result = await sb.run("python3 -c 'print(6 * 7)'")
        await sb.write_bytes("data.bin", b"\\x00\\x01")
    # the sandbox is destroyed here, because this session created it
    ```

    - `working_dir`: absolute directory that commands start in and relative paths resolve
      against; created on first use. `None` uses the image's own directory.
    - `env`: variables every command gets (a command's `env` goes on top). Kept out of `repr()`.
    - `default_timeout`: seconds a command may run when `run()` gets no timeout (None: no limit).
    - `max_output`: bytes of stdout and of stderr kept per command; the rest is dropped and the
      result says `truncated=True`.
    - `recover_timeout`: how long to look for a sandbox whose create response was lost.
    """

    _output_dir: str | None = None  # where execd keeps raw command output (see `_probe`)

    def __init__(
        self,
        spec: SandboxSpec | None = None,
        *,
        sandbox_id: str | None = None,
        connection: Connection | None = None,
        working_dir: str | None = DEFAULT_WORKING_DIR,
        env: Mapping[str, str] | None = None,
        default_timeout: float | None = DEFAULT_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
        recover_timeout: float = 30.0,
    ) -> None:
        if spec is not None and not isinstance(spec, SandboxSpec):
            raise ConfigurationError("spec must be a SandboxSpec.")
        if (spec is None) == (sandbox_id is None):
            raise ConfigurationError(
                "Pass either a SandboxSpec (to create a sandbox) or sandbox_id (to attach), not "
                + ("both." if spec is not None else "neither.")
            )
        if sandbox_id is not None and (not isinstance(sandbox_id, str) or not sandbox_id.strip()):
            raise ConfigurationError("sandbox_id must be a non-empty string.")
        if working_dir is not None and (
            not isinstance(working_dir, str)
            or not working_dir.startswith("/")
            or "\0" in working_dir
        ):
            raise ConfigurationError(
                f"working_dir must be an absolute path such as '/workspace', got {working_dir!r}."
            )
        if connection is not None and not isinstance(connection, Connection):
            raise ConfigurationError("connection must be an opensandbox_core.Connection.")
        self._timeout_default = _validate.timeout(default_timeout, allow_none=True)
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1024:
            raise ConfigurationError("max_output must be an int of at least 1024 bytes.")
        self._spec = spec
        self._connection = connection or Connection()
        self._working_dir_config = posixpath.normpath(working_dir) if working_dir else None
        self._env = validate_env(env)
        self._max_output = max_output
        self._recover_timeout = float(recover_timeout)
        self._request_timeout = float(self._connection.request_timeout)
        # Made on first use, not here: construction stays free of I/O and of randomness, which
        # durable engines (Temporal's workflow sandbox) refuse in workflow code.
        self._owner_token: str | None = None
        self._sandbox_id = sandbox_id.strip() if sandbox_id else None
        self._owned = False
        self._create_sent = False
        self._destroyed = False
        self._ready: _Ready | None = None
        self._lock = threading.Lock()
        self._start_future: concurrent.futures.Future[None] | None = None
        self._loops: dict[asyncio.AbstractEventLoop, _LoopClients] = {}
        self._renewal = _Renewal(last=0.0)
        self._lifetime = spec.lifetime if spec is not None else None
        self._paused = False
        self._link = _Link(self)
        self._commands = Commands(
            self._link,
            env=self._env,
            default_timeout=self._timeout_default,
            max_output=self._max_output,
            runner=self._run_argv,
        )
        _background.register(self, self._link)
        self._connection.check_security()

    # -- identity ---------------------------------------------------------------------------
    @classmethod
    def attach(cls, sandbox_id: str, **kwargs: Any) -> AsyncSandboxSession:
        """A session on an existing sandbox. It never destroys the sandbox on its own."""
        return cls(sandbox_id=sandbox_id, **kwargs)

    @property
    def id(self) -> str | None:
        """The sandbox id, or None before a created sandbox exists."""
        return self._sandbox_id

    @property
    def owned(self) -> bool:
        """True when this session created the sandbox (and so may destroy it on exit)."""
        return self._owned

    @property
    def owner_token(self) -> str:
        """The value of the ownership tag (`OWNER_KEY`) this session puts on a sandbox it creates."""
        if self._owner_token is None:
            self._owner_token = uuid.uuid4().hex
        return self._owner_token

    @property
    def spec(self) -> SandboxSpec | None:
        return self._spec

    @property
    def connection(self) -> Connection:
        return self._connection

    @property
    def env(self) -> Mapping[str, str]:
        return dict(self._env)

    @property
    def framing(self) -> Framing | None:
        """The execd output framing, once known."""
        return self._ready.framing if self._ready else None

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else ("ready" if self._ready else "not started")
        return (
            f"{type(self).__name__}(id={self._sandbox_id!r}, owned={self._owned}, "
            f"state={state!r}, connection={self._connection!r})"
        )

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> str:
        """Create or attach now (otherwise the first operation does it); return the sandbox id."""
        await self._ensure()
        assert self._sandbox_id is not None
        return self._sandbox_id

    async def working_dir(self) -> str:
        """The canonical working directory (absolute, symlinks resolved)."""
        await self._ensure()
        assert self._ready is not None
        return self._ready.working_dir

    async def start_background(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> BackgroundProcess:
        """Start a command that keeps running (a dev server, a watcher); returns at once, with
        a handle that execd already knows (it registers a process only after starting it).

        `timeout` (seconds, default none) stops it after that long. Use the handle to read its
        status and output from a cursor and to stop it (its whole process group). When the
        command's main process exits, execd kills its whole process group: `cmd &` and
        `nohup cmd &` children die with it. Make the server the main process, or start what
        must outlive it with `BackgroundProcess.keep_running(...)`.
        """
        body = await self._commands.background_body(command, cwd=cwd, env=env, timeout=timeout)
        return await start_background(self._link, self, body)

    def background(self, execution_id: str) -> BackgroundProcess:
        """A handle on a background process started earlier (by this or another session)."""
        from ._background import BackgroundProcess

        return BackgroundProcess(self, execution_id)

    async def get_endpoint(self, port: int) -> tuple[str, dict[str, str]]:
        """The URL of `port` inside the sandbox, and the headers a client must send to it.

        Direct or through the server proxy, as the connection says. The server routes any port
        (on Docker through execd's proxy); when it cannot expose one, this raises `ServerError`.
        """
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ConfigurationError(f"port must be an int between 1 and 65535, got {port!r}.")
        clients = await self._ensure()
        assert self._sandbox_id is not None
        try:
            endpoint = await clients.sandboxes.get_sandbox_endpoint(
                self._sandbox_id, port, clients.sdk_config.use_server_proxy
            )
        except Exception as exc:
            _errors.translate(
                exc, action=f"get the endpoint of port {port}", sandbox_id=self._sandbox_id
            )
        headers = endpoint.build_request_headers(clients.sdk_config)
        return f"{clients.sdk_config.protocol}://{endpoint.endpoint}", headers

    async def destroy(self) -> None:
        """Delete the sandbox, files included. Quiet when it is already gone; idempotent."""
        sandbox_id = self._sandbox_id
        if sandbox_id is None or self._destroyed:
            self._destroyed = self._destroyed or sandbox_id is not None
            await self.aclose()
            return
        clients = self._clients()
        try:
            await clients.sandboxes.kill_sandbox(sandbox_id)
            logger.info("Destroyed OpenSandbox sandbox %s", sandbox_id)
        except Exception as exc:
            if not _errors.is_not_found(exc):
                await self.aclose()
                _errors.translate(exc, action="destroy the sandbox", sandbox_id=sandbox_id)
            logger.debug("sandbox %s was already gone", sandbox_id)
        finally:
            self._forget(sandbox_id)
        self._destroyed = True
        await self.aclose()

    async def pause(self, *, timeout: float = 60.0) -> None:
        """Freeze the sandbox (on Docker: `docker pause`), keeping its processes, memory and
        files; returns once the server reports it `Paused`. Its lifetime keeps counting.

        While paused, commands and file operations raise `SandboxUnavailableError` saying to
        call `resume()`. Pausing changes nothing about who owns the sandbox: a session that
        created it still destroys it on leaving `async with`.
        """
        await self._pause_or_resume(pause=True, timeout=timeout)

    async def resume(self, *, timeout: float = 60.0) -> None:
        """Thaw a paused sandbox; returns once the server reports it `Running` and its daemon
        answers again, so the next command and file operation work."""
        await self._pause_or_resume(pause=False, timeout=timeout)

    async def upload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        """`opensandbox_core.upload_directory(self, ...)`: a tree without its secrets."""
        return await upload_directory(self, local_dir, remote_dir, **options)

    async def _pause_or_resume(self, *, pause: bool, timeout: float) -> None:
        limit = _validate.timeout(timeout, allow_none=False)
        assert limit is not None
        verb = "pause" if pause else "resume"
        clients = await self._ensure(allow_paused=True)
        sandbox_id = self._sandbox_id
        assert sandbox_id is not None
        call = clients.sandboxes.pause_sandbox if pause else clients.sandboxes.resume_sandbox
        try:
            await call(sandbox_id)
        except Exception as exc:
            if not _is_conflict(exc) or await self._state(clients) != (
                "paused" if pause else "running"
            ):
                _errors.translate(exc, action=f"{verb} the sandbox", sandbox_id=sandbox_id)
        want = "paused" if pause else "running"
        deadline = time.monotonic() + limit
        while (state := await self._state(clients)) != want:
            if state in _GONE_STATES or time.monotonic() >= deadline:
                raise SandboxUnavailableError(
                    f"Sandbox {sandbox_id} did not become {want} within {limit:g} s after "
                    f"the {verb} request (its state is {state or 'unknown'!r}). Check the "
                    "server log.",
                    sandbox_id=sandbox_id,
                )
            await asyncio.sleep(_READY_POLL * 4)
        self._paused = pause
        if not pause and clients.execd is not None:
            while not await clients.execd.ping(timeout=2.0):
                if time.monotonic() >= deadline:
                    raise SandboxUnavailableError(
                        f"Sandbox {sandbox_id} is running again but its execd daemon did not "
                        f"answer within {limit:g} s of the resume request.",
                        sandbox_id=sandbox_id,
                    )
                await asyncio.sleep(_READY_POLL)
        logger.info("%s OpenSandbox sandbox %s", "Paused" if pause else "Resumed", sandbox_id)

    async def _state(self, clients: _LoopClients) -> str:
        """The sandbox's state as the server reports it, lower case ('' when unknown)."""
        assert self._sandbox_id is not None
        try:
            info = await clients.sandboxes.get_sandbox_info(self._sandbox_id)
        except Exception as exc:
            _errors.translate(exc, action="read the sandbox's state", sandbox_id=self._sandbox_id)
        return str(getattr(info.status, "state", "") or "").lower()

    def _paused_error(self) -> SandboxUnavailableError:
        return SandboxUnavailableError(
            f"Sandbox {self._sandbox_id} is paused: commands and file operations wait until it "
            "is resumed. Call resume() on the session first.",
            sandbox_id=self._sandbox_id,
        )

    async def aclose(self) -> None:
        """Close this event loop's HTTP clients. The sandbox keeps running."""
        loop = asyncio.get_running_loop()
        clients = self._loops.pop(loop, None)
        # Clients of loops that are closed can no longer be awaited; drop them.
        for other in [lp for lp in self._loops if lp.is_closed()]:
            self._loops.pop(other, None)
        if clients is None:
            return
        if clients.execd is not None:
            with contextlib.suppress(Exception):
                await clients.execd.aclose()
        with contextlib.suppress(Exception):
            close = getattr(clients.sandboxes, "close", None) or getattr(
                clients.sandboxes, "aclose", None
            )
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result
        with contextlib.suppress(Exception):
            await clients.sdk_config.close_transport_if_owned()

    async def __aenter__(self) -> AsyncSandboxSession:
        try:
            await self._ensure()
        except BaseException:
            # A sandbox created before the failure would otherwise be left behind.
            if self._owned:
                with contextlib.suppress(Exception):
                    await self.destroy()
            else:
                await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._owned:
            await self.destroy()
        else:
            await self.aclose()

    # -- internals: clients and start -------------------------------------------------------
    def _clients(self) -> _LoopClients:
        loop = asyncio.get_running_loop()
        clients = self._loops.get(loop)
        if clients is None:
            from opensandbox.adapters.factory import AdapterFactory

            config = self._connection.build_sdk_config().with_transport_if_missing()
            clients = _LoopClients(
                sdk_config=config, sandboxes=AdapterFactory(config).create_sandbox_service()
            )
            self._loops[loop] = clients
        if clients.execd is None and self._ready is not None:
            clients.execd = self._new_execd(clients, self._ready.endpoint)
        return clients

    def _new_execd(self, clients: _LoopClients, endpoint: ExecdEndpoint) -> ExecdClient:
        config = clients.sdk_config
        # A transport the caller passed in is used (and left open) without the SDK's retry
        # wrapper, if it is one (the SDK's public `unwrap_retry_transport`); otherwise the
        # client opens its own. Either way a command POST is never sent twice.
        from opensandbox.transport import unwrap_retry_transport

        transport = None if config.owns_transport else config.transport
        return ExecdClient(
            endpoint,
            transport=None if transport is None else unwrap_retry_transport(transport),
            request_timeout=config.request_timeout.total_seconds(),
        )

    async def _ensure(self, *, allow_paused: bool = False) -> _LoopClients:
        if self._destroyed:
            raise SandboxUnavailableError(
                f"Sandbox {self._sandbox_id} was destroyed by this session.",
                sandbox_id=self._sandbox_id,
            )
        if self._paused and not allow_paused:
            raise self._paused_error()
        clients = self._clients()
        if self._ready is not None:
            await self._maybe_renew(clients)
            return clients
        while True:
            with self._lock:
                future = self._start_future
                creator = future is None
                if creator:
                    future = self._start_future = concurrent.futures.Future()
            assert future is not None
            if creator:
                break
            try:
                await asyncio.shield(asyncio.wrap_future(future))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and (task is None or not task.cancelling()):
                    continue  # the starter was cancelled; try again ourselves
                raise
            return self._clients()
        try:
            await self._start(clients)
        except BaseException as exc:
            with self._lock:
                self._start_future = None
            if isinstance(exc, Exception):
                future.set_exception(exc)
            else:
                future.cancel()
            raise
        future.set_result(None)
        return self._clients()

    async def _start(self, clients: _LoopClients) -> None:
        created = False
        if self._sandbox_id is None:
            await self._create(clients)
            created = True
        sandbox_id = self._sandbox_id
        assert sandbox_id is not None
        spec_timeout = self._spec.ready_timeout if self._spec else 60.0
        endpoint = await self._resolve_endpoint(
            clients, sandbox_id, wait=created, budget=spec_timeout
        )
        execd = self._new_execd(clients, endpoint)
        try:
            if created:
                await self._wait_ready(clients, execd, sandbox_id, spec_timeout)
            framing, workdir = await self._probe(clients, execd, sandbox_id)
        except BaseException:
            await execd.aclose()
            raise
        clients.execd = execd
        self._ready = _Ready(endpoint=endpoint, framing=framing, working_dir=workdir)
        self._renewal.last = time.monotonic()

    async def _create(self, clients: _LoopClients) -> None:
        spec = self._spec
        assert spec is not None
        metadata = {**spec.metadata, OWNER_KEY: self.owner_token, LIBRARY_KEY: LIBRARY_VALUE}
        if not self._create_sent:
            self._create_sent = True
            try:
                # Bounded here: a transport the caller passed in may have no timeout of its own.
                async with asyncio.timeout(self._request_timeout):
                    response = await clients.sandboxes.create_sandbox(
                        **create_arguments(spec, metadata)
                    )
            except asyncio.CancelledError:
                raise  # _create_sent stays True: the next start looks for the sandbox first
            except Exception as exc:
                if not _errors.is_lost_response(exc):
                    self._create_sent = False
                    _errors.translate(exc, action=f"create a sandbox from image {spec.image!r}")
                logger.warning(
                    "The create response was lost (%s); looking for the sandbox by its tag",
                    type(exc).__name__,
                )
                self._adopt(await self._recover(clients, exc))
                return
            self._adopt(response.id)
            return
        # A previous create attempt may have reached the server: find it before creating again.
        found = await self._find_by_tag(clients)
        if found is not None:
            self._adopt(found)
            return
        self._create_sent = False
        await self._create(clients)

    def _adopt(self, sandbox_id: str) -> None:
        self._sandbox_id = sandbox_id
        self._owned = True
        logger.info("Created OpenSandbox sandbox %s", sandbox_id)

    async def _find_by_tag(self, clients: _LoopClients) -> str | None:
        from opensandbox.models.sandboxes import SandboxFilter

        result = await clients.sandboxes.list_sandboxes(
            SandboxFilter(metadata={OWNER_KEY: self.owner_token}, page_size=20)
        )
        items = [
            s for s in result.sandbox_infos if (s.metadata or {}).get(OWNER_KEY) == self.owner_token
        ]
        if not items:
            return None
        items.sort(key=lambda s: s.created_at)
        for extra in items[1:]:  # never expected; keep one, remove duplicates we own
            with contextlib.suppress(Exception):
                await clients.sandboxes.kill_sandbox(extra.id)
        return items[0].id

    async def _recover(self, clients: _LoopClients, cause: Exception) -> str:
        """Find the sandbox of a create whose answer was lost, for `recover_timeout` seconds.

        Each listing is bounded by what is left of that time: the SDK's transport retries a
        GET that times out, which would otherwise stretch a server that never answers to
        several request timeouts per listing.
        """
        deadline = time.monotonic() + self._recover_timeout
        last_error: Exception | None = None
        while (left := deadline - time.monotonic()) > 0:
            try:
                async with asyncio.timeout(min(left, self._request_timeout)):
                    found = await self._find_by_tag(clients)
            except Exception as exc:
                last_error = exc
                found = None
            if found is not None:
                logger.info("Recovered sandbox %s after a lost create response", found)
                return found
            await asyncio.sleep(min(_RECOVER_POLL, max(0.0, deadline - time.monotonic())))
        self._create_sent = False
        detail = f" (last listing error: {type(last_error).__name__})" if last_error else ""
        if isinstance(cause, TimeoutError):
            lost = f"the server did not answer the create within {self._request_timeout:g} s"
        else:
            lost = f"the server's answer to the create was lost ({type(cause).__name__})"
        raise ServerError(
            f"Could not create a sandbox at {self._connection.display_address()}: {lost}, and "
            f"no sandbox with this session's tag appeared in the {self._recover_timeout:g} s "
            f"after{detail}. It is safe to retry.",
            retryable=True,
        ) from cause

    async def _resolve_endpoint(
        self, clients: _LoopClients, sandbox_id: str, *, wait: bool, budget: float
    ) -> ExecdEndpoint:
        deadline = time.monotonic() + budget
        while True:
            try:
                endpoint = await clients.sandboxes.get_sandbox_endpoint(
                    sandbox_id, EXECD_PORT, clients.sdk_config.use_server_proxy
                )
                break
            except Exception as exc:
                if _errors.is_not_found(exc) and not wait:
                    raise SandboxUnavailableError(
                        f"Sandbox {sandbox_id} was not found: it was deleted or has expired. "
                        "Attaching never creates a replacement.",
                        sandbox_id=sandbox_id,
                    ) from exc
                if not wait or time.monotonic() >= deadline:
                    _errors.translate(exc, action="reach the sandbox", sandbox_id=sandbox_id)
                await asyncio.sleep(_READY_POLL * 4)
        headers = endpoint.build_request_headers(clients.sdk_config)
        return ExecdEndpoint(
            base_url=f"{clients.sdk_config.protocol}://{endpoint.endpoint}".rstrip("/"),
            headers=headers,
        )

    async def _wait_ready(
        self, clients: _LoopClients, execd: ExecdClient, sandbox_id: str, budget: float
    ) -> None:
        """Wait until execd answers; fail at once, with the server's reason, when the server
        reports the sandbox failed (a missing entrypoint, an image that cannot start)."""
        deadline = time.monotonic() + budget
        next_look = time.monotonic() + _STATUS_POLL
        while not await execd.ping(timeout=min(2.0, budget)):
            if time.monotonic() >= next_look:
                next_look = time.monotonic() + _STATUS_POLL
                await self._raise_if_failed(clients, sandbox_id)
            if time.monotonic() >= deadline:
                raise SandboxUnavailableError(
                    f"Sandbox {sandbox_id} did not become ready within {budget:g} s: its execd "
                    "daemon never answered. Check the image's entrypoint and the server log; on "
                    "Docker Desktop or Kubernetes pass use_server_proxy=True.",
                    sandbox_id=sandbox_id,
                )
            await asyncio.sleep(_READY_POLL)

    async def _raise_if_failed(self, clients: _LoopClients, sandbox_id: str) -> None:
        """Raise SandboxUnavailableError when the server says the new sandbox failed or ended."""
        try:
            async with asyncio.timeout(
                max(1.0, clients.sdk_config.request_timeout.total_seconds())
            ):
                info = await clients.sandboxes.get_sandbox_info(sandbox_id)
        except Exception as exc:  # the wait goes on; its own deadline still holds
            logger.debug("could not read the state of sandbox %s (%s)", sandbox_id, exc)
            return
        status = getattr(info, "status", None)
        state = str(getattr(status, "state", "") or "").lower()
        if state not in _GONE_STATES:
            return
        reason = str(getattr(status, "reason", "") or "")
        message = str(getattr(status, "message", "") or "")
        detail = "; ".join(t for t in (reason, message) if t) or "no reason given"
        raise SandboxUnavailableError(
            f"Sandbox {sandbox_id} failed to start: the server reports it {state} ({detail}). "
            "Check the image and its entrypoint.",
            sandbox_id=sandbox_id,
        )

    async def _probe(
        self, clients: _LoopClients, execd: ExecdClient, sandbox_id: str
    ) -> tuple[Framing, str]:
        """Learn the execd generation (its output framing), the canonical working dir and where
        execd keeps each command's raw output (one command and two small requests, cached).

        The probe prints a known text to stdout (`PROBE_COMMAND`: its events tell the framing),
        the working dir and the daemon's temp dir (Go's `os.TempDir()`: `$TMPDIR`, else `/tmp`)
        to stderr. Its own raw stdout file is then read back: if it holds the probe's exact
        bytes, commands take their exact output from those files (line-framed execd) and clean
        them up (every generation); then the probe's own files are deleted.
        """
        key = (self._connection.resolved_domain(), sandbox_id)
        wd_key = (*key, self._working_dir_config)
        framing = _framing_cache.get(key)
        workdir = _workdir_cache.get(wd_key)
        if framing is not None and workdir is not None and key in _output_dir_cache:
            self._output_dir = _output_dir_cache[key]
            return framing, workdir
        if self._working_dir_config:
            quoted = shlex.quote(self._working_dir_config)
            setup = f"mkdir -p -- {quoted} && cd -- {quoted} && pwd -P >&2"
        else:
            setup = "pwd -P >&2"
        command = f"{setup}; printf '{_TMP_MARK}%s\\n' \"${{TMPDIR:-/tmp}}\" >&2; {PROBE_COMMAND}"
        stdout: list[str] = []
        stderr: list[str] = []
        state: dict[str, Any] = {"id": None, "done": False}

        def handle(event: Mapping[str, Any]) -> None:
            kind = event.get("type")
            if kind == "init":
                state["id"] = str(event.get("text") or "") or None
            elif kind == "stdout":
                stdout.append(str(event.get("text", "")))
            elif kind == "stderr":
                stderr.append(str(event.get("text", "")))
            elif kind in ("execution_complete", "error"):
                state["done"] = True

        try:
            async with asyncio.timeout(60):
                await read_events(
                    execd,
                    command_body(command, cwd=None, timeout=30),
                    handle,
                    done=lambda: bool(state["done"]),
                )
        except Exception as exc:
            await self._fail(clients, exc, "start using the sandbox", execd=execd)
        framing = classify_probe(stdout)
        if framing is None:
            raise SandboxUnavailableError(
                f"Sandbox {sandbox_id}: could not recognise the command output framing of its "
                f"execd daemon (got {stdout[:5]!r}).",
                sandbox_id=sandbox_id,
            )
        text = "".join(rebuild(framing, t) for t in stderr)
        tmp_lines = [line for line in text.splitlines() if line.startswith(_TMP_MARK)]
        tmp_dir = tmp_lines[-1][len(_TMP_MARK) :] if tmp_lines else ""
        output_dir = await self._find_output_dir(execd, state["id"], tmp_dir, framing)
        if framing is Framing.ANCIENT:
            raise UnsupportedDaemonError(
                f"Sandbox {sandbox_id} runs an execd of v1.0.16 or older, which drops the blank "
                "lines (line breaks) from command output, so output cannot be reconstructed. "
                f"{UPGRADE_EXECD}",
                sandbox_id=sandbox_id,
            )
        lines = [line for line in text.strip().splitlines() if line.startswith("/")]
        if not lines:
            raise ConfigurationError(
                f"The working directory {self._working_dir_config!r} could not be created or "
                f"entered in sandbox {sandbox_id}: {text.strip()[:300]!r}"
            )
        workdir = lines[-1]
        _framing_cache[key] = framing
        _workdir_cache[wd_key] = workdir
        _output_dir_cache[key] = output_dir
        self._output_dir = output_dir
        return framing, workdir

    async def _find_output_dir(
        self, execd: ExecdClient, probe_id: str | None, tmp_dir: str, framing: Framing
    ) -> str | None:
        """The directory that holds execd's `<id>.stdout|.stderr` files (checked on the probe's
        own file, which is then deleted), or None where they are not found."""
        if not probe_id or not tmp_dir.startswith("/") or not COMMAND_ID.fullmatch(probe_id):
            found = None
        else:
            directory = posixpath.normpath(tmp_dir)
            base = posixpath.join(directory, probe_id)
            try:
                head = await execd.read_head(base + ".stdout", len(PROBE_OUTPUT) + 1)
            except (httpx.HTTPError, ExecdError) as exc:
                logger.debug("could not read the probe's raw output file (%s)", exc)
                head = None
            found = directory if head == PROBE_OUTPUT else None
            if head is not None:
                execd.discard_later([base + ".stdout", base + ".stderr"])
        if found is None and framing is Framing.LEGACY:
            logger.warning(
                "Sandbox %s: execd's raw output files were not found in %r, so command output "
                "is rebuilt from its line events: a missing final newline and \\r\\n line endings "
                "are not kept exactly.",
                self._sandbox_id,
                tmp_dir,
            )
        return found

    def _forget(self, sandbox_id: str) -> None:
        key = (self._connection.resolved_domain(), sandbox_id)
        _framing_cache.pop(key, None)
        _output_dir_cache.pop(key, None)
        _file_api_cache.pop(key, None)
        for wd_key in [k for k in _workdir_cache if k[:2] == key]:
            _workdir_cache.pop(wd_key, None)

    async def _maybe_renew(self, clients: _LoopClients) -> None:
        lifetime = self._lifetime
        if self._sandbox_id is None:
            return
        # An attached session without a lifetime of its own keeps a sandbox that expires alive
        # while it is used (its creator may have stopped renewing it), extending the expiry to
        # DEFAULT_LIFETIME from now but never shortening it, and never giving an expiry to a
        # sandbox that has none.
        extend_only = not lifetime and self._spec is None
        if extend_only:
            lifetime = DEFAULT_LIFETIME
        if not lifetime:
            return
        now = time.monotonic()
        if now - self._renewal.last < max(1.0, lifetime / 10):
            return
        self._renewal.last = now
        target = datetime.now(UTC) + timedelta(seconds=lifetime)
        try:
            if extend_only:
                info = await clients.sandboxes.get_sandbox_info(self._sandbox_id)
                current = getattr(info, "expires_at", None)
                if isinstance(current, datetime) and current.tzinfo is None:
                    current = current.replace(tzinfo=UTC)
                if not isinstance(current, datetime) or current >= target:
                    return
            await clients.sandboxes.renew_sandbox_expiration(self._sandbox_id, target)
        except Exception as exc:
            if _errors.is_not_found(exc):
                raise SandboxUnavailableError(
                    f"Sandbox {self._sandbox_id} was not found: it was deleted or has expired.",
                    sandbox_id=self._sandbox_id,
                ) from exc
            logger.warning("Could not renew sandbox %s (%s)", self._sandbox_id, type(exc).__name__)

    def set_lifetime(self, lifetime: float | None) -> None:
        """Renew the sandbox for `lifetime` seconds as each operation starts.

        Applies to attached sandboxes too; a created one starts with its spec's lifetime. `None`
        on a created sandbox: never renewed (it has no expiry). `None` on an attached one: an
        expiry it has is extended to `DEFAULT_LIFETIME` from now while it is used, never
        shortened, and a sandbox without an expiry never gets one.
        """
        if lifetime is not None:
            SandboxSpec._check_seconds(lifetime, "lifetime", minimum=1)
        self._lifetime = lifetime

    async def sandbox_gone(self) -> bool:
        """Whether the sandbox no longer exists or its daemon no longer answers (a probe)."""
        if self._sandbox_id is None:
            return False
        clients = self._clients()
        return await self._gone(clients, clients.execd)

    async def _gone(
        self, clients: _LoopClients, execd: ExecdClient | None, *, raise_paused: bool = False
    ) -> bool:
        assert self._sandbox_id is not None
        # One request timeout at most: the SDK's client retries a read timeout several times,
        # which would multiply the time a failed call takes to report on a stalled network.
        budget = max(1.0, clients.sdk_config.request_timeout.total_seconds())
        try:
            async with asyncio.timeout(budget):
                info = await clients.sandboxes.get_sandbox_info(self._sandbox_id)
        except Exception as exc:
            return _errors.is_not_found(exc)
        state = str(getattr(info.status, "state", "")).lower()
        if state in _GONE_STATES:
            return True
        if state in ("paused", "pausing") and raise_paused:
            self._paused = True  # paused by someone else: say so instead of a network error
            raise self._paused_error()
        return execd is not None and not await execd.ping(timeout=3.0)

    async def _fail(
        self,
        clients: _LoopClients,
        exc: BaseException,
        action: str,
        *,
        execd: ExecdClient | None = None,
        path: str | None = None,
    ) -> NoReturn:
        """Raise the right error for a failed call: path error, gone sandbox, or server error."""
        if isinstance(exc, ExecdError):
            if path is not None and exc.from_execd:
                mapped = path_error(exc.message, path)
                if mapped is None and exc.status == 404:
                    mapped = new_path_error(FileNotFoundError, errno.ENOENT, path)
                if mapped is not None:
                    raise mapped from None
            if exc.from_execd and exc.status < 500 and exc.status != 404:
                raise ServerError(
                    f"Could not {action} in sandbox {self._sandbox_id}: {exc.message}",
                    status_code=exc.status,
                ) from None
        if isinstance(exc, _errors.OpenSandboxError | OSError):
            raise exc
        if await self._gone(clients, execd or clients.execd, raise_paused=True):
            raise SandboxUnavailableError(
                f"Sandbox {self._sandbox_id} is gone (deleted, expired or its daemon died): "
                f"could not {action}.",
                sandbox_id=self._sandbox_id,
            ) from exc
        if isinstance(exc, ExecdError):
            raise ServerError(
                f"Could not {action} in sandbox {self._sandbox_id}: HTTP {exc.status} {exc.message}",
                status_code=exc.status,
                retryable=exc.status in (502, 503, 504),
            ) from exc
        raise _errors.from_foreign(
            exc,
            operation=action,
            address=self._connection.display_address(),
            sandbox_id=self._sandbox_id,
        )

    # -- commands ---------------------------------------------------------------------------
    async def run(
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
        """Run a command to completion and return its exit code and output.

        A string runs through the shell (`bash -c`); a sequence is an argv whose items are passed
        literally. A non-zero exit is a result, not an error. `timeout` is in seconds (`None`:
        no limit; omitted: the session default). On timeout or cancellation the command's whole
        process group is stopped inside the sandbox, and `CommandTimeoutError` carries the
        output printed until then. `on_output(stream, text)` sees output as it streams.

        Output is byte-exact on every supported execd generation. On line-framed execd
        (v1.0.17 to v1.0.19) the events carry one line each without its ending, so the result
        is read from the raw output files execd keeps for the command (one Range download per
        stream that printed, then both files are deleted); `on_output` then sees the lines as
        the events carry them, each with `"\\n"` added. See docs/core.md, "execd versions".

        `plain_lines=True` is the caller's promise that the command prints only text lines, each
        ended by `"\\n"`, with no `"\\r"` or other line breaks (a listing such as `ls -1`): on
        line-framed execd the result is then rebuilt from the line events, exact for such
        output, without the Range downloads (the raw files are still deleted in the
        background). Output that breaks the promise may come back with line endings changed.
        """
        if not isinstance(plain_lines, bool):
            raise ConfigurationError("plain_lines must be a bool.")
        return await self._commands.run(
            command,
            cwd=cwd,
            env=env,
            timeout=self._commands.default_timeout if isinstance(timeout, _Default) else timeout,
            on_output=on_output,
            max_output=max_output,
            plain_lines=plain_lines,
        )

    # -- files ------------------------------------------------------------------------------
    def _resolve(self, path: str) -> str:
        """The absolute path that `path` names (relative paths start at the working dir).

        Any text is taken literally: `$` and a leading `~` are never expanded (paths that execd
        would expand go through commands, see `_files`).
        """
        if not isinstance(path, str):
            raise ConfigurationError(f"path must be a string, got {type(path).__name__}.")
        if not path:
            raise ConfigurationError("path must not be empty.")
        if "\0" in path:
            raise ConfigurationError(f"path {path!r} contains a NUL character.")
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError(
                f"path {path!r} is not valid Unicode (it contains a lone surrogate)."
            ) from None
        if path.startswith("/"):
            return path
        assert self._ready is not None
        return posixpath.join(self._ready.working_dir, path)

    async def _target(self, path: str, *, create: bool = False) -> str:
        """The absolute path an operation works on, with `..` segments resolved like the kernel
        does: the part up to the last `..` is canonicalised in the sandbox (symlinks followed; a
        missing directory there is FileNotFoundError, or, with `create`, made first, as
        `mkdir -p` of the parent would). A path without `..` is returned as `_resolve` gives it.
        """
        target = self._resolve(path)
        split = _files.dotdot_split(target)
        if split is None:
            return target
        head, tail = split
        if create:
            argv = ["sh", "-c", 'mkdir -p -- "$1" && exec realpath -z -e -- "$1"', "sh", head]
        else:
            argv = ["realpath", "-z", "-e", "--", head]
        result = await self._file_command(argv, timeout=60)
        if result.exit_code != 0 or not result.stdout.endswith("\0"):
            text = _files.error_text(result.stderr)
            raise path_error(text, target) or OSError(
                errno.EINVAL, text or "could not resolve '..' in the path", target
            )
        real = result.stdout[:-1]
        return posixpath.join(real, tail) if tail else real

    async def _run_argv(
        self,
        command: Sequence[str],
        *,
        cwd: str | None,
        timeout: float | None,
        max_output: int | None,
    ) -> CommandResult:
        return await self.run(command, cwd=cwd, timeout=timeout, max_output=max_output)

    async def _literal_cwd(self, command: str | Sequence[str], workdir: str) -> tuple[str, str]:
        """See `Commands.literal_cwd`."""
        return await self._commands.literal_cwd(command, workdir)

    async def _file_op(self) -> tuple[_LoopClients, ExecdClient]:
        clients = await self._ensure()
        assert clients.execd is not None
        return clients, clients.execd

    async def _file_api(self, clients: _LoopClients, execd: ExecdClient) -> _files.FileApi:
        """What this sandbox's execd file API offers; asked once per sandbox (info of `/`)."""
        assert self._sandbox_id is not None
        key = (self._connection.resolved_domain(), self._sandbox_id)
        api = _file_api_cache.get(key)
        if api is None:
            try:
                data = await execd.info(["/"])
            except Exception as exc:
                await self._fail(clients, exc, "inspect the sandbox's file API", execd=execd)
            api = _files.FileApi.from_root_info(data)
            if not api.lstat_info:
                logger.info(
                    "Sandbox %s: execd has the file API of v1.0.18 or older; paths are inspected "
                    "and listed by commands",
                    self._sandbox_id,
                )
            _file_api_cache[key] = api
        return api

    async def _lstat(
        self, clients: _LoopClients, execd: ExecdClient, path: str
    ) -> dict[str, Any] | None:
        """execd's FileInfo of a path (symlinks not followed), or None when it does not exist.

        Where execd cannot tell (v1.0.18 and older: its info follows symlinks and has no type) or
        would rewrite the path (`$`), one command answers instead; its answer also holds
        `follow`: (is_dir, is_file) with symlinks followed.
        """
        api = await self._file_api(clients, execd)
        if not api.lstat_info or not _files.literal(path):
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
            await self._fail(clients, exc, "inspect a path", execd=execd, path=path)
        except Exception as exc:
            await self._fail(clients, exc, "inspect a path", execd=execd, path=path)
        info = data.get(path) or next(iter(data.values()), None)
        return info if isinstance(info, dict) else None

    async def _lstat_by_command(self, path: str) -> dict[str, Any] | None:
        result = await self._file_command(_files.stat_argv(path), timeout=60)
        if result.exit_code != 0:
            text = _files.error_text(result.stderr)
            mapped = path_error(text, path)
            if isinstance(mapped, FileNotFoundError):
                return None
            raise mapped or OSError(errno.EIO, text or "could not inspect the path", path)
        records = self._records(result, path)
        if len(records) != 1:
            raise ServerError(
                f"Could not inspect {path!r} in sandbox {self._sandbox_id}: the command printed "
                f"{len(records)} records instead of one."
            )
        return records[0].info(path)

    def _records(self, result: CommandResult, path: str) -> list[_files.Record]:
        if result.truncated:
            raise ServerError(
                f"Could not list {path!r} in sandbox {self._sandbox_id}: the listing is over "
                f"{_files.LISTING_LIMIT} bytes."
            )
        try:
            return _files.parse_records(result.stdout)
        except ValueError as exc:
            raise ServerError(
                f"Could not inspect {path!r} in sandbox {self._sandbox_id}: unexpected output "
                f"of find ({exc}). The sandbox image needs GNU findutils."
            ) from None

    async def realpath(self, path: str) -> str:
        """The canonical absolute path (symlinks resolved, missing names kept), like `realpath -m`."""
        await self._ensure()
        target = self._resolve(path)
        result = await self._file_command(["realpath", "-z", "-m", "--", target], timeout=60)
        if result.exit_code != 0 or not result.stdout.endswith("\0"):
            text = _files.error_text(result.stderr)
            raise path_error(text, target) or OSError(
                errno.EINVAL, text or "realpath failed", target
            )
        return result.stdout[:-1]

    async def stat(self, path: str) -> FileInfo:
        """Metadata of a path; `is_dir`/`is_file` follow symlinks. Missing: FileNotFoundError."""
        clients, execd = await self._file_op()
        target = await self._target(path)
        info = await self._lstat(clients, execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        is_dir, is_file = await self._kinds(target, info)
        return _file_info(target, info, is_dir=is_dir, is_file=is_file)

    async def _kinds(self, path: str, info: Mapping[str, Any]) -> tuple[bool, bool]:
        """(is_dir, is_file) of a path whose lstat info is `info`, symlinks followed."""
        kind = _kind(info.get("type"))
        if kind != "symlink":
            return kind == "directory", kind == "file"
        follow = info.get("follow")
        if isinstance(follow, tuple):
            return bool(follow[0]), bool(follow[1])
        return (await self._follow_kinds([path]))[0]

    async def _follow_kinds(self, paths: list[str]) -> list[tuple[bool, bool]]:
        """(is_dir, is_file) of each path with symlinks followed; broken links are neither."""
        script = 'for p; do if [ -d "$p" ]; then echo d; elif [ -f "$p" ]; then echo f; else echo o; fi; done'
        result = await self.run(["sh", "-c", script, "sh", *paths], timeout=60)
        kinds = result.stdout.split()
        if len(kinds) != len(paths):
            raise ServerError(f"Could not inspect symlinks in sandbox {self._sandbox_id}.")
        return [(k == "d", k == "f") for k in kinds]

    async def exists(self, path: str) -> bool:
        """Whether the path exists (a dangling symlink counts as existing). Like
        `os.path.lexists`, a path that cannot exist (a file used as a directory, a symlink loop
        on the way) is False; a permission error is raised."""
        clients, execd = await self._file_op()
        try:
            target = await self._target(path)
            return await self._lstat(clients, execd, target) is not None
        except PermissionError:
            raise
        except OSError:
            return False

    async def list_dir(self, path: str = ".") -> list[FileInfo]:
        """The entries of a directory, sorted by name (symlinks followed for `is_dir`)."""
        clients, execd = await self._file_op()
        target = await self._target(path)
        entries = await self._entries(clients, execd, target)
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
                is_dir, is_file = await self._kinds(entry_path, entry)
            result.append(_file_info(entry_path, entry, is_dir=is_dir, is_file=is_file))
        result.sort(key=lambda e: e.name)
        return result

    async def _entries(
        self, clients: _LoopClients, execd: ExecdClient, target: str
    ) -> list[dict[str, Any]]:
        """execd's FileInfo of each entry of a directory (a symlink to one lists its target's
        entries under the name given), from `/directories/list` where it can answer, else from
        one command."""
        api = await self._file_api(clients, execd)
        if api.has_list and _files.literal(target):
            try:
                return await execd.list_dir(target)
            except ExecdError as exc:
                if exc.from_execd and exc.status == 400:
                    pass  # a symlink (execd refuses to traverse it) or not a directory
                elif exc.status == 404 and not exc.code:
                    # No such route ("404 page not found"): an execd without the endpoint.
                    assert self._sandbox_id is not None
                    key = (self._connection.resolved_domain(), self._sandbox_id)
                    _file_api_cache[key] = dataclasses.replace(api, has_list=False)
                else:
                    await self._fail(clients, exc, "list a directory", execd=execd, path=target)
            except Exception as exc:
                await self._fail(clients, exc, "list a directory", execd=execd, path=target)
        return await self._entries_by_command(target)

    async def _entries_by_command(self, target: str) -> list[dict[str, Any]]:
        result = await self._file_command(
            _files.list_argv(target), timeout=300, max_output=_files.LISTING_LIMIT
        )
        if result.exit_code != 0:
            text = _files.error_text(result.stderr)
            raise path_error(text, target) or OSError(
                errno.EIO, text or "could not list the directory", target
            )
        records = self._records(result, target)
        if not records or records[0].depth != 0:
            raise ServerError(
                f"Could not list {target!r} in sandbox {self._sandbox_id}: no record of the "
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
        clients, execd = await self._file_op()
        target = await self._target(path, create=parents)
        info = await self._lstat(clients, execd, target)
        if info is not None:
            if exist_ok and (await self._kinds(target, info))[0]:
                return
            raise new_path_error(FileExistsError, errno.EEXIST, target)
        if not parents:
            parent = posixpath.dirname(target.rstrip("/")) or "/"
            if await self._lstat(clients, execd, parent) is None:
                raise new_path_error(FileNotFoundError, errno.ENOENT, parent)
        if not _files.literal(target):
            argv = _files.mkdir_argv(target, parents=parents, mode=_DIR_MODE)
            await self._command_or_raise(argv, target)
            return
        try:
            await execd.make_dirs({target: _octal_digits(_DIR_MODE)})
        except Exception as exc:
            await self._fail(clients, exc, "create a directory", execd=execd, path=target)

    async def _file_command(
        self,
        argv: list[str],
        *,
        timeout: float,
        cwd: str | None = None,
        max_output: int | None = None,
    ) -> CommandResult:
        """See `Commands.file_command`."""
        return await self._commands.file_command(
            argv, timeout=timeout, cwd=cwd, max_output=max_output
        )

    async def _command_or_raise(self, argv: list[str], path: str) -> CommandResult:
        """Run a file command; a failure is raised as the path error its message names."""
        result = await self._file_command(argv, timeout=300)
        if result.exit_code != 0:
            text = _files.error_text(result.stderr)
            raise path_error(text, path) or OSError(errno.EIO, text or f"{argv[0]} failed", path)
        return result

    def _protected(self, target: str) -> bool:
        assert self._ready is not None
        norm = posixpath.normpath(target)
        workdir = self._ready.working_dir
        configured = self._working_dir_config or workdir
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
        clients, execd = await self._file_op()
        self._refuse_protected(self._resolve(path))
        target = await self._target(path)
        self._refuse_protected(target)
        info = await self._lstat(clients, execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        kind = _kind(info.get("type"))
        if not _files.literal(target):
            argv = _files.remove_argv(target, directory=kind == "directory", recursive=recursive)
            await self._command_or_raise(argv, target)
            return
        try:
            if kind == "directory":
                if not recursive and await self._entries(clients, execd, target):
                    raise new_path_error(OSError, errno.ENOTEMPTY, target)
                await execd.remove_dirs([target])
            elif kind == "symlink":
                await execd.remove_dirs([target])  # RemoveAll removes the link, not its target
            else:
                await execd.remove_files([target])
        except OSError:
            raise
        except Exception as exc:
            await self._fail(clients, exc, "remove a path", execd=execd, path=target)

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        """The whole content of a file. Directories, FIFOs and devices raise instead of blocking."""
        # BytesIO grows one buffer and hands it over without a copy; a list of chunks joined at
        # the end would briefly hold the file twice.
        buffer = io.BytesIO()
        async for chunk in self.iter_bytes(path, max_size=max_size):
            buffer.write(chunk)
        return buffer.getvalue()

    async def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = 1 << 20
    ) -> AsyncIterator[bytes]:
        """Stream a file's content in chunks (bounded memory)."""
        clients, execd = await self._file_op()
        target = await self._target(path)
        info = await self._lstat(clients, execd, target)
        if info is None:
            raise new_path_error(FileNotFoundError, errno.ENOENT, target)
        kind = _kind(info.get("type"))
        size = int(info.get("size") or 0)
        if kind == "symlink":
            is_dir, is_file = await self._kinds(target, info)
            if not is_dir and not is_file:
                real = await self.realpath(target)
                if await self._lstat(clients, execd, real) is None:
                    raise new_path_error(FileNotFoundError, errno.ENOENT, target)
            kind = "directory" if is_dir else ("file" if is_file else "other")
            size = -1
        if kind == "directory":
            raise new_path_error(IsADirectoryError, errno.EISDIR, target)
        if kind == "other":
            raise OSError(
                errno.EINVAL,
                "Not a regular file (FIFO, socket or device); reading it could block",
                target,
            )
        if max_size is not None and size > max_size:
            raise OutputLimitError(
                f"{target} is {size} bytes, over the limit of {max_size} bytes.", limit=max_size
            )
        source, alias = target, None
        if not _files.download_safe(target):
            # execd would rewrite the name ($) or the server's proxy would refuse the download
            # (a control character in Content-Disposition): read through a plain symlink.
            alias = _files.alias_path()
            await self._command_or_raise(["ln", "-s", "--", target, alias], target)
            source = alias
        total = 0
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
            await self._fail(clients, exc, "read a file", execd=execd, path=target)
        finally:
            if alias is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(30):
                        await self.run(["rm", "-f", "--", alias], timeout=20)

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
        if not isinstance(data, bytes | bytearray | memoryview) and not hasattr(data, "__aiter__"):
            raise ConfigurationError(
                f"data must be bytes or an async iterable of bytes, got {type(data).__name__}."
            )
        if mode is not None and (
            isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777
        ):
            raise ConfigurationError(f"mode must be an int such as 0o644, got {mode!r}.")
        clients, execd = await self._file_op()
        target = await self._target(path, create=True)
        if target.endswith("/"):
            raise new_path_error(IsADirectoryError, errno.EISDIR, target)
        payload = bytes(data) if isinstance(data, bytearray | memoryview) else data
        # The inspection and the upload to a temporary name run at once; the upload is redone
        # only when the target turns out to be a symlink (it may lead elsewhere).
        if isinstance(payload, bytes) and await self._write_overlapped(
            clients, execd, target, payload, mode, timeout
        ):
            return
        info = await self._lstat(clients, execd, target)
        if info is not None and _kind(info.get("type")) == "symlink":
            link = target
            target = await self.realpath(target)
            info = await self._lstat(clients, execd, target)
            if info is not None and _kind(info.get("type")) == "symlink":
                # A symlink loop: `realpath -m` gives up on it. Replacing the link with a file
                # would not be a write "through" it; fail like open(2) does.
                raise new_path_error(OSError, errno.ELOOP, link)
        _check_replaceable(target, info)
        temp = _temp_for(target)
        await self._upload_temp(clients, execd, temp, target, payload, mode, info, timeout)
        await self._place(clients, execd, temp, target, mode, exists=info is not None)

    async def _write_overlapped(
        self,
        clients: _LoopClients,
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
            self._upload_temp(clients, execd, temp, target, payload, mode, None, timeout)
        )
        try:
            info = await self._lstat(clients, execd, target)
            if info is not None and _kind(info.get("type")) == "symlink":
                raise _Retry
            _check_replaceable(target, info)
        except BaseException as exc:
            upload.cancel()
            await asyncio.wait([upload])
            if not upload.cancelled() and upload.exception() is None:
                await self._discard(execd, temp)
            if isinstance(exc, _Retry):
                return False
            raise
        await upload
        await self._place(clients, execd, temp, target, mode, exists=info is not None)
        return True

    async def _upload_temp(
        self,
        clients: _LoopClients,
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
            bits = _mode_from_digits(info.get("mode"))
        else:
            bits = _FILE_MODE_NEW
        owner = info.get("owner") if info is not None else None
        group = info.get("group") if info is not None else None
        try:
            await execd.upload(
                temp,
                payload,
                mode=_octal_digits(bits & 0o777),
                owner=str(owner) if owner else None,
                group=str(group) if group else None,
                timeout=timeout,
            )
        except Exception as exc:
            await self._discard(execd, temp)
            if isinstance(exc, ExecdError) and exc.from_execd:
                # Re-raise the error for the path the caller gave, not the temporary name.
                mapped = path_error(exc.message, target)
                if mapped is not None:
                    raise mapped from None
            await self._fail(clients, exc, "write a file", execd=execd, path=target)

    async def _place(
        self,
        clients: _LoopClients,
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
        if mode is not None and _files.special_bits(mode):
            chmod: str | None = format(mode, "o")
        else:
            chmod = "=" if exists and mode is None else None
        plain = _files.literal(target)
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
                await self._fail(clients, exc, "write a file", execd=execd, path=target)
            raise

    async def _finish(
        self, temp: str, target: str, *, parent: str | None, mode: str | None
    ) -> None:
        """Rename a written temporary file over its target atomically (execd's own move refuses
        an existing target), creating `parent` and applying owner and `mode` first (`_files`)."""
        await self._command_or_raise(
            _files.finish_argv(temp, target, parent=parent, mode=mode), target
        )

    async def _discard(self, execd: ExecdClient, temp: str) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await execd.remove_files([temp])

    async def upload_files(
        self, files: Sequence[tuple[str, bytes]], *, mode: int | None = None
    ) -> list[TransferResult]:
        """Write several files; one result per file, in order. Never raises for one bad file."""
        await self._ensure()
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
        await self._ensure()
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
        at once (symlinks are followed; a missing path, a directory or a FIFO raises like
        `read_bytes`). Paths that execd would rewrite (`$`) or the server's proxy refuses are
        streamed from the start instead (correct, but costs `offset + length` bytes).
        """
        for name, value in (("offset", offset), ("length", length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative int, got {value!r}.")
        clients, execd = await self._file_op()
        target = self._resolve(path)
        if not _files.download_safe(target) or _files.dotdot_split(target) is not None:
            kept = bytearray()
            seen = 0
            async for chunk in self.iter_bytes(target):
                if seen + len(chunk) > offset:
                    kept += chunk[max(0, offset - seen) :][: length - len(kept)]
                seen += len(chunk)
                if len(kept) >= length:
                    break
            return bytes(kept)
        fetch = asyncio.ensure_future(execd.download_range(target, offset, length))
        try:
            info = await self._lstat(clients, execd, target)
            if info is None:
                raise new_path_error(FileNotFoundError, errno.ENOENT, target)
            is_dir, is_file = await self._kinds(target, info)
            if is_dir:
                raise new_path_error(IsADirectoryError, errno.EISDIR, target)
            if not is_file:
                if _kind(info.get("type")) == "symlink":  # dangling
                    raise new_path_error(FileNotFoundError, errno.ENOENT, target)
                raise OSError(
                    errno.EINVAL,
                    "Not a regular file (FIFO, socket or device); reading it could block",
                    target,
                )
        except BaseException:
            fetch.cancel()
            await asyncio.wait([fetch])
            if not fetch.cancelled():
                fetch.exception()  # retrieved, so asyncio does not log it
            raise
        try:
            return await fetch
        except Exception as exc:
            await self._fail(clients, exc, "read a file", execd=execd, path=target)
            raise

    async def replace_text(self, path: str, old: str, new: str) -> None:
        """Replace every occurrence of `old` with `new` in a file, in place, in one request
        (execd's `/files/replace`: the file keeps its inode, mode and owner; a symlink is
        followed). `old` must not be empty. The path is taken literally: one that execd would
        rewrite (`$`, a leading `~`) or with `..` segments raises ConfigurationError (edit such
        files with a command). A missing file raises FileNotFoundError.
        """
        if not isinstance(old, str) or not old or not isinstance(new, str):
            raise ConfigurationError("old must be a non-empty string and new a string.")
        clients, execd = await self._file_op()
        target = self._resolve(path)
        if not _files.literal(target) or _files.dotdot_split(target) is not None:
            raise ConfigurationError(
                f"path {target!r} would be rewritten by execd ($, ~ or ..); edit it with a "
                "command instead."
            )
        try:
            await execd.replace(target, old, new)
        except Exception as exc:
            await self._fail(clients, exc, "replace text in a file", execd=execd, path=target)
            raise


_TMP_MARK: Final = "osb-tmp:"


def _file_info(path: str, info: Mapping[str, Any], *, is_dir: bool, is_file: bool) -> FileInfo:
    return FileInfo(
        path=path,
        kind=_kind(info.get("type")),
        size=int(info.get("size") or 0),
        mode=_mode_from_digits(info.get("mode", 0)),
        modified_at=_parse_time(info.get("modified_at")),
        owner=str(info["owner"]) if info.get("owner") is not None else None,
        group=str(info["group"]) if info.get("group") is not None else None,
        is_dir=is_dir,
        is_file=is_file,
    )


class _Retry(Exception):
    """Internal: the overlapped write found a symlink and is redone the sequential way."""


def _temp_for(target: str) -> str:
    """A fresh temporary name to upload `target`'s content to. A target that execd would
    rewrite ($) is written under a `$`-free name in its deepest `$`-free ancestor, then renamed
    by a command (which takes the name literally)."""
    directory, name = posixpath.split(target)
    plain = _files.literal(target)
    return _files.temp_name(directory if plain else _files.literal_anchor(target), name)


def _check_replaceable(target: str, info: Mapping[str, Any] | None) -> None:
    """Raise unless `target` (lstat `info`, None when missing) may be replaced by a file."""
    kind = _kind(info.get("type")) if info is not None else None
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


# Kept for callers of the names this module had before `_validate` and `_errors` held them.
_check_timeout = _validate.timeout
_command_text = _validate.command_text
_is_lost_response = _errors.is_lost_response
_warned_rebuilt = WARNED_REBUILT


def _is_conflict(exc: BaseException) -> bool:
    """Whether the server refused a request with 409 (e.g. pausing a paused sandbox)."""
    return getattr(exc, "status_code", None) == 409
