"""Commands against the live testbed: exact output, exit codes, timeouts that stop the process."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    ConfigurationError,
    SandboxSpec,
    SandboxUnavailableError,
    UnsupportedDaemonError,
)
from opensandbox_core._wire._framing import Framing


def profile_spec(image: str, profile: str) -> SandboxSpec:
    """A spec whose testbed daemon behaves as execd generation `profile` (1.0.19, 1.0.18, 1.1,
    1.0.16), whatever the testbed's default profile."""
    return SandboxSpec(image=image, container_env={"OSB_EXECD_PROFILE": profile})


# (shell command, exact expected stdout): exact on every supported generation.
CASES = [
    ("printf 'a\\n\\nb\\n'", "a\n\nb\n"),
    ("printf 'no newline'", "no newline"),
    ("printf 'crlf\\r\\nline\\r\\n'", "crlf\r\nline\r\n"),
    ("printf '10%%\\r100%%\\n'", "10%\r100%\n"),
    ("printf 'a\\r'", "a\r"),
    ("printf '\\n\\n\\n'", "\n\n\n"),
    ("printf '\\n\\na\\n\\n\\nb'", "\n\na\n\n\nb"),
    ("printf 'é☃𝄞\\n'", "é☃𝄞\n"),
    ("printf '\\377ok\\n'", "\ufffdok\n"),
    ("printf '\\377\\376a'", "\ufffd\ufffda"),
    ("printf 'x\\302\\205y\\n'", "x\x85y\n"),
    ("printf 'l\\342\\200\\250s\\342\\200\\251p'", "l\u2028s\u2029p"),
    ("printf 'a\\tb\\000c\\033[1md\\n'", "a\tb\x00c\x1b[1md\n"),
]
STDERR_CASE = ("printf 'o\\r\\n'; printf 'e1\\r\\n\\ne2' >&2", "o\r\n", "e1\r\n\ne2")


async def test_exact_output(session: AsyncSandboxSession) -> None:
    """Byte-exact output on the testbed's own profile (every profile runs this)."""
    for command, expected in CASES:
        result = await session.commands.run(command)
        assert result.stdout == expected, command
        assert result.exit_code == 0
    command, out, err = STDERR_CASE
    result = await session.commands.run(command)
    assert (result.stdout, result.stderr) == (out, err)


@pytest.mark.parametrize(
    ("profile", "framing"),
    [
        pytest.param(profile, framing, marks=pytest.mark.testbed_daemon(profile))
        for profile, framing in [
            ("1.0.19", Framing.LEGACY),
            ("1.0.18", Framing.LEGACY),
            ("1.1", Framing.MODERN),
        ]
    ],
)
async def test_exact_output_on_every_generation(
    sandbox_image: str, profile: str, framing: Framing
) -> None:
    async with AsyncSandboxSession(profile_spec(sandbox_image, profile)) as sb:
        for command, expected in CASES:
            assert (await sb.commands.run(command)).stdout == expected, command
        command, out, err = STDERR_CASE
        result = await sb.commands.run(command)
        assert (result.stdout, result.stderr) == (out, err)
        assert sb.framing == framing.value
        # execd's per-command output files do not pile up: they are deleted in the background,
        # many commands' worth in one request (at most ~1 s after the first of them was
        # left). Once that has landed, only the listing command's own two files are there
        # (they go in the next batch).
        count = "ls -1 \"${TMPDIR:-/tmp}\" | grep -cE '^[0-9a-f]{32}\\.std(out|err)$'"
        for _ in range(15):
            await asyncio.sleep(1.3)
            listing = await sb.commands.run(count)
            if listing.stdout == "2\n":
                break
        assert listing.stdout == "2\n"
        # No read of the daemon's one-second hold after completion.
        durations = []
        for _ in range(5):
            durations.append((await sb.commands.run("true")).duration)
        assert sorted(durations)[2] < 0.5, durations


async def test_one_mebibyte_single_line(session: AsyncSandboxSession) -> None:
    result = await session.commands.run(
        "python3 -c \"import sys; sys.stdout.write('x' * 1048576)\""
    )
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
    await session.files.write_bytes("split.py", script.encode())
    result = await session.commands.run("python3 split.py")
    assert result.stdout == "€" * 200000


async def test_stdout_stderr_exit_code_and_missing_program(session: AsyncSandboxSession) -> None:
    result = await session.commands.run("echo out; echo err >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert result.output == "out\nerr\n"
    missing = await session.commands.run(["definitely-not-a-program-osb"])
    assert missing.exit_code == 127


async def test_argv_items_are_literal(session: AsyncSandboxSession) -> None:
    marker = "/tmp/osb-injection-marker"
    payload = f"$(touch {marker}); `touch {marker}`; touch {marker}"
    result = await session.commands.run(["printf", "%s", payload])
    assert result.stdout == payload
    assert not await session.files.exists(marker)


async def test_cwd_and_env_layering(sandbox_image: str) -> None:
    async with AsyncSandboxSession(
        SandboxSpec(image=sandbox_image), env={"A": "session", "B": "session"}
    ) as sb:
        result = await sb.commands.run('printf "%s %s %s" "$A" "$B" "$PWD"', env={"B": "call"})
        assert result.stdout == f"session call {await sb.working_dir()}"
        await sb.files.make_dir("/tmp/elsewhere")
        assert (await sb.commands.run("pwd", cwd="/tmp/elsewhere")).stdout == "/tmp/elsewhere\n"
        with pytest.raises(FileNotFoundError):
            await sb.commands.run("pwd", cwd="/does/not/exist")


async def test_output_cap_sets_truncated(session: AsyncSandboxSession) -> None:
    result = await session.commands.run("head -c 300000 /dev/zero | tr '\\0' y", max_output=100_000)
    assert result.truncated
    assert result.stdout == "y" * 100_000


async def test_streaming_callback_sees_output(session: AsyncSandboxSession) -> None:
    seen: list[tuple[str, str]] = []
    result = await session.commands.run(
        "echo one; sleep 0.2; echo two >&2", on_output=lambda s, t: seen.append((s, t))
    )
    assert "".join(t for s, t in seen if s == "stdout") == result.stdout == "one\n"
    assert "".join(t for s, t in seen if s == "stderr") == "two\n"


async def test_timeout_stops_the_process_group(session: AsyncSandboxSession) -> None:
    script = "sleep 300 & echo $! > /tmp/child.pid; echo started; wait"
    with pytest.raises(CommandTimeoutError) as info:
        await session.commands.run(script, timeout=1.5)
    assert info.value.stdout == "started\n"
    assert info.value.timeout == 1.5
    pid = (await session.files.read_bytes("/tmp/child.pid")).decode().strip()
    for _ in range(50):
        if (await session.commands.run(["kill", "-0", pid])).exit_code != 0:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"the background child {pid} survived the timeout")


async def test_cancellation_stops_the_remote_command(session: AsyncSandboxSession) -> None:
    task = asyncio.create_task(session.commands.run("echo $$ > /tmp/cancel.pid; exec sleep 300"))
    for _ in range(100):
        if await session.files.exists("/tmp/cancel.pid"):
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    pid = (await session.files.read_bytes("/tmp/cancel.pid")).decode().strip()
    for _ in range(100):
        if (await session.commands.run(["kill", "-0", pid])).exit_code != 0:
            return
        await asyncio.sleep(0.1)
    pytest.fail("the cancelled command is still running in the sandbox")


async def test_concurrent_commands_do_not_serialise(session: AsyncSandboxSession) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    results = await asyncio.gather(*(session.commands.run("sleep 1; echo ok") for _ in range(16)))
    assert all(r.stdout == "ok\n" for r in results)
    assert loop.time() - started < 8


@pytest.mark.parametrize("bad", [-1, 0, float("nan"), float("inf"), "5"])
async def test_bad_timeouts(session: AsyncSandboxSession, bad: object) -> None:
    with pytest.raises(ConfigurationError):
        await session.commands.run("true", timeout=bad)  # type: ignore[arg-type]


async def test_timeout_output_is_exact(session: AsyncSandboxSession) -> None:
    with pytest.raises(CommandTimeoutError) as info:
        await session.commands.run("printf 'a\\r\\nno end'; sleep 30", timeout=1.0)
    assert info.value.stdout == "a\r\nno end"


async def test_output_cap_is_exact_on_raw_output(session: AsyncSandboxSession) -> None:
    result = await session.commands.run(
        "printf 'ab\\r\\ncd\\r\\n%.0s' $(seq 1000)", max_output=1024
    )
    assert result.truncated
    assert result.stdout == ("ab\r\ncd\r\n" * 200)[:1024]


@pytest.mark.testbed_daemon("1.0.16")
async def test_ancient_framing_is_refused_with_the_fix(sandbox_image: str) -> None:
    session = AsyncSandboxSession(profile_spec(sandbox_image, "1.0.16"))
    try:
        with pytest.raises(UnsupportedDaemonError) as info:
            await session.commands.run("true")
        message = str(info.value)
        assert "v1.0.16 or older" in message
        assert 'execd_image = "opensandbox/execd:v1.0.19"' in message
        assert isinstance(info.value, SandboxUnavailableError)
    finally:
        await session.destroy()
