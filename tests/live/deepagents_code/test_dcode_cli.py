"""One non-interactive deepagents-code turn through its command line, in an OpenSandbox sandbox.

`dcode -n TASK --sandbox opensandbox` with a scripted model (`scripted_model/`, installed in the
session's environment: deepagents-code imports a `class_path` model in its server process, whose
PYTHONPATH it strips) that calls the `execute` tool once and answers with its output. No model
service, no network beyond the testbed. Needs deepagents-code: the `deepagents_code` session.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

# A submodule: this folder itself imports as a namespace package `deepagents_code`.
pytest.importorskip(
    "deepagents_code.integrations.sandbox_registry",
    reason="needs deepagents-code (the deepagents_code session)",
)
pytest.importorskip("osb_dcode_scripted", reason="needs the scripted model (scripted_model/)")

from deepagents_opensandbox_backend import OpenSandboxBackend, OpenSandboxProvider
from opensandbox_core import SandboxUnavailableError
from opensandbox_core.fleet import list_sandboxes

_CONFIG = """\
[models.providers.scripted]
class_path = "osb_dcode_scripted:ScriptedModel"
models = ["scripted-v1"]

[warnings]
suppress = ["ripgrep", "tavily"]
"""


def _exists(sandbox_id: str) -> bool:
    try:
        OpenSandboxBackend.connect(sandbox_id).close()
    except SandboxUnavailableError:
        return False
    return True


def _dcode(
    tmp_path: Path, image: str, command: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run one turn: the scripted model runs `command` through the agent's `execute` tool."""
    home = tmp_path / "dcode-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(_CONFIG)
    executable = Path(sys.executable).parent / "dcode"
    program = str(executable) if executable.exists() else shutil.which("dcode")
    assert program, "the dcode command of deepagents-code is not installed"
    env = {
        **os.environ,
        "DEEPAGENTS_HOME": str(home),
        "OPEN_SANDBOX_IMAGE": image,
        "OSB_DCODE_COMMAND": command,
    }
    return subprocess.run(
        [
            program,
            "-n",
            "Run the command you were given.",
            "--model",
            "scripted:scripted-v1",
            "--sandbox",
            "opensandbox",
            "--shell-allow-list",
            "all",
            "--no-tracing",
            "--no-mcp",
            *extra,
        ],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_dcode_turn_runs_in_a_sandbox_it_creates(tmp_path: Path, sandbox_image: str) -> None:
    done = _dcode(tmp_path, sandbox_image, 'printf "sandbox=%s\\n" "$OPENSANDBOX_ID"; pwd')
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Calling tool: execute" in done.stdout and "Task completed" in done.stdout
    found = re.search(r"scripted answer: sandbox=([0-9a-f-]{8,})\s*\n\s*/workspace\b", done.stdout)
    assert found, done.stdout[-3000:]
    sandbox_id = found.group(1)
    # deepagents-code 0.1.88 deletes the sandbox it created from an atexit hook of its server
    # process, which never runs: uvicorn re-raises the SIGTERM that stops the server with the
    # default handler. So the sandbox is left, labelled as the provider's, and expires after the
    # package's idle lifetime (30 minutes) instead.
    left = [s for s in asyncio.run(list_sandboxes()) if s.id == sandbox_id]
    if left:
        (summary,) = left
        assert summary.metadata.get("opensandbox-agents.provider") == "deepagents-code"
        assert summary.expires_at is not None
        assert summary.expires_at - datetime.now(UTC) <= timedelta(minutes=31)
        OpenSandboxProvider().delete(sandbox_id=sandbox_id, force=True)
    assert not _exists(sandbox_id)


def test_a_dcode_turn_runs_in_an_existing_sandbox_and_leaves_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    provider = OpenSandboxProvider()
    backend = provider.get_or_create(image=sandbox_image)
    token = uuid.uuid4().hex
    try:
        backend.write("/workspace/token.txt", token)
        done = _dcode(
            tmp_path,
            sandbox_image,
            "cat /workspace/token.txt; echo; echo from-dcode > /workspace/turn.txt",
            "--sandbox-id",
            backend.id,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"scripted answer: {token}" in done.stdout
        # attached by id: the sandbox is still there, with the turn's file in it
        assert _exists(backend.id)
        assert backend.execute("cat /workspace/turn.txt").output == "from-dcode\n"
    finally:
        provider.delete(sandbox_id=backend.id)
