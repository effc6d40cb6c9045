"""`OpenSandboxBackend`: a Deep Agents `BaseSandbox` on one sandbox of a self-hosted OpenSandbox.

Verified on 2026-11-29 against deepagents 0.7.32 (the `BaseSandbox` contract and
`langchain_tests.integration_tests.SandboxIntegrationTests` from langchain-tests 1.1.9: 79 pass,
the 7 tests that predate deepagents 0.7 are expected failures), opensandbox-server 1.1.1 with
the opensandbox SDK 1.1.1, and opensandbox-core 0.1.0 (which does all the sandbox work; this
module only translates).

Behaviour, and why:
- `create()` creates the sandbox before it returns (as the seed README promises); if the sandbox
  was created but never became usable, it is destroyed before the error is raised, so a failed
  `create()` leaks nothing. Ctrl-C or a cancellation while the server is still answering waits
  for the answer (at most `CANCEL_CLEANUP_WAIT`) and deletes the sandbox it names: verified live
  with a proxy holding the answer back (`test_deepagents_outlive.py`). `connect(id)` attaches and
  checks that the sandbox answers. Building the class itself does no I/O.
- A created sandbox expires after `timeout` (30 minutes, the seed's default) without an
  operation; a running command keeps renewing it (the core's `_lifetime`).
- Paths are absolute in every file operation: a relative one is `invalid_path` for `read` as for
  `write`, uploads and downloads.
- Ownership: whoever creates a sandbox owns it, nothing else destroys it. `kill()` on a backend
  from `create()` deletes the sandbox; on a backend from `connect()` it only closes local
  connections unless called as `kill(force=True)`.
- `execute()` never raises for a failing command: a non-zero exit is a result, a timeout is exit
  code 124 with the partial output and a closing notice (`truncated` when the cap cut it). Failures that are not about the command
  raise: bad arguments as `ValueError` (the execute tool shows those to the model), a sandbox that
  is gone as `opensandbox_core.SandboxUnavailableError`, a server failure as `ServerError`.
  A dead sandbox is not something the model can fix, and turning it into a fake command result
  would hide it from the program running the agent.
- Uploads and downloads report per file, in order (`TRANSFER_ERRORS` in `_mapping.py`); one bad
  path never fails the batch. A gone sandbox or a server failure raises, like Deep Agents' own
  `FilesystemBackend` does for errors it cannot classify.
- The async methods run on the caller's event loop through `AsyncSandboxSession` (no threads);
  the blocking ones run the same coroutines on opensandbox-core's portal loop (`run_blocking`).
- `write`, `read`, `ls`, `edit` and `glob` (and their async twins) are native instead of
  `python3 -c` scripts, with BaseSandbox's exact results (compared on the same sandbox by
  `tests/live/deepagents_backend/test_native_tools.py`; where a native path cannot be exact it
  hands the call to BaseSandbox's script): `read` pages files over 1 MiB by HTTP Range reads
  (`_paging.py`), `ls` is one argv `ls` command, `edit` a download and execd's in-place
  `/files/replace` (`_tools.py`), `glob` one `find` command matched by BaseSandbox's own
  matcher (`_glob.py`). `grep` keeps BaseSandbox's command (already one command).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

from deepagents.backends.protocol import (
    EditResult,
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
    GlobResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.sandbox import BaseSandbox
from deepagents.backends.utils import EMPTY_OLD_STRING_ERROR

from opensandbox_core import (
    DEFAULT,
    OWNER_KEY,
    AsyncSandboxSession,
    CommandTimeoutError,
    Connection,
    OutputLimitError,
    SandboxSpec,
    destroy_sandbox,
    list_sandboxes,
    run_blocking,
)

from ._glob import native_glob
from ._mapping import (
    check_transfer_path,
    entrypoint_argv,
    execute_timeout,
    lifetime_seconds,
    transfer_error,
)
from ._paging import PAGED_ABOVE, page_cache, paged_read
from ._read import READ_ERRORS, read_error, render_page
from ._tools import native_edit, native_ls

__all__ = ["DEFAULT_IMAGE", "OpenSandboxBackend"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_IMAGE = "opensandbox/code-interpreter:v1.1.0"
DEFAULT_LIFETIME = timedelta(minutes=30)
DEFAULT_COMMAND_TIMEOUT = timedelta(minutes=30)
TIMEOUT_EXIT_CODE = 124
"""What `timeout(1)` exits with; `execute()` reports a timed-out command with it."""
CANCEL_CLEANUP_WAIT = 10.0
"""Seconds an interrupted `create()` waits for the server to name the sandbox it is making."""


def _timed_out(exc: CommandTimeoutError) -> ExecuteResponse:
    output = exc.stdout + exc.stderr
    if output and not output.endswith("\n"):
        output += "\n"
    output += (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; "
        "the output above is what it printed before that."
    )
    # `truncated`: the output cap (the session's `max_output`) cut what it printed before that.
    return ExecuteResponse(output=output, exit_code=TIMEOUT_EXIT_CODE, truncated=exc.truncated)


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
        self._cleanup: asyncio.Future[None] | None = None

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
        - `timeout`: idle lifetime (default 30 minutes, as in every package of this project);
          every operation renews it and a running command keeps renewing it. `None` (or `0`)
          keeps the sandbox until it is killed.
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
        try:
            backend._run(backend._start_owned())
        except KeyboardInterrupt:
            # The create goes on in the background loop until the server has answered; wait
            # for it there and for the sandbox's deletion, so Ctrl-C leaves nothing behind.
            logger.warning(
                "Interrupted while creating a sandbox: deleting it once the server has answered "
                "(at most %g s; press Ctrl-C again to leave at once).",
                CANCEL_CLEANUP_WAIT,
            )
            backend._run(backend._settle())
            raise
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
        """Create the sandbox; on failure or interruption, delete whatever was created.

        The create runs in a task of its own, so Ctrl-C (KeyboardInterrupt in `create()`, which
        cancels this coroutine) or a cancelled `acreate()` cannot cut it off between the server
        making the sandbox and the answer naming it: the answer is awaited (up to
        `CANCEL_CLEANUP_WAIT` seconds), the sandbox deleted, and the cancellation re-raised.
        """
        task = asyncio.ensure_future(self._session.start())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            self._cleanup = asyncio.ensure_future(self._abandon(task))
            await asyncio.shield(self._cleanup)
            raise
        except BaseException:
            await self._discard("did not become usable")
            raise

    async def _settle(self) -> None:
        """Wait for the cleanup that an interrupted create started (on the same loop)."""
        for _ in range(100):
            if self._cleanup is not None:
                break
            await asyncio.sleep(0.01)
        if self._cleanup is not None:
            await asyncio.wait([self._cleanup])

    async def _abandon(self, task: asyncio.Future[str]) -> None:
        """After a cancelled create: wait for the server's answer, then delete the sandbox."""
        session = self._session
        deadline = asyncio.get_running_loop().time() + CANCEL_CLEANUP_WAIT
        while session.id is None and not task.done():
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.wait([task], timeout=0.1)
        answered = task.done()
        if not answered:
            task.cancel()
            await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it
        if session.id is None and answered:
            await session.aclose()
            return  # the server refused the create: nothing exists
        if session.id is None:
            found = await self._find_created()
            if found is None:
                logger.warning(
                    "Sandbox creation was interrupted before the server answered; if it finishes, "
                    "the sandbox carries metadata %s=%s and expires after its idle lifetime.",
                    OWNER_KEY,
                    session.owner_token,
                )
                return
            await self._destroy_by_id(found)
            return
        await self._discard("was being created when the caller was interrupted")

    async def _find_created(self) -> str | None:
        """The id of a sandbox this backend's session created whose answer never arrived."""
        try:
            found = await list_sandboxes(
                self._session.connection, metadata={OWNER_KEY: self._session.owner_token}
            )
        except Exception as exc:
            logger.warning("Could not look for the interrupted sandbox (%s)", type(exc).__name__)
            return None
        return found[0].id if found else None

    async def _destroy_by_id(self, sandbox_id: str) -> None:
        logger.warning("Deleting sandbox %s, whose creation was interrupted", sandbox_id)
        try:
            await destroy_sandbox(sandbox_id, self._session.connection)
        except Exception as exc:
            logger.warning("Could not delete sandbox %s (%s)", sandbox_id, type(exc).__name__)

    async def _discard(self, why: str) -> None:
        """Delete the sandbox of a create that failed; never raises."""
        sandbox_id = self._session.id
        if sandbox_id is None:
            await self._session.aclose()
            return
        logger.warning("Deleting sandbox %s, which %s", sandbox_id, why)
        try:
            await self._session.destroy()
        except Exception as exc:
            logger.warning("Could not delete sandbox %s (%s)", sandbox_id, type(exc).__name__)

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

    def ls(self, path: str) -> LsResult:
        """The entries of a directory in directory order, as BaseSandbox lists them (one argv
        command instead of a `python3 -c` script; see `_tools.py`)."""
        return self._run(self.als(path))

    async def als(self, path: str) -> LsResult:
        """`ls()` on the caller's event loop."""
        result = await native_ls(self._session, path)
        if result is not None:
            return result
        return await BaseSandbox.als(self, path)

    def edit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """Replace `old_string` in a text file, as BaseSandbox does (CRLF-aware, one match
        unless `replace_all`), natively: a download and execd's in-place replace."""
        return self._run(self.aedit(file_path, old_string, new_string, replace_all))

    async def aedit(
        self,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> EditResult:
        """`edit()` on the caller's event loop."""
        if not old_string:
            return EditResult(error=EMPTY_OLD_STRING_ERROR)
        result = await native_edit(
            self._session, file_path, old_string, new_string, replace_all=bool(replace_all)
        )
        if result is not None:
            return result
        return await BaseSandbox.aedit(self, file_path, old_string, new_string, replace_all)

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        """Regular files under `path` matching `pattern`, as BaseSandbox finds them (one `find`
        command and BaseSandbox's own matcher instead of a `python3 -c` walk; `_glob.py`)."""
        result = self._run(native_glob(self._session, pattern, path))
        if result is not None:
            return result
        return BaseSandbox.glob(self, pattern, path)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        """`glob()` on the caller's event loop."""
        result = await native_glob(self._session, pattern, path)
        if result is not None:
            return result
        return await BaseSandbox.aglob(self, pattern, path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """A page of a text file (numbered by the tools), or a binary file as base64.

        Files up to 1 MiB are read whole; larger text files page by HTTP Range reads and a
        per-file index of line starts (checked against the file's size and mtime on every
        page), so a page costs about one page. Same results as BaseSandbox's script, which
        still answers the cases the port cannot reproduce (invalid UTF-8 the script decodes).
        """
        return self._run(self.aread(file_path, offset, limit))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """`read()` on the caller's event loop."""
        problem = check_transfer_path(file_path)
        if problem is not None:
            # One rule for every file operation: paths are absolute (`write("rel.txt")` says the
            # same), never resolved against a working directory the agent cannot see.
            return read_error(file_path if isinstance(file_path, str) else repr(file_path), problem)
        cache = page_cache(self._session)
        if cache.get(file_path) is None:
            try:
                raw = await self._session.read_bytes(file_path, max_size=PAGED_ABOVE)
            except OutputLimitError:
                pass  # over 1 MiB: paged by Range reads below
            except OSError as exc:
                code = READ_ERRORS.get(exc.errno or 0)
                if code is not None:
                    return read_error(file_path, code)
                return await BaseSandbox.aread(self, file_path, offset, limit)
            else:
                page = render_page(raw, file_path, offset, limit)
                if page is not None:
                    return page
                return await BaseSandbox.aread(self, file_path, offset, limit)
        page = await paged_read(self._session, cache, file_path, offset, limit)
        if page is not None:
            return page
        return await BaseSandbox.aread(self, file_path, offset, limit)
