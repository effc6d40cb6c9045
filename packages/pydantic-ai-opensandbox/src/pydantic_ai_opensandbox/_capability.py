"""The `OpenSandbox` capability: supplies an OpenSandbox sandbox as an agent run's workspace.

Verified with pydantic-ai-slim 2.62.0, pydantic-ai-harness 0.62.0 and opensandbox-server 1.1.1;
docs/pydantic-ai.md ("Lifecycle") says which sandboxes a failed run deletes, and why here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability, WrapRunHandler
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.workspaces import Workspace, WorkspaceBackend, WorkspaceRef, WrapperWorkspace

from opensandbox_core import NetworkPolicy, SandboxSpec, Volume
from opensandbox_core import validation as _validate
from opensandbox_core.adapters import spec_from_keywords

from ._backend import DEFAULT_SANDBOX_TIMEOUT, DEFAULT_WORKING_DIR, OpenSandboxBackend
from ._lifecycle import operation
from ._translate import PROVIDER, SPEC_FIELDS, destroy_by_id, lifetime, settings_checked

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
        # Until a run claims it, nothing closes it (docs/pydantic-ai.md, "Lifecycle").
        self._scope.close_after_operation = True

    async def discard(self, why: str) -> None:
        """Delete the sandbox this backend created (a failed run's), logging `why`."""
        await self._scope.discard(why)

    def claim(self, owned: bool) -> None:
        """Keep the clients open across operations while the run that closes them is in progress."""
        self._scope.close_after_operation = not owned


def _innermost_backend(workspace: Workspace) -> WorkspaceBackend:
    """The backend under the run's workspace (through `wrapped`, not `backend`: a durable
    workspace refuses `backend` in workflow code)."""
    current: WorkspaceBackend = workspace
    while isinstance(current, Workspace):
        current = current.wrapped if isinstance(current, WrapperWorkspace) else current.backend
    return current


@contextlib.asynccontextmanager
async def workspace_sandbox(
    ctx: RunContext[Any], capability: str
) -> AsyncIterator[OpenSandboxBackend]:
    """The run's OpenSandbox backend for one tool call of `capability` (a class name), started
    or attached and kept open until the call ends (`operation`: errors as the workspace's);
    `UserError` when the run's workspace is not an OpenSandbox sandbox."""
    found = _innermost_backend(ctx.workspace)
    if not isinstance(found, OpenSandboxBackend):
        raise UserError(
            f"{capability} needs an OpenSandbox workspace: add OpenSandbox(image=...) to the "
            "capabilities, or pass an OpenSandboxBackend as workspace=."
        )
    async with operation(found):
        yield found


def _durable(ctx: RunContext[Any]) -> bool:
    """Whether a durable engine runs this run now (asked of the engines' public base class), and
    so may resume it in the same sandbox."""
    from pydantic_ai.durable_exec import BaseDurabilityCapability

    engines: list[BaseDurabilityCapability[Any]] = []
    if ctx.agent is not None:
        ctx.agent.root_capability.apply(
            lambda c: engines.append(c) if isinstance(c, BaseDurabilityCapability) else None
        )
    return any(engine.in_durable_context for engine in engines)


@dataclass(kw_only=True)
class OpenSandbox(AbstractCapability[AgentDepsT]):
    """Supply a sandbox on your own OpenSandbox server as the run's workspace, created on first use.

    ```python
    from pydantic_ai import Agent
    from pydantic_ai_harness.coder import Coder
    from pydantic_ai_opensandbox import OpenSandbox

    agent = Agent('anthropic:claude-opus-5-5', capabilities=[OpenSandbox(image='python:3.13-slim'), Coder()])
    ```

    With an `image` (or `spec`), a run without a ref creates a sandbox on first use; a `WorkspaceRef`
    (the message history, `workspace=`) attaches. A run that succeeds keeps its sandbox (`destroy(ref)`,
    or it expires after `sandbox_timeout`); one that fails, Ctrl-C included, deletes the sandbox it
    created. Compose it with `Coder`, `Shell` or `FileSystem`, which give the model tools.
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
    """Seconds a sandbox may go unused before the server deletes it, files included (default 1800);
    every operation and a running command renew it, also attached. `None`: until destroyed."""

    working_dir: str | None = DEFAULT_WORKING_DIR
    """Where commands start and relative paths resolve, created if missing; `None`: the image's."""

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
        with settings_checked():
            self._sandbox_spec()
            _validate.working_dir(self.working_dir)
            _validate.env(self.env)
            lifetime(self.sandbox_timeout)  # also when only attaching

    def _sandbox_spec(self) -> SandboxSpec | None:
        """The new sandbox these fields describe (`None` without `image` or `spec`)."""
        if self.image is None and self.spec is None:
            return None
        fields = {name: getattr(self, name) for name in SPEC_FIELDS}
        return spec_from_keywords(SPEC_FIELDS, fields, OpenSandbox, spec=self.spec)

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
        """Build from an agent spec, with the fields JSON can express (explicit, so that the SDK's
        `ConnectionConfig` does not hide the schema); the server comes from the environment."""
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

    def _session(self, spec: SandboxSpec | None) -> dict[str, Any]:
        """What every backend of this capability takes, attached ones too."""
        lifetime = spec.lifetime if spec is not None else self.sandbox_timeout
        return {"connection": self.connection, "working_dir": self.working_dir, "env": self.env,
                "sandbox_timeout": lifetime}  # fmt: skip

    def backend(self, ref: WorkspaceRef) -> OpenSandboxBackend:
        """A lazy backend for an existing sandbox (no I/O until its first operation)."""
        return OpenSandboxBackend(ref=ref, **self._session(self._sandbox_spec()))

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
        await self._by_ref(ref, pause=True)

    async def resume(self, ref: WorkspaceRef) -> None:
        """Thaw a sandbox paused with `pause(ref)`; returns once it answers commands again."""
        await self._by_ref(ref, pause=False)

    async def _by_ref(self, ref: WorkspaceRef, *, pause: bool) -> None:
        backend = self.backend(ref)
        try:
            await (backend.pause() if pause else backend.resume())
        finally:
            await backend.aclose()

    def get_workspace(
        self, ctx: RunContext[AgentDepsT], *, ref: WorkspaceRef | None
    ) -> WorkspaceBackend | None:
        """Build the backend for this run. No I/O here: it creates or attaches on first use."""
        spec = self._sandbox_spec()
        if (ref is not None and ref.provider != PROVIDER) or (ref is None and spec is None):
            return None
        create = spec if ref is None else None
        return _SuppliedBackend(run_id=ctx.run_id, ref=ref, spec=create, **self._session(spec))

    async def wrap_run(
        self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        # Only the backend this run built: one passed as `workspace=` belongs to whoever built it.
        b = _innermost_backend(ctx.workspace)
        owned = b if isinstance(b, _SuppliedBackend) and b.run_id == ctx.run_id else None
        if owned is not None:
            owned.claim(True)
        try:
            return await handler()
        except BaseException as error:
            # No result holds the ref of the sandbox a failed run created (docs/pydantic-ai.md).
            if owned is not None and owned.created_by_run and not _durable(ctx):
                why = f"was created by a run that failed ({type(error).__name__})"
                await owned.discard(why + ": no result holds its ref")
            raise
        finally:
            if owned is not None:
                # `result.workspace` outlives the run, with no one left to close it.
                owned.claim(False)
                await owned.aclose()
