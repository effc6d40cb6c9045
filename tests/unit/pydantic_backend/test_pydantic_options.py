"""The Pydantic AI adapter passes the core's create options through, checks with the core's
checks (as `ValueError`/`TypeError`, or `UserError` on the capability), and does no I/O."""

from __future__ import annotations

import pytest
from pydantic_ai.exceptions import UserError
from pydantic_ai.workspaces import WorkspaceRef

from opensandbox_core import EgressRule, NetworkPolicy, SandboxSpec, Volume
from opensandbox_core._metadata import ADAPTER_KEY
from pydantic_ai_opensandbox import CREATE_METADATA_KEY, OpenSandbox, OpenSandboxBackend

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")
LABELS = {ADAPTER_KEY: "pydantic-ai", CREATE_METADATA_KEY: "true"}  # the project's, and seed 004's


def test_create_options_reach_the_core_spec() -> None:
    policy = NetworkPolicy(egress=[EgressRule("allow", "pypi.org")])
    backend = OpenSandboxBackend(
        image="python:3.13-slim",
        entrypoint=["sleep", "infinity"],
        metadata={"team": "a"},
        volumes=[Volume("data", "/mnt/data", claim_name="shared")],
        network_policy=policy,
    )
    spec = backend.session.spec
    assert spec is not None
    assert list(spec.entrypoint or ()) == ["sleep", "infinity"]
    assert dict(spec.metadata) == {"team": "a", **LABELS}
    assert spec.network_policy is policy
    assert [v.claim_name for v in spec.volumes] == ["shared"]
    assert backend.ref is None  # nothing was created


def test_the_core_checks_apply() -> None:
    with pytest.raises(ValueError, match="not both"):
        OpenSandboxBackend(
            image="python:3.13-slim",
            allow_internet_access=False,
            network_policy=NetworkPolicy(),
        )
    with pytest.raises(ValueError, match=r"image= \(or spec=\) to create a sandbox or ref="):
        OpenSandboxBackend()
    with pytest.raises(ValueError, match="working_dir"):
        OpenSandboxBackend(image="python:3.13-slim", working_dir="relative")
    with pytest.raises(TypeError):
        OpenSandboxBackend(image="python:3.13-slim", env={"A": 1})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="sandbox_timeout"):
        OpenSandbox(image="python:3.13-slim", sandbox_timeout=0)
    with pytest.raises(UserError, match="working_dir"):
        OpenSandbox(image="python:3.13-slim", working_dir="x")


async def test_capability_pause_refuses_other_providers() -> None:
    with pytest.raises(ValueError, match="provider"):
        await OpenSandbox().pause(WorkspaceRef(provider="docker", id="x"))


SPEC = SandboxSpec(
    image="python:3.13-slim", lifetime=600, metadata={"team": "a"}, secure_access=True
)
CTX = type("Ctx", (), {"run_id": "r1"})()


def test_a_spec_describes_the_sandbox_on_the_backend_and_the_capability() -> None:
    for backend in (
        OpenSandboxBackend(spec=SPEC),
        OpenSandboxBackend(spec=SPEC, sandbox_timeout=600, image="python:3.13-slim"),  # agree
        OpenSandbox(spec=SPEC).get_workspace(CTX, ref=None),  # type: ignore[arg-type]
    ):
        assert isinstance(backend, OpenSandboxBackend)
        spec = backend.session.spec
        assert spec is not None and (spec.image, spec.lifetime) == ("python:3.13-slim", 600)
        assert spec.secure_access  # a core option the keywords do not all reach
        assert dict(spec.metadata) == {"team": "a", **LABELS}
    # On attach the spec's lifetime is the sandbox_timeout it renews to.
    ref = WorkspaceRef(provider="opensandbox", id="sb-1")
    attached = OpenSandbox(spec=SPEC).get_workspace(CTX, ref=ref)  # type: ignore[arg-type]
    assert isinstance(attached, OpenSandboxBackend) and attached.session.spec is None
    assert attached.session._life.lifetime == 600


def test_a_spec_and_a_keyword_that_disagree_are_refused() -> None:
    with pytest.raises(ValueError, match=r"spec= and sandbox_timeout= \(the spec's lifetime\)"):
        OpenSandboxBackend(spec=SPEC, sandbox_timeout=60)
    with pytest.raises(UserError, match=r"spec= and image= \(the spec's image\)"):
        OpenSandbox(spec=SPEC, image="debian:12")
    with pytest.raises(ValueError, match="not both"):
        OpenSandboxBackend(spec=SPEC, ref=WorkspaceRef(provider="opensandbox", id="sb-1"))
    with pytest.raises(ValueError, match=r"spec must be an opensandbox_core\.SandboxSpec"):
        OpenSandboxBackend(spec={"image": "x"})  # type: ignore[arg-type]
