"""The API key and env values never leak: not to logs at any level (ours, httpx, httpcore, the
SDK's), reprs, exception messages or tracebacks, nor into the sandbox's environment unless the
user put them there. A realistic scenario per package, with its failures, is searched for both."""

from __future__ import annotations

import logging
import secrets
import shlex
import traceback
from typing import Any

import pytest
from _drivers import PACKAGES, open_driver

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral

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
        else:
            raise AssertionError(f"expected an error from {coro!r}")

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
    commands = await session.commands.run(["env"])
    init = await session.commands.run(["sh", "-c", "tr '\\0' '\\n' < /proc/1/environ"])
    assert commands.exit_code == 0 and init.exit_code == 0, init.stderr
    assert "PATH=" in init.stdout
    return commands.stdout, init.stdout


def _env_value() -> str:
    return "envsecret-" + secrets.token_hex(16)


@pytest.mark.parametrize("package", PACKAGES)
async def test_never_leaks(
    package: str,
    debug_logs: pytest.LogCaptureFixture,
    testbed_env: dict[str, str],
    sandbox_image: str,
) -> None:
    """One scenario for the core and each adapter (drivers in tests/live/_drivers.py): a
    sandbox with a secret env value, commands, files, failures of each kind, a wrong key and a
    missing sandbox; then every log record, repr, message and traceback is searched."""
    key = testbed_env["OPEN_SANDBOX_API_KEY"]
    value = _env_value()
    wrong_key = "wrongkey-" + secrets.token_hex(16)
    evidence = Evidence()
    async with open_driver(package, sandbox_image, env={"MY_TOKEN": value}, api_key=key) as driver:
        evidence.add(driver.backend, driver.session, driver.session.connection)
        code, _ = await driver.run(f'test "$MY_TOKEN" = {shlex.quote(value)}', 30)
        assert code == 0, "the env value did not reach the command"
        await driver.write("f.txt", b"data")
        assert await driver.read("f.txt") == b"data"
        evidence.add(driver.backend, await driver.run("false", 30))
        await evidence.expect_error(driver.read("/missing/file"))
        if package == "deepagents":  # a timed-out execute is a response, not an error
            evidence.add(await driver.backend.aexecute("sleep 5", timeout=1))
        else:
            await evidence.expect_error(driver.run("sleep 5", 0.5))
        await evidence.expect_error(driver.session.commands.run("true", env={"BAD=": value}))
        await evidence.expect_error(driver.session.files.remove("/"))
        if package == "deepagents":
            backend = driver.backend
            evidence.add(await backend.aexecute("echo hi; false"))
            evidence.add(await backend.aupload_files([("/tmp/f", b"x"), ("rel", b"y")]))
            evidence.add(await backend.adownload_files(["/tmp/f", "/missing"]))
            await evidence.expect_error(backend.aexecute("true", timeout=-1))
        elif package == "pydantic_ai":
            await evidence.expect_error(driver.backend.run(["true"], env={"BAD=": value}))
            evidence.add(await driver.backend.stat("f.txt"))
        commands, init = await _sandbox_environment(driver.session)
        assert key not in commands, "the API key reached a command's environment"
        assert key not in init, "the API key reached the container's environment"
        assert value in commands  # the user gave it to every command ...
        # ... and `env` means that in every package: never the container's own environment.
        assert value not in init
        await evidence.expect_error(driver.attach_missing())
        bad = AsyncSandboxSession(
            SandboxSpec(image=sandbox_image), connection=Connection(api_key=wrong_key)
        )
        await evidence.expect_error(bad.commands.run("true"))
        evidence.add(bad)
    evidence.add(driver.backend, driver.session)
    evidence.check(debug_logs, key, value, wrong_key)
