"""Commands against the live testbed: exact output, exit codes, timeouts that stop the process."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    ConfigurationError,
    Framing,
    SandboxSpec,
    SandboxUnavailableError,
    UnsupportedDaemonError,
)


def framing_spec(image: str, mode: str) -> SandboxSpec:
    """A spec whose testbed daemon frames output like execd `mode` (modern, legacy, ancient)."""
    return SandboxSpec(image=image, env={"OSB_EXECD_FRAMING": mode})


# (shell command, exact expected stdout). Each is checked in modern framing; the ones that end
# with a newline and have no CR are also exact in legacy framing.
CASES = [
    ("printf 'a\\n\\nb\\n'", "a\n\nb\n"),
    ("printf 'no newline'", "no newline"),
    ("printf 'crlf\\r\\nline\\r\\n'", "crlf\r\nline\r\n"),
    ("printf '\\n\\n\\n'", "\n\n\n"),
    ("printf 'é☃𝄞\\n'", "é☃𝄞\n"),
    ("printf '\\377ok\\n'", "\ufffdok\n"),
]


async def test_exact_output_modern(session: AsyncSandboxSession) -> None:
    assert session.framing is Framing.MODERN
    for command, expected in CASES:
        result = await session.run(command)
        assert result.stdout == expected, command
        assert result.exit_code == 0


async def test_one_mebibyte_single_line(session: AsyncSandboxSession) -> None:
    result = await session.run("python3 -c \"import sys; sys.stdout.write('x' * 1048576)\"")
    assert result.stdout == "x" * 1048576
    assert not result.truncated


async def test_multibyte_characters_split_across_chunks(session: AsyncSandboxSession) -> None:
    # 200,000 three-byte characters written in odd-sized pieces: reads split characters.
    script = (
        "import sys, time\n"
        "data = ('€' * 200000).encode()\n"
        "for i in range(0, len(data), 4097):\n"
        "    sys.stdout.buffer.write(data[i:i + 4097]); sys.stdout.flush()\n"
    )
    await session.write_bytes("split.py", script.encode())
    result = await session.run("python3 split.py")
    assert result.stdout == "€" * 200000


async def test_stdout_stderr_exit_code_and_missing_program(session: AsyncSandboxSession) -> None:
    result = await session.run("echo out; echo err >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert result.output == "out\nerr\n"
    missing = await session.run(["definitely-not-a-program-osb"])
    assert missing.exit_code == 127


async def test_argv_items_are_literal(session: AsyncSandboxSession) -> None:
    marker = "/tmp/osb-injection-marker"
    payload = f"$(touch {marker}); `touch {marker}`; touch {marker}"
    result = await session.run(["printf", "%s", payload])
    assert result.stdout == payload
    assert not await session.exists(marker)


async def test_cwd_and_env_layering(sandbox_image: str) -> None:
    async with AsyncSandboxSession(
        SandboxSpec(image=sandbox_image), env={"A": "session", "B": "session"}
    ) as sb:
        result = await sb.run('printf "%s %s %s" "$A" "$B" "$PWD"', env={"B": "call"})
        assert result.stdout == f"session call {await sb.working_dir()}"
        await sb.make_dir("/tmp/elsewhere")
        assert (await sb.run("pwd", cwd="/tmp/elsewhere")).stdout == "/tmp/elsewhere\n"
        with pytest.raises(FileNotFoundError):
            await sb.run("pwd", cwd="/does/not/exist")


async def test_output_cap_sets_truncated(session: AsyncSandboxSession) -> None:
    result = await session.run("head -c 300000 /dev/zero | tr '\\0' y", max_output=100_000)
    assert result.truncated
    assert result.stdout == "y" * 100_000


async def test_streaming_callback_sees_output(session: AsyncSandboxSession) -> None:
    seen: list[tuple[str, str]] = []
    result = await session.run(
        "echo one; sleep 0.2; echo two >&2", on_output=lambda s, t: seen.append((s, t))
    )
    assert "".join(t for s, t in seen if s == "stdout") == result.stdout == "one\n"
    assert "".join(t for s, t in seen if s == "stderr") == "two\n"


async def test_timeout_stops_the_process_group(session: AsyncSandboxSession) -> None:
    script = "sleep 300 & echo $! > /tmp/child.pid; echo started; wait"
    with pytest.raises(CommandTimeoutError) as info:
        await session.run(script, timeout=1.5)
    assert info.value.stdout == "started\n"
    assert info.value.timeout == 1.5
    pid = (await session.read_bytes("/tmp/child.pid")).decode().strip()
    for _ in range(50):
        if (await session.run(["kill", "-0", pid])).exit_code != 0:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"the background child {pid} survived the timeout")


async def test_cancellation_stops_the_remote_command(session: AsyncSandboxSession) -> None:
    task = asyncio.create_task(session.run("echo $$ > /tmp/cancel.pid; exec sleep 300"))
    for _ in range(100):
        if await session.exists("/tmp/cancel.pid"):
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    pid = (await session.read_bytes("/tmp/cancel.pid")).decode().strip()
    for _ in range(100):
        if (await session.run(["kill", "-0", pid])).exit_code != 0:
            return
        await asyncio.sleep(0.1)
    pytest.fail("the cancelled command is still running in the sandbox")


async def test_concurrent_commands_do_not_serialise(session: AsyncSandboxSession) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    results = await asyncio.gather(*(session.run("sleep 1; echo ok") for _ in range(16)))
    assert all(r.stdout == "ok\n" for r in results)
    assert loop.time() - started < 8


@pytest.mark.parametrize("bad", [-1, 0, float("nan"), float("inf"), "5"])
async def test_bad_timeouts(session: AsyncSandboxSession, bad: object) -> None:
    with pytest.raises(ConfigurationError):
        await session.run("true", timeout=bad)  # type: ignore[arg-type]


async def test_legacy_framing_is_reconstructed(sandbox_image: str) -> None:
    async with AsyncSandboxSession(framing_spec(sandbox_image, "legacy")) as sb:
        assert sb.framing is Framing.LEGACY
        for command, expected in CASES:
            if expected.endswith("\n") and "\r" not in expected:
                assert (await sb.run(command)).stdout == expected, command
        result = await sb.run("printf 'x\\n\\ny\\n'; printf 'e\\n\\n' >&2")
        assert (result.stdout, result.stderr) == ("x\n\ny\n", "e\n\n")


async def test_ancient_framing_is_refused_with_the_fix(sandbox_image: str) -> None:
    session = AsyncSandboxSession(framing_spec(sandbox_image, "ancient"))
    try:
        with pytest.raises(UnsupportedDaemonError) as info:
            await session.run("true")
        assert 'execd_image = "opensandbox/execd:release-1.2.0"' in str(info.value)
        assert isinstance(info.value, SandboxUnavailableError)
    finally:
        await session.destroy()
