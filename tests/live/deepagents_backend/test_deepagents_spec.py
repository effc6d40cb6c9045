"""One description of a sandbox on the Deep Agents side, live: `create(spec=SandboxSpec(...))`
reaches the server (container environment, entrypoint, lifetime, labels), `env` reaches every
command but never the container, and a keyword that contradicts the spec creates nothing."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend
from opensandbox_core import SandboxSpec
from opensandbox_core.fleet import list_sandboxes

PROBE = (
    "echo $STAGE $EVERY; tr '\\0' '\\n' < /proc/1/environ | grep -c '^EVERY=' || true; "
    "tr '\\0' ' ' < /proc/1/cmdline"
)


def test_create_from_a_spec(sandbox_image: str) -> None:
    tag = uuid.uuid4().hex
    spec = SandboxSpec(
        image=sandbox_image,
        lifetime=600,
        container_env={"STAGE": "spec"},
        metadata={"spec-test": tag},
        entrypoint=["sleep", "infinity"],
    )
    with OpenSandboxBackend.create(spec=spec, env={"EVERY": "cmd"}, timeout=600) as backend:
        result = backend.execute(PROBE)
        assert result.exit_code == 0, result.output
        stage, in_init, cmdline = result.output.splitlines()
        assert (stage, in_init) == ("spec cmd", "0"), result.output  # env: commands only
        assert "sleep infinity" in cmdline
        (summary,) = asyncio.run(list_sandboxes(metadata={"spec-test": tag}))
        assert summary.id == backend.id and summary.expires_at is not None
        left = (summary.expires_at - datetime.now(UTC)).total_seconds()
        assert 500 < left <= 600, left
        # connect() takes env too: it applies to an attached sandbox, like Pydantic AI's.
        with OpenSandboxBackend.connect(backend.id, env={"EVERY": "again"}) as attached:
            assert attached.execute("echo $STAGE $EVERY").output == "spec again\n"


def test_a_keyword_contradicting_the_spec_creates_nothing(sandbox_image: str) -> None:
    tag = uuid.uuid4().hex
    spec = SandboxSpec(image=sandbox_image, metadata={"spec-test": tag})
    with pytest.raises(ValueError, match=r"spec= and image= \(the spec's image\)"):
        OpenSandboxBackend.create(spec=spec, image="debian:12")
    assert asyncio.run(list_sandboxes(metadata={"spec-test": tag})) == []
