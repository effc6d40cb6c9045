"""An attached session without a lifetime of its own extends an expiring sandbox, never shortens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from opensandbox_core import AsyncSandboxSession, Connection


class _Sandboxes:
    def __init__(self, expires_at: datetime | None) -> None:
        self.expires_at = expires_at
        self.renewed: list[datetime] = []

    async def get_sandbox_info(self, sandbox_id: str) -> Any:
        return SimpleNamespace(expires_at=self.expires_at)

    async def renew_sandbox_expiration(self, sandbox_id: str, when: datetime) -> None:
        self.renewed.append(when)
        self.expires_at = when


def _attached() -> AsyncSandboxSession:
    session = AsyncSandboxSession.attach("sb-1", connection=Connection(domain="127.0.0.1:9"))
    session.set_lifetime(None)
    return session


async def _renew(session: AsyncSandboxSession, sandboxes: _Sandboxes) -> None:
    # Never renewed: monotonic time can be small (a machine that has just booted).
    session._life.renewal.last = float("-inf")
    await session._life.maybe_renew(SimpleNamespace(sandboxes=sandboxes))  # type: ignore[arg-type]


async def test_an_expiry_about_to_pass_is_extended() -> None:
    sandboxes = _Sandboxes(datetime.now(UTC) + timedelta(minutes=2))
    await _renew(_attached(), sandboxes)
    assert len(sandboxes.renewed) == 1
    left = sandboxes.renewed[0] - datetime.now(UTC)
    assert timedelta(minutes=29) < left <= timedelta(minutes=30)


async def test_a_later_expiry_is_never_shortened() -> None:
    later = datetime.now(UTC) + timedelta(hours=20)
    sandboxes = _Sandboxes(later)
    await _renew(_attached(), sandboxes)
    assert sandboxes.renewed == [] and sandboxes.expires_at == later


async def test_a_sandbox_without_expiry_never_gets_one() -> None:
    sandboxes = _Sandboxes(None)
    await _renew(_attached(), sandboxes)
    assert sandboxes.renewed == []


async def test_an_explicit_lifetime_renews_to_it() -> None:
    sandboxes = _Sandboxes(datetime.now(UTC) + timedelta(hours=20))
    session = _attached()
    session.set_lifetime(600)
    await _renew(session, sandboxes)
    assert len(sandboxes.renewed) == 1
    assert sandboxes.renewed[0] - datetime.now(UTC) <= timedelta(seconds=600)
