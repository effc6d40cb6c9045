"""`AsyncSandboxSession`: one sandbox, created or attached on first use.

Verified against opensandbox-server 1.1.1 and the opensandbox SDK 1.1.1 (November 2026), with
recorded exchanges of the real execd v1.0.19 and v1.0.18 (tests/data/execd-recordings) and the
project's testbed daemon in its generation profiles (1.0.19, 1.0.18, 1.1, 1.0.16).

The session is a facade over facets with one job each, and keeps only its flat public methods
(one-line delegations), `async with` and `aclose()`. Its methods are grouped in mixins, one
module each, that read the facets the constructor here builds: the read-only properties (`id`,
`owned`, `spec`, ...) are `SessionInfo`'s, shared with the blocking `SandboxSession`; the
command methods `CommandMethods`' (`_session_commands`, with the `DEFAULT` sentinel); paged
reads, walk, glob and grep `SearchMethods`' (`_session_search`); terminals ``TerminalMethods`'
(`_session_terminals`). The facets:

- lifecycle (`_lifecycle`, with `_startup` and `_reach`): clients, start-once, create, attach and
  recover, readiness and the probe, renewal, pause and resume, destroy, the error boundary;
- commands (`_commands`, `_background`): run, interrupt, background processes;
- files (`_filesystem`, `_transfers`): stat, list, make, remove; read, write, transfers;
- interactive terminals (`_terminal`): open and attach; the session keeps a weak set of the
  terminals it handed out, and detaches them when it closes (they keep running).

Rules it keeps:
- Construction does no I/O. The first operation creates the sandbox (built from a `SandboxSpec`)
  or attaches (built with a sandbox id); concurrent first operations, from one or several event
  loops, share one start.
- The id is recorded the moment the server answers the create, and never changes. If the answer
  is lost (timeout, dropped connection, 502/503/504), the sandbox is found again by the ownership
  tag that this session put in its metadata, instead of creating a second one.
- A session destroys its sandbox only when asked (`destroy()`), or on leaving `async with` when
  it created the sandbox itself. Closing (`aclose()`) only releases local connections.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Unpack

from . import _validate
from ._code._facet import CodeInterpreter
from ._commands._run import Commands, OutputCallback
from ._config import Connection, SandboxSpec
from ._defaults import (
    CHUNK_SIZE,
    COMMAND_TIMEOUT,
    MAX_OUTPUT,
    RECOVER_TIMEOUT,
    WORKING_DIR,
)
from ._files._filesystem import FileSystem
from ._files._pages import LineReader
from ._files._transfers import Transfers
from ._files._upload import DirectoryUpload, UploadOptions, upload_directory
from ._lifecycle._guard import CreateGuard
from ._lifecycle._sandbox import SandboxLifecycle
from ._metadata import LIBRARY_KEY, LIBRARY_VALUE, OWNER_KEY
from ._session_commands import DEFAULT, CommandMethods
from ._session_info import SessionInfo
from ._session_search import SearchMethods
from ._session_terminals import TerminalMethods
from ._terminal._handle import Terminal, let_go
from ._types import FileInfo, TransferResult, WriteData

__all__ = [
    "DEFAULT",
    "LIBRARY_KEY",
    "LIBRARY_VALUE",
    "OWNER_KEY",
    "AsyncSandboxSession",
    "OutputCallback",
]


class AsyncSandboxSession(CommandMethods, SearchMethods, TerminalMethods, SessionInfo):
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

    def __init__(
        self,
        spec: SandboxSpec | None = None,
        *,
        sandbox_id: str | None = None,
        connection: Connection | None = None,
        working_dir: str | None = WORKING_DIR,
        env: Mapping[str, str] | None = None,
        default_timeout: float | None = COMMAND_TIMEOUT,
        max_output: int = MAX_OUTPUT,
        recover_timeout: float = RECOVER_TIMEOUT,
    ) -> None:
        if spec is not None:
            _validate.instance(spec, SandboxSpec, "spec", "a SandboxSpec")
        if connection is not None:
            _validate.instance(
                connection, Connection, "connection", "an opensandbox_core.Connection"
            )
        _validate.one_of(
            spec,
            sandbox_id,
            create_name="a SandboxSpec (to create a sandbox)",
            attach_name="sandbox_id (to attach)",
        )
        _validate.working_dir(working_dir)
        _validate.max_output(max_output)
        timeout_default = _validate.timeout(default_timeout, allow_none=True)
        self._env = _validate.env(env)
        self._life = SandboxLifecycle(
            spec,
            None if sandbox_id is None else _validate.sandbox_id(sandbox_id),
            connection or Connection(),
            working_dir=posixpath.normpath(working_dir) if working_dir else None,
            recover_timeout=recover_timeout,
        )
        self._commands = Commands(
            self._life,
            env=self._env,
            default_timeout=timeout_default,
            max_output=max_output,
        )
        self._files = FileSystem(self._life, self._commands)
        self._transfers = Transfers(self._life, self._files, self._commands)
        self._lines = LineReader(self)
        self._terminals: weakref.WeakSet[Terminal] = weakref.WeakSet()
        self.code = CodeInterpreter(self._life, self._commands)
        """Code in Jupyter kernels (`run`, `create_context`, `contexts`, `delete_context`,
        `interrupt`): see `CodeInterpreter` and docs/core.md, "Code"."""
        self._life.connection.check_security()

    # -- identity (the read-only properties and repr() are `SessionInfo`'s) ------------------
    @classmethod
    def attach(cls, sandbox_id: str, **kwargs: Any) -> AsyncSandboxSession:
        """A session on an existing sandbox. It never destroys the sandbox on its own."""
        return cls(sandbox_id=sandbox_id, **kwargs)

    def _adopt(self, owner_token: str) -> None:
        """Internal, for code that created this session's sandbox itself (a snapshot restore):
        the session becomes its owner, with `owner_token` as the tag the sandbox carries, and so
        destroys it on leaving `async with`."""
        self._life.adopt(owner_token)

    # -- lifecycle (the `_lifecycle` facet) --------------------------------------------------
    async def start(self) -> str:
        """Create or attach now (otherwise the first operation does it); return the sandbox id."""
        await self._life.ensure()
        assert self._life.sandbox_id is not None
        return self._life.sandbox_id

    async def working_dir(self) -> str:
        """The canonical working directory (absolute, symlinks resolved)."""
        return (await self._life.context()).working_dir

    async def get_endpoint(self, port: int) -> tuple[str, dict[str, str]]:
        """The URL of `port` inside the sandbox, and the headers a client must send to it.

        Direct or through the server proxy, as the connection says. The server routes any port
        (on Docker through execd's proxy); when it cannot expose one, this raises `ServerError`.
        """
        return await self._life.endpoint(_validate.port(port))

    async def destroy(self) -> None:
        """Delete the sandbox, files included. Quiet when it is already gone; idempotent."""
        await let_go(self._terminals)
        await self._life.destroy()

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
        await self._life.pause_or_resume(pause=pause, limit=limit)

    async def aclose(self) -> None:
        """Close this event loop's HTTP clients and detach the terminals this session opened or
        attached (their processes keep running). The sandbox keeps running."""
        await let_go(self._terminals)
        await self._life.aclose()

    async def __aenter__(self) -> AsyncSandboxSession:
        # A sandbox created before a failure or a cancellation would otherwise be left behind.
        await CreateGuard(self).start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._life.owned:
            await self.destroy()
        else:
            await self.aclose()

    def set_lifetime(self, lifetime: float | None) -> None:
        """Renew the sandbox for `lifetime` seconds as each operation starts.

        Applies to attached sandboxes too; a created one starts with its spec's lifetime. `None`
        on a created sandbox: never renewed (it has no expiry). `None` on an attached one: an
        expiry it has is extended to `defaults.LIFETIME` from now while it is used, never
        shortened, and a sandbox without an expiry never gets one.
        """
        if lifetime is not None:
            _validate.seconds(lifetime, "lifetime", minimum=1)
        self._life.lifetime = lifetime

    async def sandbox_gone(self) -> bool:
        """Whether the sandbox no longer exists or its daemon no longer answers (a probe)."""
        if self._life.sandbox_id is None:
            return False
        return await self._life.gone(self._life.clients().execd)

    # -- files (the `_filesystem` and `_transfers` facets) -----------------------------------
    async def realpath(self, path: str) -> str:
        """The canonical absolute path (symlinks resolved, missing names kept), like `realpath -m`."""
        return await self._files.realpath(path)

    async def stat(self, path: str) -> FileInfo:
        """Metadata of a path; `is_dir`/`is_file` follow symlinks. Missing: FileNotFoundError."""
        return await self._files.stat(path)

    async def exists(self, path: str) -> bool:
        """Whether the path exists (a dangling symlink counts); see `FileSystem.exists`."""
        return await self._files.exists(path)

    async def list_dir(self, path: str = ".") -> list[FileInfo]:
        """The entries of a directory, sorted by name (symlinks followed for `is_dir`)."""
        return await self._files.list_dir(path)

    async def make_dir(self, path: str, *, parents: bool = True, exist_ok: bool = True) -> None:
        """Create a directory (and its parents). Over a file: FileExistsError."""
        await self._files.make_dir(path, parents=parents, exist_ok=exist_ok)

    async def remove(self, path: str, *, recursive: bool = True) -> None:
        """Delete a file, symlink or directory tree. Refuses the working dir and its ancestors."""
        await self._files.remove(path, recursive=recursive)

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        """The whole content of a file. Directories, FIFOs and devices raise instead of blocking."""
        return await self._transfers.read_bytes(path, max_size=max_size)

    async def iter_bytes(
        self, path: str, *, max_size: int | None = None, chunk_size: int = CHUNK_SIZE
    ) -> AsyncIterator[bytes]:
        """Stream a file's content in chunks (bounded memory)."""
        chunks = self._transfers.iter_bytes(path, max_size=max_size, chunk_size=chunk_size)
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                yield chunk

    async def write_bytes(
        self, path: str, data: WriteData, *, mode: int | None = None, timeout: float | None = None
    ) -> None:
        """Write a file atomically (see `AtomicWriter.write_bytes`): parents are created, an existing
        file keeps its mode, writes through a symlink reach its target, and a failed write leaves
        the old content in place."""
        await self._transfers.write_bytes(path, data, mode=mode, timeout=timeout)

    async def upload_files(
        self, files: Sequence[tuple[str, bytes]], *, mode: int | None = None
    ) -> list[TransferResult]:
        """Write several files; one result per file, in order. Never raises for one bad file."""
        return await self._transfers.upload_files(files, mode=mode)

    async def download_files(self, paths: Sequence[str]) -> list[TransferResult]:
        """Read several files; one result per file, in order. Never raises for one bad file."""
        return await self._transfers.download_files(paths)

    async def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Up to `length` bytes of a regular file from byte `offset` (see `Transfers.read_range`)."""
        return await self._transfers.read_range(path, offset, length)

    async def replace_text(self, path: str, old: str, new: str) -> None:
        """Replace every occurrence of `old` with `new` in a file, in place (see
        `Transfers.replace_text`)."""
        await self._transfers.replace_text(path, old, new)
