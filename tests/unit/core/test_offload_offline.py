"""`run_offloaded` offline, against `opensandbox_core.testing.FakeOpenSandbox`: what the session
does with the wrapper's answer (the file read whole or by head and tail, a small output's file
deleted), on both execd framings, and its argument checks. The wrapper itself runs in a real
shell in `tests/unit/deepagents_backend/test_offload_preview.py` and the live tests."""

from __future__ import annotations

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    OffloadedRun,
    SandboxSession,
    SandboxSpec,
)
from opensandbox_core.testing import FakeOpenSandbox, FakeOutcome
from opensandbox_core.testing._model import FakeCommand

BIG = b"".join(b"line %d\n" % i for i in range(1, 2001))


def outputs(command: FakeCommand) -> FakeOutcome | None:
    if command.command == "big":
        return FakeOutcome(stdout=BIG, stderr=b"warn\n", exit_code=3)
    if command.command == "small":
        return FakeOutcome(stdout=b"tiny\xff", exit_code=0)
    return None


@pytest.fixture(params=["legacy", "modern"])
def fake(request: pytest.FixtureRequest) -> FakeOpenSandbox:
    return FakeOpenSandbox(framing=request.param, on_command=outputs)


def files(fake: FakeOpenSandbox) -> dict[str, bytes]:
    (box,) = fake.sandboxes.values()
    return {path: f.data for path, f in box.files.items()}


async def test_a_big_output_stays_in_the_file_with_its_head_and_tail(
    fake: FakeOpenSandbox,
) -> None:
    async with AsyncSandboxSession(SandboxSpec(image="i"), connection=fake.connection()) as sb:
        run = await sb.commands.run_offloaded(
            "big", "logs/out.txt", inline_limit=100, preview_bytes=64
        )
        whole = BIG + b"warn\n"
        assert run == OffloadedRun(
            exit_code=3,
            path="/workspace/logs/out.txt",
            size=len(whole),
            truncated=False,
            lines=2001,
            output=None,
            head=whole[:64],
            tail=whole[-64:],
            duration=run.duration,
        )
        assert files(fake)["/workspace/logs/out.txt"] == whole


async def test_a_small_output_comes_back_whole_and_leaves_no_file(fake: FakeOpenSandbox) -> None:
    async with AsyncSandboxSession(SandboxSpec(image="i"), connection=fake.connection()) as sb:
        run = await sb.commands.run_offloaded("small", "/tmp/o", inline_limit=100)
        assert (run.output, run.path, run.size, run.exit_code) == ("tiny\ufffd", None, 5, 0)
        # Gone when the call returns (not deleted later, when the path may be in use again).
        assert "/tmp/o" not in files(fake)


async def test_the_cap_keeps_the_first_bytes_and_says_so(fake: FakeOpenSandbox) -> None:
    async with AsyncSandboxSession(SandboxSpec(image="i"), connection=fake.connection()) as sb:
        run = await sb.commands.run_offloaded("big", "/tmp/c", max_bytes=1000, preview_bytes=4000)
        assert (run.size, run.truncated, run.head, run.tail) == (1000, True, BIG[:1000], BIG[:1000])


def test_the_blocking_twin(fake: FakeOpenSandbox) -> None:
    with SandboxSession(SandboxSpec(image="i"), connection=fake.connection()) as sb:
        assert sb.commands.run_offloaded("small", "/tmp/b", inline_limit=10).output == "tiny\ufffd"


@pytest.mark.parametrize(
    "bad",
    [
        {"max_bytes": 0},
        {"max_bytes": "10"},
        {"inline_limit": -1},
        {"preview_bytes": 0},
    ],
)
async def test_bad_limits_are_refused_before_anything_runs(
    fake: FakeOpenSandbox, bad: dict[str, object]
) -> None:
    async with AsyncSandboxSession(SandboxSpec(image="i"), connection=fake.connection()) as sb:
        with pytest.raises(ConfigurationError):
            await sb.commands.run_offloaded("big", "/tmp/x", **bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await sb.commands.run_offloaded("big", "")
        (box,) = fake.sandboxes.values()
        assert not [c for c in box.commands if c.command == "big"]
