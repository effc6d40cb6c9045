"""One description of a sandbox on the Pydantic AI side, live: `spec=SandboxSpec(...)` on the
backend and the capability reaches the server (container environment, entrypoint, lifetime,
labels), `env` reaches every command but never the container, and a code-interpreter image gets
its entrypoint script from the core without being told."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic_ai.workspaces import WorkspaceRef

from opensandbox_core import SandboxSpec
from opensandbox_core.fleet import list_sandboxes
from pydantic_ai_opensandbox import CREATE_METADATA_KEY, OpenSandbox, OpenSandboxBackend

PROBE = [
    "sh",
    "-c",
    "echo $STAGE $EVERY; tr '\\0' '\\n' < /proc/1/environ | grep -c '^EVERY=' || true; "
    "tr '\\0' ' ' < /proc/1/cmdline",
]


async def test_backend_and_capability_create_from_a_spec(
    sandbox_image: str,
    make_backend: Callable[..., OpenSandboxBackend],
    created_refs: list[WorkspaceRef],
) -> None:
    tag = uuid.uuid4().hex
    spec = SandboxSpec(
        image=sandbox_image,
        lifetime=600,
        container_env={"STAGE": "spec"},
        metadata={"spec-test": tag},
        entrypoint=["sleep", "infinity"],
    )
    capability = OpenSandbox(spec=spec, env={"EVERY": "cmd"})
    supplied = capability.get_workspace(type("Ctx", (), {"run_id": "r"})(), ref=None)  # type: ignore[arg-type]
    assert isinstance(supplied, OpenSandboxBackend)
    for backend in (make_backend(image=None, spec=spec, env={"EVERY": "cmd"}), supplied):
        try:
            result = await backend.run(PROBE)
        finally:
            if backend.ref is not None:
                created_refs.append(backend.ref)
            await backend.aclose()
        stage, in_init, cmdline = result.stdout.splitlines()
        assert (stage, in_init) == ("spec cmd", "0"), result.stdout  # env: commands only
        assert "sleep infinity" in cmdline
    found = {s.id: s for s in await list_sandboxes(metadata={"spec-test": tag})}
    assert set(found) == {r.id for r in created_refs}
    for summary in found.values():
        assert summary.metadata[CREATE_METADATA_KEY] == "true"
        assert summary.expires_at is not None
        left = (summary.expires_at - datetime.now(UTC)).total_seconds()
        assert 500 < left <= 600, left


async def test_a_code_interpreter_image_gets_its_entrypoint_from_the_core(
    make_backend: Callable[..., OpenSandboxBackend],
) -> None:
    backend = make_backend(image="opensandbox/code-interpreter:v1.1.0")
    try:
        result = await backend.run(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"])
    finally:
        await backend.aclose()
    assert "/opt/code-interpreter/code-interpreter.sh" in result.stdout, result.stdout
