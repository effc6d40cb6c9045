"""`CodeTool` (`run_code`, what both framework packages give a model) against the offline fake of
execd's `/code`: the result text and its images, state kept in the tool's own context (one per
sandbox, in the working directory), a replaced context, timeouts, bad arguments as `Error:`
results, and what raises. `render` is checked on its own for the cuts and the image limits."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CodeError,
    CodeInterpreterUnavailableError,
    CodeResult,
    ConfigurationError,
    Execution,
    SandboxSpec,
)
from opensandbox_core._code_tools._render import MAX_IMAGE_BYTES, MAX_IMAGES, render
from opensandbox_core.adapters import CodeTool
from opensandbox_core.testing import FakeCodeInterpreter, FakeOpenSandbox
from opensandbox_core.testing._code import FakeCell, FakeKernel

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def cells(code: str, kernel: FakeKernel) -> FakeCell | None:
    """The cells of these tests, as a real kernel answers them."""
    if code.startswith("x = "):
        kernel.names["x"] = int(code[4:])
        return FakeCell()
    if code == "x * 2":
        if "x" not in kernel.names:
            return FakeCell(error=("NameError", "name 'x' is not defined", ["NameError: x"]))
        return FakeCell(result={"text/plain": repr(kernel.names["x"] * 2)})
    if code == "chart":
        png = base64.b64encode(PNG).decode()
        return FakeCell(
            outputs=(
                ("stdout", "drawing\n"),
                ("display", {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": png}),
            ),
            result={"text/plain": "'done'"},
        )
    if code == "boom":
        trace = ["\x1b[31mTraceback (most recent call last)\x1b[39m", "ZeroDivisionError: zero"]
        return FakeCell(
            outputs=(("stdout", "before\n"),), error=("ZeroDivisionError", "zero", trace)
        )
    if code == "cwd":
        return FakeCell(result={"text/plain": repr(kernel.cwd)})
    return None


def _session(code: FakeCodeInterpreter) -> AsyncSandboxSession:
    fake = FakeOpenSandbox(code=code)
    return AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())


@pytest.fixture
def interpreter() -> FakeCodeInterpreter:
    return FakeCodeInterpreter(on_cell=cells)


@pytest.fixture
async def session(interpreter: FakeCodeInterpreter) -> AsyncIterator[AsyncSandboxSession]:
    async with _session(interpreter) as sb:
        yield sb


async def test_state_is_kept_between_calls_in_the_tools_own_context(
    session: AsyncSandboxSession, interpreter: FakeCodeInterpreter
) -> None:
    tool = CodeTool()
    first = await tool.call(session, {"code": "x = 21"})
    second = await tool.call(session, {"code": "x * 2"})
    assert first.text.endswith(": done\n(no output)") and first.images == ()
    assert second.text.splitlines()[1:] == ["[result]", "42"]
    # One context of its own, made on the first call, in the session's working directory.
    own = [k for k in interpreter.contexts.values() if "x" in k.names]
    assert len(own) == 1 and own[0].cwd == await session.working_dir()
    assert (await tool.call(session, {"code": "cwd"})).text.endswith(repr(own[0].cwd))
    # Another tool object has a context of its own: x is not defined there.
    other = await CodeTool().call(session, {"code": "x * 2"})
    assert "raised NameError" in other.text.splitlines()[0]


async def test_a_chart_comes_back_as_an_image_beside_the_text(session: AsyncSandboxSession) -> None:
    result = await CodeTool().call(session, {"code": "chart"})
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", PNG)]
    lines = result.text.splitlines()
    assert lines[1:] == [
        "[stdout]",
        "drawing",
        f"[display 1: image/png, {len(PNG):,} bytes, attached as image 1]",
        "<Figure size 640x480 with 1 Axes>",
        "[result]",
        "'done'",
    ]
    assert lines[0].startswith("execution ") and lines[0].endswith(": done")


async def test_an_exception_comes_back_as_its_plain_traceback(session: AsyncSandboxSession) -> None:
    result = await CodeTool().call(session, {"code": "boom"})
    lines = result.text.splitlines()
    assert lines[0].endswith("raised ZeroDivisionError")
    assert lines[1:] == [
        "[stdout]",
        "before",
        "[error]",
        "Traceback (most recent call last)",
        "ZeroDivisionError: zero",
    ]


async def test_a_timeout_interrupts_the_run_and_keeps_the_kernel(
    session: AsyncSandboxSession, interpreter: FakeCodeInterpreter
) -> None:
    tool = CodeTool(timeout=30)
    await tool.call(session, {"code": "x = 5"})
    result = await tool.call(session, {"code": "time.sleep(600)", "timeout": 0.5})
    assert result.text.startswith("timed out after 0.5 s: the run was interrupted")
    assert interpreter.interrupts  # the kernel was interrupted, not left running
    assert (await tool.call(session, {"code": "x * 2"})).text.endswith("[result]\n10")


async def test_a_deleted_context_is_replaced_and_the_result_says_so(
    session: AsyncSandboxSession,
) -> None:
    tool = CodeTool()
    await tool.call(session, {"code": "x = 1"})
    [context] = [c for c in await session.code.contexts() if c.cwd is not None]
    await session.code.delete_context(context)
    result = await tool.call(session, {"code": "x * 2"})
    assert result.text.startswith(
        "[the earlier kernel of this tool is gone: this ran in a new one]"
    )
    assert "raised NameError" in result.text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Error: run_code needs code."),
        ({"code": 3}, "Error: code must be a string, got int."),
        ({"code": "1", "timeout": 0}, "Error: timeout must be more than 0 and at most 3600"),
        ({"code": "1", "timeout": "9"}, "Error: timeout must be a number of seconds, got str."),
        ({"code": "1", "language": "r"}, "Error: run_code has no argument language"),
    ],
)
async def test_bad_arguments_are_errors_the_model_reads(
    arguments: dict[str, object], message: str
) -> None:
    # No I/O: the session is never started by a refused call.
    result = await CodeTool().call(AsyncSandboxSession(sandbox_id="never-used"), arguments)
    assert result.text.startswith(message) and result.images == ()


async def test_a_sandbox_without_jupyter_raises() -> None:
    async with _session(FakeCodeInterpreter(jupyter=False)) as sb:
        with pytest.raises(CodeInterpreterUnavailableError):
            await CodeTool().call(sb, {"code": "1"})


async def test_a_given_context_is_used_as_it_is(
    session: AsyncSandboxSession, interpreter: FakeCodeInterpreter
) -> None:
    context = await session.code.create_context()
    await session.code.run("x = 4", context=context)
    tool = CodeTool(context=context.id)
    assert (await tool.call(session, {"code": "x * 2"})).text.endswith("[result]\n8")
    assert len(interpreter.contexts) == 1


def test_construction_checks_and_describes() -> None:
    tool = CodeTool(language="bash", timeout=5)
    assert tool.name == "run_code" and "bash kernel" in tool.description
    schema = tool.schema()
    assert schema["required"] == ["code"] and schema["properties"]["timeout"]["default"] == 5
    assert "plt.show()" in CodeTool().description
    assert "starts in the sandbox's working directory" in CodeTool().description
    assert "working directory" not in CodeTool(context="ctx-1").description
    for bad in ({"timeout": 0}, {"timeout": 7200}, {"max_output": 0}, {"language": "command"}):
        with pytest.raises(ConfigurationError):
            CodeTool(**bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CodeTool(context=3)  # type: ignore[arg-type]


def _figure(size: int) -> CodeResult:
    return CodeResult(text="<Figure>", png=b"\x89PNG" + b"\0" * (size - 4))


def test_render_keeps_the_first_images_and_says_which_it_left_out() -> None:
    results = [_figure(10) for _ in range(MAX_IMAGES)]
    results += [_figure(MAX_IMAGE_BYTES + 1), _figure(10)]
    out = render(Execution(results=results), max_output=100)
    assert len(out.images) == MAX_IMAGES
    assert (
        f"[display {MAX_IMAGES}: image/png, 10 bytes, attached as image {MAX_IMAGES}]" in out.text
    )
    assert "not attached: over 5 MiB" in out.text
    assert f"not attached: only {MAX_IMAGES} images per result" in out.text


def test_render_cuts_output_at_its_start_and_values_at_their_end() -> None:
    execution = Execution(
        stdout="a" * 50 + "END",
        results=[CodeResult(text="START" + "b" * 50, is_main_result=True)],
        error=CodeError("E", "v", ""),
    )
    text = render(execution, max_output=10, timed_out=None).text
    assert "[43 characters left out before this]\naaaaaaaEND" in text
    assert "STARTbbbbb\n[... 45 more characters left out]" in text
    assert text.endswith("[error]\nE: v")  # no traceback: its name and value
    rich = Execution(results=[CodeResult(json={"a": 1}, mime={"application/json": {"a": 1}})])
    assert render(rich, max_output=100).text.endswith('[display 1]\n(application/json) {"a": 1}')
