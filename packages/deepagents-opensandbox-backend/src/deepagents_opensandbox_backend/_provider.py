"""`OpenSandboxProvider`: the `opensandbox` sandbox provider of deepagents-code (entry point
group `deepagents_code.sandbox_providers`; contract of deepagents-code 0.1.88's
`SandboxProvider`). Importing it does not need deepagents-code: the class subclasses its
`SandboxProvider` when that is installed, and is a plain class otherwise. What it does:
docs/deepagents-code.md.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

from opensandbox_core import ConfigurationError, SandboxUnavailableError, UnsupportedDaemonError
from opensandbox_core.adapters import twin
from opensandbox_core.fleet import destroy_sandbox, restore_snapshot
from opensandbox_core.metadata import adapter_labels

from ._backend import OpenSandboxBackend
from ._options import DEFAULT_WORKING_DIR, AttachOptions, SandboxOptions
from ._provision import IMAGE_ENV, CreatedSandboxes, image_from_env, split_snapshot

__all__ = ["IMAGE_ENV", "PROVIDER_METADATA_KEY", "PROVIDER_NAME", "OpenSandboxProvider"]

logger = logging.getLogger(__name__)

PROVIDER_NAME = "opensandbox"
"""The provider's name in deepagents-code (`dcode --sandbox opensandbox`)."""

PROVIDER_METADATA_KEY = "opensandbox-agents.provider"
"""Label on every sandbox this provider creates (value `deepagents-code`): find or remove the
ones a process left behind with `opensandbox_core.list_sandboxes(metadata={key: value})`."""
_ADAPTER = "deepagents-code"
"""The provider's name in the core's `adapter` label (its `opensandbox.adapters` entry point)."""

_DCODE_PROVIDER_MODULE = "deepagents_code.integrations.sandbox_provider"
_PACKAGE = "deepagents-opensandbox-backend"
_CREATE_FIELDS = frozenset(f.name for f in fields(SandboxOptions))
_ATTACH_FIELDS = frozenset(f.name for f in fields(AttachOptions))
_CONNECTION_FIELDS = frozenset({"domain", "api_key", "use_server_proxy"})
_LABELS = MappingProxyType({**adapter_labels(_ADAPTER), PROVIDER_METADATA_KEY: _ADAPTER})
_NAME, _SEE = "opensandbox sandbox provider", "OpenSandboxBackend.create"  # for split_snapshot


def _dcode_module() -> Any:
    """deepagents-code's provider module (its public classes), or a clear ImportError."""
    try:
        return importlib.import_module(_DCODE_PROVIDER_MODULE)
    except ImportError as exc:
        raise ImportError(
            "The opensandbox sandbox provider's metadata needs deepagents-code: "
            f"pip install '{_PACKAGE}[code]' (or pip install deepagents-code)."
        ) from exc


if TYPE_CHECKING:
    _ProviderBase = object
else:
    try:
        _ProviderBase = _dcode_module().SandboxProvider
    except ImportError:
        _ProviderBase = object


def _attach_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """`connect()`'s options out of the given ones; the create-only ones are checked, then left
    out (they describe a new sandbox)."""
    SandboxOptions(**options)  # every value checked, as for a create
    ignored = sorted(set(options) - _ATTACH_FIELDS)
    if ignored:
        logger.debug("Attaching: create options %s do not apply and are ignored", ignored)
    return {k: v for k, v in options.items() if k in _ATTACH_FIELDS}


def _raise_not_found(exc: SandboxUnavailableError) -> NoReturn:
    """deepagents-code's `SandboxNotFoundError` for a sandbox that cannot be attached to (the
    core's error as its cause); the core's error when deepagents-code is not installed or the
    daemon is too old."""
    try:
        error_class = _dcode_module().SandboxNotFoundError
    except (ImportError, AttributeError):
        error_class = None
    if error_class is None or isinstance(exc, UnsupportedDaemonError):
        raise exc
    raise error_class(str(exc)) from exc


async def _restore(snapshot: str, options: SandboxOptions) -> OpenSandboxBackend:
    """A new sandbox started from `snapshot` (a name or an id), with the metadata, lifetime,
    resource and ready timeout the options describe; the backend owns it."""
    spec = options.sandbox_spec(_LABELS)
    session = await restore_snapshot(
        snapshot,
        connection=options.connection(),
        metadata=spec.metadata,
        lifetime=spec.lifetime,
        resource=spec.resource,
        ready_timeout=spec.ready_timeout,
        **options.session_options(),
    )
    return OpenSandboxBackend(session, stderr_prefix=options.stderr_prefix)


class OpenSandboxProvider(_ProviderBase):
    """deepagents-code's `opensandbox` sandbox provider (see the module docstring).

    ```python
    from deepagents_opensandbox_backend import OpenSandboxProvider

    provider = OpenSandboxProvider()
    backend = provider.get_or_create(image="python:3.13-slim")  # a new sandbox, owned here
    print(backend.execute("python3 --version").output)
    provider.delete(sandbox_id=backend.id)
    ```
    """

    def __init__(self) -> None:
        self._created: CreatedSandboxes[OpenSandboxBackend] = CreatedSandboxes()

    @property
    def metadata(self) -> Any:
        """deepagents-code's `SandboxProviderMetadata` for this provider."""
        module = _dcode_module()
        return module.SandboxProviderMetadata(
            name=PROVIDER_NAME,
            working_dir=DEFAULT_WORKING_DIR,
            install=module.SandboxInstallHint(kind="package", name=_PACKAGE),
            supports_sandbox_id=True,
            supports_snapshot_name=True,
            backend_module="deepagents_opensandbox_backend",
        )

    async def aget_or_create(
        self, /, *, sandbox_id: str | None = None, **kwargs: Any
    ) -> OpenSandboxBackend:
        """`get_or_create()` on the caller's event loop."""
        options, snapshot = split_snapshot(kwargs, sandbox_id, _CREATE_FIELDS, _NAME, _SEE)
        if sandbox_id is not None:
            try:
                return await OpenSandboxBackend.aconnect(sandbox_id, **_attach_kwargs(options))
            except SandboxUnavailableError as exc:
                _raise_not_found(exc)
        image = image_from_env()  # the environment's image, unless the caller names one
        create = SandboxOptions(**({"image": image, **options} if image else options))
        if snapshot is None:
            return self._own(await OpenSandboxBackend._acreated(create, _LABELS))
        return self._own(await _restore(snapshot, create))

    def _own(self, backend: OpenSandboxBackend) -> OpenSandboxBackend:
        return self._created.own(backend.id, backend)

    def _take(self, sandbox_id: str, force: bool, kwargs: Mapping[str, Any]) -> Any:
        """The backend that created `sandbox_id` here (removed from the list), else the
        connection to delete it with when `force` is set."""
        unknown = sorted(set(kwargs) - _CONNECTION_FIELDS)
        if unknown:
            raise ConfigurationError(
                f"delete() takes sandbox_id, force and {', '.join(sorted(_CONNECTION_FIELDS))}; "
                f"not {', '.join(map(repr, unknown))}."
            )
        backend = self._created.take(sandbox_id, force=force)
        if backend is not None:
            return backend
        return AttachOptions(**kwargs).connection()

    async def adelete(self, /, *, sandbox_id: str, force: bool = False, **kwargs: Any) -> None:
        """`delete()` on the caller's event loop."""
        if not isinstance(sandbox_id, str) or not sandbox_id.strip():
            raise ConfigurationError("sandbox_id must be a non-empty string.")
        sandbox_id = sandbox_id.strip()
        target = self._take(sandbox_id, force, kwargs)
        if isinstance(target, OpenSandboxBackend):
            await target.akill()
        else:
            await destroy_sandbox(sandbox_id, target)

    get_or_create = twin(
        aget_or_create,
        name="get_or_create",
        on_self=True,
        doc="Attach to `sandbox_id`, else create a sandbox (owned by this provider).",
    )
    delete = twin(
        adelete,
        name="delete",
        on_self=True,
        doc="""Delete a sandbox that this provider created (any sandbox with `force=True`; then
        `kwargs` name the server: `domain`, `api_key`, `use_server_proxy`). Idempotent.""",
    )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(created={self._created.ids()!r})"
