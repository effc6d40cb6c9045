"""Durable execution under DBOS (SQLite system database, so it runs offline), with a worker crash.

The first worker process creates the sandbox, writes a file in it and dies inside the next model
step. A second worker recovers the workflow from SQLite: the `ensure` step replays the ref it had
recorded, so the rest of the run reaches the same sandbox (the file is there), and no second
sandbox is created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from _harness import MISSING

pytest.importorskip("dbos")
pytest.importorskip("pydantic_ai_harness", reason=MISSING)  # the worker runs Shell()

from opensandbox_core.fleet import destroy_sandbox, list_sandboxes
from pydantic_ai_opensandbox import CREATE_METADATA_KEY

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral

WORKER = Path(__file__).with_name("_dbos_worker.py")


def _worker(db: Path, workflow_id: str, crash: bool | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(WORKER),
            str(db),
            workflow_id,
            "python:3.13-slim",
            crash if isinstance(crash, str) else "1" if crash else "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
        check=False,
    )


@pytest.mark.long
async def test_dbos_run_survives_a_worker_crash_in_the_same_sandbox(tmp_path: Path) -> None:
    db = tmp_path / "dbos.sqlite"
    workflow_id = f"osb-{uuid.uuid4().hex}"
    tag = {CREATE_METADATA_KEY: "true", "osb-durable": workflow_id}
    before = {s.id for s in await list_sandboxes(metadata=tag)}
    created: set[str] = set()
    try:
        first = _worker(db, workflow_id, crash=True)
        assert first.returncode == 17, first.stderr[-3000:]
        created = {s.id for s in await list_sandboxes(metadata=tag)} - before
        assert len(created) == 1, "the first worker created exactly one sandbox before dying"

        second = _worker(db, workflow_id, crash=False)
        assert second.returncode == 0, second.stderr[-3000:]
        result = json.loads(second.stdout.strip().splitlines()[-1])
        assert result["ref"] in created
        assert "written-before-the-crash" in result["output"]
        after = {s.id for s in await list_sandboxes(metadata=tag)} - before
        assert after == created, "recovery reattached instead of creating another sandbox"
    finally:
        for sandbox_id in created | ({s.id for s in await list_sandboxes(metadata=tag)} - before):
            await destroy_sandbox(sandbox_id)


async def test_a_failed_durable_run_keeps_its_sandbox(tmp_path: Path) -> None:
    # Under a durable engine the run may be resumed, in the same sandbox: the capability tells
    # (through pydantic-ai's public BaseDurabilityCapability) and does not delete it. The same
    # failure without an engine deletes it (test_pydantic_failed_runs.py).
    workflow_id = f"osb-{uuid.uuid4().hex}"
    tag = {CREATE_METADATA_KEY: "true", "osb-durable": workflow_id}
    before = {s.id for s in await list_sandboxes(metadata=tag)}
    created: set[str] = set()
    try:
        failed = _worker(tmp_path / "dbos.sqlite", workflow_id, crash="fail")
        assert failed.returncode == 3, failed.stderr[-3000:]
        created = {s.id for s in await list_sandboxes(metadata=tag)} - before
        assert len(created) == 1, "the failed durable run's sandbox was deleted"
    finally:
        for sandbox_id in created:
            await destroy_sandbox(sandbox_id)
