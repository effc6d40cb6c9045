"""`session.code` live: a sandbox of the code-interpreter image (a Jupyter server with python
and bash kernels) on the testbed, whose daemon answers `/code` as the real execd does, bugs
included (displays dropped, output lost after the reply, early completion, a dead kernel's run
that never ends). What the core promises holds all the same."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CodeContextBusyError,
    CodeContextNotFoundError,
    CodeInterpreterUnavailableError,
    CodeTimeoutError,
    SandboxSession,
    SandboxSpec,
)
from testbed._jupyter import CODE_TAG

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


ENTRYPOINT = ["/opt/code-interpreter/code-interpreter.sh"]  # starts the Jupyter server


@pytest.fixture
def code_spec(testbed_env: dict[str, str]) -> SandboxSpec:
    # The testbed's own tag: `opensandbox/code-interpreter:v1.1.0` is an alias that a testbed of
    # an older tree may point at its plain sandbox image (no Jupyter) while this runs.
    image = testbed_env.get("OSB_TESTBED_CODE_IMAGE") or CODE_TAG
    return SandboxSpec(
        image=CODE_TAG if image.startswith("opensandbox/") else image, entrypoint=ENTRYPOINT
    )


@pytest.fixture
async def session(code_spec: SandboxSpec) -> AsyncIterator[AsyncSandboxSession]:
    async with AsyncSandboxSession(code_spec) as sb:
        yield sb


async def test_results_displays_and_output_are_exact(session: AsyncSandboxSession) -> None:
    ctx = await session.code.create_context()
    assert (await session.code.run("1 + 1", context=ctx)).text == "2"
    cell = (
        "from IPython.display import display, HTML, Markdown, Image\n"
        "import base64, matplotlib.pyplot as plt\n"
        "print('p1')\n"
        "display(HTML('<b>1</b>'))\n"
        "plt.plot([1, 2, 3]); plt.show()\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))\n"
        "print('p2')\n"
        "display(Markdown('*2*'))\n"
        "'last'"
    )
    result = await session.code.run(cell, context=ctx)
    assert result.stdout == "p1\np2\n" and result.error is None
    kinds = [(r.html is not None, r.png is not None, r.markdown) for r in result.results]
    assert kinds == [
        (True, False, None),
        (False, True, None),
        (False, True, None),
        (False, False, "*2*"),
        (False, False, None),
    ]
    assert result.results[1].png is not None and result.results[1].png.startswith(
        b"\x89PNG\r\n\x1a\n"
    )
    assert result.results[2].png == PNG
    assert [r.is_main_result for r in result.results] == [False] * 4 + [True]
    assert result.text == "'last'"
    big = await session.code.run("print('\\n'.join(str(i) for i in range(20000)))", context=ctx)
    assert big.stdout == "".join(f"{i}\n" for i in range(20000))
    odd = await session.code.run("print('\\u00e9 [\\u2028] [\\x85] <&>', end='')", context=ctx)
    assert odd.stdout == "\u00e9 [\u2028] [\x85] <&>"


async def test_errors_are_results_and_the_context_runs_on(session: AsyncSandboxSession) -> None:
    result = await session.code.run("print('before')\nraise ValueError('x')")
    assert result.stdout == "before\n"
    assert result.error is not None and (result.error.name, result.error.value) == (
        "ValueError",
        "x",
    )
    assert "\x1b" not in result.error.traceback and "ValueError" in result.error.traceback
    syntax = await session.code.run("1 +")
    assert syntax.error is not None and syntax.error.name == "SyntaxError"
    assert (await session.code.run("21 * 2")).text == "42"


async def test_timeout_interrupts_and_the_context_keeps_its_state(
    session: AsyncSandboxSession,
) -> None:
    ctx = await session.code.create_context()
    await session.code.run("x = 41", context=ctx)
    started = time.monotonic()
    with pytest.raises(CodeTimeoutError) as caught:
        await session.code.run(
            "import time\nprint('start', flush=True)\ntime.sleep(30)", context=ctx, timeout=1.5
        )
    assert time.monotonic() - started < 10
    assert isinstance(caught.value, TimeoutError) and caught.value.stdout == "start\n"
    assert (await session.code.run("x + 1", context=ctx)).text == "42"


async def test_a_dead_kernel_is_reported_and_its_context_replaced(
    session: AsyncSandboxSession,
) -> None:
    ctx = await session.code.create_context()
    started = time.monotonic()
    died = await session.code.run("import os\nprint('bye', flush=True)\nos._exit(1)", context=ctx)
    assert time.monotonic() - started < 15
    assert died.error is not None and died.error.name == "KernelDied"
    again = await session.code.run("print('alive')\n6 * 7", context=ctx)
    assert again.stdout == "alive\n" and again.text == "42"


async def test_contexts_cwd_unknown_ids_and_on_output(session: AsyncSandboxSession) -> None:
    ctx = await session.code.create_context("python", cwd="work/here")
    assert ctx.cwd == "/workspace/work/here"
    assert (
        await session.code.run("import os\nos.getcwd()", context=ctx)
    ).text == "'/workspace/work/here'"
    assert ctx.id in {c.id for c in await session.code.contexts("python")}
    seen: list[tuple[str, str]] = []
    await session.code.run(
        "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)",
        context=ctx,
        on_output=lambda stream, text: seen.append((stream, text)),
    )
    assert "".join(t for _, t in seen).startswith("0\n1\n")
    await session.code.delete_context(ctx)
    with pytest.raises(CodeContextNotFoundError) as caught:
        await session.code.run("1", context=ctx)
    assert ctx.id in str(caught.value) and isinstance(caught.value, LookupError)
    started = time.monotonic()
    with pytest.raises(CodeInterpreterUnavailableError) as refused:
        await session.code.create_context("ruby")
    assert time.monotonic() - started < 20 and "kernel" in str(refused.value)


async def test_bash_contexts(session: AsyncSandboxSession) -> None:
    ctx = await session.code.create_context("bash")
    await session.code.run("X=5; cd /tmp", context=ctx)
    result = await session.code.run("echo $X $PWD; printf 'no newline' >&2", context=ctx)
    assert (result.stdout, result.stderr, result.error) == ("5 /tmp\n", "no newline", None)
    failed = await session.code.run("ls /nonexistent-dir", context=ctx)
    assert failed.error is not None and failed.error.value == "2"
    assert "No such file" in failed.stderr


async def test_concurrent_runs_and_creates(session: AsyncSandboxSession) -> None:
    made = await asyncio.gather(*(session.code.create_context() for _ in range(3)))
    assert len({c.id for c in made}) == 3
    runs = await asyncio.gather(*(session.code.run(f"{i} * 2", context=made[0]) for i in range(3)))
    assert [r.text for r in runs] == ["0", "2", "4"]


async def test_an_image_without_jupyter_is_refused_within_seconds(sandbox_image: str) -> None:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as sb:
        started = time.monotonic()
        with pytest.raises(CodeInterpreterUnavailableError) as caught:
            await sb.code.run("1 + 1")
        assert time.monotonic() - started < 20
        assert "Jupyter" in str(caught.value)


def test_the_blocking_twin(code_spec: SandboxSpec) -> None:
    with SandboxSession(code_spec) as sb:
        ctx = sb.code.create_context()
        assert sb.code.run("6 * 7", context=ctx).text == "42"
        sb.code.delete_context(ctx)


async def test_interrupt_cancellation_and_a_foreign_busy_run(
    session: AsyncSandboxSession,
) -> None:
    ctx = await session.code.create_context()
    await session.code.run("x = 1", context=ctx)
    running = asyncio.ensure_future(
        session.code.run("import time\nprint('a', flush=True)\ntime.sleep(30)", context=ctx)
    )
    await asyncio.sleep(3)
    other = AsyncSandboxSession.attach(session.id or "")
    async with other:
        with pytest.raises(CodeContextBusyError) as busy:
            await other.code.run("1", context=ctx.id)
        assert ctx.id in str(busy.value)
    await session.code.interrupt(ctx)
    interrupted = await asyncio.wait_for(running, 20)
    assert interrupted.error is not None and interrupted.error.name == "KeyboardInterrupt"
    assert interrupted.stdout == "a\n"
    task = asyncio.ensure_future(session.code.run("import time; time.sleep(30)", context=ctx))
    await asyncio.sleep(3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await session.code.run("x + 1", context=ctx, timeout=30)).text == "2"
