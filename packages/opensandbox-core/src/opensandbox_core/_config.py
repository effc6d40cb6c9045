"""How to reach an OpenSandbox server, and what a new sandbox should look like.

Nothing here does I/O: a `Connection` and a `SandboxSpec` are plain values that can be built at
import time, compared, and shared between frameworks.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from . import _defaults, _entry_points, _validate
from ._errors import InsecureSandboxWarning

if TYPE_CHECKING:
    import httpx
    from opensandbox.config import ConnectionConfig

    from ._create import NetworkPolicy, Volume

__all__ = ["Connection", "SandboxSpec"]


def _ours(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in _entry_points.own_packages())


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside the core and the installed adapters (the
    user's own call); the adapters are those of `_entry_points`."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and _ours(str(frame.f_globals.get("__name__", ""))):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level


def _warn_insecure() -> None:
    # Python's default warning filter shows this once per calling line, so a loop that creates
    # many sessions warns once, while `pytest.warns` and `-W error` still see every occurrence.
    warnings.warn(
        "No API key is configured for the OpenSandbox server: anyone who can reach it can run "
        "commands in its sandboxes. Set [server] api_key in the server's config and pass the same "
        f"value as api_key=... or in {_defaults.ENV_API_KEY}.",
        InsecureSandboxWarning,
        stacklevel=_caller_stacklevel(),
    )


def _quiet_sdk_logs() -> None:
    """Keep the SDK's log lines ("retrying POST ...") off stderr unless logging is configured.

    Without any handler, Python prints warnings of every logger to stderr, so each failure the
    SDK retries was printed several times before this library raised one clear error. A
    `NullHandler` on the SDK's logger stops that fallback only: an application that configures
    logging still gets the SDK's records through its own handlers.
    """
    logger = logging.getLogger("opensandbox")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


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
    request_timeout: float = _defaults.REQUEST_TIMEOUT
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    sdk_config: ConnectionConfig | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _validate.request_timeout(self.request_timeout)
        _validate.domain(self.domain)

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
        domain = self.domain or os.environ.get(_defaults.ENV_DOMAIN) or _defaults.DOMAIN
        # "host:8080/" would make every URL "//v1/...", which the server answers with a bare 404.
        return domain.rstrip("/") or domain

    def resolved_api_key(self) -> str | None:
        if self.sdk_config is not None:
            return self.sdk_config.get_api_key() or None
        return self.api_key or os.environ.get(_defaults.ENV_API_KEY) or None

    def resolved_use_server_proxy(self) -> bool:
        if self.sdk_config is not None:
            return bool(self.sdk_config.use_server_proxy)
        return self.use_server_proxy

    def resolved_protocol(self) -> str:
        """The protocol of command and file requests."""
        if self.sdk_config is not None:
            return str(self.sdk_config.protocol)
        return "https" if self.resolved_domain().lower().startswith("https://") else "http"

    def display_address(self) -> str:
        """The server's address as `scheme://host:port`, for messages and logs.

        Built from the domain and protocol only: user info, paths and queries are dropped, so it
        never contains the API key (which travels in a header), whatever the domain holds.
        """
        return display_address(self.resolved_domain(), self.resolved_protocol())

    def check_security(self) -> None:
        """Warn (InsecureSandboxWarning) when no API key is configured."""
        if not self.resolved_api_key():
            _warn_insecure()

    def build_sdk_config(self) -> ConnectionConfig:
        """A fresh SDK ConnectionConfig for one event loop's clients.

        An `sdk_config` given by the caller is returned as is (it is the caller's, transport included).
        """
        _quiet_sdk_logs()
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
    """The description of a new sandbox, the one type every package of this project builds a
    sandbox from (the adapters' keywords map onto it, `docs/core.md#one-description-of-a-sandbox`).
    Ignored when attaching to an existing one.

    - `image`: container image, e.g. `"python:3.13-slim"`.
    - `entrypoint`: the container's command; `None` gives the image's default
      (`opensandbox_core.default_entrypoint`: the entrypoint script of the
      `opensandbox/code-interpreter` images, else `tail -f /dev/null`).
    - `container_env`: the container's own environment, fixed at create: its entrypoint and
      every process in it see it, whichever client runs them. Kept out of `repr()`. (Variables
      every command of one client gets are that client's `env`, e.g. `AsyncSandboxSession(env=)`.)
    - `resource`: limits such as `{"cpu": "1", "memory": "2Gi"}`.
    - `allow_internet_access`: `False` asks the server for a deny-all egress policy.
    - `secure_access`: ask for Secure Access (Kubernetes with the ingress gateway only).
    - `lifetime`: seconds the sandbox may stay unused before the server deletes it, files
      included (default `defaults.LIFETIME`, 30 minutes). Every operation renews it as it starts,
      and a running command keeps renewing it, so only idle time counts. `None` keeps the sandbox
      until it is destroyed. The server refuses a create below 60 s.
    - `metadata`: extra labels; the library adds its own ownership tag.
    - `ready_timeout`: seconds to wait for the sandbox's daemon after create.
    - `volumes`, `network_policy`, `extensions`: the server's create options of those names
      (`opensandbox_core.Volume`, `NetworkPolicy`; see `_create`).
    """

    image: str
    entrypoint: Sequence[str] | None = None
    container_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    resource: Mapping[str, str] | None = None
    allow_internet_access: bool = True
    secure_access: bool = False
    lifetime: float | None = _defaults.LIFETIME
    metadata: Mapping[str, str] = field(default_factory=dict)
    ready_timeout: float = _defaults.READY_TIMEOUT
    volumes: Sequence[Volume] = ()
    network_policy: NetworkPolicy | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate.image(self.image)
        _validate.entrypoint(self.entrypoint)
        _validate.env(self.container_env, what="container_env")
        _validate.env(self.metadata, what="metadata")
        if self.resource is not None:
            _validate.env(self.resource, what="resource")
        if self.lifetime is not None:
            _validate.seconds(self.lifetime, "lifetime", minimum=1)
        _validate.seconds(self.ready_timeout, "ready_timeout", minimum=0.1)
        from ._create import check_create_options

        check_create_options(
            self.volumes, self.network_policy, self.extensions, self.allow_internet_access
        )


def display_address(domain: str, protocol: str = "http") -> str:
    """`scheme://host:port` of a server domain such as `localhost:8080` or `https://h:8443/x`.

    User info (`user:secret@`), paths, queries and fragments are dropped, so the result is safe to
    show; a domain that cannot be parsed is shown as `scheme://<unparseable address>`.
    """
    text = domain.strip()
    if "://" not in text:
        text = f"{protocol}://{text}"
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return f"{protocol}://<unparseable address>"
    if not host:
        return f"{parts.scheme or protocol}://<no host>"
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
