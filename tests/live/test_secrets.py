"""The API key and env values never leak: not to logs at any level (ours, httpx, httpcore, the
SDK's), reprs, exception messages or tracebacks, nor into the sandbox's environment unless the
user put them there. A realistic scenario per package, with its failures, is searched for both."""

from __future__ import annotations

import logging
import secrets
import traceback
from typing import Any

import pytest

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec

LOGGERS = ("", "httpx", "httpcore", "opensandbox", "opensandbox_core", "pydantic_ai", "deepagents")


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


class Evidence:
    """Everything the user could see: reprs, exception texts and tracebacks."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, *objects: Any) -> None:
        for obj in objects:
            if isinstance(obj, BaseException):
                self.texts.append("".join(traceback.format_exception(obj)))
                self.texts.append(repr(obj))
            self.texts.append(repr(obj))
            self.texts.append(str(obj))

    async def expect_error(self, coro: Any) -> None:
        try:
            await coro
        except Exception as exc:
            self.add(exc)
        else:  # pragma: no cover - every call given here fails
            raise AssertionError("expected an error")

    def check(self, caplog: pytest.LogCaptureFixture, *needles: str) -> None:
        logs = caplog.text + "".join(
            f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records
        )
        assert caplog.records, "the scenario logged nothing: the capture is not working"
        for needle in needles:
            assert needle not in logs, "a secret reached the logs"
            for text in self.texts:
                assert needle not in text, "a secret reached a repr, message or traceback"


async def _sandbox_environment(session: AsyncSandboxSession) -> tuple[str, str]:
    """(a command's environment, the container's own: /proc/1/environ)."""
    commands = await session.run(["env"])
    init = await session.run(["sh", "-c", "tr '\\0' '\\n' < /proc/1/environ"])
    assert commands.exit_code == 0 and init.exit_code == 0, init.stderr
    assert "PATH=" in init.stdout
    return commands.stdout, init.stdout


def _env_value() -> str:
    return "envsecret-" + secrets.token_hex(16)


async def test_core_never_leaks(
    debug_logs: pytest.LogCaptureFixture, testbed_env: dict[str, str], sandbox_image: str
) -> None:
    key = testbed_env["OPEN_SANDBOX_API_KEY"]
    value = _env_value()
    wrong_key = "wrongkey-" + secrets.token_hex(16)
    evidence = Evidence()
    connection = Connection(api_key=key)
    session = AsyncSandboxSession(
        SandboxSpec(image=sandbox_image), connection=connection, env={"MY_TOKEN": value}
    )
    evidence.add(session, connection, session.spec)
    try:
        assert (
            await session.run(["sh", "-c", 'test "$MY_TOKEN" = "$1"', "sh", value])
        ).exit_code == 0
        await session.write_bytes("f.txt", b"data")
        assert await session.read_bytes("f.txt") == b"data"
        evidence.add(session, await session.stat("f.txt"), await session.run("false"))
        await evidence.expect_error(session.read_bytes("/missing/file"))
        await evidence.expect_error(session.run("sleep 5", timeout=0.5))
        await evidence.expect_error(session.run("true", env={"BAD=": value}))
        await evidence.expect_error(session.remove("/"))
        commands, init = await _sandbox_environment(session)
        assert key not in commands + init, "the API key reached the sandbox's environment"
        assert value in commands  # the user gave it to every command ...
        assert value not in init  # ... and only to commands
        bad = AsyncSandboxSession(
            SandboxSpec(image=sandbox_image), connection=Connection(api_key=wrong_key)
        )
        await evidence.expect_error(bad.run("true"))
        evidence.add(bad)
        await evidence.expect_error(
            AsyncSandboxSession.attach("no-such-sandbox", connection=connection).run("true")
        )
    finally:
        await session.destroy()
    evidence.add(session)
    evidence.check(debug_logs, key, value, wrong_key)


async def test_pydantic_ai_never_leaks(
    debug_logs: pytest.LogCaptureFixture, testbed_env: dict[str, str], sandbox_image: str
) -> None:
    from opensandbox.config import ConnectionConfig
    from pydantic_ai.workspaces import WorkspaceRef

    from pydantic_ai_opensandbox import OpenSandbox, OpenSandboxBackend

    key = testbed_env["OPEN_SANDBOX_API_KEY"]
    value = _env_value()
    evidence = Evidence()
    config = ConnectionConfig(domain=testbed_env["OPEN_SANDBOX_DOMAIN"], api_key=key)
    backend = OpenSandboxBackend(image=sandbox_image, connection=config, env={"MY_TOKEN": value})
    capability = OpenSandbox(image=sandbox_image, connection=config, env={"MY_TOKEN": value})
    evidence.add(backend, capability)
    try:
        result = await backend.run(["sh", "-c", 'test "$MY_TOKEN" = "$1"', "sh", value])
        assert result.exit_code == 0
        await backend.write_bytes("f.txt", b"data")
        assert await backend.read_bytes("f.txt") == b"data"
        evidence.add(backend, result, await backend.stat("f.txt"))
        await evidence.expect_error(backend.read_bytes("/missing/file"))
        await evidence.expect_error(backend.run(["sleep", "5"], timeout=0.5))
        await evidence.expect_error(backend.run(["true"], env={"BAD=": value}))
        commands, init = await _sandbox_environment(backend.session)
        assert key not in commands, "the API key reached a command's environment"
        assert key not in init, "the API key reached the container's environment"
        assert value in commands and value not in init
        assert backend.ref is not None
        gone = OpenSandboxBackend(
            ref=WorkspaceRef(provider="opensandbox", id="no-such-sandbox"), connection=config
        )
        await evidence.expect_error(gone.run(["true"]))
        await gone.aclose()
    finally:
        await backend.aclose()
        await backend.session.destroy()
    evidence.check(debug_logs, key, value)


async def test_deepagents_never_leaks(
    debug_logs: pytest.LogCaptureFixture, testbed_env: dict[str, str], sandbox_image: str
) -> None:
    from deepagents_opensandbox_backend import OpenSandboxBackend

    key = testbed_env["OPEN_SANDBOX_API_KEY"]
    value = _env_value()
    evidence = Evidence()
    backend = await OpenSandboxBackend.acreate(
        image=sandbox_image, api_key=key, env={"MY_TOKEN": value}
    )
    evidence.add(backend)
    try:
        evidence.add(await backend.aexecute("echo hi; false"))
        evidence.add(await backend.aupload_files([("/tmp/f", b"x"), ("rel", b"y")]))
        evidence.add(await backend.adownload_files(["/tmp/f", "/missing"]))
        evidence.add(await backend.aexecute("sleep 5", timeout=1))
        await evidence.expect_error(backend.aexecute("true", timeout=-1))
        await evidence.expect_error(OpenSandboxBackend.aconnect("no-such-sandbox", api_key=key))
        commands, init = await _sandbox_environment(backend.session)
        assert key not in commands + init, "the API key reached the sandbox's environment"
        # The user put MY_TOKEN into the container's env (create(env=...)): it is there, as asked.
        assert value in init
    finally:
        await backend.akill()
    evidence.check(debug_logs, key, value)
