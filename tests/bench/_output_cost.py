"""Bench section `output_cost`: what a command's output costs, by its lines and its bytes.

One sandbox per testbed execd profile (1.0.19, 1.0.18: line-framed; 1.1: events that keep their
line endings), each client attached to it; per output shape, interleaved in one run: the core's
`run`, Deep Agents `aexecute`, Pydantic AI `run` and the raw SDK's `commands.run`, against the
baseline of the same sandbox's `true` plus a `read_bytes` of the same bytes from a file. The
target: every client within 2x of that baseline, on every profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from bench._stats import Sample, interleave, ratio

PROFILES = ("1.0.19", "1.0.18", "1.1")
# label -> (command, bytes of stdout)
SHAPES: dict[str, tuple[str, int]] = {
    "1,000 lines": ("seq 1 1000", 3893),
    "65,536 lines": ("seq 1 65536", 382110),
    "1,048,576 lines": ("seq 1 1048576", 7277504),
    "one 1 MiB line": ("head -c 1048576 /dev/zero | tr '\\0' x", 1048576),
}
SDK_BUDGET_SECONDS = 30.0  # one raw SDK run slower than this is not repeated (shown as skipped)


async def _clients(image: str, profile: str) -> dict[str, Any]:
    from opensandbox import Sandbox
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.workspaces import WorkspaceRef

    from deepagents_opensandbox_backend import OpenSandboxBackend as DeepAgentsBackend
    from opensandbox_core import AsyncSandboxSession, SandboxSpec
    from pydantic_ai_opensandbox import OpenSandboxBackend as PydanticBackend

    core = AsyncSandboxSession(
        SandboxSpec(image, lifetime=3600, container_env={"OSB_EXECD_PROFILE": profile})
    )
    await core.start()
    clients: dict[str, Any] = {"core": core}
    clients["deepagents"] = await DeepAgentsBackend.aconnect(core.id)
    clients["pydantic"] = PydanticBackend(ref=WorkspaceRef(provider="opensandbox", id=core.id))
    await clients["pydantic"].working_dir()
    clients["sdk"] = await Sandbox.connect(
        core.id, connection_config=ConnectionConfig(), skip_health_check=True
    )
    return clients


async def _close(clients: dict[str, Any]) -> None:
    core = clients.get("core")
    if core is not None:
        await asyncio.shield(core.destroy())
    for name in ("pydantic", "deepagents", "sdk"):
        client = clients.get(name)
        if client is None:
            continue
        with contextlib.suppress(Exception):
            await (client.close() if name == "sdk" else client.aclose())


def _sdk_text(execution: Any) -> str:
    return "".join(m.text for m in execution.logs.stdout)


async def _shape(clients: dict[str, Any], label: str, reps: int) -> dict[str, Any]:
    command, size = SHAPES[label]
    core, da, pa, sdk = clients["core"], clients["deepagents"], clients["pydantic"], clients["sdk"]
    path = f"/tmp/bench-output-{abs(hash(label))}.txt"
    made = await core.commands.run(f"{command} > {path}")
    assert made.exit_code == 0, made
    sdk_skip: list[str] = []

    async def raw_sdk() -> Any:
        if sdk_skip:
            return None
        started = time.monotonic()
        execution = await sdk.commands.run(command)
        if time.monotonic() - started > SDK_BUDGET_SECONDS:
            sdk_skip.append(f"one run took over {SDK_BUDGET_SECONDS:g} s")
        return execution

    variants = {
        "true": lambda: core.commands.run("true"),
        "read_bytes of the same bytes": lambda: core.files.read_bytes(path),
        "core run": lambda: core.commands.run(command),
        "deepagents aexecute": lambda: da.aexecute(command),
        "pydantic-ai run": lambda: pa.run(command, shell=True),  # noqa: S604
        "raw SDK commands.run": raw_sdk,
    }

    def check(name: str, result: Any) -> None:
        if result is None or name == "true":
            return
        if name == "read_bytes of the same bytes":
            got = len(result)
        elif name == "raw SDK commands.run":
            # The SDK's output is not exact on line-framed execd: check only that it arrived.
            if not _sdk_text(result):
                raise AssertionError(f"{label}, {name}: no output")
            return
        elif name == "deepagents aexecute":
            got = len(result.output.encode())
        else:
            got = len(result.stdout.encode())
        if got != size:
            raise AssertionError(f"{label}, {name}: {got} bytes of output, expected {size}")

    samples = await interleave(variants, reps, check=check)
    if sdk_skip:
        kept = samples["raw SDK commands.run"].values[:1]
        samples["raw SDK commands.run"] = Sample(values=kept, skipped=None if kept else sdk_skip[0])
    base = samples["true"].median + samples["read_bytes of the same bytes"].median
    baseline = Sample(values=[base])
    await core.commands.run(f"rm -f {path}")
    return {
        "bytes": size,
        "repetitions": reps,
        "stats": {name: s.as_json() for name, s in samples.items()},
        "baseline_seconds": base,
        "ratio_to_baseline": {
            name: ratio(s, baseline)
            for name, s in samples.items()
            if name not in ("true", "read_bytes of the same bytes")
        },
    }


async def output_cost(ctx: Any) -> dict[str, Any]:
    """The `output_cost` section (see the module docstring)."""
    image_tag = os.environ.get("OSB_TESTBED_EXECD_IMAGE", "")
    if image_tag and "testbed-execd" not in image_tag:
        return {"skipped": f"the server runs execd image {image_tag}, not the testbed daemon"}
    out: dict[str, Any] = {"profiles": list(PROFILES), "shapes": {}}
    for profile in PROFILES:
        clients: dict[str, Any] = {}
        try:
            clients = await _clients(ctx.image, profile)
            out.setdefault("framing", {})[profile] = clients["core"].framing
            for label in SHAPES:
                reps = ctx.reps(5, 2) if "1,048,576" not in label else ctx.reps(3, 1)
                result = await _shape(clients, label, reps)
                out["shapes"].setdefault(label, {})[profile] = result
        finally:
            await _close(clients)
    return out
