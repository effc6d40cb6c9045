"""The idle lifetime of a created sandbox: one default (30 minutes) in every package, one way to say
"no limit" (`None`), renewal while an operation runs, and the timed-out `truncated` flag.

The table in `docs/architecture.md` ("Sandbox lifetimes") states these; the live tests check what
the server then does (`test_deepagents_outlive.py`, `test_pydantic_failed_runs.py`).
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend as DeepAgentsBackend
from deepagents_opensandbox_backend._options import AttachOptions
from deepagents_opensandbox_backend._run import timed_out_output as _timed_out
from opensandbox_core import CommandTimeoutError, SandboxSpec
from opensandbox_core import _defaults as defaults
from opensandbox_core._lifecycle._lifetime import renewal_interval, renewing
from opensandbox_core.validation import idle_lifetime
from pydantic_ai_opensandbox import OpenSandbox
from pydantic_ai_opensandbox import OpenSandboxBackend as PydanticBackend

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

ROOT = Path(__file__).resolve().parents[2]


def _default(function: Any, name: str) -> Any:
    return inspect.signature(function).parameters[name].default


def test_every_package_defaults_to_thirty_idle_minutes() -> None:
    assert defaults.LIFETIME == 1800
    assert SandboxSpec(image="img").lifetime == 1800
    for create in (DeepAgentsBackend.create, DeepAgentsBackend.acreate):
        assert idle_lifetime(_default(create, "timeout")) == 1800
    assert OpenSandbox().sandbox_timeout == 1800
    assert _default(OpenSandbox.from_spec, "sandbox_timeout") == 1800
    assert _default(PydanticBackend, "sandbox_timeout") == 1800
    spec = PydanticBackend(image="img").session.spec
    assert spec is not None and spec.lifetime == 1800


def test_no_limit_is_none_everywhere() -> None:
    assert SandboxSpec(image="img", lifetime=None).lifetime is None
    assert idle_lifetime(None) is None
    assert idle_lifetime(0) is None  # the Deep Agents seed's spelling, still accepted
    spec = PydanticBackend(image="img", sandbox_timeout=None).session.spec
    assert spec is not None and spec.lifetime is None
    # Attaching without a value leaves the lifetime its creator set.
    assert (
        AttachOptions(timeout=None, command_timeout=None, working_dir="/workspace")
        .attach("sbx-1")
        ._life.lifetime
        is None
    )


def test_the_architecture_table_states_the_defaults() -> None:
    text = (ROOT / "docs/architecture.md").read_text()
    section = text[text.index("## Sandbox lifetimes") :]
    rows = {
        line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")
    }
    assert "30 minutes" in rows["idle lifetime of a created sandbox"]
    for name in ("SandboxSpec(lifetime=)", "create(timeout=)", "OpenSandbox(sandbox_timeout=)"):
        assert name in rows["idle lifetime of a created sandbox"]
    for readme in ("opensandbox-core", "deepagents-opensandbox-backend", "pydantic-ai-opensandbox"):
        body = (ROOT / "packages" / readme / "README.md").read_text()
        # Named in plain text: relative links break on PyPI (tests/unit/test_readme_links.py).
        assert "docs/architecture.md" in body and '"Sandbox lifetimes"' in body, readme


def test_renewal_interval_is_a_third_of_the_lifetime() -> None:
    assert renewal_interval(1800) == 600
    assert renewal_interval(1.5) == 1.0


class _FakeSession:
    def __init__(self, lifetime: float | None) -> None:
        self._lifetime = lifetime
        self._sandbox_id = "sbx-1"
        self._destroyed = False
        self.renewals = 0

    def _clients(self) -> object:
        return SimpleNamespace()

    async def _maybe_renew(self, clients: object) -> None:
        self.renewals += 1

    @property
    def lifetime(self) -> float | None:  # the `_lifetime.Renewable` interface
        return self._lifetime

    async def renew_once(self) -> None:
        await self._maybe_renew(self._clients())


async def test_renewing_renews_while_the_block_runs_and_stops_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "opensandbox_core._lifecycle._lifetime.renewal_interval", lambda lifetime: 0.05
    )
    session = _FakeSession(60)
    async with renewing(session):  # type: ignore[arg-type]
        await asyncio.sleep(0.28)
    during = session.renewals
    assert 3 <= during <= 6
    await asyncio.sleep(0.2)
    assert session.renewals == during

    unlimited = _FakeSession(None)
    async with renewing(unlimited):  # type: ignore[arg-type]
        await asyncio.sleep(0.1)
    assert unlimited.renewals == 0


async def test_renewing_never_swallows_the_callers_cancellation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "opensandbox_core._lifecycle._lifetime.renewal_interval", lambda lifetime: 0.05
    )
    session = _FakeSession(60)

    async def long_operation() -> None:
        async with renewing(session):  # type: ignore[arg-type]
            await asyncio.sleep(30)

    task = asyncio.ensure_future(long_operation())
    await asyncio.sleep(0.12)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    renewed = session.renewals
    await asyncio.sleep(0.15)
    assert session.renewals == renewed


def test_a_timed_out_command_reports_whether_the_cap_cut_it() -> None:
    cut = CommandTimeoutError("t", timeout=3, stdout="x" * 10, truncated=True)
    assert _timed_out(cut).truncated is True
    assert _timed_out(cut).exit_code == 124
    whole = CommandTimeoutError("t", timeout=3, stdout="x")
    assert _timed_out(whole).truncated is False
