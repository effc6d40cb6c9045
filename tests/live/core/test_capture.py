"""Output capture on line-framed execd (`opensandbox_core._commands._capture`), live.

Every run without callbacks on 1.0.17-1.0.19 goes through the capture wrapper: these tests pin
what must not change because of it. The same commands give the same results on a 1.1-style
daemon (never wrapped), with callbacks (never wrapped) and wrapped; the files it leaves are gone
afterwards, also after a timeout and a cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from opensandbox_core import AsyncSandboxSession, CommandResult, CommandTimeoutError, SandboxSpec

pytestmark = pytest.mark.live

# Commands whose whole result (exit code, stdout, stderr) must be the same however they run.
SAME = [
    "true",
    "false",
    "exit 3",
    "exit 255",
    "exit 141",
    "echo out; echo err >&2; exit 7",
    "printf 'a\\r\\nb'",
    "printf '\\n\\n'",
    'echo "unterminated',
    "no-such-command-capture-test",
    "set -x; echo traced",
    "set -u; echo $UNSET_CAPTURE_VAR",
    "trap 'echo bye' EXIT; echo x",
    "echo $0 $SHLVL $#",
    "env | grep -c CAPTURED",
    "cat; echo read-done",
    'read x; echo "[$x]"',
    "kill -9 $$",
    "sh -c 'kill -9 $$'",
    "kill -TERM $$",
    "return 3",
    "exec echo replaced",
    "f() { return 4; }; f",
    "echo $LINENO\necho $LINENO",
    "seq 1 3 | head -1; set -o pipefail; yes | head -1",
    "(sleep 2; echo late) & echo early",
]


def _noop(kind: str, text: str) -> None:
    """A callback: the run then streams and is never captured."""


def _outcome(result: CommandResult) -> tuple[int, str, str]:
    return result.exit_code, result.stdout, result.stderr


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(sandbox_image: str) -> AsyncIterator[dict[str, AsyncSandboxSession]]:
    specs = {
        p: SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": p})
        for p in ("1.0.19", "1.1")
    }
    opened: dict[str, AsyncSandboxSession] = {}
    try:
        for profile, spec in specs.items():
            opened[profile] = AsyncSandboxSession(spec)
            await opened[profile].start()
        yield opened
    finally:
        for session in opened.values():
            await session.aclose()


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.testbed_daemon("1.0.19")
@pytest.mark.parametrize("command", SAME)
async def test_same_result_wrapped_streamed_and_on_1_1(
    sessions: dict[str, AsyncSandboxSession], command: str
) -> None:
    legacy, modern = sessions["1.0.19"], sessions["1.1"]
    wrapped = _outcome(await legacy.commands.run(command, timeout=30))
    streamed = _outcome(await legacy.commands.run(command, timeout=30, on_output=_noop))
    unwrapped = _outcome(await modern.commands.run(command, timeout=30))
    assert wrapped == unwrapped, (wrapped, unwrapped)
    assert wrapped == streamed, (wrapped, streamed)


async def _capture_files(session: AsyncSandboxSession) -> list[str]:
    # plain_lines: this listing is not captured itself (it would find its own files)
    listing = await session.commands.run(
        ["find", "/tmp", "-maxdepth", "1", "-name", ".osbcap-*"], plain_lines=True
    )
    return listing.stdout.split()


async def _none_left(session: AsyncSandboxSession) -> list[str]:
    for _ in range(50):  # the deletion runs in the background
        left = await _capture_files(session)
        if not left:
            return left
        await asyncio.sleep(0.1)
    return await _capture_files(session)


async def test_capture_files_are_deleted_after_runs_timeouts_and_cancels(
    sandbox_image: str,
) -> None:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as session:
        await session.commands.run("echo a; echo b >&2")
        with pytest.raises(CommandTimeoutError) as info:
            await session.commands.run("echo partial; sleep 30", timeout=1)
        assert info.value.stdout == "partial\n"
        task = asyncio.create_task(session.commands.run("echo started; sleep 30"))
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _none_left(session) == []


async def test_output_cap_on_captured_output(sandbox_image: str) -> None:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as session:
        result = await session.commands.run(
            "head -c 5000 /dev/zero | tr '\\0' x; echo e >&2", max_output=1000
        )
        assert (result.stdout, result.stderr, result.truncated) == ("x" * 1000, "e\n", True)
        exact = await session.commands.run("printf 'é%.0s' $(seq 1 600)", max_output=1001)
        assert exact.stdout == "é" * 500 and exact.truncated  # never half a character
