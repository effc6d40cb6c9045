"""deepagents-code's `opensandbox` sandbox provider, found and driven the way deepagents-code does.

Needs deepagents-code (Python 3.12+), so it runs in the `deepagents_code` nox session; elsewhere
the module is skipped. Every sandbox goes through deepagents-code's own `SandboxRegistry`.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

# A submodule: this folder itself imports as a namespace package `deepagents_code`.
pytest.importorskip(
    "deepagents_code.integrations.sandbox_registry",
    reason="needs deepagents-code (the deepagents_code session)",
)

from deepagents_code.integrations.sandbox_factory import (
    create_sandbox,
    get_default_working_dir,
    verify_sandbox_deps,
)
from deepagents_code.integrations.sandbox_provider import (
    SandboxInstallHint,
    SandboxNotFoundError,
    SandboxProvider,
    SandboxProviderMetadata,
)
from deepagents_code.integrations.sandbox_registry import SandboxRegistry

from deepagents_opensandbox_backend import OpenSandboxBackend, OpenSandboxProvider
from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    SandboxSpec,
    SandboxUnavailableError,
)
from opensandbox_core.fleet import delete_snapshot, snapshot_sandbox


@pytest.fixture(autouse=True)
def own_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deepagents-code profile of the test's own (no user config can change the registry)."""
    monkeypatch.setenv("DEEPAGENTS_HOME", str(tmp_path / "dcode-home"))


def _provider() -> SandboxProvider:
    registry = SandboxRegistry.load()
    assert "opensandbox" in registry.available_providers()
    provider = registry.create_provider("opensandbox")
    assert isinstance(provider, SandboxProvider)
    assert isinstance(provider, OpenSandboxProvider)
    return provider


def _exists(sandbox_id: str) -> bool:
    try:
        OpenSandboxBackend.connect(sandbox_id).close()
    except SandboxUnavailableError:
        return False
    return True


def test_the_registry_finds_the_provider_by_its_entry_point(testbed_env: dict[str, str]) -> None:
    registry = SandboxRegistry.load()
    assert registry.is_available("opensandbox")
    meta = registry.get_metadata("opensandbox")
    assert meta == SandboxProviderMetadata(
        name="opensandbox",
        working_dir="/workspace",
        install=SandboxInstallHint(kind="package", name="deepagents-opensandbox-backend"),
        supports_sandbox_id=True,
        supports_snapshot_name=True,
        backend_module="deepagents_opensandbox_backend",
    )
    assert meta.install is not None
    assert (
        meta.install.command(in_app=False)
        == "dcode install deepagents-opensandbox-backend --package"
    )
    verify_sandbox_deps("opensandbox")  # the CLI's pre-flight check: raises when not importable
    assert get_default_working_dir("opensandbox") == "/workspace"


def test_get_or_create_then_attach_by_id_then_delete(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_IMAGE", sandbox_image)  # the image comes from the environment
    provider = _provider()
    backend = provider.get_or_create()
    sandbox_id = backend.id
    try:
        assert isinstance(backend, OpenSandboxBackend) and backend.owned
        assert backend.session.spec is not None and backend.session.spec.image == sandbox_image
        assert backend.session.spec.metadata["opensandbox-agents.provider"] == "deepagents-code"
        ran = backend.execute("echo dcode-$((6 * 7)); pwd")
        assert (ran.exit_code, ran.output) == (0, "dcode-42\n/workspace\n")
        assert (
            backend.write("/workspace/notes/from-dcode.txt", "written through the provider").error
            is None
        )
        read = backend.read("/workspace/notes/from-dcode.txt")
        assert read.error is None and read.file_data is not None
        assert read.file_data["content"] == "written through the provider"

        attached = provider.get_or_create(sandbox_id=sandbox_id)
        assert attached.id == sandbox_id and attached.owned is False
        again = attached.execute("cat /workspace/notes/from-dcode.txt")
        assert (again.exit_code, again.output) == (0, "written through the provider")
        attached.close()
    finally:
        provider.delete(sandbox_id=sandbox_id)
    assert not _exists(sandbox_id)
    with pytest.raises(SandboxNotFoundError, match="not found") as caught:
        provider.get_or_create(sandbox_id=sandbox_id)
    assert isinstance(caught.value.original_exc, SandboxUnavailableError)


async def test_async_get_or_create_then_attach_by_id_then_delete(sandbox_image: str) -> None:
    provider = _provider()
    backend = await provider.aget_or_create(image=sandbox_image, timeout=600)
    sandbox_id = backend.id
    try:
        ran = await backend.aexecute("printf 'async %s' $((2 + 3))")
        assert (ran.exit_code, ran.output) == (0, "async 5")
        assert (await backend.awrite("/workspace/a.txt", "async file")).error is None
        read = await backend.aread("/workspace/a.txt")
        assert read.file_data is not None and read.file_data["content"] == "async file"
        attached = await provider.aget_or_create(sandbox_id=sandbox_id)
        assert attached.id == sandbox_id and attached.owned is False
        seen = await attached.aexecute("cat /workspace/a.txt")
        assert seen.output == "async file"
        await attached.aclose()
    finally:
        await provider.adelete(sandbox_id=sandbox_id)
    assert not await asyncio.to_thread(_exists, sandbox_id)
    with pytest.raises(SandboxNotFoundError):
        await provider.aget_or_create(sandbox_id=sandbox_id)


def test_delete_only_deletes_what_the_provider_created(sandbox_image: str) -> None:
    creator = _provider()
    backend = creator.get_or_create(image=sandbox_image)
    sandbox_id = backend.id
    other = _provider()
    try:
        other.get_or_create(sandbox_id=sandbox_id).close()
        with pytest.raises(ConfigurationError, match="not created by this provider"):
            other.delete(sandbox_id=sandbox_id)
        assert _exists(sandbox_id)
        other.delete(sandbox_id=sandbox_id, force=True)
        assert not _exists(sandbox_id)
    finally:
        creator.delete(sandbox_id=sandbox_id)  # already gone: quiet
    with pytest.raises(ConfigurationError, match="not created by this provider"):
        creator.delete(sandbox_id=sandbox_id)  # forgotten once deleted


def test_bad_options_are_refused_before_any_sandbox_exists() -> None:
    provider = _provider()
    with pytest.raises(ConfigurationError, match="does not take 'imagee'"):
        provider.get_or_create(imagee="python:3.13")
    with pytest.raises(ConfigurationError, match="timeout"):
        provider.get_or_create(timeout=-5)
    with pytest.raises(ConfigurationError, match="snapshot cannot be combined with sandbox_id"):
        provider.get_or_create(sandbox_id="abc", snapshot="base")


def test_deepagents_code_create_sandbox_cleans_up_only_what_it_created(
    sandbox_image: str,
) -> None:
    """deepagents-code's own `create_sandbox` (what `dcode --sandbox opensandbox` runs)."""
    params = {"image": sandbox_image}
    with create_sandbox("opensandbox", params=params) as backend:
        created = backend.id
        assert backend.execute("echo created").output == "created\n"
        with create_sandbox("opensandbox", sandbox_id=created, params=params) as attached:
            assert attached.id == created
            attached.write("/workspace/by-id.txt", "attached\n")
        assert _exists(created)  # leaving the attached block did not delete it
        assert backend.execute("cat /workspace/by-id.txt").output == "attached\n"
    assert not _exists(created)


def test_snapshot_name_starts_a_sandbox_from_that_snapshot(sandbox_image: str) -> None:
    name = f"dcode-{uuid.uuid4().hex[:12]}"

    async def make_snapshot() -> str:
        async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as source:
            await source.files.write_bytes("/workspace/base.txt", b"from the snapshot\n")
            return (await snapshot_sandbox(source, name=name)).id

    snapshot_id = asyncio.run(make_snapshot())
    try:
        with create_sandbox("opensandbox", snapshot_name=name) as backend:
            seen = backend.execute("cat /workspace/base.txt")
            assert (seen.exit_code, seen.output) == (0, "from the snapshot\n")
            restored = backend.id
        assert not _exists(restored)
        with pytest.raises(ConfigurationError, match="No ready snapshot"):
            _provider().get_or_create(snapshot=f"{name}-missing")
    finally:
        asyncio.run(delete_snapshot(snapshot_id))
