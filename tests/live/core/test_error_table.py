"""Issue 14's error table, live: each common mistake gets a clear error in the time it takes to know.

Every row starts a session the way a user would and asserts the message (address tried, the
setting to fix, never the key), whether the error may be retried, and the time to error. None of
them creates a sandbox: each fails before the server would make one.
"""

from __future__ import annotations

import socket
import time
import warnings

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    AuthenticationError,
    Connection,
    InsecureSandboxWarning,
    OpenSandboxError,
    SandboxSpec,
    ServerError,
)

# Connection failures go through the SDK's three retries (about 2.5 s of backoff); the rest is
# client start-up on a shared machine.
FAST = 8.0


async def _start_error(connection: Connection, image: str) -> tuple[OpenSandboxError, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureSandboxWarning)
        session = AsyncSandboxSession(SandboxSpec(image=image), connection=connection)
        started = time.monotonic()
        try:
            await session.start()
        except OpenSandboxError as exc:
            await session.aclose()
            return exc, time.monotonic() - started
    await session.destroy()
    raise AssertionError("the session started although the settings are wrong")


def _assert_chain_ends(exc: BaseException) -> None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None:
        assert id(current) not in seen, "the exception chain loops"
        seen.add(id(current))
        current = current.__cause__ or current.__context__


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_wrong_port_names_the_address_and_the_fix(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    port = _closed_port()
    connection = Connection(domain=f"127.0.0.1:{port}", api_key=testbed_env["OPEN_SANDBOX_API_KEY"])
    error, took = await _start_error(connection, sandbox_image)
    assert isinstance(error, ServerError) and error.retryable
    message = str(error)
    assert f"http://127.0.0.1:{port}" in message
    assert "connection refused" in message and "OPEN_SANDBOX_DOMAIN" in message
    assert "Network connectivity error" not in message  # the SDK's text is not repeated
    assert took < FAST
    _assert_chain_ends(error)


async def test_unknown_host_is_named_and_not_retried(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    connection = Connection(
        domain="no-such-host.invalid:8080", api_key=testbed_env["OPEN_SANDBOX_API_KEY"]
    )
    error, took = await _start_error(connection, sandbox_image)
    assert isinstance(error, ServerError)
    assert not error.retryable  # a name that does not exist will not exist on the next try
    assert "http://no-such-host.invalid:8080 could not be resolved" in str(error)
    assert "OPEN_SANDBOX_DOMAIN" in str(error)
    assert took < FAST


async def test_https_to_the_plain_http_server_is_not_retryable(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    domain = testbed_env["OPEN_SANDBOX_DOMAIN"]
    connection = Connection(domain=f"https://{domain}", api_key=testbed_env["OPEN_SANDBOX_API_KEY"])
    error, took = await _start_error(connection, sandbox_image)
    assert isinstance(error, ServerError)
    assert error.retryable is False  # durable engines must not retry this forever
    message = str(error)
    assert f"https://{domain}" in message and "plain http" in message
    assert f"(use {domain})" in message
    assert took < FAST
    _assert_chain_ends(error)


async def test_no_key_says_none_was_sent_and_how_to_give_one(
    testbed_env: dict[str, str], sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPEN_SANDBOX_API_KEY", raising=False)
    connection = Connection(domain=testbed_env["OPEN_SANDBOX_DOMAIN"])
    error, took = await _start_error(connection, sandbox_image)
    assert isinstance(error, AuthenticationError)
    message = str(error)
    assert "refused the API key" not in message
    assert "none was sent" in message
    assert "OPEN_SANDBOX_API_KEY" in message and "api_key=" in message
    assert took < 3
    _assert_chain_ends(error)


async def test_a_wrong_key_is_refused_and_never_printed(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    wrong = "wrong-key-" + "7" * 24
    connection = Connection(domain=testbed_env["OPEN_SANDBOX_DOMAIN"], api_key=wrong)
    error, took = await _start_error(connection, sandbox_image)
    assert isinstance(error, AuthenticationError)
    assert "refused the API key" in str(error)
    assert wrong not in str(error) and wrong not in repr(error)
    assert testbed_env["OPEN_SANDBOX_API_KEY"] not in str(error)
    assert took < 3
