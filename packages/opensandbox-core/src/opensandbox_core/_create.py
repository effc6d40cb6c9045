"""The create options beyond the basics: volumes, egress network policy, extensions; and the one
place that turns a `SandboxSpec` into the SDK's create arguments.

Everything here is a plain value checked when it is built (no I/O), named as in the server's API
(`volumes`, `networkPolicy`, `extensions`), so a bad value fails before any request is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from . import _validate
from ._images import default_entrypoint

if TYPE_CHECKING:
    from ._config import SandboxSpec

__all__ = ["EgressRule", "NetworkPolicy", "Volume", "check_create_options", "create_arguments"]

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
        _validate.volume(
            self.name,
            self.mount_path,
            self.host_path,
            self.claim_name,
            self.read_only,
            self.sub_path,
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
        _validate.egress_rule(self.action, self.target)


@dataclass(frozen=True)
class NetworkPolicy:
    """The sandbox's outbound network policy: `egress` rules in order, then `default_action`.

    `NetworkPolicy(egress=[EgressRule("allow", "pypi.org")])` allows only PyPI. Enforced by the
    server's egress sidecar, which must be configured on the server.
    """

    default_action: Literal["allow", "deny"] = "deny"
    egress: Sequence[EgressRule] = ()

    def __post_init__(self) -> None:
        _validate.network_policy(self.default_action, self.egress, EgressRule)

    def to_sdk(self) -> Any:
        from opensandbox.models.sandboxes import NetworkPolicy as SdkPolicy

        return SdkPolicy.model_validate(
            {
                "defaultAction": self.default_action,
                "egress": [{"action": r.action, "target": r.target} for r in self.egress],
            }
        )


def check_create_options(
    volumes: object, network_policy: object, extensions: object, allow_internet_access: bool
) -> None:
    """Check the options of `SandboxSpec` that this module defines; raise ConfigurationError."""
    _validate.create_options(
        volumes,
        network_policy,
        extensions,
        allow_internet_access,
        volume_type=Volume,
        policy_type=NetworkPolicy,
    )


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
        "entrypoint": list(spec.entrypoint or default_entrypoint(spec.image)),
        "env": dict(spec.container_env),
        "metadata": dict(metadata),
        "timeout": timedelta(seconds=spec.lifetime) if spec.lifetime else None,
        "resource": dict(spec.resource or _DEFAULT_RESOURCE),
        "network_policy": policy,
        "extensions": dict(spec.extensions),
        "volumes": [v.to_sdk() for v in spec.volumes] or None,
        "secure_access": spec.secure_access,
    }
