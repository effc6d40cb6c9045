"""The error boundary (`_errors.from_foreign`) through the public API: issue 14's error table
offline, as a caller of `list_sandboxes`, `destroy_sandbox` or a session sees it.

Real failures where a loopback socket can make them (refused port, TLS to a plain-HTTP server);
otherwise the `Connection`'s transport answers or fails the way a server or network would, and
the SDK and the core do the rest on their production paths. Each row asserts the message
(address named, fix named, no key), whether it may be retried, and a chain that ends. execd's
answers are covered in `test_execd_error_bodies.py`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    AuthenticationError,
    ConfigurationError,
    Connection,
    OpenSandboxError,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)
from opensandbox_core._errors import from_foreign, is_connect_error, is_lost_response
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes
from opensandbox_core.testing import FakeOpenSandbox

SECRET = "sk-boundary-secret-0123456789"

Handler = Callable[[httpx.Request], httpx.Response]


def _chain_length(exc: BaseException) -> int:
    """How many exceptions the chain holds; fails the test if it loops."""
    seen: list[int] = []
    current: BaseException | None = exc
    while current is not None:
        assert id(current) not in seen, "the exception chain loops"
        seen.append(id(current))
        current = current.__cause__ or current.__context__
    return len(seen)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _raising(exc: Callable[[httpx.Request], Exception]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc(request)

    return handler


async def _listing_error(
    handler: Handler | None = None, *, domain: str = "10.1.2.3:9999", api_key: str | None = SECRET
) -> OpenSandboxError:
    """What `list_sandboxes` raises against `domain`: answered by `handler` when given, else over
    a real socket (a transport of the caller's: the SDK's retries of its own stay out)."""
    transport = httpx.MockTransport(handler) if handler else httpx.AsyncHTTPTransport()
    connection = Connection(domain=domain, api_key=api_key, transport=transport)
    try:
        with pytest.raises(OpenSandboxError) as caught:
            await list_sandboxes(connection)
    finally:
        await transport.aclose()
    error = caught.value
    assert SECRET not in str(error) and SECRET not in repr(error)
    assert _chain_length(error) >= 2  # the foreign failure is kept as the cause
    return error


@pytest.fixture
async def plain_http_port() -> AsyncIterator[int]:
    """A loopback server that answers every connection with a plain-HTTP 400, like uvicorn."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield int(port)
    finally:
        server.close()
        await server.wait_closed()


# -- transport rows ----------------------------------------------------------------------------


async def test_refused_port_names_the_address_and_the_fix_fast() -> None:
    port = _free_port()
    started = time.monotonic()
    error = await _listing_error(domain=f"127.0.0.1:{port}")
    assert time.monotonic() - started < 2
    assert isinstance(error, ServerError) and error.retryable
    message = str(error)
    assert message.startswith("Could not list sandboxes: nothing accepted the connection at ")
    assert f"http://127.0.0.1:{port}" in message
    assert "connection refused" in message and "OPEN_SANDBOX_DOMAIN" in message
    assert error.__cause__ is not None
    assert is_connect_error(error.__cause__) and not is_lost_response(error.__cause__)


async def test_a_refused_create_is_reported_as_such_not_recovered() -> None:
    requests: list[str] = []

    def refused(request: httpx.Request) -> Exception:
        requests.append(request.method)
        return httpx.ConnectError("All connection attempts failed", request=request)

    transport = httpx.MockTransport(_raising(refused))
    connection = Connection(domain="10.1.2.3:9999", api_key=SECRET, transport=transport)
    with pytest.raises(ServerError) as caught:
        async with AsyncSandboxSession(SandboxSpec(image="img"), connection=connection) as sb:
            await sb.commands.run("true")
    assert str(caught.value).startswith(
        "Could not create a sandbox from image 'img': nothing accepted the connection at "
        "http://10.1.2.3:9999 (connection refused)."
    )
    assert requests == ["POST"]  # never sent: no search for a sandbox it might have made


async def test_unknown_host_is_named_and_not_retried() -> None:
    def unknown(request: httpx.Request) -> Exception:
        error = httpx.ConnectError("[Errno -2] Name or service not known", request=request)
        error.__context__ = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return error

    error = await _listing_error(_raising(unknown), domain="no-such-host.invalid:8080")
    assert isinstance(error, ServerError) and not error.retryable
    assert "http://no-such-host.invalid:8080 could not be resolved" in str(error)
    assert "OPEN_SANDBOX_DOMAIN" in str(error)


async def test_https_to_a_plain_http_server_is_not_retryable(plain_http_port: int) -> None:
    error = await _listing_error(domain=f"https://127.0.0.1:{plain_http_port}")
    assert isinstance(error, ServerError)
    assert error.retryable is False
    message = str(error)
    assert f"https://127.0.0.1:{plain_http_port}" in message
    assert "plain http" in message and "Drop https://" in message
    assert f"127.0.0.1:{plain_http_port})" in message  # the domain to use instead


async def test_an_sdk_wrapped_failure_is_described_once_without_the_sdk_text() -> None:
    def refused(request: httpx.Request) -> Exception:
        return httpx.ConnectError("All connection attempts failed", request=request)

    message = str(await _listing_error(_raising(refused)))
    assert "Network connectivity error" not in message  # the SDK's own wording
    assert message.count("http://10.1.2.3:9999") == 1


async def test_a_server_that_never_answers_is_a_retryable_timeout() -> None:
    error = await _listing_error(_raising(lambda r: httpx.ReadTimeout("slow", request=r)))
    assert isinstance(error, ServerError) and error.retryable
    assert "http://10.1.2.3:9999 accepted the connection but did not answer" in str(error)
    assert error.__cause__ is not None and is_lost_response(error.__cause__)


# -- answers of the server ---------------------------------------------------------------------


def _answer(status: int, body: object) -> Handler:
    return lambda request: httpx.Response(status, json=body)


async def test_no_key_sent_never_says_the_key_was_refused() -> None:
    missing = {"code": "MISSING_API_KEY", "message": "Authentication credentials are missing."}
    error = await _listing_error(_answer(401, missing), api_key=None)
    assert isinstance(error, AuthenticationError)
    assert "refused the API key" not in str(error)
    assert "none was sent" in str(error)
    assert "OPEN_SANDBOX_API_KEY" in str(error) and "api_key=" in str(error)


async def test_a_wrong_key_says_it_was_refused_without_printing_it() -> None:
    wrong = {"code": "INVALID_API_KEY", "message": f"key {SECRET} is invalid"}
    error = await _listing_error(_answer(401, wrong))
    assert isinstance(error, AuthenticationError)
    assert "refused the API key" in str(error)


async def test_a_refusal_that_does_not_say_why_names_both_causes() -> None:
    error = await _listing_error(_answer(403, {"detail": "forbidden"}))
    assert isinstance(error, AuthenticationError)
    assert "no API key was sent, or it is not the server's" in str(error)
    assert "OPEN_SANDBOX_API_KEY" in str(error)


async def test_a_busy_server_is_retryable_and_a_bad_request_is_not() -> None:
    busy = await _listing_error(_answer(503, {"code": "UNAVAILABLE", "message": "busy"}))
    assert isinstance(busy, ServerError) and busy.retryable and busy.status_code == 503
    assert busy.__cause__ is not None and is_lost_response(busy.__cause__)
    bad = await _listing_error(_answer(400, {"code": "INVALID_ARGUMENT", "message": "bad"}))
    assert isinstance(bad, ServerError) and not bad.retryable and bad.status_code == 400


async def test_an_html_page_is_named_not_pasted() -> None:
    page = b"<!DOCTYPE html><html>" + b"x" * 5000 + b"</html>"
    error = await _listing_error(lambda request: httpx.Response(404, content=page))
    assert "HTML page" in str(error) and "<html" not in str(error)


async def test_a_value_the_sdk_rejects_is_a_configuration_error() -> None:
    error = await _listing_error(_answer(200, {"items": "not a list"}))
    assert isinstance(error, ConfigurationError)
    assert str(error).startswith("Could not list sandboxes: ")


# -- sandboxes the server does not know --------------------------------------------------------


async def test_attaching_to_a_missing_sandbox_says_so_once() -> None:
    fake = FakeOpenSandbox()
    session = AsyncSandboxSession.attach("sbx-missing", connection=fake.connection())
    with pytest.raises(SandboxUnavailableError) as caught:
        await session.commands.run("true")
    assert caught.value.sandbox_id == "sbx-missing"
    assert str(caught.value) == (
        "Sandbox sbx-missing was not found: it was deleted or has expired. "
        "Attaching never creates a replacement."
    )
    assert await destroy_sandbox("sbx-missing", fake.connection()) is False
    assert fake.deleted == []


async def test_a_sandbox_deleted_under_a_session_is_unavailable_with_a_finite_chain() -> None:
    fake = FakeOpenSandbox()
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        await sb.commands.run("true")
        assert sb.id is not None
        fake.sandboxes.pop(sb.id)  # deleted by someone else: execd no longer answers
        with pytest.raises(SandboxUnavailableError) as caught:
            await sb.commands.run("true")
        assert caught.value.sandbox_id == sb.id
        assert str(caught.value) == (
            f"Sandbox {sb.id} is gone (deleted, expired or its daemon died): could not run a "
            "command."
        )
        assert isinstance(caught.value.__cause__, httpx.ConnectError)
        assert _chain_length(caught.value) == 2


# -- a guard no production path reaches offline ------------------------------------------------


def test_a_looping_foreign_chain_is_cut_and_the_result_chain_ends() -> None:
    first, second = httpx.ConnectError("a"), httpx.ConnectError("b")
    first.__cause__, second.__cause__ = second, first
    error = from_foreign(first, operation="x")
    assert error.__cause__ is first
    assert _chain_length(error) == 3


# -- display address and the SDK's log lines ---------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "shown"),
    [
        ("localhost:8080", "http://localhost:8080"),
        ("https://sandbox.example.com/", "https://sandbox.example.com"),
        (f"https://user:{SECRET}@h.example:8443/base?k={SECRET}", "https://h.example:8443"),
        ("[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_display_address_is_scheme_host_port_only(domain: str, shown: str) -> None:
    connection = Connection(domain=domain, api_key=SECRET)
    assert connection.display_address() == shown


def test_sdk_log_lines_stay_off_stderr_unless_logging_is_configured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # As in a fresh interpreter: no handler from the SDK's logger up to the root (pytest's log
    # capture, a NullHandler an earlier test's session added: set aside meanwhile), so Python's
    # fallback prints a line to stderr until the core configures the SDK.
    retry = logging.getLogger("opensandbox.transport._async_retry")
    chain = [retry, logging.getLogger("opensandbox.transport"), logging.getLogger("opensandbox")]
    chain.append(logging.getLogger())
    kept = [(logger, logger.handlers) for logger in chain]
    try:
        for logger in chain:
            logger.handlers = []
        capsys.readouterr()
        retry.warning("retrying POST bare")
        assert "retrying POST bare" in capsys.readouterr().err
        Connection(domain="127.0.0.1:1", api_key="k").build_sdk_config()
        retry.warning("retrying POST configured")
        assert "retrying POST" not in capsys.readouterr().err
    finally:
        for logger, handlers in kept:
            logger.handlers = handlers
