"""One sandbox, two frameworks: a Deep Agents step creates the sandbox and produces data, a Pydantic
AI step attaches by id, checks it, runs code in a Jupyter kernel of the sandbox (its chart goes to
the model as an image) and writes a summary; the creator downloads the chart and destroys the
sandbox. The sandbox runs the code-interpreter image (a Jupyter server beside the usual tools).

The models are scripted by default (no API key, no network): they emit the same tool calls a real
model would, and the Pydantic AI one computes its summary from what its tools returned. With
`ANTHROPIC_API_KEY` set and `real_model=True`, both steps use a real Anthropic model instead.
Used by `nox -s demo` (`testbed.demo`) and by `tests/live/test_pipeline.py`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

WORKDIR = "/workspace/pipeline"
REAL_MODEL_DEEPAGENTS = "anthropic:claude-sonnet-4-6"
REAL_MODEL_PYDANTIC = "anthropic:claude-sonnet-4-6"

# The size of the chart the data script draws, in pixels (matplotlib: 8 x 4.5 inches at 100 dpi).
CHART_WIDTH, CHART_HEIGHT = 800, 450

# The code-interpreter image's entrypoint, which starts its Jupyter server: the core gives it to
# `opensandbox/code-interpreter` images by default; the testbed's own tag needs it named.
CODE_ENTRYPOINT = ["/opt/code-interpreter/code-interpreter.sh"]

# The cell the Pydantic AI step runs in a kernel of the sandbox (`run_code`): the units sold so
# far, month by month, drawn with pandas and matplotlib (the image's Jupyter environment); the
# figure goes back to the model as a PNG, and the cell's value is the year's total.
KERNEL_CELL = f"""\
import matplotlib.pyplot as plt
import pandas as pd

sales = pd.read_csv("{WORKDIR}/sales.csv")
sales["so far"] = sales["units"].cumsum()
ax = sales.plot(x="month", y="so far", marker="o", legend=False, figsize=(6, 3.5))
ax.set_title("Units sold so far this year")
ax.set_ylabel("units")
plt.tight_layout()
plt.show()
int(sales["units"].sum())
"""

# The data script the Deep Agents step writes and runs inside the sandbox: a CSV of monthly
# units and a bar chart of them drawn with matplotlib (in the testbed's sandbox image: Debian's
# python3-matplotlib), with a title, axis labels, each bar's value and the monthly mean.
DATA_SCRIPT = f"""\
import csv, random, sys

try:
    import matplotlib
except ImportError:
    sys.exit("matplotlib is missing in this sandbox image: use the testbed's image "
             "(it has Debian's python3-matplotlib) or install matplotlib in yours")
matplotlib.use("Agg")  # no display in a sandbox
import matplotlib.pyplot as plt

random.seed(7)
months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
rows = [(m, random.randint(20, 100)) for m in months]
with open("sales.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["month", "units"])
    writer.writerows(rows)

units = [u for _, u in rows]
mean = sum(units) / len(units)
fig, ax = plt.subplots(figsize=({CHART_WIDTH / 100}, {CHART_HEIGHT / 100}), dpi=100)
bars = ax.bar(months, units, color="#2f6fb0", label="units sold")
ax.bar_label(bars, padding=2, fontsize=8)
ax.axhline(mean, color="#d0672a", linestyle="--", linewidth=1.2, label=f"mean {{mean:.1f}}")
ax.set_title("Units sold per month")
ax.set_xlabel("Month")
ax.set_ylabel("Units sold")
ax.set_ylim(0, max(units) * 1.15)
ax.grid(axis="y", alpha=0.3)
ax.set_axisbelow(True)
ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
fig.savefig("chart.png", dpi=100)
width, height = (round(v) for v in fig.get_size_inches() * fig.dpi)
print(f"wrote {{len(rows)}} rows ({{sum(units)}} units) and a {{width}}x{{height}} chart "
      f"(matplotlib {{matplotlib.__version__}})")
"""


@dataclass
class StepReport:
    name: str
    seconds: float
    details: list[str] = field(default_factory=list)


@dataclass
class PipelineResult:
    sandbox_id: str
    steps: list[StepReport]
    chart: bytes
    chart_sha256_in_sandbox: str
    summary: str
    destroyed: bool
    model_image: bytes = b""
    """The PNG of the kernel's chart as the Pydantic AI model got it (`BinaryContent`)."""


# -- scripted models --------------------------------------------------------------------------------


def _deepagents_model() -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class ScriptedChatModel(GenericFakeChatModel):
        """Replays AI messages with tool calls; binding tools is a no-op."""

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            return self

    def calls() -> Iterator[AIMessage]:
        def call(name: str, args: dict[str, Any]) -> AIMessage:
            tool_call = {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:8]}"}
            return AIMessage(content="", tool_calls=[tool_call])

        yield call("write_file", {"file_path": f"{WORKDIR}/make_data.py", "content": DATA_SCRIPT})
        yield call("execute", {"command": f"cd {WORKDIR} && python3 make_data.py"})
        yield AIMessage(content=f"Wrote {WORKDIR}/sales.csv and {WORKDIR}/chart.png.")

    return ScriptedChatModel(messages=calls())


def _summarise(csv_text: str) -> str:
    rows = [(r["month"], int(r["units"])) for r in csv.DictReader(io.StringIO(csv_text))]
    best = max(rows, key=lambda r: r[1])
    worst = min(rows, key=lambda r: r[1])
    total = sum(u for _, u in rows)
    return (
        "# Sales summary\n\n"
        f"- months: {len(rows)}\n"
        f"- total units: {total}\n"
        f"- best month: {best[0]} ({best[1]} units)\n"
        f"- weakest month: {worst[0]} ({worst[1]} units)\n"
        f"- mean per month: {total / len(rows):.1f}\n"
    )


def _pydantic_model() -> Any:
    """A FunctionModel that reads the CSV through Coder's shell tool, checks the chart, runs a
    cell in a kernel of the sandbox (`run_code`) and looks at the chart it shows, and writes a
    summary computed from what the tools returned."""
    from pydantic_ai import BinaryContent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
    )
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

    state: dict[str, Any] = {"step": 0, "returns": [], "images": []}
    check_png = (
        "python3 -c \"import struct; d = open('chart.png', 'rb').read(); "
        "print('png', d[:8] == b'\\x89PNG\\r\\n\\x1a\\n', *struct.unpack('>II', d[16:24]))\""
    )

    def decide(messages: list[ModelMessage]) -> tuple[str, dict[str, Any]] | str:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if part.part_kind == "tool-return":
                    state["returns"].append(str(part.content))
                content = getattr(part, "content", None)
                for item in content if isinstance(content, list) else ():
                    if isinstance(item, BinaryContent) and item.is_image:
                        state["images"].append(item)
        step = state["step"]
        state["step"] += 1
        if step == 0:
            return ("shell", {"command": f"cat {WORKDIR}/sales.csv"})
        if step == 1:
            return ("shell", {"command": f"cd {WORKDIR} && {check_png}"})
        if step == 2:
            return ("run_code", {"code": KERNEL_CELL})
        if step == 3:
            found = re.search(r"month,units\r?\n(?:[A-Za-z]+,\d+\r?\n?)+", state["returns"][0])
            if not found or f"png True {CHART_WIDTH} {CHART_HEIGHT}" not in state["returns"][1]:
                return "The data did not check out: " + json.dumps(state["returns"])[:500]
            state["summary"] = _summarise(found.group(0))
            total = re.search(r"total units: (\d+)", state["summary"])
            seen = [i for i in state["images"] if i.data.startswith(b"\x89PNG\r\n\x1a\n")]
            if total is None or not state["returns"][2].endswith(f"[result]\n{total.group(1)}"):
                return "The kernel's total did not check out: " + state["returns"][2][:500]
            if not seen:
                return "The kernel's chart did not reach me as an image."
            return ("write_file", {"path": f"{WORKDIR}/summary.md", "content": state["summary"]})
        return state.get("summary", "no summary")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = decide(messages)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(
            parts=[ToolCallPart(step[0], json.dumps(step[1]), tool_call_id=uuid.uuid4().hex)]
        )

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        step = decide(messages)
        if isinstance(step, str):
            yield step
            return
        yield {
            0: DeltaToolCall(
                name=step[0], json_args=json.dumps(step[1]), tool_call_id=uuid.uuid4().hex
            )
        }

    return FunctionModel(respond, stream_function=stream)


# -- the pipeline -----------------------------------------------------------------------------------


def _image_sent(messages: Sequence[Any]) -> bytes:
    """The first PNG the Pydantic AI run sent its model (a `run_code` chart), or b""."""
    from pydantic_ai import BinaryContent
    from pydantic_ai.messages import ModelRequest

    for message in messages:
        for part in message.parts if isinstance(message, ModelRequest) else ():
            content = getattr(part, "content", None)
            for item in content if isinstance(content, list) else ():
                if isinstance(item, BinaryContent) and item.data.startswith(b"\x89PNG"):
                    return item.data
    return b""


def _use_real_model(real_model: bool | None) -> bool:
    if real_model is None:
        return bool(os.environ.get("ANTHROPIC_API_KEY"))
    return real_model


def run_pipeline(
    *,
    image: str | None = None,
    real_model: bool | None = None,
    say: Callable[[str], None] = print,
) -> PipelineResult:
    """Run the two-framework pipeline once; the sandbox is destroyed before this returns."""
    import asyncio

    from deepagents import create_deep_agent
    from deepagents.backends import CompositeBackend
    from pydantic_ai import Agent
    from pydantic_ai.workspaces import WorkspaceRef
    from pydantic_ai_harness.coder import Coder

    from deepagents_opensandbox_backend import OpenSandboxBackend
    from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxCodeInterpreter

    real = _use_real_model(real_model)
    steps: list[StepReport] = []
    started = time.monotonic()
    # The caller's image, else the testbed's code-interpreter image by its own tag (the
    # `opensandbox/code-interpreter:v1.1.0` alias, the backend's default, is a tag other
    # testbeds on the host may move), with the entrypoint that starts its Jupyter server.
    from testbed._jupyter import CODE_TAG

    kwargs: dict[str, Any] = {"image": CODE_TAG, "entrypoint": CODE_ENTRYPOINT}
    if image is not None:
        kwargs = {"image": image}
    backend = OpenSandboxBackend.create(**kwargs)
    destroyed = False
    try:
        steps.append(
            StepReport(
                "create sandbox (Deep Agents side)",
                time.monotonic() - started,
                [f"id {backend.id}"],
            )
        )
        say(f"[1/4] created sandbox {backend.id} in {steps[-1].seconds:.2f} s")

        # Step 2: a deep agent writes and runs the data script.
        t = time.monotonic()
        agent = create_deep_agent(
            model=REAL_MODEL_DEEPAGENTS if real else _deepagents_model(),
            system_prompt=(
                "You are a data engineer with a Linux sandbox. Write a Python script at "
                f"{WORKDIR}/make_data.py that writes sales.csv (month,units for 12 months) and a "
                f"{CHART_WIDTH}x{CHART_HEIGHT} PNG bar chart chart.png next to it with matplotlib "
                "(title, axis labels, each bar's value), then run it."
            ),
            backend=CompositeBackend(default=backend, routes={}, artifacts_root="/workspace"),
        )
        result = agent.invoke({"messages": "Produce the sales data and the chart."})
        tool_outputs = [str(m.content) for m in result["messages"] if m.type == "tool"]
        steps.append(
            StepReport(
                "Deep Agents: write + run data script", time.monotonic() - t, tool_outputs[-1:]
            )
        )
        say(f"[2/4] deep agent wrote and ran {WORKDIR}/make_data.py in {steps[-1].seconds:.2f} s")
        for line in tool_outputs[-1:]:
            say("      " + line.strip().replace("\n", "\n      ")[:400])

        # Step 3: a Pydantic AI agent attaches by id, checks the outputs, runs a cell in a kernel
        # of the sandbox (its chart goes to the model as an image), writes a summary.
        t = time.monotonic()
        ref = WorkspaceRef(provider="opensandbox", id=backend.id)
        pyd_agent: Agent[None, str] = Agent(
            capabilities=[OpenSandbox(), Coder(repo_context=False), OpenSandboxCodeInterpreter()]
        )
        model: Any = REAL_MODEL_PYDANTIC if real else _pydantic_model()
        prompt = (
            f"In {WORKDIR} there is sales.csv and chart.png. Check that the CSV has 12 months and "
            f"that chart.png is a valid {CHART_WIDTH}x{CHART_HEIGHT} PNG. Then, with run_code, "
            "plot the units sold so far this year, month by month, from the CSV with pandas "
            "(show it with plt.show()) and end the cell with the year's total. Write summary.md "
            f"in {WORKDIR} with the total, the best and the weakest month, and reply with the "
            "summary."
        )
        pyd_result = asyncio.run(pyd_agent.run(prompt, model=model, workspace=ref))
        summary = str(pyd_result.output)
        model_image = _image_sent(pyd_result.all_messages())
        kernel_line = (
            f"the kernel's chart reached the model as an image: PNG, {len(model_image):,} bytes"
            if model_image
            else "no chart from the kernel reached the model"
        )
        steps.append(
            StepReport(
                "Pydantic AI: attach, check, run code, summarise",
                time.monotonic() - t,
                [summary, kernel_line],
            )
        )
        say(
            f"[3/4] pydantic-ai agent attached to {ref.id}, checked the data, ran code in a "
            f"kernel of the sandbox and wrote summary.md in {steps[-1].seconds:.2f} s"
        )
        say("      " + kernel_line)
        for line in summary.strip().splitlines():
            say("      " + line)

        # Step 4: the creator downloads the chart byte-exact and destroys the sandbox.
        t = time.monotonic()
        digest = backend.execute(f"sha256sum {WORKDIR}/chart.png").output.split()[0]
        [download] = backend.download_files([f"{WORKDIR}/chart.png"])
        if download.error or download.content is None:
            raise RuntimeError(f"could not download the chart: {download.error}")
        chart = download.content
        if hashlib.sha256(chart).hexdigest() != digest:
            raise RuntimeError("the downloaded chart differs from the one in the sandbox")
        sandbox_id = backend.id
        backend.kill()
        destroyed = True
        steps.append(
            StepReport(
                "download chart + destroy (creator)",
                time.monotonic() - t,
                [f"{len(chart)} bytes, sha256 {digest[:16]}…"],
            )
        )
        say(
            f"[4/4] downloaded chart.png ({len(chart)} bytes, sha256 matches) and destroyed the "
            f"sandbox in {steps[-1].seconds:.2f} s"
        )
        return PipelineResult(sandbox_id, steps, chart, digest, summary, destroyed, model_image)
    finally:
        if not destroyed:
            backend.kill()
