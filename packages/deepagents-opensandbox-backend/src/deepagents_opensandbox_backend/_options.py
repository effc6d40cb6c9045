"""The keywords of the Deep Agents backends and where each one goes in the core: one table.

`SPEC_FIELDS` maps each keyword that describes a new sandbox to its field of the core's
`SandboxSpec`, with the conversion of its value where the form differs; `spec=SandboxSpec(...)`
can be given instead (with those keywords, only where they agree). The other keywords are the
connection's (`domain`, `api_key`, `use_server_proxy`) or the session's (`env`, `working_dir`,
`command_timeout`, and `timeout` when attaching); `docs/core.md#one-description-of-a-sandbox`
lists every keyword of both adapters with the core name it maps to.

The keyword declarations (names, types, defaults) are the frozen dataclasses below, checked when
built (no I/O); `takes_options` gives a method the signature of one of them, for type checkers
(`ParamSpec`) and `help()` alike, and hands the method the built object.

| class            | used by                              | adds                                   |
|------------------|--------------------------------------|----------------------------------------|
| `AttachOptions`  | `connect`, `aconnect`                | server, lifetime renewal, commands     |
| `SandboxOptions` | `create`, `acreate`                  | what a new sandbox looks like, `spec`  |
| `ThreadOptions`  | `ThreadSandboxBackend(...)`          | `namespace`, `settle_timeout`          |
"""

from __future__ import annotations

import functools
import inspect
import re
import shlex
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    Connection,
    NetworkPolicy,
    SandboxSpec,
    SpecField,
    Volume,
    spec_from_keywords,
)
from opensandbox_core import defaults as _defaults
from opensandbox_core import validation as _validate
from opensandbox_core.metadata import adapter_labels

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_IMAGE",
    "DEFAULT_LIFETIME",
    "SPEC_FIELDS",
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


def _argv(entrypoint: object) -> object:
    """A string entrypoint split like a shell would; a list (or None) as it is."""
    if not isinstance(entrypoint, str):
        return entrypoint
    argv = shlex.split(entrypoint)
    if not argv:
        raise ConfigurationError("entrypoint must not be empty; pass None for the image's own.")
    return argv


SPEC_FIELDS: Final[Mapping[str, SpecField]] = MappingProxyType(
    {
        # keyword of create() / ThreadSandboxBackend()  ->  SandboxSpec field
        "image": SpecField("image"),
        "entrypoint": SpecField("entrypoint", _argv),  # a string is split like a shell would
        "timeout": SpecField("lifetime", _validate.idle_lifetime),  # timedelta or s; 0: none
        "resource": SpecField("resource"),
        "allow_internet_access": SpecField("allow_internet_access"),
        "network_policy": SpecField("network_policy"),
        "volumes": SpecField("volumes"),
        "metadata": SpecField("metadata"),
        "ready_timeout": SpecField("ready_timeout"),
    }
)
"""Where each keyword describing a new sandbox goes in the core's `SandboxSpec`."""

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
    - `env`: variables every command gets (`execute()`'s, the file tools' helpers'), sent with
      each command, so they apply to an attached sandbox too. Never shown in `repr()`.
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
    env: Mapping[str, str] | None = field(default=None, repr=False)
    stderr_prefix: str | None = None

    def __post_init__(self) -> None:
        _validate.idle_lifetime(self.timeout)
        _validate.idle_lifetime(self.command_timeout, "command_timeout")
        _validate.working_dir(self.working_dir)
        _validate.env(self.env)
        if self.stderr_prefix is not None and not isinstance(self.stderr_prefix, str):
            raise _validate.ArgumentTypeError("stderr_prefix must be a string or None.")

    def connection(self) -> Connection:
        return Connection(
            domain=self.domain, api_key=self.api_key, use_server_proxy=self.use_server_proxy
        )

    def session_options(self) -> dict[str, Any]:
        """`AsyncSandboxSession`'s keywords for how commands run (`restore_snapshot` takes them)."""
        return {
            "working_dir": self.working_dir,
            "env": self.env,
            "default_timeout": _validate.idle_lifetime(self.command_timeout, "command_timeout"),
        }

    def attach(self, sandbox_id: str, connection: Connection | None = None) -> AsyncSandboxSession:
        """A session on an existing sandbox (no I/O), renewing it to `timeout` when given."""
        session = AsyncSandboxSession.attach(
            sandbox_id, connection=connection or self.connection(), **self.session_options()
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

    - `image`, `entrypoint`: what the sandbox runs. `entrypoint=None` gives the image's own
      command (the core's `default_entrypoint`: the script of `opensandbox/code-interpreter`
      images, picked from the tag, else `tail -f /dev/null`). A string is split like a shell would.
    - `timeout`: idle lifetime (default 30 minutes, as in every package of this project); every
      operation renews it and a running command keeps renewing it. `None` (or `0`) keeps the
      sandbox until it is killed.
    - `resource`: limits such as `{"cpu": "1", "memory": "2Gi"}` (default one CPU and 2 GiB).
    - `allow_internet_access`: `False` asks the server for a deny-all egress policy.
    - `network_policy`: an `opensandbox_core.NetworkPolicy` (egress rules such as
      `EgressRule("allow", "pypi.org")`, then a default action); not with
      `allow_internet_access=False`. Needs the server's egress sidecar.
    - `volumes`: `opensandbox_core.Volume`s to mount (host paths the server allows, or named
      volumes).
    - `metadata`: labels on the sandbox (find it again with `opensandbox_core.list_sandboxes`).
    - `ready_timeout`: seconds to wait for the sandbox's daemon after the create.
    - `spec`: an `opensandbox_core.SandboxSpec` describing the sandbox instead of the keywords
      above (every core option, e.g. `secure_access` or `container_env`); a keyword given with
      it must agree with it.
    """

    image: str = DEFAULT_IMAGE
    entrypoint: str | Sequence[str] | None = None
    timeout: timedelta | float | None = DEFAULT_LIFETIME
    resource: Mapping[str, str] | None = None
    allow_internet_access: bool = True
    network_policy: NetworkPolicy | None = None
    volumes: Sequence[Volume] = ()
    metadata: Mapping[str, str] | None = None
    ready_timeout: float = _defaults.READY_TIMEOUT
    spec: SandboxSpec | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sandbox_spec()  # checks every create option now, before any I/O

    def sandbox_spec(self, labels: Mapping[str, str] | None = None) -> SandboxSpec:
        """The core's `SandboxSpec` these options describe, with the project's labels for Deep
        Agents (`opensandbox_core.metadata`) and `labels` (a thread's, the provider's) added."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        labels = {**adapter_labels("deepagents"), **(labels or {})}
        return spec_from_keywords(SPEC_FIELDS, values, _DEFAULTS, spec=self.spec, labels=labels)

    def create(
        self, labels: Mapping[str, str] | None = None, connection: Connection | None = None
    ) -> AsyncSandboxSession:
        """A session that creates a sandbox on first use (no I/O here)."""
        return AsyncSandboxSession(
            self.sandbox_spec(labels),
            connection=connection or self.connection(),
            **self.session_options(),
        )


_DEFAULTS: Final = MappingProxyType({f.name: f.default for f in fields(SandboxOptions)})


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


_SEED_ORDER = (
    "namespace",
    "domain",
    "image",
    "entrypoint",
    "api_key",
    "use_server_proxy",
    "timeout",
)
"""The seed's order first; the other keywords follow in the order they are declared."""


def _signature(options: type[Any], *leading: inspect.Parameter) -> inspect.Signature:
    params = sorted(
        (
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(options).parameters.values()
        ),
        key=lambda p: _SEED_ORDER.index(p.name) if p.name in _SEED_ORDER else len(_SEED_ORDER),
    )
    return inspect.Signature([*leading, *params])


_FIRST = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
_ID = inspect.Parameter("sandbox_id", inspect.Parameter.POSITIONAL_ONLY, annotation="str")


def _wrap(method: Any, build: Callable[..., Any], *leading: inspect.Parameter) -> Any:
    """`method(first, *ids, options)` called as `wrapper(first, *ids, **keywords)`."""
    count = len(leading) - 1  # positional arguments after `self`: the sandbox id, if any

    def call(first: Any, /, *args: Any, **kwargs: Any) -> Any:
        return method(first, *args[:count], build(*args[count:], **kwargs))

    async def acall(first: Any, /, *args: Any, **kwargs: Any) -> Any:
        coroutine: Coroutine[Any, Any, Any] = call(first, *args, **kwargs)
        return await coroutine

    wrapper: Any = acall if inspect.iscoroutinefunction(method) else call
    functools.update_wrapper(wrapper, method)
    wrapper.__signature__ = _signature(cast(type, build), *leading)
    return wrapper


def takes_options(
    options: Callable[P, O],
) -> Callable[[Callable[[Any, O], R]], Callable[Concatenate[Any, P], R]]:
    """Give `method(self_or_cls, options)` the keyword signature of the options class."""
    return lambda method: cast(Any, _wrap(method, options, _FIRST))


def takes_options_after_id(
    options: Callable[P, O],
) -> Callable[[Callable[[Any, str, O], R]], Callable[Concatenate[Any, str, P], R]]:
    """`takes_options` for `method(cls, sandbox_id, options)`."""
    return lambda method: cast(Any, _wrap(method, options, _FIRST, _ID))
