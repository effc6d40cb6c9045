"""The options of `OpenSandboxBackend.create/acreate/connect/aconnect` and `ThreadSandboxBackend`,
declared once.

Each options class is a frozen dataclass whose fields are the keyword arguments (names, types,
defaults) of the methods that take it; `takes_options` gives such a method the dataclass's
signature, for type checkers (`ParamSpec`) and for `inspect.signature` and `help()` alike, and
hands the method one built options object. The values are checked once, by the core's
`_validate`, when the object is built (no I/O).

| class            | used by                                | adds                                  |
|------------------|----------------------------------------|---------------------------------------|
| `AttachOptions`  | `connect`, `aconnect`                  | server, lifetime renewal, commands    |
| `SandboxOptions` | `create`, `acreate`                    | what a new sandbox looks like         |
| `ThreadOptions`  | `ThreadSandboxBackend(...)`            | `namespace`, `settle_timeout`         |
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from opensandbox_core import (
    AsyncSandboxSession,
    Connection,
    NetworkPolicy,
    SandboxSpec,
    Volume,
)
from opensandbox_core import (
    defaults as _defaults,
)
from opensandbox_core import (
    validation as _validate,
)

from ._mapping import entrypoint_argv

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_IMAGE",
    "DEFAULT_LIFETIME",
    "AttachOptions",
    "SandboxOptions",
    "ThreadOptions",
    "takes_options",
    "takes_options_after_id",
]

DEFAULT_IMAGE = "opensandbox/code-interpreter:v1.1.0"
DEFAULT_LIFETIME = timedelta(seconds=_defaults.LIFETIME)
DEFAULT_COMMAND_TIMEOUT = timedelta(seconds=_defaults.COMMAND_TIMEOUT)

_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")

P = ParamSpec("P")
R = TypeVar("R")
O = TypeVar("O")  # noqa: E741 - the options type


@dataclass(frozen=True, kw_only=True)
class AttachOptions:
    """What `connect()` takes: the server, the lifetime renewal, and how commands run.

    - `domain`: the server, `host:port` (default `OPEN_SANDBOX_DOMAIN`, then `localhost:8080`);
      `https://host:port` switches to HTTPS.
    - `api_key`: the server's `[server] api_key` (default `OPEN_SANDBOX_API_KEY`). Without one an
      `InsecureSandboxWarning` is emitted. Never shown in `repr()`.
    - `use_server_proxy`: route command and file traffic through the server (Docker Desktop on
      macOS and Windows, Kubernetes without an ingress).
    - `timeout`: idle lifetime; when attaching, `None` leaves the one the creator set.
    - `command_timeout`: what `execute(timeout=None)` allows a command (`None`: no limit).
    - `working_dir`: where commands start (created if missing).
    - `stderr_prefix`: when set, `execute()` marks stderr in the combined output: every line
      the command printed on stderr starts with it (e.g. `"[stderr] "`), after all of stdout.
      Default `None`: stdout then stderr, unmarked, exactly as printed.
    """

    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    use_server_proxy: bool = False
    timeout: timedelta | float | None = None
    command_timeout: timedelta | float | None = DEFAULT_COMMAND_TIMEOUT
    working_dir: str = _defaults.WORKING_DIR
    stderr_prefix: str | None = None

    def __post_init__(self) -> None:
        _validate.idle_lifetime(self.timeout)
        _validate.idle_lifetime(self.command_timeout, "command_timeout")
        _validate.working_dir(self.working_dir)
        if self.stderr_prefix is not None and not isinstance(self.stderr_prefix, str):
            raise _validate.ArgumentTypeError("stderr_prefix must be a string or None.")

    def connection(self) -> Connection:
        return Connection(
            domain=self.domain, api_key=self.api_key, use_server_proxy=self.use_server_proxy
        )

    def attach(self, sandbox_id: str, connection: Connection | None = None) -> AsyncSandboxSession:
        """A session on an existing sandbox (no I/O), renewing it to `timeout` when given."""
        session = AsyncSandboxSession.attach(
            sandbox_id,
            connection=connection or self.connection(),
            working_dir=self.working_dir,
            default_timeout=_validate.idle_lifetime(self.command_timeout, "command_timeout"),
        )
        session.set_lifetime(_validate.idle_lifetime(self.timeout))
        return session

    def attach_options(self) -> AttachOptions:
        """These options as `connect()` takes them (for attaching to a sandbox made with them)."""
        names = {f.name for f in fields(AttachOptions)}
        return AttachOptions(**{n: getattr(self, n) for n in names})


@dataclass(frozen=True, kw_only=True)
class SandboxOptions(AttachOptions):
    """What `create()` takes: `AttachOptions` plus what a new sandbox looks like.

    - `image`, `entrypoint`: what the sandbox runs. For `opensandbox/code-interpreter` images the
      entrypoint script is picked from the tag; other images keep `tail -f /dev/null` unless
      given. A string entrypoint is split like a shell would.
    - `timeout`: idle lifetime (default 30 minutes, as in every package of this project); every
      operation renews it and a running command keeps renewing it. `None` (or `0`) keeps the
      sandbox until it is killed.
    - `env`: the container's environment (every command sees it). Never shown in `repr()`.
    - `resource`: limits such as `{"cpu": "1", "memory": "2Gi"}` (default one CPU and 2 GiB).
    - `allow_internet_access`: `False` asks the server for a deny-all egress policy.
    - `network_policy`: an `opensandbox_core.NetworkPolicy` (egress rules such as
      `EgressRule("allow", "pypi.org")`, then a default action); not with
      `allow_internet_access=False`. Needs the server's egress sidecar.
    - `volumes`: `opensandbox_core.Volume`s to mount (host paths the server allows, or named
      volumes).
    - `metadata`: labels on the sandbox (find it again with `opensandbox_core.list_sandboxes`).
    - `ready_timeout`: seconds to wait for the sandbox's daemon after the create.
    """

    image: str = DEFAULT_IMAGE
    entrypoint: str | Sequence[str] | None = None
    timeout: timedelta | float | None = DEFAULT_LIFETIME
    env: Mapping[str, str] | None = field(default=None, repr=False)
    resource: Mapping[str, str] | None = None
    allow_internet_access: bool = True
    network_policy: NetworkPolicy | None = None
    volumes: Sequence[Volume] = ()
    metadata: Mapping[str, str] | None = None
    ready_timeout: float = _defaults.READY_TIMEOUT

    def __post_init__(self) -> None:
        super().__post_init__()
        self.spec()  # checks every create option now, before any I/O

    def spec(self, extra_metadata: Mapping[str, str] | None = None) -> SandboxSpec:
        """The core's `SandboxSpec` for these options, with `extra_metadata` added."""
        return SandboxSpec(
            image=self.image,
            entrypoint=entrypoint_argv(self.entrypoint, self.image),
            env=dict(self.env or {}),
            resource=dict(self.resource) if self.resource is not None else None,
            allow_internet_access=self.allow_internet_access,
            network_policy=self.network_policy,
            volumes=tuple(self.volumes),
            metadata={**(self.metadata or {}), **(extra_metadata or {})},
            lifetime=_validate.idle_lifetime(self.timeout),
            ready_timeout=self.ready_timeout,
        )

    def create(
        self,
        extra_metadata: Mapping[str, str] | None = None,
        connection: Connection | None = None,
    ) -> AsyncSandboxSession:
        """A session that creates a sandbox on first use (no I/O here)."""
        return AsyncSandboxSession(
            self.spec(extra_metadata),
            connection=connection or self.connection(),
            working_dir=self.working_dir,
            default_timeout=_validate.idle_lifetime(self.command_timeout, "command_timeout"),
        )


@dataclass(frozen=True, kw_only=True)
class ThreadOptions(SandboxOptions):
    """What `ThreadSandboxBackend(...)` takes: `SandboxOptions` plus

    - `namespace`: separates applications sharing one server (a label value: letters, digits,
      `-`, `_`, `.`, at most 63 characters). The same thread id in two namespaces gets two
      sandboxes.
    - `settle_timeout`: how long a racing first call may take to agree on the thread's sandbox.
    """

    namespace: str = "default"
    settle_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.namespace, str) or not _LABEL_VALUE.fullmatch(self.namespace):
            raise ValueError(
                f"namespace must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending "
                f"with a letter or digit; got {self.namespace!r}."
            )
        _validate.seconds(self.settle_timeout, "settle_timeout", minimum=0.001)
        super().__post_init__()

    def sandbox_options(self) -> SandboxOptions:
        names = {f.name for f in fields(SandboxOptions)}
        return SandboxOptions(**{n: getattr(self, n) for n in names})


_ORDER = (
    # The seed's order first (domain, image, entrypoint, api_key, use_server_proxy, timeout).
    "namespace",
    "domain",
    "image",
    "entrypoint",
    "api_key",
    "use_server_proxy",
    "timeout",
    "env",
    "resource",
    "allow_internet_access",
    "network_policy",
    "volumes",
    "metadata",
    "command_timeout",
    "working_dir",
    "ready_timeout",
    "stderr_prefix",
    "settle_timeout",
)


def _signature(options: type[Any], *leading: inspect.Parameter) -> inspect.Signature:
    params = sorted(
        (
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(options).parameters.values()
        ),
        key=lambda p: _ORDER.index(p.name) if p.name in _ORDER else len(_ORDER),
    )
    return inspect.Signature([*leading, *params])


_FIRST = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)


def takes_options(
    options: Callable[P, O],
) -> Callable[[Callable[[Any, O], R]], Callable[Concatenate[Any, P], R]]:
    """Give `method(self_or_cls, options)` the keyword signature of the options class."""

    def decorate(method: Callable[[Any, O], R]) -> Callable[Concatenate[Any, P], R]:
        if inspect.iscoroutinefunction(method):

            async def acall(first: Any, /, *args: P.args, **kwargs: P.kwargs) -> Any:
                coroutine: Coroutine[Any, Any, Any] = cast(Any, method)(
                    first, options(*args, **kwargs)
                )
                return await coroutine

            wrapper = cast(Callable[Concatenate[Any, P], R], acall)
        else:

            def call(first: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
                return method(first, options(*args, **kwargs))

            wrapper = call
        functools.update_wrapper(wrapper, method)
        wrapper.__signature__ = _signature(cast(type, options), _FIRST)  # type: ignore[attr-defined]
        return wrapper

    return decorate


_ID = inspect.Parameter("sandbox_id", inspect.Parameter.POSITIONAL_ONLY, annotation="str")


def takes_options_after_id(
    options: Callable[P, O],
) -> Callable[[Callable[[Any, str, O], R]], Callable[Concatenate[Any, str, P], R]]:
    """`takes_options` for `method(cls, sandbox_id, options)`."""

    def decorate(method: Callable[[Any, str, O], R]) -> Callable[Concatenate[Any, str, P], R]:
        if inspect.iscoroutinefunction(method):

            async def acall(
                first: Any, sandbox_id: str, /, *args: P.args, **kwargs: P.kwargs
            ) -> Any:
                coroutine: Coroutine[Any, Any, Any] = cast(Any, method)(
                    first, sandbox_id, options(*args, **kwargs)
                )
                return await coroutine

            wrapper = cast(Callable[Concatenate[Any, str, P], R], acall)
        else:

            def call(first: Any, sandbox_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
                return method(first, sandbox_id, options(*args, **kwargs))

            wrapper = call
        functools.update_wrapper(wrapper, method)
        wrapper.__signature__ = _signature(cast(type, options), _FIRST, _ID)  # type: ignore[attr-defined]
        return wrapper

    return decorate
