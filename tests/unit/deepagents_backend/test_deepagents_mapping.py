"""Offline rules of the Deep Agents backend: tables, timeouts, no I/O, no secrets."""

from __future__ import annotations

import dataclasses
import errno
import logging
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast, get_args

import pytest
from deepagents.backends.protocol import FileOperationError

import deepagents_opensandbox_backend
from deepagents_opensandbox_backend import InsecureSandboxWarning, OpenSandboxBackend
from deepagents_opensandbox_backend._filesystem import check_transfer_path, execute_timeout
from deepagents_opensandbox_backend._transfers import (
    TRANSFER_CODES,
    TRANSFER_ERRNOS,
    TRANSFER_ERRORS,
    transfer_code,
)
from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    Connection,
    OpenSandboxError,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
    TransferResult,
)
from opensandbox_core.testing import FakeOpenSandbox
from opensandbox_core.validation import idle_lifetime

SECRET = "sk-unit-test-secret-0123456789"


def test_public_names() -> None:
    assert set(deepagents_opensandbox_backend.__all__) == {
        "DEFAULT_IMAGE",
        "FORK_OF_METADATA_KEY",
        "NAMESPACE_METADATA_KEY",
        "SANDBOX_FILES_KEY",
        "THREAD_METADATA_KEY",
        "InsecureSandboxWarning",
        "OpenSandboxBackend",
        "OpenSandboxProvider",
        "SandboxFiles",
        "TerminalMiddleware",
        "ThreadSandboxBackend",
        "TimeTravelSandboxBackend",
        "__version__",
        "code_tools",
        "terminal_tools",
    }
    assert issubclass(InsecureSandboxWarning, UserWarning)


# -- transfer outcomes -------------------------------------------------------------------------


def _core_transfer_code() -> Callable[[BaseException], str]:
    """The core's own exception -> TransferResult.error mapping (wherever the core keeps it)."""
    import importlib
    import pkgutil

    import opensandbox_core

    for info in pkgutil.walk_packages(opensandbox_core.__path__, "opensandbox_core."):
        if info.name.endswith("__main__"):
            continue  # running it would start the doctor's command line
        module = importlib.import_module(info.name)
        found = getattr(module, "_transfer_error", None)
        if callable(found):
            return cast(Callable[[BaseException], str], found)
    raise AssertionError("opensandbox_core no longer has its _transfer_error mapping")


def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _subclasses(sub)
    return found


def _core_samples() -> list[BaseException]:
    """One instance of every error class a core transfer can fail with: the core's whole
    OpenSandboxError tree and the OSError kinds the core raises for paths."""
    samples: list[BaseException] = []
    for cls in _subclasses(OpenSandboxError):
        if cls.__module__.startswith("opensandbox_core"):
            samples.append(cls.__new__(cls))
    samples += [
        FileNotFoundError(errno.ENOENT, "x", "/p"),
        PermissionError(errno.EACCES, "x", "/p"),
        IsADirectoryError(errno.EISDIR, "x", "/p"),
        NotADirectoryError(errno.ENOTDIR, "x", "/p"),
        OSError(errno.ENOSPC, "x", "/p"),
        RuntimeError("x"),
    ]
    return samples


CORE_CODES = {_core_transfer_code()(exc): exc for exc in _core_samples()}


def transfer_error(result: TransferResult) -> FileOperationError | None:
    """What the backend reports for one core result: the core's code through the adapter's table."""
    code = transfer_code(result)
    return None if code is None else TRANSFER_ERRORS[code]


def test_every_core_code_has_a_row() -> None:
    """The table covers exactly the codes the core's classification gives, and every outcome
    of the core's whole error tree is either one of them or raised (derived from the tree)."""
    assert set(TRANSFER_ERRORS) == TRANSFER_CODES
    assert set(TRANSFER_ERRNOS.values()) <= TRANSFER_CODES
    assert len(CORE_CODES) >= 5  # the derivation found the tree, not an empty set
    deep_codes = set(get_args(FileOperationError))
    for sample in _core_samples():
        result = TransferResult(path="/p", error=_core_transfer_code()(sample), exception=sample)
        try:
            code = transfer_code(result)
        except type(sample):
            continue  # not about the file: raised as it is (anything else fails the test)
        assert code is not None and TRANSFER_ERRORS[code] in deep_codes


@pytest.mark.parametrize("core", sorted(CORE_CODES))
def test_per_file_codes(core: str) -> None:
    """A code the core produces is a Deep Agents literal: the same word where Deep Agents has
    it; `not_a_directory` is Deep Agents' `invalid_path` (as its own FilesystemBackend says);
    the other codes are not about the file and raise the core's exception."""
    deep_codes = set(get_args(FileOperationError))
    exc = CORE_CODES[core]
    result = TransferResult(path="/p", error=core, exception=exc)
    if core in deep_codes:
        assert transfer_error(result) == core
    elif core == "not_a_directory":
        assert transfer_error(result) == "invalid_path"
    else:
        assert core not in TRANSFER_ERRORS
        with pytest.raises(type(exc)):
            transfer_error(result)


def test_success_has_no_code() -> None:
    assert transfer_error(TransferResult(path="/p", content=b"")) is None


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (errno.ELOOP, "invalid_path"),
        (errno.ENAMETOOLONG, "invalid_path"),
        (errno.EINVAL, "invalid_path"),
        (errno.EROFS, "permission_denied"),
    ],
)
def test_path_level_oserrors_are_codes(code: int, expected: str) -> None:
    exc = OSError(code, "x", "/p")
    assert transfer_error(TransferResult(path="/p", error="error", exception=exc)) == expected


@pytest.mark.parametrize(
    "exc",
    [
        SandboxUnavailableError("gone", sandbox_id="s"),
        ServerError("boom", status_code=500),
        OSError(errno.ENOSPC, "No space left on device", "/p"),
    ],
)
def test_failures_not_about_the_file_raise(exc: Exception) -> None:
    code = "unavailable" if isinstance(exc, SandboxUnavailableError) else "error"
    with pytest.raises(type(exc)):
        transfer_error(TransferResult(path="/p", error=code, exception=exc))


def test_batches_refuse_before_any_request() -> None:
    """The backend's batches go through the core's checks: a bad path is answered without a
    request, non-bytes content raises before anything is sent (the session here has no server:
    any request would fail)."""
    backend = OpenSandboxBackend(_offline_session())
    up = backend.upload_files([("rel.txt", b"a"), ("", "not bytes")])  # type: ignore[list-item]
    assert [(r.path, r.error) for r in up] == [("rel.txt", "invalid_path"), ("", "invalid_path")]
    down = backend.download_files(["rel.txt", "/a/\0b"])
    assert [(d.path, d.content, d.error) for d in down] == [
        ("rel.txt", None, "invalid_path"),
        ("/a/\0b", None, "invalid_path"),
    ]
    with pytest.raises(TypeError, match=r"^content for '/a' must be bytes, got str\.$"):
        backend.upload_files([("rel.txt", b"a"), ("/a", "text")])  # type: ignore[list-item]
    assert backend.upload_files([]) == [] and backend.download_files([]) == []


@pytest.mark.parametrize(
    "path", ["", "relative.txt", "./x", "../etc/passwd", "~/x", "/a/\0b", None, b"/bytes"]
)
def test_paths_refused_before_sending(path: object) -> None:
    assert check_transfer_path(path) == "invalid_path"


@pytest.mark.parametrize("path", ["/a", "/tmp/with space/é ' \" \n.txt", "/a/../b"])
def test_absolute_paths_are_sent(path: str) -> None:
    assert check_transfer_path(path) is None


# -- time values -------------------------------------------------------------------------------


def test_execute_timeouts() -> None:
    assert execute_timeout(0) is None
    assert execute_timeout(5) == 5.0
    assert execute_timeout(0.5) == 0.5
    for bad in (-1, True, "10", float("nan"), float("inf")):
        with pytest.raises(ValueError):
            execute_timeout(bad)


def test_lifetimes() -> None:
    assert idle_lifetime(timedelta(minutes=30)) == 1800.0
    assert idle_lifetime(None) is None
    assert idle_lifetime(0) is None
    assert idle_lifetime(90) == 90.0
    with pytest.raises(ConfigurationError):
        idle_lifetime(timedelta(seconds=-1))
    with pytest.raises(ConfigurationError):
        idle_lifetime(0.5)


# -- construction ------------------------------------------------------------------------------


def _offline_session(**kwargs: object) -> AsyncSandboxSession:
    # Port 9 (discard) on loopback: any request would fail loudly.
    connection = Connection(domain="127.0.0.1:9", api_key=SECRET)
    return AsyncSandboxSession(SandboxSpec(image="python:3.13-slim"), connection=connection)


def test_construction_does_no_io(monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("construction must not send requests")

    monkeypatch.setattr(httpx.AsyncClient, "send", refuse)
    monkeypatch.setattr(httpx.Client, "send", refuse)
    backend = OpenSandboxBackend(_offline_session())
    assert backend.owned is False
    with pytest.raises(RuntimeError, match="not been created"):
        _ = backend.id


def test_constructor_wants_a_core_session() -> None:
    with pytest.raises(TypeError, match="AsyncSandboxSession"):
        OpenSandboxBackend("sandbox-id")  # type: ignore[arg-type]


def test_repr_and_logs_have_no_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    backend = OpenSandboxBackend(_offline_session())
    text = repr(backend) + str(backend)
    assert SECRET not in text
    assert "api_key=<set>" in text
    assert SECRET not in caplog.text


def test_bad_arguments_are_caught_before_any_request() -> None:
    with pytest.raises(ValueError, match="timeout"):
        OpenSandboxBackend.create(domain="127.0.0.1:9", api_key=SECRET, timeout="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="image"):
        OpenSandboxBackend.create(domain="127.0.0.1:9", api_key=SECRET, image=" ")


def test_warns_only_without_any_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline: every session the backend makes talks to an in-process fake server, whose
    create fails (HTTP 500, not retried), so create() warns (or not) and fails at once."""
    fake = FakeOpenSandbox()
    original = AsyncSandboxSession.__init__

    def offline(self: AsyncSandboxSession, *args: Any, **kwargs: Any) -> None:
        connection = kwargs.get("connection") or Connection()
        kwargs["connection"] = dataclasses.replace(connection, transport=fake.transport)
        original(self, *args, **kwargs)

    monkeypatch.setattr(AsyncSandboxSession, "__init__", offline)
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
    fake.fail_next("create", status=500)
    with pytest.warns(InsecureSandboxWarning), pytest.raises(ServerError):
        OpenSandboxBackend.create(domain="127.0.0.1:9")
    for env_key, arg_key in ((SECRET, None), (None, SECRET)):
        if env_key:
            monkeypatch.setenv("OPEN_SANDBOX_API_KEY", env_key)
        else:
            monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
        fake.fail_next("create", status=500)
        with warnings.catch_warnings():
            warnings.simplefilter("error", InsecureSandboxWarning)
            with pytest.raises(ServerError) as info:
                OpenSandboxBackend.create(domain="127.0.0.1:9", api_key=arg_key)
            assert SECRET not in str(info.value)
        assert SECRET in fake.requests[-1].headers.values()  # the key was sent, as a header
    assert fake.count("create") == 3
    assert fake.created == []


@pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")
def test_terminal_tools_are_the_cores_four_tools_and_build_without_io() -> None:
    from opensandbox_core import AsyncSandboxSession
    from opensandbox_core.adapters import TerminalTools

    backend = OpenSandboxBackend(AsyncSandboxSession(sandbox_id="sbx-1"))
    tools = deepagents_opensandbox_backend.terminal_tools(backend)
    assert [t.name for t in tools] == [spec.name for spec in TerminalTools.specs]
    for tool, spec in zip(tools, TerminalTools.specs, strict=True):
        assert tool.description == spec.description
        assert tool.args_schema == spec.schema()
    with pytest.raises(ValueError, match="max_output"):
        deepagents_opensandbox_backend.terminal_tools(backend, max_output=0)
    middleware = deepagents_opensandbox_backend.TerminalMiddleware(backend)
    assert [t.name for t in middleware.tools] == [spec.name for spec in TerminalTools.specs]
    with pytest.raises(TypeError, match="close_at_end"):
        deepagents_opensandbox_backend.TerminalMiddleware(backend, close_at_end="yes")  # type: ignore[arg-type]
