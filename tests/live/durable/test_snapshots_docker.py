"""What opensandbox-server 1.1.1 does with snapshots on Docker (the facts docs/scaling.md states).

A snapshot is a `docker commit` of the sandbox's container; a sandbox created from it has the
files of that moment, and (because a commit keeps the container's labels) the source's metadata
unless the create sets those keys itself.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx

from opensandbox_core import (
    OWNER_KEY,
    AsyncSandboxSession,
    Connection,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
    destroy_sandbox,
)


async def _read_when_ready(sandbox_id: str, path: str) -> bytes:
    """Attach to a sandbox the test created without the core (so nobody waited for its daemon)."""
    deadline = time.monotonic() + 90
    while True:
        session = AsyncSandboxSession.attach(sandbox_id)
        try:
            return await session.read_bytes(path)
        except (SandboxUnavailableError, ServerError):  # its daemon is not up yet
            if time.monotonic() > deadline:
                raise
        finally:
            await session.aclose()
        await asyncio.sleep(0.5)


async def test_a_snapshot_restores_the_files_of_its_moment(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    from opensandbox.adapters.factory import AdapterFactory

    api = f"{testbed_env.get('OPEN_SANDBOX_PROTOCOL') or 'http'}://{testbed_env['OPEN_SANDBOX_DOMAIN']}/v1"
    headers = {"OPEN-SANDBOX-API-KEY": testbed_env["OPEN_SANDBOX_API_KEY"]}
    tag = {"osb-test": f"snap-{uuid.uuid4().hex[:10]}"}
    source = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata=tag, lifetime=600))
    made: list[str] = []
    snapshot_id = None
    config = Connection().build_sdk_config().with_transport_if_missing()
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        try:
            made.append(await source.start())
            await source.write_bytes("/workspace/state.txt", b"checkpoint 1\n")
            answer = await http.post(f"{api}/sandboxes/{source.id}/snapshots", json={})
            assert answer.status_code == 202, answer.text
            snapshot_id = answer.json()["id"]
            deadline = time.monotonic() + 120
            while (
                state := (await http.get(f"{api}/snapshots/{snapshot_id}")).json()["status"][
                    "state"
                ]
            ) == "Creating":
                assert time.monotonic() < deadline, "the snapshot never became ready"
            assert state == "Ready"
            await source.write_bytes("/workspace/state.txt", b"changed later\n")

            service = AdapterFactory(config).create_sandbox_service()
            created = await service.create_sandbox(
                spec=None,
                entrypoint=None,
                env={},
                metadata={},
                timeout=None,
                resource={"cpu": "1", "memory": "2Gi"},
                network_policy=None,
                extensions={},
                volumes=None,
                snapshot_id=snapshot_id,
            )
            made.append(created.id)
            assert await _read_when_ready(created.id, "/workspace/state.txt") == b"checkpoint 1\n"
            info = (await http.get(f"{api}/sandboxes/{created.id}")).json()
            assert info["snapshotId"] == snapshot_id
            inherited = info.get("metadata") or {}
            assert inherited.get(OWNER_KEY) == source.owner_token, "labels are no longer inherited"
            assert inherited.get("osb-test") == tag["osb-test"]
        finally:
            for sandbox_id in made:
                await destroy_sandbox(sandbox_id)
            if snapshot_id is not None:
                assert (await http.delete(f"{api}/snapshots/{snapshot_id}")).status_code == 204
            await source.aclose()
            await config.close_transport_if_owned()
