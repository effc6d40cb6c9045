"""Background processes, port preview and warm sandboxes, live."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from opensandbox_core import AsyncSandboxSession, SandboxPool, SandboxSpec, list_sandboxes


async def test_background_process_status_output_and_stop(session: AsyncSandboxSession) -> None:
    proc = await session.start_background(
        "for i in 1 2 3; do echo line $i; sleep 0.3; done; echo err >&2; exit 4"
    )
    first = await proc.read_output()
    assert (await proc.wait(timeout=30)) == 4
    rest = await proc.read_output(first.cursor)
    assert "line 1\n" in first.text + rest.text
    assert "line 3\n" in first.text + rest.text
    assert (first.text + rest.text).count("line 1") == 1  # the cursor does not repeat output
    status = await proc.status()
    assert (status.running, status.exit_code) == (False, 4)


async def test_background_stop_kills_the_process_group(session: AsyncSandboxSession) -> None:
    proc = await session.start_background("sleep 300 & echo $! > /tmp/bg.pid; wait")
    for _ in range(100):
        if await session.exists("/tmp/bg.pid"):
            break
        await asyncio.sleep(0.05)
    assert (await proc.status()).running
    await proc.stop()
    pid = (await session.read_bytes("/tmp/bg.pid")).decode().strip()
    for _ in range(100):
        if (await session.run(["kill", "-0", pid])).exit_code != 0:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the background process's child survived stop()")
    await proc.stop()  # idempotent


async def test_background_output_is_bounded_on_the_client(session: AsyncSandboxSession) -> None:
    proc = await session.start_background("head -c 3000000 /dev/zero | tr '\\0' z")
    await proc.wait(timeout=60)
    chunk = await proc.read_output(max_bytes=100_000)
    assert chunk.truncated
    assert len(chunk.text) == 100_000


async def test_port_preview_serves_a_file(session: AsyncSandboxSession) -> None:
    await session.write_bytes("site/hello.txt", b"served from the sandbox\n")
    server = await session.start_background(
        ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1"], cwd="site"
    )
    try:
        url, headers = await session.get_endpoint(8000)
        assert url.startswith(("http://127.0.0.1", "http://localhost"))
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient(headers=headers, timeout=5) as client:
            while True:
                try:
                    response = await client.get(f"{url}/hello.txt")
                    if response.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the preview endpoint never answered"
                await asyncio.sleep(0.2)
        assert response.content == b"served from the sandbox\n"
    finally:
        await server.stop()


async def test_pool_hands_out_ready_owned_sandboxes(sandbox_image: str) -> None:
    spec = SandboxSpec(image=sandbox_image)
    async with SandboxPool(spec, size=1) as pool:
        await pool.start()
        assert pool.ready_count == 1
        started = time.monotonic()
        session = await pool.acquire()
        async with session:
            assert (await session.run("echo pooled")).stdout == "pooled\n"
            warm = time.monotonic() - started
            assert session.owned
            tags = {s.id: s.owner_token for s in await list_sandboxes()}
            assert tags[session.id or ""] == session.owner_token
        print(f"pooled create-to-first-command: {warm:.3f} s")
        # the pool refills behind the handed-out session
        for _ in range(200):
            if pool.ready_count == 1:
                break
            await asyncio.sleep(0.1)
        assert pool.ready_count == 1
        [pooled_id] = pool.ready_ids
        assert pooled_id != session.id
    remaining = {s.id for s in await list_sandboxes()}
    assert pooled_id not in remaining, "closing the pool must destroy its idle sandboxes"
    assert session.id not in remaining
