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
import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    Connection,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)
from opensandbox_core._metadata import OWNER_KEY
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes


async def _read_when_ready(sandbox_id: str, path: str) -> bytes:
    """Attach to a sandbox the test created without the core (so nobody waited for its daemon)."""
    deadline = time.monotonic() + 90
    while True:
        session = AsyncSandboxSession.attach(sandbox_id)
        try:
            return await session.files.read_bytes(path)
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
            await source.files.write_bytes("/workspace/state.txt", b"checkpoint 1\n")
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
            await source.files.write_bytes("/workspace/state.txt", b"changed later\n")

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


async def test_the_snapshot_api_restores_files_and_gives_the_copy_a_new_owner(
    sandbox_image: str,
) -> None:
    from opensandbox_core._fleet._snapshots import get_snapshot, list_snapshots
    from opensandbox_core.fleet import delete_snapshot, restore_snapshot, snapshot_sandbox

    tag = {"osb-test": f"snapapi-{uuid.uuid4().hex[:10]}"}
    source = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata=tag, lifetime=600))
    restored: AsyncSandboxSession | None = None
    snapshot = None
    try:
        await source.files.write_bytes("/workspace/state.txt", b"checkpoint 1\n")
        started = time.monotonic()
        snapshot = await snapshot_sandbox(source, name="api-test")
        took_snapshot = time.monotonic() - started
        assert snapshot.ready and snapshot.sandbox_id == source.id
        assert [s.id for s in await list_snapshots(sandbox_id=source.id)] == [snapshot.id]
        await source.files.write_bytes("/workspace/state.txt", b"changed later\n")

        started = time.monotonic()
        restored = await restore_snapshot(snapshot.id, metadata=tag, lifetime=600)
        took_restore = time.monotonic() - started
        assert restored.id != source.id and restored.owned
        assert await restored.files.read_bytes("/workspace/state.txt") == b"checkpoint 1\n"
        assert await source.files.read_bytes("/workspace/state.txt") == b"changed later\n"

        # The copy carries its restorer's tag, not the source's (which the image would give it).
        [mine] = await list_sandboxes(metadata={OWNER_KEY: restored.owner_token})
        assert mine.id == restored.id
        assert [s.id for s in await list_sandboxes(metadata={OWNER_KEY: source.owner_token})] == [
            source.id
        ], "the restored sandbox still carries the source owner's tag"
        assert restored.owner_token != source.owner_token

        # The source's owner cleans up: the copy survives, and its own owner removes it.
        await source.destroy()
        assert (await restored.commands.run("cat /workspace/state.txt")).stdout == "checkpoint 1\n"
        async with restored:
            pass
        assert await list_sandboxes(metadata={OWNER_KEY: restored.owner_token}) == []
        restored = None
        assert await delete_snapshot(snapshot.id)
        assert await get_snapshot(snapshot.id) is None
        assert not await delete_snapshot(snapshot.id)
        snapshot = None
        print(
            f"\nsnapshot ready in {took_snapshot:.2f} s; restored and usable in {took_restore:.2f} s"
        )
    finally:
        if restored is not None:
            await restored.destroy()
        await source.destroy()
        if snapshot is not None:
            await delete_snapshot(snapshot.id)


async def test_a_snapshot_is_restored_by_its_name(sandbox_image: str) -> None:
    # `restore_snapshot` takes a name as well as an id (the deepagents-code provider's
    # `snapshot=`): the newest ready snapshot of that name.
    from opensandbox_core import ConfigurationError
    from opensandbox_core.fleet import delete_snapshot, restore_snapshot, snapshot_sandbox

    name = f"by-name-{uuid.uuid4().hex[:10]}"
    tag = {"osb-test": name}
    async with AsyncSandboxSession(
        SandboxSpec(image=sandbox_image, metadata=tag, lifetime=600)
    ) as source:
        await source.files.write_bytes("/workspace/state.txt", b"named\n")
        snapshot = await snapshot_sandbox(source, name=name)
    try:
        async with await restore_snapshot(name, metadata=tag, lifetime=600) as restored:
            assert await restored.files.read_bytes("/workspace/state.txt") == b"named\n"
        with pytest.raises(ConfigurationError, match="No ready snapshot"):
            await restore_snapshot(f"{name}-none", lifetime=600)
    finally:
        await delete_snapshot(snapshot.id)
