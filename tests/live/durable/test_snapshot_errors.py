"""The snapshot API's errors, against a scripted HTTP transport (no server involved).

A runtime without snapshots (Kubernetes without a committer: 501 or 409 UNSUPPORTED_RUNTIME;
a server before the API: 405) raises `SnapshotsUnsupportedError` saying so; a missing snapshot
reads as None and deletes as False; the API key never appears in an error.
"""

from __future__ import annotations

import json

import httpx
import pytest

from opensandbox_core import ConfigurationError, Connection, ServerError
from opensandbox_core._fleet._snapshots import get_snapshot
from opensandbox_core.fleet import (
    SnapshotsUnsupportedError,
    delete_snapshot,
    restore_snapshot,
    snapshot_sandbox,
)

KEY = "secret-key-for-the-snapshot-tests"


def _connection(status: int, body: dict[str, object]) -> Connection:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("OPEN-SANDBOX-API-KEY") == KEY
        return httpx.Response(status, content=json.dumps(body).encode())

    return Connection(domain="127.0.0.1:9", api_key=KEY, transport=httpx.MockTransport(answer))


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (501, "SNAPSHOT::NOT_IMPLEMENTED"),
        (409, "SNAPSHOT::UNSUPPORTED_RUNTIME"),
        (405, "METHOD_NOT_ALLOWED"),
    ],
)
async def test_a_runtime_without_snapshots_says_so(status: int, code: str) -> None:
    connection = _connection(status, {"code": code, "message": "no rootfs snapshot committer"})
    with pytest.raises(SnapshotsUnsupportedError, match="does not support snapshots") as caught:
        await snapshot_sandbox("sbx-1", connection=connection)
    assert caught.value.status_code == status
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)
    with pytest.raises(SnapshotsUnsupportedError):
        await restore_snapshot("snap-1", connection=connection)


async def test_other_failures_stay_server_errors_and_missing_snapshots_are_quiet() -> None:
    conflict = _connection(409, {"code": "SANDBOX::NOT_RUNNING", "message": "not running"})
    with pytest.raises(ServerError) as caught:
        await snapshot_sandbox("sbx-1", connection=conflict)
    assert not isinstance(caught.value, SnapshotsUnsupportedError)
    missing = _connection(404, {"code": "SNAPSHOT::NOT_FOUND", "message": "no such snapshot"})
    assert await get_snapshot("snap-1", connection=missing) is None
    assert await delete_snapshot("snap-1", connection=missing) is False


async def test_bad_arguments_fail_before_any_request() -> None:
    with pytest.raises(ConfigurationError, match="snapshot_id"):
        await get_snapshot("  ")
    with pytest.raises(ConfigurationError, match="sandbox id"):
        await snapshot_sandbox("")
    with pytest.raises(ConfigurationError, match="lifetime"):
        await restore_snapshot("snap-1", lifetime=10)
