"""The core's metadata, written for every package: each package's sandboxes carry the core's labels
with the adapter name the package passes (and the package's own labels), and the doctor finds all
of them, counted by package, 0.2.0's sandboxes included. The core finds the installed adapters by
their `opensandbox.adapters` entry points.

Each sandbox is created through its package's own public path, against the core's in-memory fake
server (which keeps the metadata each create sent); the doctor's leftovers check then lists them
through the same server.
"""

from __future__ import annotations

import warnings

import httpx
import pytest
from opensandbox.config import ConnectionConfig

import deepagents_opensandbox_backend as deep
from deepagents_opensandbox_backend._options import AttachOptions
from deepagents_opensandbox_backend._provider import PROVIDER_METADATA_KEY
from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    Connection,
    InsecureSandboxWarning,
    SandboxSpec,
)
from opensandbox_core._doctor import DoctorOptions, run_checks
from opensandbox_core._doctor._registry import CHECKS
from opensandbox_core._entry_points import installed_adapters
from opensandbox_core._metadata import (
    ADAPTER_KEY,
    DOCTOR_KEY,
    LIBRARY_KEY,
    LIBRARY_VALUE,
    OWNER_KEY,
    adapter_labels,
    adapter_of,
)
from opensandbox_core.fleet import list_sandboxes
from opensandbox_core.testing import FakeOpenSandbox
from pydantic_ai_opensandbox import CREATE_METADATA_KEY, OpenSandboxBackend

REINSTALL = "reinstall the packages (pip install -e) so that their entry points are read"
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


async def test_every_package_writes_the_cores_labels_and_its_own(fake: FakeOpenSandbox) -> None:
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
    assert pydantic[CREATE_METADATA_KEY] == "true" and CREATE_METADATA_KEY == "pydantic-ai-create"
    (thread,) = [m for m in labels if deep.THREAD_METADATA_KEY in m]
    assert thread[deep.NAMESPACE_METADATA_KEY] == "app" and thread[ADAPTER_KEY] == "deepagents"
    assert thread[deep.THREAD_METADATA_KEY] == deep.ThreadSandboxBackend(
        image="img", namespace="app"
    ).thread_key("ticket-1")
    (provider,) = [m for m in labels if PROVIDER_METADATA_KEY in m]
    assert provider[PROVIDER_METADATA_KEY] == "deepagents-code"
    (plain,) = [m for m in labels if m.get("team") == "a"]  # the user's own metadata kept
    assert plain[ADAPTER_KEY] == "deepagents"
    # Every adapter name a package writes is one it declares as an entry point.
    declared = {adapter.name for adapter in installed_adapters()}
    assert set(made.values()) - {"core"} <= declared, REINSTALL


# Labels exactly as 0.2.0 wrote them (opensandbox_core._metadata at 5fc2004), and older ones.
V020_THREAD = {
    **OLD,
    ADAPTER_KEY: "deepagents",
    "opensandbox-agents.namespace": "app",
    "opensandbox-agents.thread": "0" * 40,
}
V020_FORK = {**V020_THREAD, "opensandbox-agents.fork-of": "0" * 40}
V020_PROVIDER = {
    **OLD,
    ADAPTER_KEY: "deepagents-code",
    "opensandbox-agents.provider": "deepagents-code",
}
V020_PYDANTIC = {**OLD, ADAPTER_KEY: "pydantic-ai", "pydantic-ai-create": "true"}


async def test_the_doctor_finds_every_package_and_earlier_releases(fake: FakeOpenSandbox) -> None:
    made = await _create_one_of_each(fake)
    fake.add_sandbox("v020-thread", **V020_THREAD)
    fake.add_sandbox("v020-fork", **{**V020_FORK, "opensandbox-agents.thread": "1" * 40})
    fake.add_sandbox("v020-provider", **V020_PROVIDER)
    fake.add_sandbox("v020-pydantic", **V020_PYDANTIC)
    # Labelled before `opensandbox-agents.adapter` existed: still found, counted as unlabelled.
    fake.add_sandbox("old-pydantic", **OLD, **{CREATE_METADATA_KEY: "true"})
    fake.add_sandbox("old-core", **OLD)
    fake.add_sandbox("old-probe", **OLD, **{DOCTOR_KEY: "a-run"})
    fake.add_sandbox("not-ours", team="another application")
    options = DoctorOptions(domain=fake.domain, api_key=fake.api_key, transport=_WithHealth(fake))
    checks = [c for c in CHECKS if c.name in ("reachable", "leftovers")]
    report = (await run_checks(options, checks))[1]
    assert report.status == "PASS", report.summary
    assert report.data["count"] == len(made) + 7
    assert report.data["adapters"] == {
        "core": 1,
        "deepagents": 4,
        "deepagents-code": 2,
        "doctor": 1,
        "pydantic-ai": 2,
        "unlabelled": 2,
    }
    assert "12 found: 1 core, 4 deepagents, 2 deepagents-code, 1 doctor, 2 pydantic-ai, " in (
        report.summary
    )
    listed = {s.id: s.adapter for s in await list_sandboxes(fake.connection())}
    assert "not-ours" not in listed
    assert listed["v020-pydantic"] == "pydantic-ai" and listed["v020-thread"] == "deepagents"
    assert listed["old-pydantic"] is None and listed["old-core"] is None
    assert {i: listed[i] for i in made} == made


def test_an_adapter_name_is_any_label_value() -> None:
    assert adapter_labels("my-framework") == {ADAPTER_KEY: "my-framework"}
    for bad in ("", "two words", "-dash", "x" * 64):
        with pytest.raises(ConfigurationError, match="adapter"):
            adapter_labels(bad)


def test_the_adapters_are_found_by_their_entry_points() -> None:
    found = {a.name: (a.package, a.distribution) for a in installed_adapters()}
    assert found == {
        "deepagents": ("deepagents_opensandbox_backend", "deepagents-opensandbox-backend"),
        "deepagents-code": ("deepagents_opensandbox_backend", "deepagents-opensandbox-backend"),
        "pydantic-ai": ("pydantic_ai_opensandbox", "pydantic-ai-opensandbox"),
    }, REINSTALL


def test_a_warning_names_the_line_that_called_an_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    # The adapters' frames are skipped like the core's: they are the entry points' packages.
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        OpenSandboxBackend(image="img")
    (insecure,) = [w for w in caught if issubclass(w.category, InsecureSandboxWarning)]
    assert insecure.filename == __file__, REINSTALL
