"""`session.code` against the offline fake of execd's `/code` (`FakeCodeInterpreter`, built from
the recordings' `code_*` exchanges, execd's bugs on): exact output when execd loses it, every
display in order, errors as results, timeouts, dead kernels, busy and unknown contexts, the
language probe, concurrent creates and cancellation."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Callable

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CodeContext,
    CodeContextBusyError,
    CodeContextNotFoundError,
    CodeInterpreterUnavailableError,
    CodeTimeoutError,
    ConfigurationError,
    OpenSandboxError,
    SandboxSession,
    SandboxSpec,
)
from opensandbox_core._code import _runner
from opensandbox_core.testing import FakeCodeInterpreter, FakeOpenSandbox
from opensandbox_core.testing._code import FakeCell, FakeKernel

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()
Handler = Callable[[str, FakeKernel], FakeCell | None]


def _session(code: FakeCodeInterpreter) -> tuple[FakeOpenSandbox, AsyncSandboxSession]:
    fake = FakeOpenSandbox(code=code)
    return fake, AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())


@pytest.fixture
async def session() -> AsyncIterator[AsyncSandboxSession]:
    _, sb = _session(FakeCodeInterpreter(on_cell=_cells))
    async with sb:
        yield sb


def _cells(code: str, kernel: FakeKernel) -> FakeCell | None:
    """Cells the tests below send, as the real kernel answers them."""
    if code == "chart":
        return FakeCell(
            outputs=(
                ("display", {"text/plain": "<Figure>", "image/png": PNG_B64}),
                ("stdout", "after show\n"),
                ("display", {"text/html": "<b>x</b>", "text/plain": "<HTML>"}),
            ),
            result={"text/plain": "'last'"},
        )
    if code == "tail":  # its last output event is lost by execd (lose_late)
        return FakeCell(outputs=(("stdout", "o1\n"), ("stderr", "e1\n"), ("stdout", "o2\n")))
    if code == "boom":
        tb = ["\x1b[31m----\x1b[39m", "\x1b[31mValueError\x1b[39m: x"]
        return FakeCell(outputs=(("stdout", "before\n"),), error=("ValueError", "x", tb))
    if code.startswith("x = "):
        kernel.names["x"] = int(code[4:])
        return FakeCell()
    if code == "x":
        if "x" not in kernel.names:
            return FakeCell(error=("NameError", "name 'x' is not defined", []))
        return FakeCell(result={"text/plain": repr(kernel.names["x"])})
    if code == "json":
        return FakeCell(result={"text/plain": "<JSON>", "application/json": {"a": [1, 2]}})
    return None


async def test_output_and_displays_are_exact_where_execd_loses_them(
    session: AsyncSandboxSession,
) -> None:
    result = await session.code.run("chart")
    assert result.stdout == "after show\n"  # execd dropped this event (its last)
    assert [r.is_main_result for r in result.results] == [False, False, True]
    assert result.results[0].png == PNG  # plt.show(): display_data, never sent by execd
    assert result.results[0].mime["image/png"] == PNG_B64
    assert result.results[1].html == "<b>x</b>"
    assert result.results[2].text == "'last'" == result.text
    assert result.error is None
    tail = await session.code.run("tail")
    assert (tail.stdout, tail.stderr) == ("o1\no2\n", "e1\n")
    assert tail.execution_count == 3  # the setup cell was the first


async def test_an_exception_is_a_result_with_a_plain_traceback(
    session: AsyncSandboxSession,
) -> None:
    result = await session.code.run("boom")
    assert result.stdout == "before\n"
    assert result.error is not None
    assert (result.error.name, result.error.value) == ("ValueError", "x")
    assert result.error.traceback == "----\nValueError: x"
    assert (await session.code.run("1 + 1")).text == "2"


async def test_state_is_kept_per_context_and_json_is_decoded(
    session: AsyncSandboxSession,
) -> None:
    a = await session.code.create_context()
    b = await session.code.create_context("python")
    assert isinstance(a, CodeContext) and a.language == "python" and a.id != b.id
    await session.code.run("x = 41", context=a)
    assert (await session.code.run("x", context=a.id)).text == "41"
    missing = await session.code.run("x", context=b)
    assert missing.error is not None and missing.error.name == "NameError"
    assert (await session.code.run("json")).results[0].json == {"a": [1, 2]}
    assert {c.id for c in await session.code.contexts("python")} >= {a.id, b.id}


async def test_on_output_sees_the_stream_as_it_comes(session: AsyncSandboxSession) -> None:
    seen: list[tuple[str, str]] = []

    async def sink(stream: str, text: str) -> None:
        seen.append((stream, text))

    result = await session.code.run("tail", on_output=sink)
    assert seen == [("stdout", "o1\n"), ("stderr", "e1\n")]  # what execd sent
    assert result.stdout == "o1\no2\n"  # what the kernel printed


async def test_default_context_is_execds_and_a_cwd_is_applied() -> None:
    code = FakeCodeInterpreter(on_cell=_cells)
    _, sb = _session(code)
    async with sb:
        await sb.code.run("x = 1")
        assert list(code.defaults) == ["python"]
        default = code.defaults["python"]
        assert (await sb.code.run("x")).text == "1"
        ctx = await sb.code.create_context(cwd="sub/dir")
        assert ctx.cwd == "/workspace/sub/dir" == code.contexts[ctx.id].cwd
        assert code.defaults["python"] == default


async def test_unknown_context_is_a_lookup_error_naming_it(session: AsyncSandboxSession) -> None:
    ghost = "00000000-0000-4000-8000-00000000dead"
    for call in (
        session.code.run("1", context=ghost),
        session.code.run("1", context=CodeContext(ghost, "python")),
        session.code.delete_context(ghost),
        session.code.interrupt(ghost),
    ):
        with pytest.raises(CodeContextNotFoundError) as caught:
            await call
        assert isinstance(caught.value, LookupError | OpenSandboxError)
        assert isinstance(caught.value, LookupError) and ghost in str(caught.value)
    ctx = await session.code.create_context()
    await session.code.delete_context(ctx)
    with pytest.raises(CodeContextNotFoundError):
        await session.code.run("1", context=ctx)


async def test_timeout_interrupts_and_keeps_the_output_and_the_state() -> None:
    def slow(code: str, kernel: FakeKernel) -> FakeCell | None:
        if code == "slow":
            return FakeCell(outputs=(("stdout", "start\n"), ("stdout", "more\n")), delay=30)
        return _cells(code, kernel)

    code = FakeCodeInterpreter(on_cell=slow)
    _, sb = _session(code)
    async with sb:
        ctx = await sb.code.create_context()
        await sb.code.run("x = 7", context=ctx)
        started = time.monotonic()
        with pytest.raises(CodeTimeoutError) as caught:
            await sb.code.run("slow", context=ctx, timeout=0.3)
        assert time.monotonic() - started < 3
        assert isinstance(caught.value, TimeoutError)
        assert caught.value.stdout == "start\nmore\n"  # from the record: execd lost "more"
        assert caught.value.execution.error is not None
        assert code.interrupts == [ctx.id]
        assert (await sb.code.run("x", context=ctx)).text == "7"


async def test_a_dead_kernel_is_reported_within_seconds_and_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kernel's process is first looked at 1.5 s into a run; a tenth of that here.
    monkeypatch.setattr(_runner, "FIRST_CHECK", 0.15)
    code = FakeCodeInterpreter(on_cell=_cells)
    _, sb = _session(code)
    async with sb:
        ctx = await sb.code.create_context()
        started = time.monotonic()
        result = await sb.code.run("import os; os._exit(1)", context=ctx, timeout=60)
        assert time.monotonic() - started < 5
        assert result.error is not None and result.error.name == "KernelDied"
        assert ctx.id not in code.contexts  # deleted: execd keeps it busy for good
        again = await sb.code.run("print('alive')", context=ctx)
        assert again.stdout == "alive\n" and again.error is None
        default = await sb.code.run("import os; os._exit(1)")
        assert default.error is not None and default.error.name == "KernelDied"
        assert (await sb.code.run("1 + 1")).text == "2"


async def test_runs_of_one_session_wait_their_turn_and_a_foreign_run_is_busy() -> None:
    def slowish(code: str, kernel: FakeKernel) -> FakeCell | None:
        return (
            FakeCell(outputs=(("stdout", code + "\n"),), delay=0.2)
            if code.startswith("s")
            else None
        )

    code = FakeCodeInterpreter(on_cell=slowish)
    fake, sb = _session(code)
    async with sb:
        ctx = await sb.code.create_context()
        first, second = await asyncio.gather(
            sb.code.run("s1", context=ctx), sb.code.run("s2", context=ctx)
        )
        assert (first.stdout, second.stdout) == ("s1\n", "s2\n")
        other = AsyncSandboxSession(sandbox_id=sb.id or "", connection=fake.connection())
        async with other:
            running = asyncio.ensure_future(sb.code.run("s3", context=ctx))
            await asyncio.sleep(0.1)
            with pytest.raises(CodeContextBusyError) as caught:
                await other.code.run("print('x')", context=ctx.id)
            assert ctx.id in str(caught.value)
            assert (await running).stdout == "s3\n"


async def test_no_jupyter_or_no_kernel_is_refused_within_seconds() -> None:
    _, sb = _session(FakeCodeInterpreter(jupyter=False))
    async with sb:
        for call in (sb.code.create_context(), sb.code.run("1")):
            started = time.monotonic()
            with pytest.raises(CodeInterpreterUnavailableError) as caught:
                await call
            assert time.monotonic() - started < 5
            assert "Jupyter" in str(caught.value) and "JUPYTER_HOST" in str(caught.value)
    _, sb = _session(FakeCodeInterpreter(kernels=("python",)))
    async with sb:
        with pytest.raises(CodeInterpreterUnavailableError) as caught:
            await sb.code.create_context("java")
        assert "no kernel for java" in str(caught.value) and "python" in str(caught.value)
        with pytest.raises(CodeInterpreterUnavailableError):
            await sb.code.run("echo hi", language="bash")


async def test_concurrent_creates_are_serialised_and_leak_nothing() -> None:
    code = FakeCodeInterpreter()
    _, sb = _session(code)
    async with sb:
        made = await asyncio.gather(*(sb.code.create_context() for _ in range(4)))
        assert len({c.id for c in made}) == 4 == code.created
        task = asyncio.ensure_future(sb.code.create_context())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(50):
            await asyncio.sleep(0.01)
            if len(code.contexts) == 4:
                break
        assert len(code.contexts) == 4  # the cancelled create's context was deleted


async def test_cancellation_interrupts_the_kernel() -> None:
    def slow(code: str, kernel: FakeKernel) -> FakeCell | None:
        return FakeCell(delay=30) if code == "slow" else None

    code = FakeCodeInterpreter(on_cell=slow)
    _, sb = _session(code)
    async with sb:
        ctx = await sb.code.create_context()
        task = asyncio.ensure_future(sb.code.run("slow", context=ctx))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert code.interrupts == [ctx.id]
        assert (await sb.code.run("print('next')", context=ctx)).stdout == "next\n"


async def test_bash_runs_exactly_with_its_exit_status() -> None:
    def bash(code: str, kernel: FakeKernel) -> FakeCell | None:
        if code == "printf 'no newline'; echo err >&2; exit 3":
            return FakeCell(
                outputs=(("stdout", "no newline"), ("stderr", "err\n")), error=("", "3", [])
            )
        return None

    code = FakeCodeInterpreter(on_cell=bash)
    _, sb = _session(code)
    async with sb:
        ctx = await sb.code.create_context("bash", cwd="/tmp/b")
        assert ctx.language == "bash" and ctx.cwd == "/tmp/b"
        result = await sb.code.run("printf 'no newline'; echo err >&2; exit 3", context=ctx)
        assert (result.stdout, result.stderr) == ("no newline", "err\n")
        assert result.error is not None and result.error.value == "3"
        assert not result.results


async def test_arguments_are_checked_before_any_request(session: AsyncSandboxSession) -> None:
    for bad in (
        session.code.run(5),  # type: ignore[arg-type]
        session.code.run("1", language="command"),
        session.code.run("1", context=3),  # type: ignore[arg-type]
        session.code.create_context("no spaces allowed"),
        session.code.create_context(cwd="a\nb"),
        session.code.run("1", timeout=-1),
    ):
        with pytest.raises(ConfigurationError):
            await bad


def test_the_blocking_twin_runs_code() -> None:
    fake = FakeOpenSandbox(code=FakeCodeInterpreter())
    with SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        ctx = sb.code.create_context()
        assert sb.code.run("6 * 7", context=ctx).text == "42"
        assert [c.id for c in sb.code.contexts()] == [ctx.id]
        sb.code.interrupt(ctx)
        sb.code.delete_context(ctx)
        assert sb.code.contexts() == []
