"""Leftovers on the testbed: judged by idle time and owner, never by age alone.

Four sandboxes of these packages, all tagged for this test only: a dead one (its entrypoint exits
with an error: the server lists it as Failed), one without expiry (kept until deleted), one in use
(expiring, renewed by a command just run) and one without expiry of another owner.
`--remove-idle-for 0s` removes only the dead one; with `--owner` and `--include-no-expiry` the
owner's idle sandbox goes too, while the other owner's and the one in use stay.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import httpx
import pytest

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec
from opensandbox_core._doctor import DoctorOptions, run_doctor
from opensandbox_core._fleet._admin import LIBRARY_VALUE
from opensandbox_core._metadata import LIBRARY_KEY
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


async def _dead_sandbox(env: dict[str, str], image: str, tag: dict[str, str]) -> str:
    """A sandbox whose entrypoint exits 3, once the server reports it Failed.

    In two of about eight full live runs on 2 cores (2026-12-02) the server had not reported
    Failed after 60 s and 180 s (the same test passes in 4-5 s alone and in the other runs; the
    cause is not known). That is the server's state reporting, not what this test is about: a
    sandbox that does not get there in 90 s is deleted and made once more, and the failure
    names every status seen last.
    """
    stuck: list[str] = []
    async with httpx.AsyncClient(
        base_url=f"http://{env['OPEN_SANDBOX_DOMAIN']}",
        headers={"OPEN-SANDBOX-API-KEY": env["OPEN_SANDBOX_API_KEY"]},
        timeout=60,
    ) as client:
        for _attempt in range(2):
            response = await client.post(
                "/v1/sandboxes",
                json={
                    "image": {"uri": image},
                    "entrypoint": ["/bin/sh", "-c", "exit 3"],
                    "timeout": 600,
                    "resourceLimits": {"cpu": "1", "memory": "256Mi"},
                    "env": {},
                    "metadata": {LIBRARY_KEY: LIBRARY_VALUE, **tag},
                },
            )
            assert response.is_success, response.text
            sandbox_id = str(response.json()["id"])
            deadline = time.monotonic() + 90
            status: object = None
            while time.monotonic() < deadline:
                status = (await client.get(f"/v1/sandboxes/{sandbox_id}")).json().get("status")
                if isinstance(status, dict) and str(status.get("state")).lower() == "failed":
                    return sandbox_id
                await asyncio.sleep(1)
            stuck.append(f"{sandbox_id}: {status}")
            await client.delete(f"/v1/sandboxes/{sandbox_id}")
    raise AssertionError(f"no sandbox reached state Failed; last statuses {stuck}")


async def test_leftovers_by_idle_time_and_owner(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    tag = {"osb-doctor-test": uuid.uuid4().hex}
    connection = Connection()
    kept = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata=tag, lifetime=None))
    in_use = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata=tag, lifetime=600))
    other = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata=tag, lifetime=None))
    ids: list[str] = []
    try:
        ids += [await s.start() for s in (kept, in_use, other)]
        dead = await _dead_sandbox(testbed_env, sandbox_image, tag)
        ids.append(dead)
        await kept.aclose()  # left behind on purpose
        await other.aclose()
        assert (await in_use.commands.run("true")).exit_code == 0

        def options(**extra: object) -> DoctorOptions:
            return DoctorOptions(skip_sandbox=True, match=tag, **extra)  # type: ignore[arg-type]

        results = await run_doctor(options(stale_after=timedelta(0)))
        report = {r.name: r for r in results}["leftovers"]
        assert (report.status, report.data["stale"]) == ("WARN", [dead])
        assert "1 expiring" in report.summary and "2 without expiry" in report.summary

        # What docs/kubernetes.md used to recommend, at its most aggressive: only the dead one.
        results = await run_doctor(options(remove_idle_for=timedelta(0)))
        report = {r.name: r for r in results}["leftovers"]
        assert (report.status, report.data["removed"]) == ("PASS", [dead])
        left = {s.id for s in await list_sandboxes(connection, metadata=tag)}
        assert left == {kept.id, in_use.id, other.id}

        # The owner's idle sandbox, counted without expiry: the other owner's and the one in use stay.
        results = await run_doctor(
            options(remove_idle_for=timedelta(0), owner=kept.owner_token, include_no_expiry=True)
        )
        report = {r.name: r for r in results}["leftovers"]
        assert (report.status, report.data["removed"]) == ("PASS", [kept.id])
        left = {s.id for s in await list_sandboxes(connection, metadata=tag)}
        assert left == {in_use.id, other.id}
        assert (await in_use.commands.run("echo still here")).stdout == "still here\n"
    finally:
        await in_use.destroy()
        for sandbox_id in ids:
            await destroy_sandbox(sandbox_id, connection)
