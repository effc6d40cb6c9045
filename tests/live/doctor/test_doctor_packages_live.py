"""The core's metadata for every package, live: a sandbox made through each package (the core, Deep Agents'
`create()`, its thread backend and its deepagents-code provider, Pydantic AI's backend) carries the
project's labels on the real server, and `opensandbox-doctor` finds every one, counted by package."""

from __future__ import annotations

import uuid

import pytest
from pydantic_ai.workspaces import WorkspaceRef

from deepagents_opensandbox_backend import OpenSandboxBackend as DeepBackend
from deepagents_opensandbox_backend import OpenSandboxProvider, ThreadSandboxBackend
from opensandbox_core import AsyncSandboxSession, SandboxSpec
from opensandbox_core._doctor import DoctorOptions, run_doctor
from opensandbox_core._metadata import ADAPTER_KEY, LIBRARY_KEY
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes
from pydantic_ai_opensandbox import CREATE_METADATA_KEY
from pydantic_ai_opensandbox import OpenSandboxBackend as PydanticBackend


@pytest.mark.daemon_neutral  # the server's labels, the same on every generation
async def test_the_doctor_finds_the_sandboxes_of_every_package(sandbox_image: str) -> None:
    tag = {"osb-metadata-test": uuid.uuid4().hex}
    made: dict[str, str] = {}
    core = AsyncSandboxSession(SandboxSpec(image=sandbox_image, metadata=tag, lifetime=600))
    threads = ThreadSandboxBackend(image=sandbox_image, metadata=tag, namespace="osb-metadata")
    pydantic = PydanticBackend(image=sandbox_image, metadata=tag, sandbox_timeout=600)
    try:
        made[await core.start()] = "core"
        deep = await DeepBackend.acreate(image=sandbox_image, metadata=tag, timeout=600)
        made[deep.id] = "deepagents"
        await deep.aclose()
        thread = await threads.afor_thread(uuid.uuid4().hex)
        made[thread.id] = "deepagents"
        await thread.aclose()
        provided = await OpenSandboxProvider().aget_or_create(image=sandbox_image, metadata=tag)
        made[provided.id] = "deepagents-code"
        await provided.aclose()
        await pydantic.run(["true"])
        assert isinstance(pydantic.ref, WorkspaceRef)
        made[pydantic.ref.id] = "pydantic-ai"

        listed = {s.id: s for s in await list_sandboxes(metadata=tag)}
        assert {i: s.adapter for i, s in listed.items()} == made
        for summary in listed.values():
            assert summary.metadata[LIBRARY_KEY] == "opensandbox-core"
            assert summary.metadata[ADAPTER_KEY] == made[summary.id]
        assert listed[pydantic.ref.id].metadata[CREATE_METADATA_KEY] == "true"

        results = await run_doctor(DoctorOptions(skip_sandbox=True, match=tag))
        report = {r.name: r for r in results}["leftovers"]
        assert report.data["count"] == 5, report.summary
        assert report.data["adapters"] == {"core": 1, "deepagents": 2, "deepagents-code": 1,
                                           "pydantic-ai": 1}  # fmt: skip
        assert "5 found: 1 core, 2 deepagents, 1 deepagents-code, 1 pydantic-ai" in report.summary
    finally:
        await pydantic.aclose()
        await core.aclose()
        for sandbox_id in made:
            await destroy_sandbox(sandbox_id)
