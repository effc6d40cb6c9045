"""Leftovers offline: the idle rule, remove_sandboxes' selectors, and the doctor's leftovers check
against a fake server listing one sandbox of each kind."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import httpx
import pytest

from opensandbox_core import ConfigurationError, Connection
from opensandbox_core._doctor import DoctorOptions, run_checks
from opensandbox_core._doctor._registry import CHECKS
from opensandbox_core._fleet._admin import LIBRARY_VALUE, SandboxSummary, idle_time, select_idle
from opensandbox_core._metadata import LIBRARY_KEY, OWNER_KEY
from opensandbox_core.fleet import remove_sandboxes

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def summary(
    state: str = "Running", expires: timedelta | None = None, **meta: str
) -> SandboxSummary:
    return SandboxSummary(
        id=f"sb-{state}-{expires}",
        state=state,
        created_at=NOW - 3 * DAY,
        image="img",
        metadata=dict(meta),
        expires_at=NOW + expires if expires is not None else None,
    )


def test_idle_rule_from_what_the_server_reports() -> None:
    dead = summary("Failed")
    expired = summary(expires=-timedelta(hours=2))
    expiring = summary(expires=timedelta(minutes=20))
    forever = summary()
    assert (dead.activity(NOW), idle_time(dead, NOW)) == ("dead", 3 * DAY)
    assert (expired.activity(NOW), idle_time(expired, NOW)) == ("expired", timedelta(hours=2))
    assert (expiring.activity(NOW), idle_time(expiring, NOW)) == ("expiring", None)
    assert (forever.activity(NOW), idle_time(forever, NOW)) == ("no-expiry", None)
    assert idle_time(forever, NOW, include_no_expiry=True) == 3 * DAY
    # created three days ago, but a day of idle time is not reached by the expiring one
    everything = [dead, expired, expiring, forever]
    assert select_idle(everything, DAY, NOW) == [dead]
    assert select_idle(everything, timedelta(hours=1), NOW) == [dead, expired]
    assert select_idle(everything, DAY, NOW, include_no_expiry=True) == [dead, forever]


def test_state_with_a_prefix_is_read_as_its_last_word() -> None:
    assert summary("SandboxState.TERMINATED").activity(NOW) == "dead"


async def test_remove_sandboxes_needs_a_selector() -> None:
    def no_requests(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.method} {request.url}")

    connection = Connection(domain="127.0.0.1:9", transport=httpx.MockTransport(no_requests))
    with pytest.raises(ConfigurationError, match=r"without a selector.*ids=, owner=, idle_for="):
        await remove_sandboxes(connection)
    with pytest.raises(ConfigurationError):
        await remove_sandboxes(connection, metadata={"team": "a"})  # narrows, selects nothing
    assert await remove_sandboxes(connection, ids=[]) == []


def _item(sandbox_id: str, state: str, expires: timedelta | None, owner: str) -> dict[str, object]:
    item: dict[str, object] = {
        "id": sandbox_id,
        "status": {"state": state},
        "entrypoint": ["tail", "-f", "/dev/null"],
        "createdAt": (datetime.now(UTC) - 3 * DAY).isoformat(),
        "metadata": {LIBRARY_KEY: LIBRARY_VALUE, OWNER_KEY: owner},
        "image": {"uri": "img"},
    }
    if expires is not None:  # the server leaves expiresAt out for a sandbox without expiry
        item["expiresAt"] = (datetime.now(UTC) + expires).isoformat()
    return item


class ListingServer:
    """Lists four sandboxes (dead, expired, expiring, without expiry) and records deletions."""

    ITEMS: ClassVar[list[dict[str, object]]] = [
        _item("dead", "Failed", None, "alice"),
        _item("expired", "Running", -2 * DAY, "alice"),
        _item("in-use", "Running", timedelta(minutes=25), "alice"),
        _item("kept", "Running", None, "bob"),
    ]

    def __init__(self) -> None:
        self.deleted: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "healthy"})
        if request.method == "DELETE":
            self.deleted.append(request.url.path.rsplit("/", 1)[-1])
            return httpx.Response(204)
        if request.url.path == "/v1/sandboxes" and request.method == "GET":
            # the SDK sends the metadata filter as one parameter: "k1=v1&k2=v2"
            query = request.url.params.get("metadata", "")
            items = [i for i in self.ITEMS if self._matches(i, query)]
            return httpx.Response(200, json={"items": items, "pagination": {
                "page": 1, "pageSize": 100, "totalItems": len(items), "totalPages": 1,
                "hasNextPage": False}})  # fmt: skip
        return httpx.Response(404, json={"code": "NOT_FOUND"})

    @staticmethod
    def _matches(item: dict[str, object], query: str) -> bool:
        meta = item["metadata"]
        assert isinstance(meta, dict)
        pairs = [p.split("=", 1) for p in query.split("&") if "=" in p]
        return all(meta.get(k) == v for k, v in pairs)


@pytest.mark.parametrize(
    ("selectors", "removed"),
    [
        ({"idle_for": DAY}, ["dead", "expired"]),
        ({"idle_for": DAY, "include_no_expiry": True}, ["dead", "expired", "kept"]),
        ({"idle_for": DAY, "owner": "bob"}, []),
        ({"idle_for": timedelta(0), "owner": "bob", "include_no_expiry": True}, ["kept"]),
        ({"ids": ["in-use"]}, ["in-use"]),
        ({"owner": "alice"}, ["dead", "expired", "in-use"]),
        ({"all_": True}, ["dead", "expired", "in-use", "kept"]),
    ],
)
async def test_remove_sandboxes_selectors(selectors: dict[str, object], removed: list[str]) -> None:
    server = ListingServer()
    connection = Connection(domain="127.0.0.1:9", api_key="k",
                            transport=httpx.MockTransport(server))  # fmt: skip
    assert await remove_sandboxes(connection, **selectors) == removed  # type: ignore[arg-type]
    assert server.deleted == removed


async def test_doctor_leftovers_judges_idle_not_age() -> None:
    leftovers = [c for c in CHECKS if c.name in ("reachable", "leftovers")]
    server = ListingServer()
    options = DoctorOptions(
        domain="127.0.0.1:9", api_key="k", transport=httpx.MockTransport(server)
    )
    report = (await run_checks(options, leftovers))[1]
    assert report.status == "WARN"
    assert report.data["stale"] == ["dead", "expired"]
    assert "1 expiring" in report.summary and "1 without expiry" in report.summary
    assert "--remove-idle-for" in (report.fix or "")
    assert server.deleted == []
    removing = DoctorOptions(domain="127.0.0.1:9", api_key="k", remove_idle_for=DAY,
                             transport=httpx.MockTransport(server))  # fmt: skip
    report = (await run_checks(removing, leftovers))[1]
    assert (report.status, report.data["removed"]) == ("PASS", ["dead", "expired"])
    assert server.deleted == ["dead", "expired"]
    assert json.dumps(report.data)  # serialisable for --json
