"""Session rules that need no server: construction does no I/O, arguments are checked early."""

from __future__ import annotations

import math
import socket

import pytest

from opensandbox_core import AsyncSandboxSession, ConfigurationError, Connection, SandboxSpec

SECRET = "sk-offline-secret-987654321"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("construction must not open a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.usefixtures("no_network")
def test_construction_does_no_io() -> None:
    conn = Connection(domain="127.0.0.1:1", api_key=SECRET)
    session = AsyncSandboxSession(
        SandboxSpec(image="img", container_env={"K": SECRET}), connection=conn
    )
    assert session.id is None
    assert not session.owned
    attached = AsyncSandboxSession.attach("sandbox-123", connection=conn)
    assert attached.id == "sandbox-123"
    assert not attached.owned
    for text in (repr(session), repr(attached)):
        assert SECRET not in text


def test_spec_xor_id() -> None:
    with pytest.raises(ConfigurationError):
        AsyncSandboxSession()
    with pytest.raises(ConfigurationError):
        AsyncSandboxSession(SandboxSpec(image="img"), sandbox_id="x")


@pytest.mark.parametrize("wd", ["relative/dir", "", "/a\0b"])
def test_working_dir_must_be_absolute(wd: str) -> None:
    with pytest.raises(ConfigurationError):
        AsyncSandboxSession(SandboxSpec(image="img"), working_dir=wd)


@pytest.mark.parametrize("timeout", [0, -5, math.nan, math.inf, "10"])
def test_bad_default_timeout(timeout: object) -> None:
    with pytest.raises(ConfigurationError):
        AsyncSandboxSession(SandboxSpec(image="img"), default_timeout=timeout)  # type: ignore[arg-type]


async def test_bad_run_arguments_fail_before_any_request() -> None:
    session = AsyncSandboxSession(
        SandboxSpec(image="img"), connection=Connection(domain="127.0.0.1:1", api_key=SECRET)
    )
    for kwargs in (
        {"timeout": -1},
        {"timeout": math.nan},
        {"env": {"A=B": "1"}},
        {"env": {"A": 3}},
    ):
        with pytest.raises(ConfigurationError):
            await session.commands.run("true", **kwargs)  # type: ignore[arg-type]
    assert session.id is None
