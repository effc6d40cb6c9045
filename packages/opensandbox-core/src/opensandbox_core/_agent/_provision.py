"""Provisioning helpers for tools that start sandboxes for a user (agent CLIs, providers):
the image named in the environment, a snapshot found by name or id, and a sandbox of a
`SandboxSpec` started from a snapshot; and the sandboxes a provider
created (only those are deleted without `force`)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from opensandbox_core._errors import ConfigurationError
from opensandbox_core._fleet._snapshots import get_snapshot, list_snapshots, restore_snapshot

if TYPE_CHECKING:
    from opensandbox_core._config import Connection, SandboxSpec
    from opensandbox_core._session import AsyncSandboxSession

__all__ = [
    "IMAGE_ENV",
    "CreatedSandboxes",
    "find_snapshot",
    "image_from_env",
    "restore_spec",
]

T = TypeVar("T")

IMAGE_ENV: Final = "OPEN_SANDBOX_IMAGE"
"""Environment variable naming the image of a created sandbox when none is given."""


def image_from_env() -> str | None:
    """`OPEN_SANDBOX_IMAGE` (stripped), or None when unset or blank."""
    return os.environ.get(IMAGE_ENV, "").strip() or None


async def find_snapshot(reference: str, connection: Connection | None = None) -> str:
    """The id of the ready snapshot with this id, else of the newest ready one with this name;
    `ConfigurationError` when there is none."""
    found = await get_snapshot(reference, connection)
    if found is not None and found.ready:
        return found.id
    named = [s for s in await list_snapshots(connection) if s.name == reference and s.ready]
    if not named:
        state = f" (its state is {found.state!r})" if found is not None else ""
        raise ConfigurationError(
            f"No ready snapshot named or with the id {reference!r} on the server{state}. Make "
            "one from a sandbox with opensandbox_core.snapshot_sandbox(session, name=...)."
        )
    named.sort(key=lambda s: (s.created_at is not None, s.created_at or 0))
    return named[-1].id


async def restore_spec(
    snapshot: str, spec: SandboxSpec, connection: Connection | None = None, **session_options: Any
) -> AsyncSandboxSession:
    """A new sandbox started from the snapshot `snapshot` (a name or an id, `find_snapshot`),
    with the metadata, lifetime, resource and ready timeout of `spec`; the session owns it."""
    snapshot_id = await find_snapshot(snapshot, connection)
    return await restore_snapshot(
        snapshot_id,
        connection=connection,
        metadata=spec.metadata,
        lifetime=spec.lifetime,
        resource=spec.resource,
        ready_timeout=spec.ready_timeout,
        **session_options,
    )


class CreatedSandboxes(Generic[T]):
    """What a provider created, by sandbox id (thread-safe): whoever creates a sandbox owns it."""

    def __init__(self) -> None:
        self._created: dict[str, T] = {}
        self._lock = threading.Lock()

    def own(self, sandbox_id: str, item: T) -> T:
        with self._lock:
            self._created[sandbox_id] = item
        return item

    def take(self, sandbox_id: str, *, force: bool) -> T | None:
        """The item created as `sandbox_id` (forgotten here); None for another sandbox when
        `force` is set, else `ConfigurationError` (it is not this provider's to delete)."""
        with self._lock:
            item = self._created.pop(sandbox_id, None)
        if item is None and not force:
            raise ConfigurationError(
                f"Sandbox {sandbox_id} was not created by this provider, so it is not deleted "
                "(whoever creates a sandbox owns it). Pass force=True to delete it anyway."
            )
        return item

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._created)
