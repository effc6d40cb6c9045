"""Finding and removing the sandboxes this library created (by their `LIBRARY_KEY` tag)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from . import _errors
from ._config import Connection
from ._session import LIBRARY_KEY, LIBRARY_VALUE, OWNER_KEY

__all__ = ["SandboxSummary", "destroy_sandbox", "list_sandboxes", "remove_sandboxes"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxSummary:
    """One sandbox as the server lists it."""

    id: str
    state: str
    created_at: datetime
    image: str | None
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def owner_token(self) -> str | None:
        return self.metadata.get(OWNER_KEY)

    def age(self, now: datetime | None = None) -> timedelta:
        created = self.created_at if self.created_at.tzinfo else self.created_at.replace(tzinfo=UTC)
        return (now or datetime.now(UTC)) - created


async def list_sandboxes(
    connection: Connection | None = None,
    *,
    older_than: timedelta | None = None,
    metadata: dict[str, str] | None = None,
    all_sandboxes: bool = False,
) -> list[SandboxSummary]:
    """The sandboxes this library created (or every sandbox, with `all_sandboxes=True`)."""
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
            for info in result.sandbox_infos:
                found.append(
                    SandboxSummary(
                        id=info.id,
                        state=str(info.status.state),
                        created_at=info.created_at,
                        image=info.image.image if info.image else None,
                        metadata=dict(info.metadata or {}),
                    )
                )
            if not result.pagination.has_next_page:
                break
            page += 1
    except Exception as exc:
        _errors.translate(exc, action="list sandboxes")
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
        _errors.translate(exc, action="destroy the sandbox", sandbox_id=sandbox_id)
    finally:
        with contextlib.suppress(Exception):
            await config.close_transport_if_owned()
    logger.info("Destroyed OpenSandbox sandbox %s", sandbox_id)
    return True


async def remove_sandboxes(
    connection: Connection | None = None, *, older_than: timedelta | None = None
) -> list[str]:
    """Delete the sandboxes this library created (optionally only those older than an age)."""
    removed = []
    for summary in await list_sandboxes(connection, older_than=older_than):
        if await destroy_sandbox(summary.id, connection):
            removed.append(summary.id)
    return removed
