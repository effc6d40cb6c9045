"""The mixed pipeline, live: Deep Agents creates, Pydantic AI attaches, only the creator destroys."""

from __future__ import annotations

import hashlib
import struct

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxUnavailableError
from opensandbox_core.fleet import list_sandboxes
from testbed.pipeline import CHART_HEIGHT, CHART_WIDTH, WORKDIR, run_pipeline


async def _exists(sandbox_id: str) -> bool:
    return sandbox_id in {s.id for s in await list_sandboxes(all_sandboxes=True)}


@pytest.mark.long
def test_pipeline_shares_one_sandbox_between_frameworks(testbed_env: dict[str, str]) -> None:
    import asyncio

    lines: list[str] = []
    result = run_pipeline(real_model=False, say=lines.append)
    # The chart came back byte-exact and is a real PNG of the size the script draws.
    assert hashlib.sha256(result.chart).hexdigest() == result.chart_sha256_in_sandbox
    assert result.chart[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", result.chart[16:24]) == (CHART_WIDTH, CHART_HEIGHT)
    # The Pydantic AI step computed its summary from the CSV the Deep Agents step produced.
    assert "- months: 12" in result.summary
    assert "total units:" in result.summary
    assert [s.name for s in result.steps][1:3] == [
        "Deep Agents: write + run data script",
        "Pydantic AI: attach, check, run code, summarise",
    ]
    # The Pydantic AI step ran a cell in a kernel of the shared sandbox, and its chart reached
    # the model as an image (the scripted model checked it too, before writing the summary).
    assert result.model_image.startswith(b"\x89PNG\r\n\x1a\n")
    kernel_line = (
        f"the kernel's chart reached the model as an image: PNG, {len(result.model_image):,} bytes"
    )
    assert kernel_line in result.steps[2].details
    assert any("wrote 12 rows" in d and "matplotlib" in d for d in result.steps[1].details)
    # Destroyed once, by its creator: attaching now fails, nothing is left.
    assert result.destroyed
    assert not asyncio.run(_exists(result.sandbox_id))

    async def attach() -> None:
        await AsyncSandboxSession.attach(result.sandbox_id).commands.run("true")

    with pytest.raises(SandboxUnavailableError):
        asyncio.run(attach())
    assert any(line.startswith("[3/4]") for line in lines)
    assert "      " + kernel_line in lines
    assert WORKDIR.startswith("/workspace")
