"""Background processes, port preview and warm sandboxes, live."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from opensandbox_core import AsyncSandboxSession, BackgroundProcess, SandboxSpec
from opensandbox_core.fleet import SandboxPool, list_sandboxes


async def _alive(session: AsyncSandboxSession, pid: str) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie) in the sandbox."""
    probe = f'S=$(cut -d\' \' -f3 /proc/{pid}/stat 2>/dev/null); [ -n "$S" ] && [ "$S" != Z ]'
    return (await session.commands.run(probe)).exit_code == 0


async def _read_pid(session: AsyncSandboxSession, path: str) -> str:
    for _ in range(200):
        if await session.files.exists(path):
            text = (await session.files.read_bytes(path)).decode().strip()
            if text:
                return text
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


async def test_background_process_status_output_and_stop(session: AsyncSandboxSession) -> None:
    proc = await session.commands.start_background(
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
    proc = await session.commands.start_background("sleep 300 & echo $! > /tmp/bg.pid; wait")
    for _ in range(100):
        if await session.files.exists("/tmp/bg.pid"):
            break
        await asyncio.sleep(0.05)
    assert (await proc.status()).running
    await proc.stop()
    pid = (await session.files.read_bytes("/tmp/bg.pid")).decode().strip()
    for _ in range(100):
        if (await session.commands.run(["kill", "-0", pid])).exit_code != 0:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the background process's child survived stop()")
    await proc.stop()  # idempotent


@pytest.mark.parametrize(
    "profile",
    [
        # the real v1.0.18 registers a background command as v1.0.19 does
        pytest.param("1.0.19", marks=pytest.mark.testbed_daemon("1.0.19", "1.0.18")),
        pytest.param("1.1", marks=pytest.mark.testbed_daemon("1.1")),
    ],
)
async def test_background_handle_is_usable_at_once(sandbox_image: str, profile: str) -> None:
    """execd registers a background command only after it started (status 404 right after
    `init` on the real v1.0.19); the handle start_background returns works at once."""
    spec = SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": profile})
    async with AsyncSandboxSession(spec) as sb:
        for _ in range(5):
            proc = await sb.commands.start_background("sleep 5")
            assert (await proc.status()).running
            assert (await proc.read_output()).text == ""
            await proc.stop()
        durations = []
        for _ in range(3):
            started = time.monotonic()
            await (await sb.commands.start_background("true")).wait(timeout=10)
            durations.append(time.monotonic() - started)
        assert min(durations) < 0.9, durations  # the stream's 1 s hold is not waited for


@pytest.mark.testbed_daemon("1.0.19", "1.0.18")  # as the real v1.0.19 and v1.0.18 do
async def test_background_children_die_with_the_main_process(sandbox_image: str) -> None:
    """When a background main process exits, execd kills its process group: `cmd &` and
    `nohup cmd &` children die; `keep_running` starts one that survives."""
    spec = SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": "1.0.19"})
    async with AsyncSandboxSession(spec) as sb:
        plain = await sb.commands.start_background("sleep 300 & echo $! > /tmp/plain.pid")
        nohup = await sb.commands.start_background(
            "nohup sleep 300 >/dev/null 2>&1 & echo $! > /tmp/nohup.pid"
        )
        kept_line = BackgroundProcess.keep_running("sleep 300", log="/tmp/kept.log")
        kept = await sb.commands.start_background(f"{kept_line}; echo $! > /tmp/kept.pid")
        for proc in (plain, nohup, kept):
            assert await proc.wait(timeout=30) == 0
        plain_pid = await _read_pid(sb, "/tmp/plain.pid")
        nohup_pid = await _read_pid(sb, "/tmp/nohup.pid")
        kept_pid = await _read_pid(sb, "/tmp/kept.pid")
        for _ in range(50):
            if not await _alive(sb, plain_pid) and not await _alive(sb, nohup_pid):
                break
            await asyncio.sleep(0.1)
        assert not await _alive(sb, plain_pid), "a `cmd &` child outlived its main process"
        assert not await _alive(sb, nohup_pid), "a `nohup cmd &` child outlived its main process"
        assert await _alive(sb, kept_pid), "keep_running's child died with the main process"
        await sb.commands.run(["kill", "-KILL", f"-{kept_pid}"])


@pytest.mark.testbed_daemon("1.0.19", "1.0.18")  # as the real v1.0.19 and v1.0.18 do
async def test_discard_removes_the_output_file(sandbox_image: str) -> None:
    spec = SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": "1.0.19"})
    async with AsyncSandboxSession(spec) as sb:
        proc = await sb.commands.start_background("echo hello; sleep 300")
        for _ in range(100):
            if (await proc.read_output()).text == "hello\n":
                break
            await asyncio.sleep(0.05)
        listing = f'ls "${{TMPDIR:-/tmp}}"/{proc.id}.output'
        assert (await sb.commands.run(listing)).exit_code == 0
        await proc.discard()
        assert not (await proc.status()).running
        assert (await sb.commands.run(listing)).exit_code != 0
        await proc.discard()  # idempotent


async def test_background_output_is_bounded_on_the_client(session: AsyncSandboxSession) -> None:
    proc = await session.commands.start_background("head -c 3000000 /dev/zero | tr '\\0' z")
    await proc.wait(timeout=60)
    chunk = await proc.read_output(max_bytes=100_000)
    assert chunk.truncated
    assert len(chunk.text) == 100_000


async def test_port_preview_serves_a_file(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("site/hello.txt", b"served from the sandbox\n")
    server = await session.commands.start_background(
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
            assert (await session.commands.run("echo pooled")).stdout == "pooled\n"
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
