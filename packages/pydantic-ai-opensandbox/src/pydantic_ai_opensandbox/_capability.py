"""The `OpenSandbox` capability: supplies an OpenSandbox sandbox as an agent run's workspace.

Verified on 2026-11-29 with pydantic-ai-slim 2.62.0, pydantic-ai-harness 0.62.0 (`Coder`, `Shell`)
and opensandbox-server 1.1.1: a run creates its sandbox on first use, a follow-up run finds it in the
message history, `workspace=ref` reattaches, `workspace='new'` creates another, a destroyed sandbox
raises `WorkspaceUnavailableError`, and a run under `DBOSDurability` (dbos 3.4, SQLite) records the
ref in its first step and reaches the same sandbox after a worker failure.

On 2026-12-01 (same versions): a run that fails (the model raises, or a real SIGINT stops
`run_sync` while the model is awaited) deletes the sandbox it created, after the user's
`on_run_error` hooks ran; one it attached to (by ref, from the message history) stays. `wrap_run`
is the place: pydantic-ai calls `on_run_error` only for failures of the run body, never for
`KeyboardInterrupt`, while `wrap_run` sees every failure, cancellation included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.workspaces import Workspace, WorkspaceBackend, WorkspaceRef, WrapperWorkspace

from opensandbox_core import NetworkPolicy, SandboxSpec, Volume, discard_sandbox, spec_from_keywords
from opensandbox_core import validation as _validate

from ._backend import DEFAULT_SANDBOX_TIMEOUT, DEFAULT_WORKING_DIR, OpenSandboxBackend
from ._translate import PROVIDER, SPEC_FIELDS, destroy_by_id, lifetime

if TYPE_CHECKING:
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.run import AgentRunResult

__all__ = ["OpenSandbox"]


class _SuppliedBackend(OpenSandboxBackend):
    """A backend `OpenSandbox` built for one run; the capability closes it when that run ends."""

    def __init__(self, *, run_id: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id
        self.created_by_run = kwargs.get("ref") is None
        # Until a run claims it nothing closes this backend (a durable engine may build one per
        # step and drop it), so its clients close after each operation instead.
        self._close_after_operation = True

    def claim(self, owned: bool) -> None:
        """Keep the clients open across operations while the run that closes them is in progress."""
        self._close_after_operation = not owned


def _innermost_backend(workspace: Workspace) -> WorkspaceBackend:
    """The backend under the run's workspace (through `wrapped`, not `backend`: a durable
    workspace refuses `backend` in workflow code)."""
    current: WorkspaceBackend = workspace
    while isinstance(current, Workspace):
        current = current.wrapped if isinstance(current, WrapperWorkspace) else current.backend
    return current


def _durable(ctx: RunContext[Any]) -> bool:
    """Whether a durable engine runs this run now, and so may resume it in the same sandbox.

    Asked of the engines' public base class (the workspace wrapper they add is private)."""
    from pydantic_ai.durable_exec import BaseDurabilityCapability

    engines: list[BaseDurabilityCapability[Any]] = []
    if ctx.agent is not None:
        ctx.agent.root_capability.apply(
            lambda c: engines.append(c) if isinstance(c, BaseDurabilityCapability) else None
        )
    return any(engine.in_durable_context for engine in engines)


async def _destroy_after_failure(backend: _SuppliedBackend, error: BaseException) -> None:
    """Delete the sandbox a failed run created; never raises, survives a cancelled caller."""
    if backend.session.owned:
        await discard_sandbox(
            backend.session,
            f"was created by a run that failed ({type(error).__name__}): no result holds its ref",
        )


@dataclass(kw_only=True)
class OpenSandbox(AbstractCapability[AgentDepsT]):
    """Supply a sandbox on your own OpenSandbox server as the run's workspace, created on first use.

    ```python
    from pydantic_ai import Agent
    from pydantic_ai_harness.coder import Coder
    from pydantic_ai_opensandbox import OpenSandbox

    agent = Agent('anthropic:claude-opus-5-5', capabilities=[OpenSandbox(image='python:3.13-slim'), Coder()])
    ```

    With an `image`, a run without a ref creates a sandbox on first use; a `WorkspaceRef` (from the
    message history or `workspace=`) attaches to an existing one. A run that succeeds keeps its
    sandbox (call `destroy(ref)`; unused, it expires after `sandbox_timeout`, 30 minutes by default);
    a run that fails, Ctrl-C included, deletes the sandbox it created, never one it attached to.
    Without an `image` the capability only attaches and destroys by ref. It supplies the workspace
    only; compose it with `Coder`, `Shell` or `FileSystem` to give the model tools that use it.
    """

    image: str | None = None
    """Image for a new sandbox, such as `'python:3.13-slim'`; it needs a POSIX sh and the usual file
    utilities. `None` only attaches to and destroys sandboxes by ref."""

    connection: ConnectionConfig | None = field(default=None, repr=False)
    """The SDK's `opensandbox.config.ConnectionConfig`, used as given. `None` reads
    `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY` on each run."""

    resource: Mapping[str, str] | None = None
    """Limits for a new sandbox, such as `{'cpu': '500m', 'memory': '1Gi'}`; `None`: one CPU, 2 GiB."""

    allow_internet_access: bool = True
    """`False` asks the server for deny-all egress on a new sandbox; `True` sends no policy."""

    secure_access: bool = False
    """Ask the server for Secure Access on a new sandbox (Kubernetes ingress gateway only)."""

    sandbox_timeout: int | None = DEFAULT_SANDBOX_TIMEOUT
    """Seconds a sandbox may go unused before the server deletes it, files included (default 1800,
    30 minutes, as in every package of this project). Every operation renews it as it starts and a
    running command keeps renewing it, also on an attached sandbox. `None` keeps it until
    destroyed."""

    working_dir: str | None = DEFAULT_WORKING_DIR
    """Absolute directory commands start in and relative paths resolve against, created on first use
    if missing; `None` uses the image's own."""

    env: Mapping[str, str] | None = field(default=None, repr=False)
    """Variables every command gets, also in an attached sandbox. Nothing is read from the host."""

    entrypoint: Sequence[str] | None = None
    """A new sandbox's container command (argv); `None`: the image's (`default_entrypoint`)."""

    metadata: Mapping[str, str] | None = None
    """Labels for a new sandbox, besides the project's (`docs/core.md#sandbox-metadata`)."""

    volumes: Sequence[Volume] = ()
    """`opensandbox_core.Volume`s to mount in a new sandbox. Python only, like `connection`."""

    network_policy: NetworkPolicy | None = None
    """An `opensandbox_core.NetworkPolicy` for a new sandbox; not with `allow_internet_access=False`.
    Python only."""

    spec: SandboxSpec | None = None
    """An `opensandbox_core.SandboxSpec` for a new sandbox instead of `image` and the fields that
    map to it (`SPEC_FIELDS`: one given too must agree); its `lifetime` is the `sandbox_timeout`.
    Python only."""

    def __post_init__(self) -> None:
        if self.defer_loading:
            raise UserError(
                "`OpenSandbox` does not support `defer_loading=True`: the workspace is selected "
                "before deferred capabilities load."
            )
        try:  # the core's checks, now rather than at the run's first operation
            self._sandbox_spec()
            _validate.working_dir(self.working_dir)
            _validate.env(self.env)
            lifetime(self.sandbox_timeout)  # also when only attaching
        except (TypeError, ValueError) as exc:
            raise UserError(str(exc)) from None

    def _sandbox_spec(self) -> SandboxSpec | None:
        """The new sandbox these fields describe (`None` without `image` or `spec`)."""
        if self.image is None and self.spec is None:
            return None
        fields = {name: getattr(self, name) for name in SPEC_FIELDS}
        return spec_from_keywords(SPEC_FIELDS, fields, _DEFAULTS, spec=self.spec)

    @classmethod
    def from_spec(
        cls,
        *,
        id: str | None = None,
        description: str | None = None,
        image: str | None = None,
        resource: Mapping[str, str] | None = None,
        allow_internet_access: bool = True,
        secure_access: bool = False,
        sandbox_timeout: int | None = DEFAULT_SANDBOX_TIMEOUT,
        working_dir: str | None = DEFAULT_WORKING_DIR,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> OpenSandbox[Any]:
        """Build from an agent spec, with the fields JSON can express.

        The signature is explicit so that the SDK's `ConnectionConfig` does not hide the schema;
        specs reach the server through `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY`.
        """
        return cls(
            id=id,
            description=description,
            image=image,
            resource=resource,
            allow_internet_access=allow_internet_access,
            secure_access=secure_access,
            sandbox_timeout=sandbox_timeout,
            working_dir=working_dir,
            env=env,
            **kwargs,
        )

    def backend(self, ref: WorkspaceRef) -> OpenSandboxBackend:
        """A lazy backend for an existing sandbox (no I/O until its first operation)."""
        spec = self._sandbox_spec()
        return OpenSandboxBackend(
            ref=ref,
            connection=self.connection,
            working_dir=self.working_dir,
            env=self.env,
            sandbox_timeout=spec.lifetime if spec is not None else self.sandbox_timeout,
        )

    async def destroy(self, ref: WorkspaceRef) -> None:
        """Delete a sandbox by id, files included; one that no longer exists returns quietly."""
        if ref.provider != PROVIDER:
            raise ValueError(
                f"unsupported workspace provider {ref.provider!r}; expected 'opensandbox'"
            )
        await destroy_by_id(ref.id, self.connection)

    async def pause(self, ref: WorkspaceRef) -> None:
        """Freeze a sandbox by ref between runs (processes, memory and files kept); a run on a
        paused sandbox raises `WorkspaceUnavailableError` until `resume(ref)`."""
        backend = self.backend(ref)
        try:
            await backend.pause()
        finally:
            await backend.aclose()

    async def resume(self, ref: WorkspaceRef) -> None:
        """Thaw a sandbox paused with `pause(ref)`; returns once it answers commands again."""
        backend = self.backend(ref)
        try:
            await backend.resume()
        finally:
            await backend.aclose()

    def get_workspace(
        self, ctx: RunContext[AgentDepsT], *, ref: WorkspaceRef | None
    ) -> WorkspaceBackend | None:
        """Build the backend for this run. No I/O here: it creates or attaches on first use."""
        spec = self._sandbox_spec()
        if (ref is not None and ref.provider != PROVIDER) or (ref is None and spec is None):
            return None
        common: dict[str, Any] = {
            "run_id": ctx.run_id,
            "connection": self.connection,
            "working_dir": self.working_dir,
            "env": self.env,
        }
        if ref is not None:
            lifetime = spec.lifetime if spec is not None else self.sandbox_timeout
            return _SuppliedBackend(ref=ref, sandbox_timeout=lifetime, **common)
        return _SuppliedBackend(spec=spec, **common)

    async def wrap_run(
        self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        # Only the backend this run built: one passed as `workspace=` belongs to whoever built it.
        backend = _innermost_backend(ctx.workspace)
        owned = (
            backend
            if isinstance(backend, _SuppliedBackend) and backend.run_id == ctx.run_id
            else None
        )
        if owned is not None:
            owned.claim(True)
        try:
            return await handler()
        except BaseException as error:
            # A failed run returns no result, so nobody could find or delete the sandbox it
            # created. One it attached to (a ref, the message history) is never deleted, nor
            # is one under a durable engine, which may resume the run in it.
            if owned is not None and owned.created_by_run and not _durable(ctx):
                await _destroy_after_failure(owned, error)
            raise
        finally:
            if owned is not None:
                # `result.workspace` outlives the run, with no one left to close it.
                owned.claim(False)
                await owned.aclose()


_DEFAULTS: Final = {
    f.name: f.default for f in dataclasses.fields(OpenSandbox) if f.name in SPEC_FIELDS
}
