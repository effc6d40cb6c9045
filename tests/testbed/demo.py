"""The main job (`nox -s demo`): one sandbox shared by a Deep Agents step and a Pydantic AI step.

Runs against the server in OPEN_SANDBOX_DOMAIN / OPEN_SANDBOX_API_KEY (the nox session starts the
local testbed and exports its settings). No API key is needed: the models are scripted unless
ANTHROPIC_API_KEY is set, in which case both steps use a real Anthropic model. The sandbox runs
the code-interpreter image (the testbed's: its sandbox image, which has Debian's
python3-matplotlib, plus a Jupyter server). The chart is drawn inside the sandbox with matplotlib
and saved as `sales-chart.png` in the current directory; the Pydantic AI step also runs code in a
Jupyter kernel of the sandbox, whose chart goes to the model as an image.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from pathlib import Path

from testbed.pipeline import run_pipeline


def main() -> int:
    real = bool(os.environ.get("ANTHROPIC_API_KEY"))
    domain = os.environ.get("OPEN_SANDBOX_DOMAIN", "localhost:8080")
    print(
        f"OpenSandbox server: {domain}; models: {'Anthropic (real)' if real else 'scripted (no API key)'}"
    )
    started = time.monotonic()
    result = run_pipeline(image=os.environ.get("OSB_DEMO_IMAGE"), real_model=real)
    out = Path.cwd() / "sales-chart.png"
    out.write_bytes(result.chart)
    total = time.monotonic() - started
    print()
    print(f"{'step':<48} {'seconds':>8}")
    for step in result.steps:
        print(f"{step.name:<48} {step.seconds:>8.2f}")
    print(f"{'total':<48} {total:>8.2f}")
    print()
    width, height = struct.unpack(">II", result.chart[16:24])
    print(
        f"chart saved to {out} ({width}x{height} PNG, {len(result.chart)} bytes): a bar chart "
        "'Units sold per month' drawn with matplotlib inside the sandbox (months on the x axis, "
        "units on the y axis, each bar labelled with its value, the monthly mean as a dashed line)"
    )
    if result.model_image:
        width, height = struct.unpack(">II", result.model_image[16:24])
        print(
            f"the Pydantic AI step ran code in a Jupyter kernel of the shared sandbox; its chart "
            f"'Units sold so far this year' reached the model as an image ({width}x{height} PNG, "
            f"{len(result.model_image)} bytes)"
        )
    print(f"sandbox {result.sandbox_id} destroyed: {result.destroyed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
