"""Bench section `code_run`: a cell's round trip through `session.code.run` against a raw httpx
client on execd's `/code`, in the same context of one code-interpreter sandbox.

- `1 + 1`: the core (the cell with its marker line, the stream read to its end, the run's record
  downloaded) against the raw client (the same cell posted, its stream read to the end);
- a chart's PNG: the core's `plt.show()` (a display execd drops, read back from the record)
  against the same figure as the cell's last expression over raw `/code` (the only way a raw
  client gets a figure through execd), both checked to hold a PNG.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import httpx

from bench._stats import interleave, ratio

EXECD_PORT = 44772
ENTRYPOINT = ["/opt/code-interpreter/code-interpreter.sh"]
CHART = "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([i * i for i in range(50)])\n"


async def _raw(client: httpx.AsyncClient, code: str, context_id: str) -> list[dict[str, Any]]:
    """POST /code and read its stream to the end; the events."""
    body = {"code": code, "context": {"id": context_id, "language": "python"}}
    events: list[dict[str, Any]] = []
    async with client.stream("POST", "/code", json=body) as response:
        response.raise_for_status()
        buffer = b""
        async for chunk in response.aiter_bytes():
            buffer += chunk
            *whole, buffer = buffer.split(b"\n\n")
            events += [json.loads(e) for e in whole if e.strip()]
    return events


def _raw_png(events: list[dict[str, Any]]) -> bytes:
    for event in events:
        if event.get("type") == "result" and "image/png" in event.get("results", {}):
            return base64.b64decode(event["results"]["image/png"])
    raise AssertionError(f"no PNG in the raw stream: {[e.get('type') for e in events]}")


async def code_run(ctx: Any) -> dict[str, Any]:
    """The `code_run` section (see the module docstring)."""
    from opensandbox_core import AsyncSandboxSession, SandboxSpec

    image = os.environ.get("OSB_TESTBED_CODE_IMAGE", "opensandbox/code-interpreter:v1.1.0")
    reps = ctx.reps(40, 12)
    async with AsyncSandboxSession(SandboxSpec(image, entrypoint=ENTRYPOINT)) as session:
        context = await session.code.create_context()
        await session.code.run("import matplotlib.pyplot as plt", context=context)
        url, headers = await session.get_endpoint(EXECD_PORT)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:

            async def core_one() -> Any:
                return (await session.code.run("1 + 1", context=context)).text

            async def raw_one() -> Any:
                events = await _raw(client, "1 + 1", context.id)
                return next(e["results"]["text"] for e in events if e.get("type") == "result")

            async def core_chart() -> Any:
                result = await session.code.run(CHART + "plt.show()", context=context)
                return result.results[0].png

            async def raw_chart() -> Any:
                return _raw_png(await _raw(client, CHART + "plt.close(fig)\nfig", context.id))

            def check(name: str, value: Any) -> None:
                if isinstance(value, bytes):
                    assert value.startswith(b"\x89PNG"), name
                else:
                    assert value == "2", (name, value)

            one = await interleave(
                {"core code.run": core_one, "raw /code": raw_one}, reps, warmup=2, check=check
            )
            chart = await interleave(
                {"core code.run (plt.show)": core_chart, "raw /code (fig last)": raw_chart},
                max(4, reps // 4),
                warmup=1,
                check=check,
            )
    return {
        "repetitions": reps,
        "one_plus_one": {name: s.as_json() for name, s in one.items()},
        "chart_png": {name: s.as_json() for name, s in chart.items()},
        "ratio_to_raw": ratio(one["core code.run"], one["raw /code"]),
        "chart_ratio_to_raw": ratio(
            chart["core code.run (plt.show)"], chart["raw /code (fig last)"]
        ),
    }
