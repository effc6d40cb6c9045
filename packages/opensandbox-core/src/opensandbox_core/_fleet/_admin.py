"""Finding and removing the sandboxes this library created (by their `LIBRARY_KEY` tag).

Sandboxes are judged by idle time and owner, never by age alone. The idle rule uses only what
the server reports for each sandbox (its state, `expiresAt` and creation time):

- **dead** (state Failed, Terminated, Stopping, ...): idle since it was created; removable.
- **expired** (`expiresAt` in the past, the server has not reaped it yet): idle at least since
  it expired; removable.
- **expiring** (`expiresAt` in the future): renewed while it is used, and the server deletes it
  by itself once it has been idle for its lifetime; always kept by an idle rule.
- **no expiry** (`expiresAt` null, manual cleanup): its creator chose to keep it until it is
  deleted, and nothing renews it, so the server cannot tell when it was last used; kept unless
  `include_no_expiry=True`, which counts it idle since its creation.

A sandbox is removed only through an explicit selector: ids, an owner token, `idle_for` or
`all_=True`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from opensandbox_core import _errors, _validate
from opensandbox_core._config import Connection
from opensandbox_core._metadata import LIBRARY_KEY, LIBRARY_VALUE, OWNER_KEY, adapter_of

if TYPE_CHECKING:
    from opensandbox.models.sandboxes import SandboxInfo

__all__ = [
    "Activity",
    "SandboxSummary",
    "destroy_sandbox",
    "idle_time",
    "list_sandboxes",
    "remove_sandboxes",
    "select_idle",
]

logger = logging.getLogger(__name__)

Activity = Literal["dead", "expired", "expiring", "no-expiry"]
"""How a sandbox's activity is judged (see the module docstring)."""


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class SandboxSummary:
    """One sandbox as the server lists it. `expires_at` is None for a sandbox without expiry."""

    id: str
    state: str
    created_at: datetime
    image: str | None
    metadata: dict[str, str] = field(default_factory=dict)
    expires_at: datetime | None = None

    @property
    def owner_token(self) -> str | None:
        return self.metadata.get(OWNER_KEY)

    @property
    def adapter(self) -> str | None:
        """The package that created it (`opensandbox_core.metadata.adapter_of`, old labels too)."""
        return adapter_of(self.metadata)

    def age(self, now: datetime | None = None) -> timedelta:
        return (now or datetime.now(UTC)) - _utc(self.created_at)

    def activity(self, now: datetime | None = None) -> Activity:
        """`dead`, `expired`, `expiring` or `no-expiry` (see the module docstring)."""
        if _errors.is_gone_state(self.state):
            return "dead"
        if self.expires_at is None:
            return "no-expiry"
        return "expired" if _utc(self.expires_at) <= (now or datetime.now(UTC)) else "expiring"


def idle_time(
    summary: SandboxSummary, now: datetime | None = None, *, include_no_expiry: bool = False
) -> timedelta | None:
    """How long the sandbox has been unused for certain, or None when it must be kept."""
    now = now or datetime.now(UTC)
    activity = summary.activity(now)
    if activity == "dead":
        return summary.age(now)
    if activity == "expired":
        assert summary.expires_at is not None
        return now - _utc(summary.expires_at)
    if activity == "no-expiry" and include_no_expiry:
        return summary.age(now)
    return None


def select_idle(
    summaries: Iterable[SandboxSummary],
    idle_for: timedelta,
    now: datetime | None = None,
    *,
    include_no_expiry: bool = False,
) -> list[SandboxSummary]:
    """The sandboxes idle for at least `idle_for` by the module's rule."""
    now = now or datetime.now(UTC)
    chosen = []
    for summary in summaries:
        idle = idle_time(summary, now, include_no_expiry=include_no_expiry)
        if idle is not None and idle >= idle_for:
            chosen.append(summary)
    return chosen


def _summary(info: SandboxInfo) -> SandboxSummary:
    return SandboxSummary(
        id=info.id,
        state=str(info.status.state),
        created_at=info.created_at,
        image=info.image.image if info.image else None,
        metadata=dict(info.metadata or {}),
        expires_at=info.expires_at,
    )


async def list_sandboxes(
    connection: Connection | None = None,
    *,
    older_than: timedelta | None = None,
    metadata: dict[str, str] | None = None,
    all_sandboxes: bool = False,
) -> list[SandboxSummary]:
    """The sandboxes this library created (or every sandbox, with `all_sandboxes=True`).

    `older_than` keeps those created at least that long ago (their age, not their idle time).
    """
    from opensandbox.adapters.factory import AdapterFactory
    from opensandbox.models.sandboxes import SandboxFilter

    connection = connection or Connection()
    config = connection.build_sdk_config().with_transport_if_missing()
    service = AdapterFactory(config).create_sandbox_service()
    wanted = dict(metadata or {})
    if not all_sandboxes:
        wanted[LIBRARY_KEY] = LIBRARY_VALUE
    found: list[SandboxSummary] = []
    try:
        page = 1
        while True:
            result = await service.list_sandboxes(
                SandboxFilter(metadata=wanted or None, page=page, page_size=100)
            )
            found.extend(_summary(info) for info in result.sandbox_infos)
            if not result.pagination.has_next_page:
                break
            page += 1
    except Exception:
        with _errors.translated("list sandboxes"):
            raise
    finally:
        with contextlib.suppress(Exception):
            await config.close_transport_if_owned()
    if older_than is not None:
        now = datetime.now(UTC)
        found = [s for s in found if s.age(now) >= older_than]
    return found


async def destroy_sandbox(sandbox_id: str, connection: Connection | None = None) -> bool:
    """Delete one sandbox by id. Returns False (quietly) when it was already gone."""
    from opensandbox.adapters.factory import AdapterFactory

    connection = connection or Connection()
    config = connection.build_sdk_config().with_transport_if_missing()
    service = AdapterFactory(config).create_sandbox_service()
    try:
        await service.kill_sandbox(sandbox_id)
    except Exception as exc:
        if _errors.is_not_found(exc):
            return False
        with _errors.translated("destroy the sandbox", sandbox_id=sandbox_id):
            raise
    finally:
        with contextlib.suppress(Exception):
            await config.close_transport_if_owned()
    logger.info("Destroyed OpenSandbox sandbox %s", sandbox_id)
    return True


async def remove_sandboxes(
    connection: Connection | None = None,
    *,
    ids: Iterable[str] | None = None,
    owner: str | None = None,
    idle_for: timedelta | None = None,
    metadata: Mapping[str, str] | None = None,
    include_no_expiry: bool = False,
    all_: bool = False,
) -> list[str]:
    """Delete sandboxes this library created that the selectors name; returns the ids removed.

    At least one selector is required: `ids`, `owner` (the `OWNER_KEY` value of the session that
    created them), `idle_for` (idle at least that long, by the rule of this module: dead and
    expired sandboxes; expiring ones are always kept, sandboxes without expiry only with
    `include_no_expiry=True`) or `all_=True` (every sandbox the other selectors leave). Selectors
    combine: `owner=t, idle_for=timedelta(hours=1)` removes only `t`'s idle sandboxes.
    `metadata` narrows the set further but is not a selector on its own.
    """
    wanted_ids = {i.strip() for i in ids} if ids is not None else None
    _validate.removal_selectors(wanted_ids, owner, idle_for, all_)
    if wanted_ids is not None and not wanted_ids:
        return []
    match = dict(metadata or {})
    if owner is not None:
        match[OWNER_KEY] = owner
    found = await list_sandboxes(connection, metadata=match)
    if wanted_ids is not None:
        found = [s for s in found if s.id in wanted_ids]
    if idle_for is not None:
        found = select_idle(found, idle_for, include_no_expiry=include_no_expiry)
    removed = []
    for summary in found:
        if await destroy_sandbox(summary.id, connection):
            removed.append(summary.id)
    return removed
