"""The deepagents-code provider (`OpenSandboxProvider`) offline, on the core's fake server.

Runs without deepagents-code (the `tests` session): everything but `metadata` needs only this
package. The live tests with deepagents-code itself are in tests/live/deepagents_code.
"""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend, OpenSandboxProvider
from deepagents_opensandbox_backend._options import AttachOptions
from opensandbox_core import ConfigurationError, Connection
from opensandbox_core.testing import FakeOpenSandbox


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeOpenSandbox:
    """Every connection the provider builds goes to one in-memory fake server."""
    server = FakeOpenSandbox()

    def connection(self: AttachOptions) -> Connection:
        return server.connection()

    monkeypatch.setattr(AttachOptions, "connection", connection)
    return server


def test_importing_the_package_never_needs_deepagents_code() -> None:
    # deepagents-code made unimportable: the package, the provider class and its methods load;
    # only `metadata` (deepagents-code's own class) says what to install. The package is
    # imported afresh here (its modules, and deepagents-code's, out of `sys.modules` meanwhile;
    # then put back), with what it imports from elsewhere as loaded.
    ours = ("deepagents_opensandbox_backend", "deepagents_code")
    loaded = {name: sys.modules.pop(name) for name in list(sys.modules) if name.startswith(ours)}
    sys.modules["deepagents_code"] = None  # type: ignore[assignment]
    try:
        fresh = importlib.import_module("deepagents_opensandbox_backend")
        assert fresh.OpenSandboxProvider is not OpenSandboxProvider  # imported again
        provider = fresh.OpenSandboxProvider()
        with pytest.raises(ImportError, match=re.escape("deepagents-opensandbox-backend[code]")):
            provider.metadata  # noqa: B018
    finally:
        for name in [name for name in sys.modules if name.startswith(ours)]:
            del sys.modules[name]
        sys.modules.update(loaded)


def test_the_callers_image_wins_over_the_environments(
    fake: FakeOpenSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_IMAGE", "from-env:1")
    provider = OpenSandboxProvider()
    named = provider.get_or_create(image="named:2")
    assert named.session.spec is not None and named.session.spec.image == "named:2"
    provider.delete(sandbox_id=named.id)
    assert fake.created == [named.id]


def test_get_or_create_owns_attach_does_not_and_delete_removes(
    fake: FakeOpenSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPEN_SANDBOX_IMAGE", "from-env:1")
    provider = OpenSandboxProvider()
    backend = provider.get_or_create(metadata={"team": "a"})
    assert isinstance(backend, OpenSandboxBackend) and backend.owned
    assert fake.created == [backend.id]
    spec = backend.session.spec
    assert spec is not None and spec.image == "from-env:1"
    assert fake.sandbox(backend.id).metadata["opensandbox-agents.provider"] == "deepagents-code"
    assert fake.sandbox(backend.id).metadata["team"] == "a"
    assert backend.execute("echo hi").output == "hi\n"

    attached = provider.get_or_create(sandbox_id=backend.id, image="ignored-when-attaching")
    assert attached.id == backend.id and attached.owned is False
    assert fake.created == [backend.id]  # attaching created nothing

    other = OpenSandboxProvider()
    with pytest.raises(ConfigurationError, match="not created by this provider"):
        other.delete(sandbox_id=backend.id)
    assert fake.deleted == []
    provider.delete(sandbox_id=backend.id)
    assert fake.deleted == [backend.id]
    with pytest.raises(ConfigurationError, match="not created by this provider"):
        provider.delete(sandbox_id=backend.id)  # forgotten once deleted


async def test_async_twins_and_forced_delete(fake: FakeOpenSandbox) -> None:
    provider = OpenSandboxProvider()
    backend = await provider.aget_or_create(image="img:1", timeout=120)
    assert fake.created == [backend.id]
    assert (await backend.aexecute("printf async")).output == "async"
    attached = await OpenSandboxProvider().aget_or_create(sandbox_id=backend.id)
    assert attached.owned is False
    await OpenSandboxProvider().adelete(sandbox_id=backend.id, force=True)
    assert fake.deleted == [backend.id]
    await provider.adelete(sandbox_id=backend.id)  # the creator's delete of a gone sandbox: quiet


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"imagee": "x"}, "does not take 'imagee'"),
        ({"snapshot": ""}, "snapshot must be"),
        ({"snapshot": 3}, "snapshot must be"),
        ({"timeout": -1}, "timeout"),
        ({"metadata": ["a"]}, "metadata must be a mapping"),
        ({"sandbox_id": ""}, "sandbox_id must be a non-empty string"),
        ({"sandbox_id": "abc", "snapshot": "base"}, "cannot be combined with sandbox_id"),
    ],
)
def test_bad_options_are_refused_before_any_request(
    fake: FakeOpenSandbox, kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        OpenSandboxProvider().get_or_create(**kwargs)  # type: ignore[arg-type]
    assert fake.requests == []


def test_delete_takes_only_the_server_options(fake: FakeOpenSandbox) -> None:
    with pytest.raises(ConfigurationError, match="not 'image'"):
        OpenSandboxProvider().delete(sandbox_id="abc", force=True, image="x")
    assert fake.requests == []
