"""The session's network logic offline, against `opensandbox_core.testing.FakeOpenSandbox`.

Only the public API is used (session methods, the fake's knobs), so these tests hold across
refactors of the session's internals. Both execd framings are covered: line-framed
(v1.0.17-1.0.19, exact output from the raw output files) and event-preserving (1.1).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    OpenSandboxError,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)
from opensandbox_core.testing import FakeOpenSandbox, FakeOutcome
from opensandbox_core.testing._model import FakeCommand

FRAMINGS = ["legacy", "modern"]

# printf format -> the exact bytes it prints (decoded as the session returns them).
OUTPUTS = {
    r"a\nb": "a\nb",
    r"a\nb\n": "a\nb\n",
    r"a\r\nb\r\n": "a\r\nb\r\n",
    r"10%%\r100%%\n": "10%\r100%\n",
    r"\n\na\n\n\nb": "\n\na\n\n\nb",
    r"\n": "\n",
    r"a\r": "a\r",
    r"x\302\205y\n": "x\x85y\n",
    r"l\342\200\250s\342\200\251p\n": "l\u2028s\u2029p\n",
    r"\377\376a\n": "\ufffd\ufffda\n",
}


def new_session(fake: FakeOpenSandbox, **kwargs: object) -> AsyncSandboxSession:
    return AsyncSandboxSession(
        SandboxSpec(image="img"),
        connection=fake.connection(),
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(params=FRAMINGS)
def fake(request: pytest.FixtureRequest) -> FakeOpenSandbox:
    return FakeOpenSandbox(framing=request.param)


async def probes(fake: FakeOpenSandbox) -> int:
    return sum(
        1 for box in fake.sandboxes.values() for c in box.commands if "osb-tmp:" in c.command
    )


# -- command events ---------------------------------------------------------------------------
@pytest.mark.parametrize(("fmt", "expected"), sorted(OUTPUTS.items()))
async def test_output_is_exact_on_both_framings(
    fake: FakeOpenSandbox, fmt: str, expected: str
) -> None:
    async with new_session(fake) as sb:
        result = await sb.commands.run(f"printf '{fmt}'")
        err = await sb.commands.run(f"printf '{fmt}' >&2")
    assert result.exit_code == 0
    assert result.stdout == expected
    assert result.stderr == ""
    assert err.stderr == expected
    assert err.stdout == ""


async def test_on_output_sees_the_stream(fake: FakeOpenSandbox) -> None:
    seen: list[tuple[str, str]] = []
    async with new_session(fake) as sb:
        result = await sb.commands.run(
            "printf 'one\\ntwo\\n'", on_output=lambda s, t: seen.append((s, t))
        )
    assert result.stdout == "one\ntwo\n"
    assert "".join(t for s, t in seen if s == "stdout") == "one\ntwo\n"


async def test_exit_codes_and_callback(fake: FakeOpenSandbox) -> None:
    def answer(command: FakeCommand) -> FakeOutcome | None:
        if command.command == "build":
            return FakeOutcome(stdout=b"half", stderr=b"boom\n", exit_code=2)
        return None

    fake.on_command = answer
    async with new_session(fake, env={"A": "1"}) as sb:
        failed = await sb.commands.run("build", env={"B": "2"})
        false = await sb.commands.run("false")
        unknown = await sb.commands.run("no-such-tool --flag")
        commands = fake.sandbox().commands
    assert (failed.exit_code, failed.stdout, failed.stderr) == (2, "half", "boom\n")
    assert false.exit_code == 1
    assert unknown.exit_code == 127
    (build,) = [c for c in commands if c.command == "build"]
    assert build.env == {"A": "1", "B": "2"}
    assert fake.deleted == fake.created  # the owned sandbox was destroyed on exit


async def test_legacy_without_raw_files_falls_back_to_events() -> None:
    fake = FakeOpenSandbox(framing="legacy", raw_output_files=False)
    async with new_session(fake) as sb:
        result = await sb.commands.run("printf 'a\\nb\\n'")
    assert result.stdout == "a\nb\n"


async def test_timeout_stops_the_command(fake: FakeOpenSandbox) -> None:
    """execd enforces the timeout the client sends it: the daemon's kill is a timeout."""
    async with new_session(fake) as sb:
        await sb.start()
        started = time.monotonic()
        with pytest.raises(CommandTimeoutError) as info:
            await sb.commands.run("sleep 30", timeout=0.3)
        assert time.monotonic() - started < 10
        assert info.value.timeout == pytest.approx(0.3)
        (command,) = [c for c in fake.sandbox().commands if c.command == "sleep 30"]
        assert command.timeout_ms == 300


async def test_timeout_interrupts_a_command_the_daemon_did_not_stop() -> None:
    """A daemon that lets the command run past its timeout: the client's own deadline fires and
    it sends exactly one interrupt, for that command's id. (One framing: the deadline and the
    interrupt do not depend on it, and each run waits the client's 2 s grace.)"""
    fake = FakeOpenSandbox(kill_on_timeout=False)
    async with new_session(fake) as sb:
        await sb.start()
        started = time.monotonic()
        with pytest.raises(CommandTimeoutError) as info:
            await sb.commands.run("sleep 30", timeout=0.1)
        assert time.monotonic() - started < 10
        assert "was stopped" in str(info.value)
        box = fake.sandbox()
        (execution_id,) = [i for i, s in box.statuses.items() if s["content"] == "sleep 30"]
        interrupts = [
            r.url.params.get("id")
            for r in fake.requests
            if r.method == "DELETE" and r.url.path == "/command"
        ]
        assert interrupts == [execution_id]
        assert fake.count("interrupt") == 1
        assert box.interrupted == {execution_id}  # the fake took it: the command is stopped


# -- failure mapping --------------------------------------------------------------------------
@pytest.mark.parametrize("status", [500, 503])
async def test_execd_5xx_on_a_command_is_a_server_error(fake: FakeOpenSandbox, status: int) -> None:
    async with new_session(fake) as sb:
        await sb.start()
        fake.fail_next("command", status=status)
        with pytest.raises(ServerError) as info:
            await sb.commands.run("true")
        assert info.value.status_code == status
        assert str(sb.id) in str(info.value)
        assert (await sb.commands.run("echo ok")).stdout == "ok\n"  # the session is still usable


async def test_missing_cwd_is_file_not_found(fake: FakeOpenSandbox) -> None:
    async with new_session(fake) as sb:
        with pytest.raises(FileNotFoundError):
            await sb.commands.run("true", cwd="/no/such/dir")


async def test_stream_cut_mid_command_is_an_error(fake: FakeOpenSandbox) -> None:
    async with new_session(fake) as sb:
        await sb.start()
        fake.cut_stream_after(2)
        with pytest.raises(OpenSandboxError):
            await sb.commands.run("printf 'a\\nb\\nc\\n'")
        fake.cut_stream_after(None)
        assert (await sb.commands.run("echo back")).stdout == "back\n"


async def test_lost_create_answer_recovers_the_sandbox_by_its_tag(fake: FakeOpenSandbox) -> None:
    fake.lose_next("create")
    async with new_session(fake) as sb:
        assert (await sb.commands.run("echo hi")).stdout == "hi\n"
        assert sb.id == fake.created[0]
    assert len(fake.created) == 1
    assert fake.deleted == fake.created
    assert fake.count("list") >= 1


async def test_create_refused_is_an_error_and_creates_nothing(fake: FakeOpenSandbox) -> None:
    fake.fail_next("create", status=500)
    sb = new_session(fake)
    with pytest.raises(OpenSandboxError):
        await sb.start()
    assert fake.created == []
    await sb.aclose()


async def test_attach_to_a_missing_sandbox_says_so(fake: FakeOpenSandbox) -> None:
    sb = AsyncSandboxSession.attach("sbx-gone", connection=fake.connection())
    with pytest.raises(SandboxUnavailableError):
        await sb.commands.run("true")
    await sb.aclose()


async def test_attached_session_never_deletes(fake: FakeOpenSandbox) -> None:
    fake.add_sandbox("sbx-mine")
    async with AsyncSandboxSession.attach("sbx-mine", connection=fake.connection()) as sb:
        assert (await sb.commands.run("echo x")).stdout == "x\n"
    assert fake.deleted == []
    assert "sbx-mine" in fake.sandboxes


# -- atomic write -----------------------------------------------------------------------------
async def test_write_uses_a_temporary_name_then_moves(fake: FakeOpenSandbox) -> None:
    first, second = b"first" * 10_000, b"second" * 10_000  # uploaded (over `_inline`'s size)
    async with new_session(fake) as sb:
        await sb.files.write_bytes("/workspace/new.txt", first)
        await sb.files.write_bytes("/workspace/new.txt", second)
        box = fake.sandbox()
        assert box.read("/workspace/new.txt") == second
        uploads = [r for r in fake.requests if r.url.path == "/files/upload"]
        assert len(uploads) == 2
        for request in uploads:
            assert b'"/workspace/new.txt"' not in request.content  # never the target itself
            assert b".osb-" in request.content
        assert not [p for p in box.files if ".osb-" in p]
        assert await sb.files.read_bytes("/workspace/new.txt") == second


@pytest.mark.parametrize(
    ("route", "content"),
    [("upload", b"big" * 20_000), ("command", b"big" * 20_000), ("command", b"small")],
    ids=["upload", "rename-command", "one-command"],
)
async def test_a_failed_write_leaves_the_old_file(
    fake: FakeOpenSandbox, route: str, content: bytes
) -> None:
    async with new_session(fake) as sb:
        await sb.files.write_bytes("/workspace/keep.txt", b"old")
        fake.fail_next(route, status=500)  # type: ignore[arg-type]
        with pytest.raises((OpenSandboxError, OSError)):
            await sb.files.write_bytes("/workspace/keep.txt", content)
        box = fake.sandbox()
        assert box.read("/workspace/keep.txt") == b"old"
        await asyncio.sleep(0)
        assert not [p for p in box.files if ".osb-" in p]


# -- concurrent first use ---------------------------------------------------------------------
async def test_many_tasks_at_once_create_and_probe_once(fake: FakeOpenSandbox) -> None:
    async with new_session(fake) as sb:
        results = await asyncio.gather(*(sb.commands.run(f"echo {i}") for i in range(12)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(12)]
        assert fake.count("create") == 1
        assert await probes(fake) == 1


async def test_concurrent_first_use_with_a_failed_create(fake: FakeOpenSandbox) -> None:
    fake.fail_next("create", status=500)
    sb = new_session(fake)
    outcomes = await asyncio.gather(
        *(sb.commands.run("true") for _ in range(6)), return_exceptions=True
    )
    assert all(isinstance(o, OpenSandboxError) for o in outcomes[:1])
    assert fake.count("create") <= 6
    result = await sb.commands.run("echo again")
    assert result.stdout == "again\n"
    assert len(fake.created) == 1
    await sb.destroy()
    assert fake.deleted == fake.created


async def test_errors_do_not_leak_the_api_key(fake: FakeOpenSandbox) -> None:
    fake.fail_next("create", status=500)
    with pytest.raises(OpenSandboxError) as info:
        await new_session(fake).start()
    assert fake.api_key not in str(info.value)
    assert fake.api_key not in repr(fake.connection())


def test_fake_rejects_unknown_framing() -> None:
    with pytest.raises(ValueError, match="framing"):
        FakeOpenSandbox(framing="ancient")  # type: ignore[arg-type]
