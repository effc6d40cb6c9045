"""An OpenSandbox sandbox behind Pydantic AI's `WorkspaceBackend` protocol.

The work is done by `opensandbox_core.AsyncSandboxSession`; this module translates types, and
`_translate` errors (one table). Verified with pydantic-ai-slim 2.62.0 and 2.68.0
(`WorkspaceBackendSuite`); see docs/pydantic-ai.md for the design and what was verified live.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Unpack

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
)

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    NetworkPolicy,
    SandboxSpec,
    Volume,
)
from opensandbox_core import validation as _validate
from opensandbox_core.adapters import (
    DirectoryUpload,
    OperationScope,
    UploadOptions,
    spec_from_keywords,
)
from opensandbox_core.metadata import adapter_labels

from ._lifecycle import SessionLifecycle
from ._translate import (
    PROVIDER,
    SPEC_FIELDS,
    check_ref,
    core_connection,
    file_entry,
    require_asyncio,
    translate,
)

if TYPE_CHECKING:
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.workspaces import WorkspaceCommand

__all__ = ["CREATE_METADATA_KEY", "PROVIDER", "OpenSandboxBackend"]

logger = logging.getLogger(__name__)

CREATE_METADATA_KEY: Final = "pydantic-ai-create"
"""Seed 004's entry (`true`) on every sandbox this package creates, besides the core's labels."""
_ADAPTER: Final = "pydantic-ai"
"""This package's name in the core's `adapter` label (its `opensandbox.adapters` entry point)."""
_CREATE_METADATA: Final = {**adapter_labels(_ADAPTER), CREATE_METADATA_KEY: "true"}
DEFAULT_WORKING_DIR: Final = "/workspace"
"""Default `working_dir` (seed 004's)."""
DEFAULT_SANDBOX_TIMEOUT: Final = 1800
"""Default `sandbox_timeout`: 30 minutes of disuse, the idle lifetime every package here uses
(tests/unit/test_lifetimes.py holds it equal to the core's)."""
_MAX_OUTPUT: Final = 16 * 1024 * 1024
"""Bytes of stdout and of stderr a command may print; past that `run` raises instead of cutting."""


class OpenSandboxBackend(
    SessionLifecycle, WorkspaceBackend, SupportsCommands, SupportsFilesystem, SupportsRealpath
):
    """Run commands and file operations in an OpenSandbox sandbox, created on first use.

    Built with `image`, the first operation creates a sandbox from it; built with `ref`, it attaches
    to that sandbox and raises `WorkspaceUnavailableError` if it is gone. Building does no I/O. The
    backend never deletes the sandbox: call `OpenSandbox().destroy(ref)`; left unused, it expires
    after `sandbox_timeout`. Under Trio every operation raises `UserError` (the SDK needs asyncio).

    Args:
        image: The image for a new sandbox, such as `'python:3.13-slim'`. Pass it (or `spec`) or `ref`.
        ref: `WorkspaceRef(provider='opensandbox', id=<sandbox id>)` to attach to instead.
        connection: The SDK's `opensandbox.config.ConnectionConfig`, used as given (a transport in
            it stays yours to close). `None` reads `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY`.
        working_dir: Absolute directory commands start in and relative paths resolve against,
            created on first use if missing; `None` uses the image's own.
        env: Variables every command gets; a command's `env` goes on top. Kept out of `repr()`.
        sandbox_timeout: Seconds the sandbox may go unused before the server deletes it (default
            1800, 30 minutes); every operation renews it and a running command keeps renewing it,
            on an attached sandbox too. `None` keeps it until destroyed.
        resource, allow_internet_access, secure_access, entrypoint, metadata, volumes,
            network_policy: A new sandbox's, as `OpenSandbox`'s fields of those names say.
        spec: An `opensandbox_core.SandboxSpec` describing a new sandbox instead of the keywords
            that map to it (`SPEC_FIELDS`); one given with it must agree with it.
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
        sandbox_timeout: float | None = DEFAULT_SANDBOX_TIMEOUT,
        entrypoint: Sequence[str] | None = None,
        metadata: Mapping[str, str] | None = None,
        volumes: Sequence[Volume] = (),
        network_policy: NetworkPolicy | None = None,
        spec: SandboxSpec | None = None,
    ) -> None:
        create = spec if spec is not None else image
        if (create is None) == (ref is None):
            raise ConfigurationError(
                "Pass either image= (or spec=) to create a sandbox or ref=, not "
                + ("both." if ref is not None else "neither.")
            )
        if ref is not None:
            check_ref(ref)
        else:
            given = {k: v for k, v in locals().items() if k in SPEC_FIELDS}  # as called
            spec = spec_from_keywords(
                SPEC_FIELDS, given, OpenSandboxBackend, spec=spec, labels=_CREATE_METADATA
            )
        self._image = spec.image if spec is not None else None
        self._given_ref = ref
        self._created_ref: WorkspaceRef | None = None
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
        self._logged_create = False
        self._scope = OperationScope(self._session)

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
        # Checked before `_operation()` starts the sandbox: a bad call must not create one.
        line = _validate.command_form(command, shell)
        _validate.timeout(timeout)
        _validate.env(env)
        async with self._operation():
            try:
                result = await self._session.commands.run(line, env=env, timeout=timeout)
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
            return await self._session.files.read_bytes(path)

    async def write_bytes(self, path: str, data: bytes) -> None:
        content = _validate.byte_data(data)
        async with self._operation():
            await self._session.files.write_bytes(path, content)

    async def stat(self, path: str) -> FileEntry:
        async with self._operation():
            info = await self._session.files.stat(path)
            return file_entry(info, path)

    async def list_dir(self, path: str) -> Sequence[FileEntry]:
        async with self._operation():
            entries = await self._session.files.list_dir(path)
            return [file_entry(e, posixpath.join(path, e.name)) for e in entries]

    async def make_dir(self, path: str) -> None:
        async with self._operation():
            await self._session.files.make_dir(path, parents=True, exist_ok=True)

    async def remove(self, path: str) -> None:
        async with self._operation():
            await self._session.files.remove(path, recursive=True)

    async def exists(self, path: str) -> bool:
        async with self._operation():
            return await self._session.files.exists(path)

    # -- SupportsRealpath ---------------------------------------------------------------------
    async def realpath(self, path: str) -> str:
        async with self._operation():
            return await self._session.files.realpath(path)

    # -- beyond the workspace protocol ------------------------------------------------------------
    async def pause(self) -> None:
        """Freeze the sandbox (processes, memory and files kept), for an agent that waits between
        runs; `resume()` thaws it. While paused, operations raise `WorkspaceUnavailableError`
        saying to resume it. Its `sandbox_timeout` keeps counting."""
        async with self._operation():
            await self._session.pause()

    async def resume(self) -> None:
        """Thaw a paused sandbox; returns once it answers commands again."""
        require_asyncio()
        try:
            await self._session.resume()
        except Exception as exc:
            translate(exc, starting=True)

    async def upload_dir(
        self, local_dir: str | os.PathLike[str], remote_dir: str, **options: Unpack[UploadOptions]
    ) -> DirectoryUpload:
        """Copy a local directory tree into the sandbox, leaving secrets behind (`.env`, `.ssh/`,
        `*.pem`, ...: the core's list, docs/core.md) unless `include_secrets=True`; options and
        result as `session.files.upload_dir`'s. A relative `remote_dir` resolves against the
        working directory."""
        async with self._operation():
            return await self._session.files.upload_dir(local_dir, remote_dir, **options)
