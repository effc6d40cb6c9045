"""`OpenSandboxBackend`: a Deep Agents `BaseSandbox` on one sandbox of a self-hosted OpenSandbox.

Verified on 2026-11-29 against deepagents 0.7.32 (the `BaseSandbox` contract and
`langchain_tests.integration_tests.SandboxIntegrationTests` from langchain-tests 1.1.9: 79 pass,
the 7 tests that predate deepagents 0.7 are expected failures), opensandbox-server 1.1.1 with
the opensandbox SDK 1.1.1, and opensandbox-core 0.1.0 (which does all the sandbox work; this
module only translates).

Behaviour, and why:
- `create()` creates the sandbox before it returns (as the seed README promises); if the sandbox
  was created but never became usable, it is destroyed before the error is raised, so a failed
  `create()` leaks nothing. `connect(id)` attaches and checks that the sandbox answers. Building
  the class itself does no I/O.
- Ownership: whoever creates a sandbox owns it, nothing else destroys it. `kill()` on a backend
  from `create()` deletes the sandbox; on a backend from `connect()` it only closes local
  connections unless called as `kill(force=True)`.
- `execute()` never raises for a failing command: a non-zero exit is a result, a timeout is exit
  code 124 with the partial output and a closing notice. Failures that are not about the command
  raise: bad arguments as `ValueError` (the execute tool shows those to the model), a sandbox that
  is gone as `opensandbox_core.SandboxUnavailableError`, a server failure as `ServerError`.
  A dead sandbox is not something the model can fix, and turning it into a fake command result
  would hide it from the program running the agent.
- Uploads and downloads report per file, in order (`TRANSFER_ERRORS` in `_mapping.py`); one bad
  path never fails the batch. A gone sandbox or a server failure raises, like Deep Agents' own
  `FilesystemBackend` does for errors it cannot classify.
- The async methods run on the caller's event loop through `AsyncSandboxSession` (no threads);
  the blocking ones run the same coroutines on opensandbox-core's portal loop (`run_blocking`).
- `write`, `read` (and their async twins) use the native file API instead of `python3 -c`
  scripts, with BaseSandbox's exact results; `edit` keeps BaseSandbox's server-side script,
  which never moves the file (measured: no faster natively).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

from deepagents.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import BaseSandbox

from opensandbox_core import (
    DEFAULT,
    AsyncSandboxSession,
    CommandTimeoutError,
    Connection,
    OutputLimitError,
    SandboxSpec,
    run_blocking,
)

from ._mapping import (
    check_transfer_path,
    entrypoint_argv,
    execute_timeout,
    lifetime_seconds,
    transfer_error,
)
from ._read import READ_ERRORS, read_error, render_page

__all__ = ["DEFAULT_IMAGE", "OpenSandboxBackend"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_IMAGE = "opensandbox/code-interpreter:v1.1.0"
DEFAULT_LIFETIME = timedelta(minutes=30)
DEFAULT_COMMAND_TIMEOUT = timedelta(minutes=30)
TIMEOUT_EXIT_CODE = 124
"""What `timeout(1)` exits with; `execute()` reports a timed-out command with it."""
NATIVE_READ_LIMIT = 8 * 1024 * 1024
"""Files larger than this are paged by BaseSandbox's script, in the sandbox, not downloaded."""


def _timed_out(exc: CommandTimeoutError) -> ExecuteResponse:
    output = exc.stdout + exc.stderr
    if output and not output.endswith("\n"):
        output += "\n"
    output += (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; "
        "the output above is what it printed before that."
    )
    return ExecuteResponse(output=output, exit_code=TIMEOUT_EXIT_CODE, truncated=False)


class OpenSandboxBackend(BaseSandbox):
    """A Deep Agents sandbox backend on a self-hosted OpenSandbox server.

    Build it with `OpenSandboxBackend.create(...)` (a new sandbox, owned by this backend) or
    `OpenSandboxBackend.connect(sandbox_id)` (an existing one, never destroyed by this backend
    unless asked). `backend.id` is the sandbox id to hand to another process or framework.

    ```python
    with OpenSandboxBackend.create(api_key="...") as backend:
        print(backend.execute("python3 --version").output)
    # the sandbox is deleted here
    ```

    The constructor wraps an existing `opensandbox_core.AsyncSandboxSession` and does no I/O;
    the first operation creates or attaches.
    """

    def __init__(self, session: AsyncSandboxSession) -> None:
        if not isinstance(session, AsyncSandboxSession):
            raise TypeError(
                "session must be an opensandbox_core.AsyncSandboxSession; use "
                "OpenSandboxBackend.create() or OpenSandboxBackend.connect() to build one."
            )
        self._session = session

    # -- construction -----------------------------------------------------------------------
    @staticmethod
    def _create_session(
        *,
        domain: str | None,
        image: str,
        entrypoint: str | Sequence[str] | None,
        api_key: str | None,
        use_server_proxy: bool,
        timeout: timedelta | float | None,
        env: Mapping[str, str] | None,
        resource: Mapping[str, str] | None,
        allow_internet_access: bool,
        command_timeout: timedelta | float | None,
        working_dir: str,
        ready_timeout: float,
    ) -> AsyncSandboxSession:
        spec = SandboxSpec(
            image=image,
            entrypoint=entrypoint_argv(entrypoint, image),
            env=dict(env or {}),
            resource=dict(resource) if resource is not None else None,
            allow_internet_access=allow_internet_access,
            lifetime=lifetime_seconds(timeout),
            ready_timeout=ready_timeout,
        )
        return AsyncSandboxSession(
            spec,
            connection=Connection(
                domain=domain, api_key=api_key, use_server_proxy=use_server_proxy
            ),
            working_dir=working_dir,
            default_timeout=lifetime_seconds(command_timeout, "command_timeout"),
        )

    @classmethod
    def create(
        cls,
        *,
        domain: str | None = None,
        image: str = DEFAULT_IMAGE,
        entrypoint: str | Sequence[str] | None = None,
        api_key: str | None = None,
        use_server_proxy: bool = False,
        timeout: timedelta | float | None = DEFAULT_LIFETIME,
        env: Mapping[str, str] | None = None,
        resource: Mapping[str, str] | None = None,
        allow_internet_access: bool = True,
        command_timeout: timedelta | float | None = DEFAULT_COMMAND_TIMEOUT,
        working_dir: str = "/workspace",
        ready_timeout: float = 60.0,
    ) -> OpenSandboxBackend:
        """Create a sandbox and return a backend that owns it (`kill()` deletes it).

        - `domain`: the server, `host:port` (default `OPEN_SANDBOX_DOMAIN`, then
          `localhost:8080`); `https://host:port` switches to HTTPS.
        - `image`, `entrypoint`: what the sandbox runs. For `opensandbox/code-interpreter`
          images the entrypoint script is picked from the tag; other images keep
          `tail -f /dev/null` unless given. A string entrypoint is split like a shell would.
        - `api_key`: the server's `[server] api_key` (default `OPEN_SANDBOX_API_KEY`). Without
          one an `InsecureSandboxWarning` is emitted.
        - `use_server_proxy`: route command and file traffic through the server (Docker Desktop
          on macOS and Windows, Kubernetes without an ingress).
        - `timeout`: idle lifetime; every operation renews it. `None` keeps the sandbox until
          it is killed.
        - `env`, `resource` (e.g. `{"cpu": "1", "memory": "2Gi"}`), `allow_internet_access`:
          the container's environment, limits and egress.
        - `command_timeout`: what `execute(timeout=None)` allows a command (`None`: no limit).
        - `working_dir`: where commands start (created if missing).
        """
        session = cls._create_session(
            domain=domain,
            image=image,
            entrypoint=entrypoint,
            api_key=api_key,
            use_server_proxy=use_server_proxy,
            timeout=timeout,
            env=env,
            resource=resource,
            allow_internet_access=allow_internet_access,
            command_timeout=command_timeout,
            working_dir=working_dir,
            ready_timeout=ready_timeout,
        )
        backend = cls(session)
        backend._run(backend._start_owned())
        return backend

    @classmethod
    async def acreate(
        cls,
        *,
        domain: str | None = None,
        image: str = DEFAULT_IMAGE,
        entrypoint: str | Sequence[str] | None = None,
        api_key: str | None = None,
        use_server_proxy: bool = False,
        timeout: timedelta | float | None = DEFAULT_LIFETIME,
        env: Mapping[str, str] | None = None,
        resource: Mapping[str, str] | None = None,
        allow_internet_access: bool = True,
        command_timeout: timedelta | float | None = DEFAULT_COMMAND_TIMEOUT,
        working_dir: str = "/workspace",
        ready_timeout: float = 60.0,
    ) -> OpenSandboxBackend:
        """`create()` for async code: same arguments, runs on the caller's event loop."""
        session = cls._create_session(
            domain=domain,
            image=image,
            entrypoint=entrypoint,
            api_key=api_key,
            use_server_proxy=use_server_proxy,
            timeout=timeout,
            env=env,
            resource=resource,
            allow_internet_access=allow_internet_access,
            command_timeout=command_timeout,
            working_dir=working_dir,
            ready_timeout=ready_timeout,
        )
        backend = cls(session)
        await backend._start_owned()
        return backend

    async def _start_owned(self) -> None:
        try:
            await self._session.start()
        except BaseException:
            if self._session.id is not None:
                # Created but never usable: do not leave it running.
                logger.warning("Deleting sandbox %s, which did not become usable", self._session.id)
                try:
                    await self._session.destroy()
                except Exception as exc:
                    logger.warning(
                        "Could not delete sandbox %s (%s)", self._session.id, type(exc).__name__
                    )
            raise

    @staticmethod
    def _attach_session(
        sandbox_id: str,
        *,
        domain: str | None,
        api_key: str | None,
        use_server_proxy: bool,
        timeout: timedelta | float | None,
        command_timeout: timedelta | float | None,
        working_dir: str,
    ) -> AsyncSandboxSession:
        session = AsyncSandboxSession.attach(
            sandbox_id,
            connection=Connection(
                domain=domain, api_key=api_key, use_server_proxy=use_server_proxy
            ),
            working_dir=working_dir,
            default_timeout=lifetime_seconds(command_timeout, "command_timeout"),
        )
        session.set_lifetime(lifetime_seconds(timeout))
        return session

    @classmethod
    def connect(
        cls,
        sandbox_id: str,
        *,
        domain: str | None = None,
        api_key: str | None = None,
        use_server_proxy: bool = False,
        timeout: timedelta | float | None = None,
        command_timeout: timedelta | float | None = DEFAULT_COMMAND_TIMEOUT,
        working_dir: str = "/workspace",
    ) -> OpenSandboxBackend:
        """Attach to an existing sandbox (for example one a Pydantic AI agent created).

        The sandbox must exist (`SandboxUnavailableError` otherwise); it is never replaced and
        never deleted by this backend unless `kill(force=True)` is called. `timeout`, when
        given, renews the sandbox's idle lifetime to that value on each operation; `None`
        leaves the lifetime its creator set.
        """
        session = cls._attach_session(
            sandbox_id,
            domain=domain,
            api_key=api_key,
            use_server_proxy=use_server_proxy,
            timeout=timeout,
            command_timeout=command_timeout,
            working_dir=working_dir,
        )
        backend = cls(session)
        backend._run(session.start())
        return backend

    @classmethod
    async def aconnect(
        cls,
        sandbox_id: str,
        *,
        domain: str | None = None,
        api_key: str | None = None,
        use_server_proxy: bool = False,
        timeout: timedelta | float | None = None,
        command_timeout: timedelta | float | None = DEFAULT_COMMAND_TIMEOUT,
        working_dir: str = "/workspace",
    ) -> OpenSandboxBackend:
        """`connect()` for async code: same arguments, runs on the caller's event loop."""
        session = cls._attach_session(
            sandbox_id,
            domain=domain,
            api_key=api_key,
            use_server_proxy=use_server_proxy,
            timeout=timeout,
            command_timeout=command_timeout,
            working_dir=working_dir,
        )
        backend = cls(session)
        await session.start()
        return backend

    # -- identity ---------------------------------------------------------------------------
    @property
    def id(self) -> str:
        """The sandbox id (share it to attach elsewhere: `OpenSandboxBackend.connect(id)`)."""
        sandbox_id = self._session.id
        if sandbox_id is None:
            raise RuntimeError(
                "This backend's sandbox has not been created yet: call start() (or any "
                "operation) first, or build the backend with OpenSandboxBackend.create()."
            )
        return sandbox_id

    @property
    def owned(self) -> bool:
        """True when this backend created the sandbox (and so `kill()` deletes it)."""
        return self._session.owned

    @property
    def session(self) -> AsyncSandboxSession:
        """The opensandbox-core session behind this backend (same sandbox, same state)."""
        return self._session

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(id={self._session.id!r}, owned={self._session.owned}, "
            f"connection={self._session.connection!r})"
        )

    # -- lifecycle --------------------------------------------------------------------------
    @staticmethod
    def _run(coro: Coroutine[Any, Any, T]) -> T:
        return run_blocking(coro)

    def start(self) -> str:
        """Create or attach now if that has not happened yet; return the sandbox id."""
        return self._run(self._session.start())

    async def astart(self) -> str:
        """`start()` on the caller's event loop."""
        return await self._session.start()

    def kill(self, *, force: bool = False) -> None:
        """Delete the sandbox if this backend created it (or `force=True`); close connections.

        Idempotent. On a backend from `connect()` without `force`, the sandbox keeps running
        and only local connections are closed: the creator owns it.
        """
        self._run(self._akill(force=force))

    async def akill(self, *, force: bool = False) -> None:
        """`kill()` on the caller's event loop (also closes the blocking loop's connections)."""
        await self._akill(force=force)
        await asyncio.to_thread(run_blocking, self._session.aclose())

    async def _akill(self, *, force: bool) -> None:
        if self._session.owned or force:
            await self._session.destroy()
        else:
            logger.debug("Not deleting sandbox %s: this backend attached to it", self._session.id)
            await self._session.aclose()

    def close(self) -> None:
        """Close local connections. The sandbox keeps running; nothing else changes."""
        self._run(self._session.aclose())

    async def aclose(self) -> None:
        """`close()` for async code: closes this loop's and the blocking loop's connections."""
        await self._session.aclose()
        await asyncio.to_thread(run_blocking, self._session.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.akill()

    # -- commands ---------------------------------------------------------------------------
    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Run a shell command; output is stdout then stderr, exactly as printed.

        `timeout` in seconds: `None` uses the backend's default (30 minutes), `0` means no
        limit. A timed-out command is stopped and reported with exit code 124.
        """
        return self._run(self.aexecute(command, timeout=timeout))

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """`execute()` on the caller's event loop."""
        limit: Any = DEFAULT if timeout is None else execute_timeout(timeout)
        try:
            result = await self._session.run(command, timeout=limit)
        except CommandTimeoutError as exc:
            return _timed_out(exc)
        return ExecuteResponse(
            output=result.output, exit_code=result.exit_code, truncated=result.truncated
        )

    # -- file transfer ----------------------------------------------------------------------
    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Write files (parents created, existing files replaced); one result per file, in order."""
        return self._run(self.aupload_files(files))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """`upload_files()` on the caller's event loop."""
        responses: list[FileUploadResponse | None] = []
        batch: list[tuple[str, bytes]] = []
        for path, content in files:
            problem = check_transfer_path(path)
            if problem is None and not isinstance(content, bytes | bytearray | memoryview):
                raise TypeError(f"content for {path!r} must be bytes, got {type(content).__name__}")
            responses.append(FileUploadResponse(path=path, error=problem) if problem else None)
            if problem is None:
                batch.append((path, bytes(content)))
        results = iter(await self._session.upload_files(batch) if batch else [])
        return [
            response
            if response is not None
            else FileUploadResponse(path=(r := next(results)).path, error=transfer_error(r))
            for response in responses
        ]

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Read files as bytes; one result per file, in order."""
        return self._run(self.adownload_files(paths))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """`download_files()` on the caller's event loop."""
        responses: list[FileDownloadResponse | None] = []
        batch: list[str] = []
        for path in paths:
            problem = check_transfer_path(path)
            responses.append(FileDownloadResponse(path=path, error=problem) if problem else None)
            if problem is None:
                batch.append(path)
        results = iter(await self._session.download_files(batch) if batch else [])
        out: list[FileDownloadResponse] = []
        for response in responses:
            if response is None:
                result = next(results)
                error = transfer_error(result)
                response = FileDownloadResponse(
                    path=result.path, content=None if error else result.content, error=error
                )
            out.append(response)
        return out

    # -- native file operations -------------------------------------------------------------
    def write(self, file_path: str, content: str) -> WriteResult:
        """Create or overwrite a text file (parents created), in one native upload."""
        return self._run(self.awrite(file_path, content))

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """`write()` on the caller's event loop."""
        responses = await self.aupload_files([(file_path, content.encode("utf-8"))])
        if responses[0].error:
            return WriteResult(error=f"Failed to write file '{file_path}': {responses[0].error}")
        return WriteResult(path=file_path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """A page of a text file (numbered by the tools), or a binary file as base64."""
        return self._run(self.aread(file_path, offset, limit))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """`read()` on the caller's event loop."""
        if check_transfer_path(file_path) is None:
            try:
                raw = await self._session.read_bytes(file_path, max_size=NATIVE_READ_LIMIT)
            except OutputLimitError:
                pass  # too large to move: page it in the sandbox
            except OSError as exc:
                code = READ_ERRORS.get(exc.errno or 0)
                if code is not None:
                    return read_error(file_path, code)
            else:
                page = render_page(raw, file_path, offset, limit)
                if page is not None:
                    return page
        return await BaseSandbox.aread(self, file_path, offset, limit)
