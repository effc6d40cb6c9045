"""The create options beyond the basics: volumes, egress network policy, extensions; and the one
place that turns a `SandboxSpec` into the SDK's create arguments.

Everything here is a plain value checked when it is built (no I/O), named as in the server's API
(`volumes`, `networkPolicy`, `extensions`), so a bad value fails before any request is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from ._errors import ConfigurationError

if TYPE_CHECKING:
    from ._config import SandboxSpec

__all__ = ["EgressRule", "NetworkPolicy", "Volume", "check_create_options", "create_arguments"]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DEFAULT_ENTRYPOINT = ("tail", "-f", "/dev/null")
_DEFAULT_RESOURCE = {"cpu": "1", "memory": "2Gi"}


@dataclass(frozen=True)
class Volume:
    """A directory mounted into the sandbox: a host directory (`host_path`, a bind mount) or a
    platform volume (`claim_name`: a Docker named volume or a Kubernetes PVC). Exactly one of
    the two is given.

    - `name`: a DNS label unique in the sandbox (`[a-z0-9-]`, at most 63 characters).
    - `mount_path`: absolute path inside the sandbox.
    - `read_only`: mount it read-only.
    - `sub_path`: a relative subdirectory of the source to mount instead of its root.

    The server accepts a host path only under its `[storage] allowed_host_paths` prefixes.
    """

    name: str
    mount_path: str
    host_path: str | None = None
    claim_name: str | None = None
    read_only: bool = False
    sub_path: str | None = None

    def __post_init__(self) -> None:
        if (
            not isinstance(self.name, str)
            or len(self.name) > 63
            or not _DNS_LABEL.fullmatch(self.name)
        ):
            raise ConfigurationError(
                f"Volume name {self.name!r} is not a DNS label: use lowercase letters, digits "
                "and '-', at most 63 characters, e.g. 'data'."
            )
        _check_absolute(self.mount_path, f"Volume {self.name!r}: mount_path")
        if (self.host_path is None) == (self.claim_name is None):
            raise ConfigurationError(
                f"Volume {self.name!r}: give exactly one of host_path (a host directory) and "
                "claim_name (a named volume)."
            )
        if self.host_path is not None:
            _check_absolute(self.host_path, f"Volume {self.name!r}: host_path")
        if self.claim_name is not None and (
            not isinstance(self.claim_name, str)
            or len(self.claim_name) > 253
            or not _DNS_LABEL.fullmatch(self.claim_name)
        ):
            raise ConfigurationError(
                f"Volume {self.name!r}: claim_name {self.claim_name!r} is not a DNS label."
            )
        if not isinstance(self.read_only, bool):
            raise ConfigurationError(f"Volume {self.name!r}: read_only must be a bool.")
        if self.sub_path is not None and (
            not isinstance(self.sub_path, str)
            or not self.sub_path
            or self.sub_path.startswith("/")
            or ".." in self.sub_path.split("/")
            or "\0" in self.sub_path
        ):
            raise ConfigurationError(
                f"Volume {self.name!r}: sub_path must be a relative path without '..', got "
                f"{self.sub_path!r}."
            )

    def to_sdk(self) -> Any:
        from opensandbox.models.sandboxes import PVC, Host
        from opensandbox.models.sandboxes import Volume as SdkVolume

        return SdkVolume(
            name=self.name,
            host=Host(path=self.host_path) if self.host_path is not None else None,
            pvc=PVC(claimName=self.claim_name) if self.claim_name is not None else None,
            mountPath=self.mount_path,
            readOnly=self.read_only,
            subPath=self.sub_path,
        )


@dataclass(frozen=True)
class EgressRule:
    """One egress rule: `action` ("allow" or "deny") for `target`, a domain such as
    `"pypi.org"` or a wildcard such as `"*.github.com"` (IP ranges are not supported)."""

    action: Literal["allow", "deny"]
    target: str

    def __post_init__(self) -> None:
        if self.action not in ("allow", "deny"):
            raise ConfigurationError(
                f"EgressRule action must be 'allow' or 'deny', got {self.action!r}."
            )
        if not isinstance(self.target, str) or not self.target.strip() or " " in self.target:
            raise ConfigurationError(
                f"EgressRule target must be a domain such as 'pypi.org', got {self.target!r}."
            )


@dataclass(frozen=True)
class NetworkPolicy:
    """The sandbox's outbound network policy: `egress` rules in order, then `default_action`.

    `NetworkPolicy(egress=[EgressRule("allow", "pypi.org")])` allows only PyPI. Enforced by the
    server's egress sidecar, which must be configured on the server.
    """

    default_action: Literal["allow", "deny"] = "deny"
    egress: Sequence[EgressRule] = ()

    def __post_init__(self) -> None:
        if self.default_action not in ("allow", "deny"):
            raise ConfigurationError(
                f"NetworkPolicy default_action must be 'allow' or 'deny', got "
                f"{self.default_action!r}."
            )
        egress: object = self.egress
        if isinstance(egress, str | bytes) or not isinstance(egress, Sequence):
            raise ConfigurationError("NetworkPolicy egress must be a sequence of EgressRule.")
        if not all(isinstance(rule, EgressRule) for rule in egress):
            raise ConfigurationError("NetworkPolicy egress must be a sequence of EgressRule.")

    def to_sdk(self) -> Any:
        from opensandbox.models.sandboxes import NetworkPolicy as SdkPolicy

        return SdkPolicy.model_validate(
            {
                "defaultAction": self.default_action,
                "egress": [{"action": r.action, "target": r.target} for r in self.egress],
            }
        )


def _check_absolute(value: object, what: str) -> None:
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ConfigurationError(f"{what} must be an absolute path, got {value!r}.")


def check_create_options(
    volumes: object, network_policy: object, extensions: object, allow_internet_access: bool
) -> None:
    """Check the options of `SandboxSpec` that this module defines; raise ConfigurationError."""
    if isinstance(volumes, str | bytes) or not isinstance(volumes, Sequence):
        raise ConfigurationError("volumes must be a sequence of opensandbox_core.Volume.")
    names: set[str] = set()
    for volume in volumes:
        if not isinstance(volume, Volume):
            raise ConfigurationError("volumes must be a sequence of opensandbox_core.Volume.")
        if volume.name in names:
            raise ConfigurationError(f"Two volumes are named {volume.name!r}; names must differ.")
        names.add(volume.name)
    if network_policy is not None:
        if not isinstance(network_policy, NetworkPolicy):
            raise ConfigurationError("network_policy must be an opensandbox_core.NetworkPolicy.")
        if not allow_internet_access:
            raise ConfigurationError(
                "Give either allow_internet_access=False (deny all egress) or a network_policy, "
                "not both."
            )
    if not isinstance(extensions, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in extensions.items()
    ):
        raise ConfigurationError("extensions must map non-empty strings to strings.")


def create_arguments(spec: SandboxSpec, metadata: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments of the SDK's `create_sandbox` for `spec` with `metadata`."""
    from opensandbox.models.sandboxes import SandboxImageSpec

    policy: Any = None
    if spec.network_policy is not None:
        policy = spec.network_policy.to_sdk()
    elif not spec.allow_internet_access:
        policy = NetworkPolicy(default_action="deny").to_sdk()
    return {
        "spec": SandboxImageSpec(image=spec.image),
        "entrypoint": list(spec.entrypoint or _DEFAULT_ENTRYPOINT),
        "env": dict(spec.env),
        "metadata": dict(metadata),
        "timeout": timedelta(seconds=spec.lifetime) if spec.lifetime else None,
        "resource": dict(spec.resource or _DEFAULT_RESOURCE),
        "network_policy": policy,
        "extensions": dict(spec.extensions),
        "volumes": [v.to_sdk() for v in spec.volumes] or None,
        "secure_access": spec.secure_access,
    }
