"""`OpenSandboxBackend`: a Deep Agents `BaseSandbox` on one sandbox of a self-hosted OpenSandbox.

Verified on 2026-11-29 against deepagents 0.7.32 (the `BaseSandbox` contract and
`langchain_tests.integration_tests.SandboxIntegrationTests` from langchain-tests 1.1.9: 79 pass,
the 7 tests that predate deepagents 0.7 are expected failures), opensandbox-server 1.1.1 with
the opensandbox SDK 1.1.1, and opensandbox-core 0.2.0 (which does all the sandbox work; this
module only translates). Pause, resume, directory upload and the create options verified live
on 2026-12-01 (`tests/live/deepagents_backend/test_deepagents_peer_features.py`).

Behaviour, and why:
- `create()` creates the sandbox before it returns (as the seed README promises) and leaks
  nothing when it fails or is interrupted (the core's `CreateGuard`). `connect(id)` attaches
  and checks that the sandbox answers. Building the class itself does no I/O. The options of
  both are declared once, in `_options.py`.
- A created sandbox expires after `timeout` (30 minutes, the seed's default) without an
  operation; a running command keeps renewing it (the core's `_lifetime`).
- Ownership: whoever creates a sandbox owns it, nothing else destroys it. `kill()` on a backend
  from `create()` deletes the sandbox; on a backend from `connect()` it only closes local
  connections unless called as `kill(force=True)`.
- `execute()` never raises for a failing command: a non-zero exit is a result, a timeout is exit
  code 124 with the partial output and a closing notice (`truncated` when the cap cut it).
  Failures that are not about the command raise: bad arguments as `ValueError` (the execute tool
  shows those to the model), a sandbox that is gone as `opensandbox_core.SandboxUnavailableError`,
  a server failure as `ServerError`. A dead sandbox is not something the model can fix, and
  turning it into a fake command result would hide it from the program running the agent.
- The async methods run on the caller's event loop through `AsyncSandboxSession` (no threads);
  the blocking ones run the same coroutines on opensandbox-core's portal loop (`run_blocking`).
- The file operations are native (`_filesystem.py`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self, Unpack

from deepagents.backends.protocol import ExecuteOffloadResult, ExecuteResponse

from opensandbox_core import (
    DEFAULT,
    AsyncSandboxSession,
    CommandTimeoutError,
    CreateGuard,
    DirectoryUpload,
    Framing,
    OutputLimitError,
    ServerError,
    UploadOptions,
    decode_output,
    run_blocking,
    upload_directory,
)

from ._filesystem import NativeFiles, plain_requested
from ._mapping import combined_output, execute_timeout
from ._offload import PREVIEW_BYTES, offload_result, timed_out_result
from ._options import (
    DEFAULT_IMAGE,
    AttachOptions,
    SandboxOptions,
    takes_options,
    takes_options_after_id,
)
from ._texts import OFFLOAD_MAX_CAPTURE_BYTES

__all__ = ["DEFAULT_IMAGE", "OpenSandboxBackend"]

logger = logging.getLogger(__name__)

TIMEOUT_EXIT_CODE = 124
"""What `timeout(1)` exits with; `execute()` reports a timed-out command with it."""


def _timed_out(exc: CommandTimeoutError, stderr_prefix: str | None = None) -> ExecuteResponse:
    output = combined_output(exc.stdout, exc.stderr, stderr_prefix)
    if output and not output.endswith("\n"):
        output += "\n"
    output += (
        f"Error: the command timed out after {exc.timeout:g} seconds and was stopped; "
        "the output above is what it printed before that."
    )
    # `truncated`: the output cap (the session's `max_output`) cut what it printed before that.
    return ExecuteResponse(output=output, exit_code=TIMEOUT_EXIT_CODE, truncated=exc.truncated)


class OpenSandboxBackend(NativeFiles):
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
    the first operation creates or attaches. `stderr_prefix` is `create()`'s option of that name.
    """

    enable_capture_offload = True
    """`execute_with_offload` leaves a large output in the sandbox (the core's output capture)."""

    def __init__(self, session: AsyncSandboxSession, *, stderr_prefix: str | None = None) -> None:
        if not isinstance(session, AsyncSandboxSession):
            raise TypeError(
                "session must be an opensandbox_core.AsyncSandboxSession; use "
                "OpenSandboxBackend.create() or OpenSandboxBackend.connect() to build one."
            )
        super().__init__(session)
        self._stderr_prefix = stderr_prefix
        self._creator = CreateGuard(session)

    # -- construction -----------------------------------------------------------------------
    @staticmethod
    def _create_session(
        options: SandboxOptions, labels: Mapping[str, str] | None = None
    ) -> AsyncSandboxSession:
        return options.create(labels)

    @staticmethod
    def _attach_session(sandbox_id: str, **options: Any) -> AsyncSandboxSession:
        return AttachOptions(**options).attach(sandbox_id)

    @classmethod
    @takes_options(SandboxOptions)
    def create(cls, options: SandboxOptions) -> OpenSandboxBackend:
        """Create a sandbox and return a backend that owns it (`kill()` deletes it).

        The arguments, all keyword-only, are `SandboxOptions`' fields (see its docstring):
        `domain`, `image`, `entrypoint`, `api_key`, `use_server_proxy`, `timeout` (idle
        lifetime, 30 minutes), `spec` (an `opensandbox_core.SandboxSpec` instead of the
        keywords that describe the sandbox), `env`, `resource`, `allow_internet_access`,
        `network_policy`, `volumes`, `metadata`, `command_timeout`, `working_dir`,
        `ready_timeout`, `stderr_prefix`. A failed create leaves no sandbox behind; so does Ctrl-C.
        """
        return cls._created(options)

    @classmethod
    def _created(
        cls, options: SandboxOptions, labels: Mapping[str, str] | None = None
    ) -> OpenSandboxBackend:
        backend = cls(cls._create_session(options, labels), stderr_prefix=options.stderr_prefix)
        backend._creator.start_blocking()
        return backend

    @classmethod
    @takes_options(SandboxOptions)
    async def acreate(cls, options: SandboxOptions) -> OpenSandboxBackend:
        """`create()` for async code: same arguments, runs on the caller's event loop."""
        return await cls._acreated(options)

    @classmethod
    async def _acreated(
        cls, options: SandboxOptions, labels: Mapping[str, str] | None = None
    ) -> OpenSandboxBackend:
        backend = cls(cls._create_session(options, labels), stderr_prefix=options.stderr_prefix)
        await backend._start_owned()
        return backend

    async def _start_owned(self) -> None:
        await self._creator.start()

    @classmethod
    @takes_options_after_id(AttachOptions)
    def connect(cls, sandbox_id: str, options: AttachOptions) -> OpenSandboxBackend:
        """Attach to an existing sandbox (for example one a Pydantic AI agent created).

        The sandbox must exist (`SandboxUnavailableError` otherwise); it is never replaced and
        never deleted by this backend unless `kill(force=True)` is called. The keyword arguments
        are `AttachOptions`' fields: `domain`, `api_key`, `use_server_proxy`, `timeout` (when
        given, renews the sandbox's idle lifetime to that value on each operation; `None`
        leaves the lifetime its creator set), `command_timeout`, `working_dir`, `env`,
        `stderr_prefix`.
        """
        backend = cls(options.attach(sandbox_id), stderr_prefix=options.stderr_prefix)
        backend._run(backend._session.start())
        return backend

    @classmethod
    @takes_options_after_id(AttachOptions)
    async def aconnect(cls, sandbox_id: str, options: AttachOptions) -> OpenSandboxBackend:
        """`connect()` for async code: same arguments, runs on the caller's event loop."""
        backend = cls(options.attach(sandbox_id), stderr_prefix=options.stderr_prefix)
        await backend._session.start()
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
    def start(self) -> str:
        """Create or attach now if that has not happened yet; return the sandbox id."""
        return self._run(self._session.start())

    async def astart(self) -> str:
        """`start()` on the caller's event loop."""
        return await self._session.start()

    def pause(self) -> None:
        """Freeze the sandbox (processes, memory and files kept) until `resume()`.

        For an agent that waits, e.g. for a human: a paused sandbox uses no CPU. While paused,
        every operation raises `SandboxUnavailableError` saying to resume it; its idle lifetime
        keeps counting, so pass a longer `timeout` to `create()` to pause for long.
        """
        self._run(self._session.pause())

    async def apause(self) -> None:
        """`pause()` on the caller's event loop."""
        await self._session.pause()

    def resume(self) -> None:
        """Thaw a paused sandbox; returns once its daemon answers again."""
        self._run(self._session.resume())

    async def aresume(self) -> None:
        """`resume()` on the caller's event loop."""
        await self._session.resume()

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
        limit. A timed-out command is stopped and reported with exit code 124. With
        `stderr_prefix` set (`create(stderr_prefix="[stderr] ")`), every stderr line of the
        output starts with it.
        """
        return self._run(self._execute(command, timeout, plain=plain_requested()))

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """`execute()` on the caller's event loop."""
        return await self._execute(command, timeout, plain=plain_requested())

    async def _execute(self, command: str, timeout: int | None, *, plain: bool) -> ExecuteResponse:
        limit: Any = DEFAULT if timeout is None else execute_timeout(timeout)
        if plain and self._stderr_prefix is None and self._session.framing is not Framing.MODERN:
            try:
                exact = await self._session.run_bytes(command, timeout=limit)
            except (CommandTimeoutError, OutputLimitError, ServerError):
                exact = None  # run as it is, below, for the command's own output and timeout
            if exact is not None and not exact.stderr:
                output = decode_output(exact.stdout)
                return ExecuteResponse(output=output, exit_code=exact.exit_code, truncated=False)
        try:
            result = await self._session.run(command, timeout=limit)
        except CommandTimeoutError as exc:
            return _timed_out(exc, self._stderr_prefix)
        output = (
            result.output
            if self._stderr_prefix is None
            else combined_output(result.stdout, result.stderr, self._stderr_prefix)
        )
        return ExecuteResponse(
            output=output, exit_code=result.exit_code, truncated=result.truncated
        )

    def execute_with_offload(
        self,
        command: str,
        capture_path: str,
        *,
        max_inline_bytes: int,
        max_capture_bytes: int | None = None,
        timeout: int | None = None,
    ) -> ExecuteOffloadResult:
        """Run a shell command, leaving an output over `max_inline_bytes` in the sandbox at
        `capture_path` (stdout and stderr as they interleave, byte-exact, capped at
        `max_capture_bytes`, 10 MiB by default) and returning a preview of it, as the protocol
        documents (`_offload.py`); a smaller output comes back whole and leaves no file.
        `timeout` as for `execute()`; a timed-out command is reported like there (exit code 124,
        not offloaded; what it printed stays at `capture_path`). Where `capture_path` cannot
        be written, the command runs as `execute()` and its output comes back whole.
        `stderr_prefix` does not apply: the file holds what was printed."""
        return self._run(
            self.aexecute_with_offload(
                command,
                capture_path,
                max_inline_bytes=max_inline_bytes,
                max_capture_bytes=max_capture_bytes,
                timeout=timeout,
            )
        )

    async def aexecute_with_offload(
        self,
        command: str,
        capture_path: str,
        *,
        max_inline_bytes: int,
        max_capture_bytes: int | None = None,
        timeout: int | None = None,
    ) -> ExecuteOffloadResult:
        """`execute_with_offload()` on the caller's event loop."""
        limit: Any = DEFAULT if timeout is None else execute_timeout(timeout)
        cap = OFFLOAD_MAX_CAPTURE_BYTES if max_capture_bytes is None else max_capture_bytes
        try:
            run = await self._session.run_offloaded(
                command,
                capture_path,
                max_bytes=cap,
                inline_limit=max_inline_bytes,
                preview_bytes=PREVIEW_BYTES,
                timeout=limit,
            )
        except CommandTimeoutError as exc:
            return timed_out_result(exc, capture_path)
        except OSError as exc:
            # `capture_path` cannot be written (nothing ran): the output comes back whole.
            logger.warning("Could not offload a command's output to %s (%s)", capture_path, exc)
            response = await self._execute(command, timeout, plain=False)
            return ExecuteOffloadResult(offloaded=False, response=response)
        return offload_result(run)

    # -- directory upload -------------------------------------------------------------------
    def upload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        """Copy a local directory tree into the sandbox at `remote_dir` (absolute, like every
        path here), leaving secrets behind: `.env`, `.env.*`, `.ssh/`, `.aws/`, `.gnupg/`,
        `*.pem`, `*.key`, `id_rsa*`, `.netrc`, `.git-credentials`, `.npmrc`, `.pypirc`, `*.p12`
        and the rest of `opensandbox_core.SECRET_PATTERNS`. Options: `include_secrets=True`
        uploads them; `exclude` adds patterns (`["node_modules/", "*.log"]`); `concurrency`
        (8 files at once) and `timeout` (per file). Symlinks never lead out of the tree. Returns
        what was uploaded and what was skipped, and why (`opensandbox_core.DirectoryUpload`).
        """
        return self._run(self.aupload_dir(local_dir, remote_dir, **options))

    async def aupload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        """`upload_dir()` on the caller's event loop."""
        if not isinstance(remote_dir, str) or not remote_dir.startswith("/"):
            raise ValueError(
                f"remote_dir must be an absolute path such as '/workspace/project', got "
                f"{remote_dir!r}."
            )
        return await upload_directory(self._session, local_dir, remote_dir, **options)
