"""One metadata scheme: every package's sandboxes carry the project's labels, and the doctor finds
all of them, counted by the package that made it, older labels included.

Each sandbox is created through its package's own public path, against the core's in-memory fake
server (which keeps the metadata each create sent); the doctor's leftovers check then lists them
through the same server.
"""

from __future__ import annotations

import httpx
import pytest
from opensandbox.config import ConnectionConfig

import deepagents_opensandbox_backend as deep
from deepagents_opensandbox_backend._options import AttachOptions
from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec, list_sandboxes
from opensandbox_core._doctor import DoctorOptions, run_checks
from opensandbox_core._doctor._registry import CHECKS
from opensandbox_core.metadata import (
    ADAPTER_KEY,
    LIBRARY_KEY,
    LIBRARY_VALUE,
    OWNER_KEY,
    PROVIDER_KEY,
    PYDANTIC_AI_CREATE_KEY,
    adapter_labels,
    adapter_of,
)
from opensandbox_core.testing import FakeOpenSandbox
from pydantic_ai_opensandbox import CREATE_METADATA_KEY, OpenSandboxBackend

OLD = {LIBRARY_KEY: LIBRARY_VALUE, OWNER_KEY: "an-older-release"}


class _WithHealth(httpx.AsyncBaseTransport):
    """The fake server plus the server's `/health`, which the doctor asks first."""

    def __init__(self, fake: FakeOpenSandbox) -> None:
        self.fake = fake

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "healthy"})
        return await self.fake.transport.handle_async_request(request)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeOpenSandbox:
    """One fake server; the Deep Agents keywords' connection is pointed at it."""
    server = FakeOpenSandbox()

    def connection(self: AttachOptions) -> Connection:
        return server.connection()

    monkeypatch.setattr(AttachOptions, "connection", connection)
    return server


async def _create_one_of_each(fake: FakeOpenSandbox) -> dict[str, str]:
    """A sandbox of every package, through its public path: {sandbox id: package}."""
    made: dict[str, str] = {}
    core = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    made[await core.start()] = "core"
    backend = await deep.OpenSandboxBackend.acreate(image="img", metadata={"team": "a"})
    made[backend.id] = "deepagents"
    threads = deep.ThreadSandboxBackend(image="img", namespace="app")
    made[(await threads.afor_thread("ticket-1")).id] = "deepagents"
    made[(await deep.OpenSandboxProvider().aget_or_create(image="img")).id] = "deepagents-code"
    config = ConnectionConfig(domain=fake.domain, api_key=fake.api_key, transport=fake.transport)
    pydantic = OpenSandboxBackend(image="img", connection=config)
    await pydantic.run(["true"])
    assert pydantic.ref is not None
    made[pydantic.ref.id] = "pydantic-ai"
    return made


async def test_every_package_writes_the_one_scheme(fake: FakeOpenSandbox) -> None:
    made = await _create_one_of_each(fake)
    assert set(made) == set(fake.created)
    for sandbox_id, package in made.items():
        labels = fake.sandbox(sandbox_id).metadata
        assert labels[LIBRARY_KEY] == LIBRARY_VALUE and labels[OWNER_KEY], labels
        assert labels[ADAPTER_KEY] == package and adapter_of(labels) == package
        assert adapter_labels(package).items() <= labels.items()
    # The keys the seeds and the packages published keep their values and are still written.
    labels = [fake.sandbox(i).metadata for i in made]
    (pydantic,) = [m for m in labels if m[ADAPTER_KEY] == "pydantic-ai"]
    assert pydantic[CREATE_METADATA_KEY] == "true" and CREATE_METADATA_KEY == PYDANTIC_AI_CREATE_KEY
    (thread,) = [m for m in labels if deep.THREAD_METADATA_KEY in m]
    assert thread[deep.NAMESPACE_METADATA_KEY] == "app" and thread[ADAPTER_KEY] == "deepagents"
    (provider,) = [m for m in labels if PROVIDER_KEY in m]
    assert provider[PROVIDER_KEY] == "deepagents-code"
    (plain,) = [m for m in labels if m.get("team") == "a"]  # the user's own metadata kept
    assert plain[ADAPTER_KEY] == "deepagents"


async def test_the_doctor_finds_every_package_and_older_labels(fake: FakeOpenSandbox) -> None:
    made = await _create_one_of_each(fake)
    # Sandboxes of earlier releases, labelled before `opensandbox-agents.adapter` existed.
    fake.add_sandbox("old-pydantic", **OLD, **{PYDANTIC_AI_CREATE_KEY: "true"})
    fake.add_sandbox("old-thread", **OLD, **{deep.THREAD_METADATA_KEY: "k", "x": "y"})
    fake.add_sandbox("old-provider", **OLD, **{PROVIDER_KEY: "deepagents-code"})
    fake.add_sandbox("old-core", **OLD)
    fake.add_sandbox("not-ours", team="another application")
    options = DoctorOptions(domain=fake.domain, api_key=fake.api_key, transport=_WithHealth(fake))
    checks = [c for c in CHECKS if c.name in ("reachable", "leftovers")]
    report = (await run_checks(options, checks))[1]
    assert report.status == "PASS", report.summary
    assert report.data["count"] == len(made) + 4
    assert report.data["adapters"] == {
        "core": 1,
        "deepagents": 3,
        "deepagents-code": 2,
        "pydantic-ai": 2,
        "unlabelled": 1,
    }
    assert "9 found: 1 core, 3 deepagents, 2 deepagents-code, 2 pydantic-ai, 1 unlabelled" in (
        report.summary
    )
    listed = {s.id: s.adapter for s in await list_sandboxes(fake.connection())}
    assert "not-ours" not in listed
    assert listed["old-pydantic"] == "pydantic-ai" and listed["old-core"] is None
    assert {i: listed[i] for i in made} == made


def test_unknown_adapters_are_refused() -> None:
    with pytest.raises(ValueError, match="adapter"):
        adapter_labels("langchain")
