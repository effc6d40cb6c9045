"""An agent's work with the `run_code` tool, written once for both frameworks' scripted models.

The "model" sets a variable and reads it back in a second call (state kept in the kernel), draws
a chart (the framework's glue checks that the model's next request holds the PNG's bytes,
equal to the file the cell saved), divides by zero (the traceback reaches the model), runs a
`time.sleep(600)` with a 3 s timeout (interrupted), and uses the variable once more (the kernel
kept its state and is free again). The sandboxes run the testbed's code-interpreter image
(`code_image`).
"""

from __future__ import annotations

from typing import Any

CODE_ENTRYPOINT = ["/opt/code-interpreter/code-interpreter.sh"]
"""The code-interpreter image's entrypoint (it starts the Jupyter server). The core gives it to
`opensandbox/code-interpreter` images by default; the testbed's own tag needs it named."""


def code_image() -> str:
    """The testbed's code-interpreter image by its own tag (`OSB_TESTBED_CODE_IMAGE` may name the
    `opensandbox/code-interpreter:v1.1.0` alias, a tag other testbeds on the host may move)."""
    from testbed._jupyter import CODE_TAG

    return CODE_TAG


CHART_FILE = "code-chart.png"
"""The PNG the chart cell saves in the kernel's working directory (the workspace's)."""
CHART_STEP = 2
"""The index of the step that draws the chart: the request after it holds the image."""

CHART = f"""\
import io
import matplotlib.pyplot as plt
from IPython.display import Image, display

fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
ax.bar(["a", "b", "c"], [3, 5, 2])
buffer = io.BytesIO()
fig.savefig(buffer, format="png")
plt.close(fig)
with open({CHART_FILE!r}, "wb") as out:
    out.write(buffer.getvalue())
display(Image(buffer.getvalue()))
print("saved", len(buffer.getvalue()), "bytes")
"""

STEPS: list[dict[str, Any]] = [
    {"code": "x = 6 * 7\nprint('x is set')"},
    {"code": "print(x)"},
    {"code": CHART},
    {"code": "1 / 0"},
    {"code": "import time\ntime.sleep(600)", "timeout": 3},
    {"code": "x + 1"},
]
"""The arguments of each `run_code` call, in order; then the final answer `DONE`."""
DONE = "x was 42; the chart, the error and the interrupt came back."


def step(results: list[str]) -> tuple[str, dict[str, Any]] | str:
    """The next step after `results` (the tool results so far)."""
    n = len(results)
    return ("run_code", STEPS[n]) if n < len(STEPS) else DONE


def check_results(results: list[str], chart_bytes: int) -> None:
    """What each call returned, as the model read it."""
    assert len(results) == len(STEPS), results
    first, printed, chart, error, slept, after = results
    assert first.endswith(": done\n[stdout]\nx is set"), first
    assert printed.endswith("[stdout]\n42"), printed
    assert f"[stdout]\nsaved {chart_bytes} bytes\n" in chart, chart
    assert f"[display 1: image/png, {chart_bytes:,} bytes, attached as image 1]" in chart, chart
    assert error.splitlines()[0].endswith(": raised ZeroDivisionError"), error
    assert "ZeroDivisionError: division by zero" in error and "----> 1 1 / 0" in error, error
    assert slept.startswith("timed out after 3 s: the run was interrupted"), slept
    assert after.endswith("[result]\n43"), after
