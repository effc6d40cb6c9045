"""Unit tests for pydantic-ai-opensandbox: argument checks, no I/O at construction, the error table."""

from __future__ import annotations

import inspect

import pytest
from pydantic_ai.exceptions import UserError
from pydantic_ai.workspaces import (
    SupportsCommands,
    SupportsFilesystem,
    SupportsRealpath,
    WorkspaceBackend,
    WorkspaceError,
    WorkspaceOutputLimitError,
    WorkspaceRef,
    WorkspaceTimeoutError,
    WorkspaceUnavailableError,
)

import pydantic_ai_opensandbox
from opensandbox_core import (
    AuthenticationError,
    CommandTimeoutError,
    ConfigurationError,
    OutputLimitError,
    SandboxUnavailableError,
    ServerError,
    UnsupportedDaemonError,
)
from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend
from pydantic_ai_opensandbox._backend import translate

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")

REF = WorkspaceRef(provider="opensandbox", id="sbx-1")


def test_public_names() -> None:
    assert set(pydantic_ai_opensandbox.__all__) == {
        "CREATE_METADATA_KEY",
        "OpenSandbox",
        "OpenSandboxBackend",
        "OpenSandboxCodeInterpreter",
        "OpenSandboxTerminal",
        "__version__",
    }


def test_backend_implements_every_protocol_without_io() -> None:
    backend = OpenSandboxBackend(image="python:3.13-slim")
    for protocol in (WorkspaceBackend, SupportsCommands, SupportsFilesystem, SupportsRealpath):
        assert isinstance(backend, protocol)
    assert backend.ref is None


def test_backend_built_from_a_ref_reports_exactly_that_ref() -> None:
    assert OpenSandboxBackend(ref=REF).ref is REF


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, ValueError),
        ({"image": "x", "ref": REF}, ValueError),
        ({"ref": WorkspaceRef(provider="e2b", id="x")}, ValueError),
        ({"image": "x", "working_dir": "relative"}, ValueError),
        ({"image": "x", "env": {"A": 1}}, TypeError),
        ({"image": "x", "sandbox_timeout": 0}, ValueError),
        ({"image": "x", "connection": "localhost:8080"}, TypeError),
    ],
)
def test_backend_rejects_bad_arguments(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        OpenSandboxBackend(**kwargs)  # type: ignore[arg-type]


async def test_command_form_is_checked_before_any_io() -> None:
    backend = OpenSandboxBackend(image="python:3.13-slim")
    with pytest.raises(TypeError):
        await backend.run("true")
    with pytest.raises(TypeError):
        await backend.run(["true"], shell=True)  # noqa: S604 - the mismatch under test
    with pytest.raises(ValueError):
        await backend.run(["true"], timeout=0)
    assert backend.ref is None


def test_env_is_kept_out_of_reprs() -> None:
    capability = OpenSandbox(image="python:3.13-slim", env={"TOKEN": "hunter2"})
    backend = OpenSandboxBackend(image="python:3.13-slim", env={"TOKEN": "hunter2"})
    assert "hunter2" not in repr(capability)
    assert "hunter2" not in repr(backend)


def test_capability_checks_settings() -> None:
    with pytest.raises(UserError):
        OpenSandbox(image="x", working_dir="rel")
    with pytest.raises(UserError):
        OpenSandbox(image="x", sandbox_timeout=-1)


def test_from_spec_signature_is_explicit() -> None:
    params = inspect.signature(OpenSandbox.from_spec).parameters
    assert list(params)[:9] == [
        "id",
        "description",
        "image",
        "resource",
        "allow_internet_access",
        "secure_access",
        "sandbox_timeout",
        "working_dir",
        "env",
    ]
    capability = OpenSandbox.from_spec(image="python:3.13-slim", sandbox_timeout=60)
    assert capability.image == "python:3.13-slim"
    assert capability.working_dir == "/workspace"


def test_get_workspace_owns_only_its_refs() -> None:
    ctx = type("Ctx", (), {"run_id": "r1"})()
    capability = OpenSandbox(image="python:3.13-slim")
    assert capability.get_workspace(ctx, ref=WorkspaceRef(provider="e2b", id="x")) is None  # type: ignore[arg-type]
    attached = capability.get_workspace(ctx, ref=REF)  # type: ignore[arg-type]
    assert attached is not None and attached.ref == REF
    fresh = capability.get_workspace(ctx, ref=None)  # type: ignore[arg-type]
    assert fresh is not None and fresh.ref is None
    assert OpenSandbox().get_workspace(ctx, ref=None) is None  # type: ignore[arg-type]
    assert OpenSandbox().get_workspace(ctx, ref=REF) is not None  # type: ignore[arg-type]


async def test_destroy_refuses_another_providers_ref() -> None:
    with pytest.raises(ValueError):
        await OpenSandbox().destroy(WorkspaceRef(provider="e2b", id="x"))


@pytest.mark.parametrize(
    ("core", "expected", "starting"),
    [
        (SandboxUnavailableError("gone"), WorkspaceUnavailableError, False),
        (UnsupportedDaemonError("old execd"), WorkspaceUnavailableError, True),
        (
            CommandTimeoutError("slow", timeout=1, stdout="o", stderr="e"),
            WorkspaceTimeoutError,
            False,
        ),
        (OutputLimitError("big", limit=10), WorkspaceOutputLimitError, False),
        (ConfigurationError("bad path"), ValueError, False),
        (ConfigurationError("cannot create working dir"), WorkspaceError, True),
        (ServerError("HTTP 503", status_code=503, retryable=True), ServerError, False),
        (FileNotFoundError(2, "No such file", "/x"), FileNotFoundError, False),
    ],
)
def test_error_table(core: Exception, expected: type[Exception], starting: bool) -> None:
    with pytest.raises(expected) as info:
        translate(core, starting=starting)
    if isinstance(core, CommandTimeoutError):
        assert isinstance(info.value, WorkspaceTimeoutError)
        assert (info.value.stdout, info.value.stderr) == ("o", "e")
    if isinstance(core, ServerError | FileNotFoundError):
        assert info.value is core


def test_refused_api_key_is_unavailable() -> None:
    error = AuthenticationError("the server refused the API key (HTTP 401)")
    with pytest.raises(WorkspaceUnavailableError):
        translate(error)
    # Any other configuration error in an operation is a bad argument.
    with pytest.raises(ValueError) as info:
        translate(ConfigurationError("bad path"))
    assert not isinstance(info.value, WorkspaceUnavailableError)


def test_terminal_capability_gives_the_cores_four_tools_without_io() -> None:
    from opensandbox_core.adapters import TerminalTools
    from pydantic_ai_opensandbox import OpenSandboxTerminal

    capability = OpenSandboxTerminal()
    toolset = capability.get_toolset()
    assert capability.get_toolset() is toolset  # built once: durable engines see one toolset
    assert toolset.id == "opensandbox_terminal"
    assert list(toolset.tools) == [spec.name for spec in TerminalTools.specs]
    for spec in TerminalTools.specs:
        tool = toolset.tools[spec.name]
        assert tool.description == spec.description
        assert tool.function_schema.json_schema == spec.schema()
        assert tool.takes_ctx
