"""How to reach an OpenSandbox server, and what a new sandbox should look like.

Nothing here does I/O: a `Connection` and a `SandboxSpec` are plain values that can be built at
import time, compared, and shared between frameworks.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError, InsecureSandboxWarning

if TYPE_CHECKING:
    import httpx
    from opensandbox.config import ConnectionConfig

__all__ = ["DEFAULT_DOMAIN", "DEFAULT_LIFETIME", "Connection", "SandboxSpec"]

DEFAULT_DOMAIN = "localhost:8080"
DEFAULT_LIFETIME = 1800.0
"""Seconds a created sandbox may stay unused before the server deletes it, unless told otherwise.

The same 30 minutes in every package (the Deep Agents seed's `timeout` default); see the lifetime
table in `docs/architecture.md`. While an operation runs, the sandbox is renewed (see `_lifetime`).
"""
ENV_DOMAIN = "OPEN_SANDBOX_DOMAIN"
ENV_API_KEY = "OPEN_SANDBOX_API_KEY"

_OUR_PACKAGES = ("opensandbox_core", "deepagents_opensandbox_backend", "pydantic_ai_opensandbox")


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside these packages (the user's own call)."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_OUR_PACKAGES):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level


def _warn_insecure() -> None:
    # Python's default warning filter shows this once per calling line, so a loop that creates
    # many sessions warns once, while `pytest.warns` and `-W error` still see every occurrence.
    warnings.warn(
        "No API key is configured for the OpenSandbox server: anyone who can reach it can run "
        "commands in its sandboxes. Set [server] api_key in the server's config and pass the same "
        f"value as api_key=... or in {ENV_API_KEY}.",
        InsecureSandboxWarning,
        stacklevel=_caller_stacklevel(),
    )


@dataclass(frozen=True, eq=False)
class Connection:
    """Where the OpenSandbox server is and how to talk to it.

    Every field is optional: `domain` falls back to `OPEN_SANDBOX_DOMAIN` (then
    `localhost:8080`), `api_key` to `OPEN_SANDBOX_API_KEY`. A domain written as
    `https://host:port` makes every request HTTPS: the server's API, commands and file transfers.
    `use_server_proxy=True` sends command and file traffic through the server instead of straight
    to the sandbox (needed on Kubernetes without an ingress gateway, and on Docker Desktop).

    `transport` is an httpx transport that the caller owns and closes; without one the library
    opens its own and closes it on `aclose()`. `sdk_config` is an `opensandbox.config.ConnectionConfig`
    that is used exactly as given (its protocol, headers and transport), overriding the fields above.

    The API key never appears in `repr()`, logs or error messages.
    """

    domain: str | None = None
    api_key: str | None = field(default=None, repr=False)
    use_server_proxy: bool = False
    request_timeout: float = 30.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    sdk_config: ConnectionConfig | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.request_timeout, bool) or not isinstance(
            self.request_timeout, int | float
        ):
            raise ConfigurationError("request_timeout must be a number of seconds.")
        if not math.isfinite(self.request_timeout) or self.request_timeout <= 0:
            raise ConfigurationError(
                f"request_timeout must be a positive, finite number of seconds, "
                f"got {self.request_timeout!r}."
            )
        if self.domain is not None and (not isinstance(self.domain, str) or not self.domain):
            raise ConfigurationError("domain must be a non-empty string such as 'localhost:8080'.")

    def __repr__(self) -> str:
        key = "set" if self.resolved_api_key() else "unset"
        return (
            f"Connection(domain={self.resolved_domain()!r}, api_key=<{key}>, "
            f"use_server_proxy={self.resolved_use_server_proxy()})"
        )

    @classmethod
    def from_sdk_config(cls, config: ConnectionConfig) -> Connection:
        """Wrap an SDK `ConnectionConfig`, which is then used exactly as given."""
        return cls(sdk_config=config)

    # -- resolution (reads the environment; no I/O) ---------------------------------------
    def resolved_domain(self) -> str:
        if self.sdk_config is not None:
            return self.sdk_config.get_domain()
        domain = self.domain or os.environ.get(ENV_DOMAIN) or DEFAULT_DOMAIN
        # "host:8080/" would make every URL "//v1/...", which the server answers with a bare 404.
        return domain.rstrip("/") or domain

    def resolved_api_key(self) -> str | None:
        if self.sdk_config is not None:
            return self.sdk_config.get_api_key() or None
        return self.api_key or os.environ.get(ENV_API_KEY) or None

    def resolved_use_server_proxy(self) -> bool:
        if self.sdk_config is not None:
            return bool(self.sdk_config.use_server_proxy)
        return self.use_server_proxy

    def resolved_protocol(self) -> str:
        """The protocol of command and file requests."""
        if self.sdk_config is not None:
            return str(self.sdk_config.protocol)
        return "https" if self.resolved_domain().lower().startswith("https://") else "http"

    def check_security(self) -> None:
        """Warn (InsecureSandboxWarning) when no API key is configured."""
        if not self.resolved_api_key():
            _warn_insecure()

    def build_sdk_config(self) -> ConnectionConfig:
        """A fresh SDK ConnectionConfig for one event loop's clients.

        An `sdk_config` given by the caller is returned as is (it is the caller's, transport included).
        """
        if self.sdk_config is not None:
            return self.sdk_config
        from opensandbox.config import ConnectionConfig

        kwargs: dict[str, Any] = {
            "domain": self.resolved_domain(),
            "protocol": self.resolved_protocol(),
            "use_server_proxy": self.use_server_proxy,
            "request_timeout": timedelta(seconds=self.request_timeout),
            "headers": dict(self.headers),
            "disable_metrics": bool(os.environ.get("OPENSANDBOX_DISABLE_METRICS")),
        }
        key = self.resolved_api_key()
        if key:
            kwargs["api_key"] = key
        if self.transport is not None:
            kwargs["transport"] = self.transport
        return ConnectionConfig(**kwargs)


_RESOURCE_KEYS = frozenset({"cpu", "memory", "gpu", "ephemeral-storage", "storage"})


@dataclass(frozen=True)
class SandboxSpec:
    """The description of a new sandbox. Ignored when attaching to an existing one.

    - `image`: container image, e.g. `"python:3.13-slim"`.
    - `entrypoint`: the container's command (default: the SDK's `tail -f /dev/null`).
    - `env`: environment of the container (also seen by every command). Kept out of `repr()`.
    - `resource`: limits such as `{"cpu": "1", "memory": "2Gi"}`.
    - `allow_internet_access`: `False` asks the server for a deny-all egress policy.
    - `secure_access`: ask for Secure Access (Kubernetes with the ingress gateway only).
    - `lifetime`: seconds the sandbox may stay unused before the server deletes it, files
      included (default `DEFAULT_LIFETIME`, 30 minutes). Every operation renews it as it starts,
      and a running command keeps renewing it, so only idle time counts. `None` keeps the sandbox
      until it is destroyed. The server refuses a create below 60 s.
    - `metadata`: extra labels; the library adds its own ownership tag.
    - `ready_timeout`: seconds to wait for the sandbox's daemon after create.
    """

    image: str
    entrypoint: Sequence[str] | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    resource: Mapping[str, str] | None = None
    allow_internet_access: bool = True
    secure_access: bool = False
    lifetime: float | None = DEFAULT_LIFETIME
    metadata: Mapping[str, str] = field(default_factory=dict)
    ready_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.image, str) or not self.image.strip():
            raise ConfigurationError(
                "image must be a non-empty image reference such as 'python:3.13-slim'."
            )
        if self.entrypoint is not None:
            if isinstance(self.entrypoint, str) or not all(
                isinstance(a, str) for a in self.entrypoint
            ):
                raise ConfigurationError(
                    "entrypoint must be a list of strings, e.g. ['tail', '-f', '/dev/null']."
                )
            if not self.entrypoint:
                raise ConfigurationError("entrypoint must not be empty; use None for the default.")
        validate_env(self.env, what="env")
        validate_env(self.metadata, what="metadata")
        if self.resource is not None:
            validate_env(self.resource, what="resource")
        if self.lifetime is not None:
            self._check_seconds(self.lifetime, "lifetime", minimum=1)
        self._check_seconds(self.ready_timeout, "ready_timeout", minimum=0.1)

    @staticmethod
    def _check_seconds(value: object, name: str, *, minimum: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(
                f"{name} must be a number of seconds, got {type(value).__name__}."
            )
        if not math.isfinite(value) or value < minimum:
            raise ConfigurationError(
                f"{name} must be a finite number of seconds >= {minimum}, got {value!r}."
            )


def validate_env(env: Mapping[str, str] | None, *, what: str = "env") -> dict[str, str]:
    """Check that a mapping holds only string names and values usable as environment."""
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise ConfigurationError(f"{what} must be a mapping of strings to strings.")
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigurationError(
                f"{what} must map strings to strings; the entry for {key!r} is not a string pair."
            )
        if not key or "\0" in key or (what == "env" and "=" in key):
            raise ConfigurationError(f"{what} has an invalid name {key!r} (empty, '=' or NUL).")
        if "\0" in value:
            raise ConfigurationError(f"{what} value for {key!r} contains a NUL character.")
        out[key] = value
    return out
