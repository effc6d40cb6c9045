"""`AsyncSandboxSession`: one sandbox, created or attached on first use.

Verified against opensandbox-server 1.1.1 and the opensandbox SDK 1.1.1 (November 2026), with
recorded exchanges of the real execd v1.0.19 and v1.0.18 (tests/data/execd-recordings) and the
project's testbed daemon in its generation profiles (1.0.19, 1.0.18, 1.1, 1.0.16).

The session holds the sandbox's identity and lifecycle, and composes the facets users call
(as the OpenSandbox SDK and e2b group them), each a class of its own in its folder:

- `session.commands` (`_commands._facet.Commands`): run, run_bytes, run_offloaded, background
  processes;
- `session.files` (`_files._facet.Files`): stat, list, make, remove; read, write, ranges, pages,
  batches, directory uploads; walk, glob, grep and edit;
- `session.terminals` (`_terminal._facet.Terminals`): interactive terminals, opened or attached;
  the session detaches those still open when it closes (they keep running);
- `session.code` (`_code._facet.CodeInterpreter`): code in Jupyter kernels of a code-interpreter
  image, with contexts.

Underneath, the lifecycle (`_lifecycle`, with `_startup` and `_reach`: clients, start-once,
create, attach and recover, readiness and the probe, renewal, pause and resume, destroy, the
error boundary) is shared by every facet. The read-only properties (`id`, `owned`, `spec`, ...)
are `SessionInfo`'s, shared with the blocking `SandboxSession`.

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

import posixpath
from collections.abc import Mapping
from typing import Any

from . import _validate
from ._code._facet import CodeInterpreter
from ._commands._facet import Commands
from ._commands._run import CommandRunner
from ._config import Connection, SandboxSpec
from ._defaults import COMMAND_TIMEOUT, MAX_OUTPUT, RECOVER_TIMEOUT, WORKING_DIR
from ._files._facet import Files
from ._files._filesystem import FileSystem
from ._files._transfers import Transfers
from ._lifecycle._guard import CreateGuard
from ._lifecycle._sandbox import SandboxLifecycle
from ._session_info import SessionInfo
from ._terminal._facet import Terminals

__all__ = ["AsyncSandboxSession"]


class AsyncSandboxSession(SessionInfo):
    """A session on one OpenSandbox sandbox: commands and files, created or attached lazily.

    Build it with a `SandboxSpec` to create a sandbox on first use, or with `sandbox_id=` to
    attach to an existing one (`AsyncSandboxSession.attach(id)`). Pass the id (`session.id`) to
    another process or framework to share the sandbox.

    ```python
    async with AsyncSandboxSession(SandboxSpec(image="python:3.13-slim")) as sb:
        result = await sb.commands.run("python3 -c 'print(6 * 7)'")
        await sb.files.write_bytes("data.bin", b"\\x00\\x01")
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
        self._runner = CommandRunner(
            self._life, env=self._env, default_timeout=timeout_default, max_output=max_output
        )
        fs = FileSystem(self._life, self._runner)
        transfers = Transfers(self._life, fs, self._runner)
        self.commands: Commands = Commands(self._life, self._runner, fs, transfers)
        """Commands: `run`, `run_bytes`, `run_offloaded`, `start_background`, `background`."""
        self.files: Files = Files(self._runner, fs, transfers)
        """Files: read, write, stat, list, walk, glob, grep, edit, batches and uploads."""
        self.terminals: Terminals = Terminals(self._life)
        """Interactive terminals: `open` and `attach`."""
        self.code: CodeInterpreter = CodeInterpreter(self._life, self._runner)
        """Code in Jupyter kernels: `run`, `create_context`, `contexts`, `delete_context`,
        `interrupt` (docs/core.md, "Code")."""
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
        await self.terminals._let_go()
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

    async def _pause_or_resume(self, *, pause: bool, timeout: float) -> None:
        limit = _validate.timeout(timeout, allow_none=False)
        assert limit is not None
        await self._life.pause_or_resume(pause=pause, limit=limit)

    async def aclose(self) -> None:
        """Close this event loop's HTTP clients and detach the terminals this session opened or
        attached (their processes keep running). The sandbox keeps running."""
        await self.terminals._let_go()
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
