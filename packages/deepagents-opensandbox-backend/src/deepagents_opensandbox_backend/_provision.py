"""What the deepagents-code provider needs besides the backend: the image named in the
environment, its keywords split into create options and a `snapshot` reference, and the
sandboxes it created (only those are deleted without `force`). The restore itself is the
core's `opensandbox_core.fleet.restore_snapshot`, which takes a snapshot's name or id."""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Mapping
from typing import Any, Final, Generic, TypeVar

from opensandbox_core import ConfigurationError

__all__ = ["IMAGE_ENV", "CreatedSandboxes", "image_from_env", "split_snapshot"]

T = TypeVar("T")

IMAGE_ENV: Final = "OPEN_SANDBOX_IMAGE"
"""Environment variable naming the image of a created sandbox when none is given."""


def image_from_env() -> str | None:
    """`OPEN_SANDBOX_IMAGE` (stripped), or None when unset or blank."""
    return os.environ.get(IMAGE_ENV, "").strip() or None


def split_snapshot(
    kwargs: Mapping[str, Any],
    sandbox_id: str | None,
    allowed: Collection[str],
    provider: str,
    see: str,
) -> tuple[dict[str, Any], str | None]:
    """A provider's create options (each in `allowed`) and its `snapshot` reference (stripped),
    out of `kwargs`; `ConfigurationError` for anything else, a blank snapshot, or a snapshot
    with a `sandbox_id`. `provider` names the provider in the messages, `see` its create call."""
    options = dict(kwargs)
    snapshot = options.pop("snapshot", None)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigurationError(
            f"The {provider} does not take {', '.join(map(repr, unknown))}. "
            f"It takes {', '.join(sorted(allowed))} and snapshot (see {see})."
        )
    if snapshot is not None and (not isinstance(snapshot, str) or not snapshot.strip()):
        raise ConfigurationError(
            f"snapshot must be a snapshot's name or id (a non-empty string), got {snapshot!r}."
        )
    if snapshot is not None and sandbox_id is not None:
        raise ConfigurationError(
            "snapshot cannot be combined with sandbox_id: a snapshot starts a new sandbox."
        )
    return options, snapshot.strip() if snapshot is not None else None


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
