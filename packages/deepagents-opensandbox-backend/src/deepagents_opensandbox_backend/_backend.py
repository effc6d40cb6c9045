"""`OpenSandboxBackend`: a Deep Agents `BaseSandbox` on one sandbox of a self-hosted OpenSandbox;
opensandbox-core does the sandbox work, this module translates. Contract (construction, ownership,
errors, loops): docs/deepagents.md#opensandboxbackend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Unpack

from deepagents.backends.protocol import ExecuteOffloadResult, ExecuteResponse

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import (
    DirectoryUpload,
    OperationScope,
    UploadOptions,
    run_blocking,
    twin,
)
from opensandbox_core.defaults import DEFAULT

from ._filesystem import NativeFiles, execute_timeout
from ._options import DEFAULT_IMAGE, SEED_ORDER, AttachOptions, SandboxOptions
from ._run import offload_for_agent, run_for_agent
from ._signatures import takes_keywords, takes_keywords_after_id
from ._texts import OFFLOAD_MAX_CAPTURE_BYTES, OFFLOAD_PREVIEW

__all__ = ["DEFAULT_IMAGE", "OpenSandboxBackend"]


def _limit(timeout: int | None) -> Any:
    """`execute(timeout=)` as the core takes it: None is the session's default (`DEFAULT`)."""
    return DEFAULT if timeout is None else execute_timeout(timeout)


class OpenSandboxBackend(NativeFiles):
    """A Deep Agents sandbox backend on a self-hosted OpenSandbox server: `create(...)` (a new
    sandbox, owned by this backend) or `connect(sandbox_id)` (an existing one, never destroyed
    by this backend unless asked); `backend.id` is the id to hand to another process.

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
        self._creator = OperationScope(session)

    # -- construction -----------------------------------------------------------------------
    @classmethod
    @takes_keywords(SandboxOptions, SEED_ORDER)
    def create(cls, options: SandboxOptions) -> OpenSandboxBackend:
        """Create a sandbox and return a backend that owns it (`kill()` deletes it). The
        keywords are `SandboxOptions`' (the README's parameter table); a failed or interrupted
        create leaves no sandbox behind."""
        backend = cls(options.create(), stderr_prefix=options.stderr_prefix)
        backend._creator.start_blocking(discard_unfinished=True)  # the caller gets no backend
        return backend

    @classmethod
    @takes_keywords(SandboxOptions, SEED_ORDER)
    async def acreate(cls, options: SandboxOptions) -> OpenSandboxBackend:
        """`create()` for async code: same arguments, runs on the caller's event loop."""
        return await cls._acreated(options)

    @classmethod
    async def _acreated(
        cls, options: SandboxOptions, labels: Mapping[str, str] | None = None
    ) -> OpenSandboxBackend:
        backend = cls(options.create(labels), stderr_prefix=options.stderr_prefix)
        await backend._creator.start(discard_unfinished=True)
        return backend

    @classmethod
    @takes_keywords_after_id(AttachOptions, SEED_ORDER)
    def connect(cls, sandbox_id: str, options: AttachOptions) -> OpenSandboxBackend:
        """Attach to an existing sandbox, which must exist (`SandboxUnavailableError`); it is
        never deleted by this backend unless `kill(force=True)`. The keywords are
        `AttachOptions`' (`timeout`, when given, renews the idle lifetime to it)."""
        backend = cls(options.attach(sandbox_id), stderr_prefix=options.stderr_prefix)
        run_blocking(backend._session.start())
        return backend

    @classmethod
    @takes_keywords_after_id(AttachOptions, SEED_ORDER)
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

    # -- commands ---------------------------------------------------------------------------
    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        return await run_for_agent(
            self._session, command, timeout=_limit(timeout), stderr_prefix=self._stderr_prefix
        )

    execute = twin(
        aexecute,
        name="execute",
        on_self=True,
        doc="Differs: `timeout=0` is no limit, a timeout is exit code 124, `stderr_prefix`.",
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
        """Differs: the core's capture, no `stderr_prefix` (docs/deepagents.md#offload)."""
        cap = OFFLOAD_MAX_CAPTURE_BYTES if max_capture_bytes is None else max_capture_bytes
        return await offload_for_agent(
            self._session,
            command,
            capture_path,
            OFFLOAD_PREVIEW,
            max_bytes=cap,
            inline_limit=max_inline_bytes,
            timeout=_limit(timeout),
            stderr_prefix=self._stderr_prefix,
        )

    execute_with_offload = twin(aexecute_with_offload, name="execute_with_offload", on_self=True)

    # -- directory upload -------------------------------------------------------------------
    async def aupload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        """`upload_dir()` on the caller's event loop."""
        if not isinstance(remote_dir, str) or not remote_dir.startswith("/"):
            raise ValueError(
                f"remote_dir must be an absolute path such as '/workspace/project', got "
                f"{remote_dir!r}."
            )
        return await self._session.files.upload_dir(local_dir, remote_dir, **options)

    upload_dir = twin(
        aupload_dir,
        name="upload_dir",
        on_self=True,
        doc="""Copy a local directory tree into the sandbox at `remote_dir` (absolute), leaving
        secrets behind (the core's list, docs/core.md: `.env`, `.ssh/`, `*.pem`, ...).
        Options: `include_secrets=True`, `exclude` (more patterns, `["node_modules/"]`),
        `concurrency` (8 files at once), `timeout` (per file). Symlinks never lead out of the
        tree. Returns what was uploaded and what was skipped, and why.""",
    )
