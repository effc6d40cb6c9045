"""The daemon inside the sandbox dies mid-command; callers cancel or interrupt a command."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import pytest
from _drivers import PACKAGES, open_driver

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    SandboxSession,
    SandboxSpec,
)

KILL_EXECD = "(sleep 1; pkill -9 -f /opt/opensandbox/execd) >/dev/null 2>&1 & sleep 30; echo never"


@pytest.mark.parametrize("package", PACKAGES)
async def test_execd_dies_mid_command(package: str, sandbox_image: str) -> None:
    """One body for the core and each adapter (drivers in tests/live/_drivers.py)."""
    async with open_driver(package, sandbox_image) as driver:
        sid = driver.sandbox_id
        started = time.monotonic()
        with pytest.raises(driver.died) as info:
            async with asyncio.timeout(60):
                await driver.run(KILL_EXECD, 20)
        assert not isinstance(info.value, CommandTimeoutError)
        assert time.monotonic() - started < 20 + 12  # within the command's timeout and grace
        assert sid in str(info.value)
        # The daemon is gone for good: every later call says so.
        with pytest.raises(driver.unavailable) as later:
            await driver.run("true", 10)
        assert sid in str(later.value)
        assert await driver.session.sandbox_gone()


async def _pid_alive(session: AsyncSandboxSession, pid: str) -> bool:
    return (await session.commands.run(["sh", "-c", f"kill -0 {pid}"], timeout=10)).exit_code == 0


async def _wait_pid(session: AsyncSandboxSession, marker: str) -> str:
    for _ in range(100):
        result = await session.commands.run(["cat", marker], timeout=10)
        if result.exit_code == 0 and result.stdout.strip():
            return result.stdout.strip()
        await asyncio.sleep(0.1)
    raise AssertionError("the command never wrote its pid")


async def test_cancelled_task_stops_the_remote_process(sandbox_image: str) -> None:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as session:
        task = asyncio.create_task(
            session.commands.run("echo $$ > /tmp/cancel.pid; exec sleep 300")
        )
        pid = await _wait_pid(session, "/tmp/cancel.pid")
        assert await _pid_alive(session, pid)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(50):
            if not await _pid_alive(session, pid):
                break
            await asyncio.sleep(0.1)
        assert not await _pid_alive(session, pid), "the cancelled command still runs"


@pytest.mark.usefixtures("ctrl_c")
def test_keyboard_interrupt_in_blocking_run_stops_the_remote_process(sandbox_image: str) -> None:
    assert threading.current_thread() is threading.main_thread()
    with SandboxSession(SandboxSpec(image=sandbox_image)) as sandbox:
        sandbox.start()
        main = threading.main_thread().ident
        assert main is not None

        def interrupt_when_started() -> None:
            for _ in range(200):
                if sandbox.commands.run(["cat", "/tmp/kbd.pid"], timeout=10).stdout.strip():
                    break
                time.sleep(0.1)
            time.sleep(0.5)
            signal.pthread_kill(main, signal.SIGINT)

        helper = threading.Thread(target=interrupt_when_started)
        helper.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            sandbox.commands.run("echo $$ > /tmp/kbd.pid; exec sleep 300")
        helper.join()
        assert time.monotonic() - started < 60
        pid = sandbox.commands.run(["cat", "/tmp/kbd.pid"], timeout=10).stdout.strip()
        alive = True
        for _ in range(50):
            alive = sandbox.commands.run(["sh", "-c", f"kill -0 {pid}"], timeout=10).exit_code == 0
            if not alive:
                break
            time.sleep(0.1)
        assert not alive, "the interrupted command still runs"
        # The façade still works after its own KeyboardInterrupt.
        assert sandbox.commands.run("echo after").stdout == "after\n"
        sandbox_id = sandbox.id
    # ... and leaving `with` after it still destroyed the sandbox it created.
    assert sandbox_id is not None
    check = SandboxSession.attach(sandbox_id)
    try:
        assert check.sandbox_gone(), f"sandbox {sandbox_id} was left running"
    finally:
        check.close()
