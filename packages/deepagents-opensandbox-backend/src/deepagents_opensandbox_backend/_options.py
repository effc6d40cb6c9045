"""The keywords of the Deep Agents backends and where each goes in the core: one table
(`SPEC_FIELDS`); every keyword with its core name: `docs/core.md#one-description-of-a-sandbox`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Final, TypeVar

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    Connection,
    NetworkPolicy,
    SandboxSpec,
    Volume,
)
from opensandbox_core import validation as _validate
from opensandbox_core.adapters import spec_from_keywords
from opensandbox_core.metadata import adapter_labels

__all__ = [
    "ADAPTER",
    "DEFAULT_IMAGE",
    "DEFAULT_LIFETIME",
    "DEFAULT_WORKING_DIR",
    "SEED_ORDER",
    "SPEC_FIELDS",
    "AttachOptions",
    "SandboxOptions",
    "SessionKeywords",
    "ThreadOptions",
]

# The documented defaults of this package (the seed's README and ours; tests/unit/test_lifetimes.py
# holds the lifetime equal to the core's).
DEFAULT_IMAGE = "opensandbox/code-interpreter:v1.1.0"
DEFAULT_LIFETIME = timedelta(minutes=30)
DEFAULT_COMMAND_TIMEOUT = timedelta(minutes=30)
DEFAULT_WORKING_DIR = "/workspace"
DEFAULT_READY_TIMEOUT = 60.0
ADAPTER = "deepagents"
"""This package's name in the core's `adapter` label (its `opensandbox.adapters` entry point)."""


def _argv(entrypoint: object) -> object:
    """A string entrypoint split like a shell would; a list (or None) as it is."""
    if not isinstance(entrypoint, str):
        return entrypoint
    argv = shlex.split(entrypoint)
    if not argv:
        raise ConfigurationError("entrypoint must not be empty; pass None for the image's own.")
    return argv


SPEC_FIELDS: Final[Mapping[str, str | tuple[str, Any]]] = MappingProxyType(
    {
        # keyword of create() / ThreadSandboxBackend()  ->  SandboxSpec field (, conversion)
        "image": "image",
        "entrypoint": ("entrypoint", _argv),  # a string is split like a shell would
        "timeout": ("lifetime", _validate.idle_lifetime),  # timedelta or s; 0: none
        "resource": "resource",
        "allow_internet_access": "allow_internet_access",
        "network_policy": "network_policy",
        "volumes": "volumes",
        "metadata": "metadata",
        "ready_timeout": "ready_timeout",
    }
)
"""Where each keyword describing a new sandbox goes in the core's `SandboxSpec`."""

K = TypeVar("K", bound="SessionKeywords")


@dataclass(frozen=True, kw_only=True)
class SessionKeywords:
    """The keywords that connect to a server and say how commands run, shared by the create and
    attach keywords (frozen, checked when built, no I/O): the server (`domain`, `api_key` never
    shown in `repr()`, `use_server_proxy`), `timeout` (the idle lifetime; `None` when attaching
    leaves the creator's), `command_timeout` (a command's default limit), `working_dir` and `env`
    (sent with every command, so they apply to an attached sandbox too; never shown in
    `repr()`)."""

    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    use_server_proxy: bool = False
    timeout: timedelta | float | None = None
    command_timeout: timedelta | float | None = DEFAULT_COMMAND_TIMEOUT
    working_dir: str = DEFAULT_WORKING_DIR
    env: Mapping[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _validate.idle_lifetime(self.timeout)
        _validate.idle_lifetime(self.command_timeout, "command_timeout")
        _validate.working_dir(self.working_dir)
        _validate.env(self.env)

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

    def narrowed(self, kind: type[K]) -> K:
        """These keywords as the class `kind` (a base of this one) takes them."""
        return kind(**{f.name: getattr(self, f.name) for f in fields(kind)})


@dataclass(frozen=True, kw_only=True)
class AttachOptions(SessionKeywords):
    """What `connect()` takes: `SessionKeywords` (server, idle lifetime, `command_timeout`:
    `execute(timeout=None)`'s limit, `working_dir`, `env`) and `stderr_prefix` (marks every
    stderr line of `execute()`'s output; `None`: stdout then stderr, as printed)."""

    stderr_prefix: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stderr_prefix is not None and not isinstance(self.stderr_prefix, str):
            raise _validate.ArgumentTypeError("stderr_prefix must be a string or None.")

    def attach_options(self) -> AttachOptions:
        """These options as `connect()` takes them (for attaching to a sandbox made with them)."""
        return self.narrowed(AttachOptions)


@dataclass(frozen=True, kw_only=True)
class SandboxOptions(AttachOptions):
    """What `create()` takes: `AttachOptions` plus what a new sandbox looks like (`SPEC_FIELDS`;
    `entrypoint=None` is the core's `default_entrypoint` for the image, `timeout` defaults to
    30 minutes), or `spec`, a whole `opensandbox_core.SandboxSpec` (a keyword given with it must
    agree with it)."""

    image: str = DEFAULT_IMAGE
    entrypoint: str | Sequence[str] | None = None
    timeout: timedelta | float | None = DEFAULT_LIFETIME
    resource: Mapping[str, str] | None = None
    allow_internet_access: bool = True
    network_policy: NetworkPolicy | None = None
    volumes: Sequence[Volume] = ()
    metadata: Mapping[str, str] | None = None
    ready_timeout: float = DEFAULT_READY_TIMEOUT
    spec: SandboxSpec | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sandbox_spec()  # checks every create option now, before any I/O

    def sandbox_spec(self, labels: Mapping[str, str] | None = None) -> SandboxSpec:
        """The core's `SandboxSpec` these options describe, with this package's `adapter` label
        (`deepagents`; `opensandbox_core.metadata`) and `labels` (a thread's, the provider's)
        added."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        labels = {**adapter_labels(ADAPTER), **(labels or {})}
        return spec_from_keywords(
            SPEC_FIELDS, values, SandboxOptions, spec=self.spec, labels=labels
        )

    def create(
        self, labels: Mapping[str, str] | None = None, connection: Connection | None = None
    ) -> AsyncSandboxSession:
        """A session that creates a sandbox on first use (no I/O here)."""
        return AsyncSandboxSession(
            self.sandbox_spec(labels),
            connection=connection or self.connection(),
            **self.session_options(),
        )


@dataclass(frozen=True, kw_only=True)
class ThreadOptions(SandboxOptions):
    """What `ThreadSandboxBackend(...)` takes: `SandboxOptions` plus `namespace` (separates
    applications sharing one server; a label value) and `settle_timeout` (how long a racing
    first call may take to agree on the thread's sandbox)."""

    namespace: str = "default"
    settle_timeout: float = 60.0

    def __post_init__(self) -> None:
        # `namespace` is checked by the core's `KeyedSandboxes`, built with the backend.
        _validate.seconds(self.settle_timeout, "settle_timeout", minimum=0.001)
        super().__post_init__()

    def sandbox_options(self) -> SandboxOptions:
        return self.narrowed(SandboxOptions)


SEED_ORDER: Final = (
    "namespace",
    "domain",
    "image",
    "entrypoint",
    "api_key",
    "use_server_proxy",
    "timeout",
)
"""The order of the keywords in signatures: the seed's first, then the others as declared."""
