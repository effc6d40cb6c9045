"""The error boundary (`_errors.from_foreign`, `from_execd_response`): issue 14's error table offline.

Real failures where a loopback socket can make them (refused port, TLS to a plain-HTTP server),
`httpx.MockTransport` or the SDK's exported exception classes otherwise. Each row asserts the
message (address named, fix named, no key) and, where it matters, whether it may be retried.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from opensandbox.exceptions import (
    InvalidArgumentException,
    SandboxApiException,
    SandboxConnectionException,
    SandboxError,
    SandboxReadyTimeoutException,
    SandboxTimeoutException,
)

from opensandbox_core import (
    AuthenticationError,
    ConfigurationError,
    Connection,
    OpenSandboxError,
    SandboxUnavailableError,
    ServerError,
)
from opensandbox_core._errors import (
    from_execd_response,
    from_foreign,
    is_connect_error,
    is_lost_response,
    parse_error_body,
    translate,
)

SECRET = "sk-boundary-secret-0123456789"


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


async def _fail_request(url: str) -> httpx.HTTPError:
    async with httpx.AsyncClient(timeout=5) as client:
        try:
            await client.get(url)
        except httpx.HTTPError as exc:
            return exc
    raise AssertionError(f"GET {url} did not fail")


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
    foreign = await _fail_request(f"http://127.0.0.1:{port}/v1/sandboxes")
    error = from_foreign(foreign, operation="create a sandbox")
    assert time.monotonic() - started < 2
    assert isinstance(error, ServerError) and error.retryable
    message = str(error)
    assert f"http://127.0.0.1:{port}" in message
    assert "connection refused" in message and "OPEN_SANDBOX_DOMAIN" in message
    assert "image" not in message
    assert is_connect_error(foreign) and not is_lost_response(foreign)


async def test_address_falls_back_to_the_connection_when_the_request_is_unknown() -> None:
    error = from_foreign(
        httpx.ConnectError("All connection attempts failed"),
        operation="list sandboxes",
        address=Connection(domain="10.1.2.3:9999").display_address(),
    )
    assert "http://10.1.2.3:9999" in str(error)


def test_unknown_host_is_named_and_not_retried() -> None:
    request = httpx.Request("POST", "http://no-such-host.invalid:8080/v1/sandboxes")
    foreign = httpx.ConnectError("[Errno -2] Name or service not known", request=request)
    foreign.__context__ = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    error = from_foreign(foreign, operation="create a sandbox")
    assert isinstance(error, ServerError) and not error.retryable
    assert "http://no-such-host.invalid:8080 could not be resolved" in str(error)
    assert "OPEN_SANDBOX_DOMAIN" in str(error)


async def test_https_to_a_plain_http_server_is_not_retryable(plain_http_port: int) -> None:
    foreign = await _fail_request(f"https://127.0.0.1:{plain_http_port}/health")
    error = from_foreign(foreign, operation="list sandboxes")
    assert isinstance(error, ServerError)
    assert error.retryable is False
    message = str(error)
    assert f"https://127.0.0.1:{plain_http_port}" in message
    assert "plain http" in message and "Drop https://" in message
    assert f"127.0.0.1:{plain_http_port})" in message  # the domain to use instead


def test_an_sdk_wrapped_failure_is_described_once_without_the_sdk_text() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/sandboxes")
    cause = httpx.ConnectError("All connection attempts failed", request=request)
    sdk = SandboxConnectionException(
        message="Network connectivity error: All connection attempts failed",
        cause=cause,
        is_retryable=True,
    )
    message = str(from_foreign(sdk, operation="create a sandbox"))
    assert "Network connectivity error" not in message
    assert message.count("http://127.0.0.1:1") == 1


def test_a_server_that_never_answers_is_a_retryable_timeout() -> None:
    request = httpx.Request("GET", "http://127.0.0.1:8080/v1/sandboxes")
    sdk = SandboxTimeoutException(
        "Request timed out", cause=httpx.ReadTimeout("x", request=request)
    )
    error = from_foreign(sdk, operation="list sandboxes")
    assert isinstance(error, ServerError) and error.retryable
    assert "http://127.0.0.1:8080 accepted the connection but did not answer" in str(error)
    assert is_lost_response(sdk) and not is_connect_error(sdk)


# -- API key rows ------------------------------------------------------------------------------


def _api_error(status: int, code: str, text: str) -> SandboxApiException:
    return SandboxApiException(text, status_code=status, error=SandboxError(code, text))


def test_no_key_sent_never_says_the_key_was_refused() -> None:
    missing = _api_error(401, "MISSING_API_KEY", "Authentication credentials are missing.")
    error = from_foreign(missing, operation="create a sandbox")
    assert isinstance(error, AuthenticationError)
    assert "refused the API key" not in str(error)
    assert "none was sent" in str(error)
    assert "OPEN_SANDBOX_API_KEY" in str(error) and "api_key=" in str(error)


def test_a_wrong_key_says_it_was_refused_without_printing_it() -> None:
    wrong = _api_error(401, "INVALID_API_KEY", f"key {SECRET} is invalid")
    error = from_foreign(wrong, operation="create a sandbox")
    assert isinstance(error, AuthenticationError)
    assert "refused the API key" in str(error)
    assert SECRET not in str(error) and SECRET not in repr(error)


def test_the_key_header_of_the_request_decides_when_the_server_does_not_say() -> None:
    for headers, expected in (({"OPEN-SANDBOX-API-KEY": SECRET}, "refused"), ({}, "none was")):
        request = httpx.Request("GET", "http://127.0.0.1:8080/v1/sandboxes", headers=headers)
        response = httpx.Response(403, json={"detail": "forbidden"}, request=request)
        foreign = httpx.HTTPStatusError("403", request=request, response=response)
        message = str(from_foreign(foreign, operation="list sandboxes"))
        assert expected in message and SECRET not in message
    unknown = from_foreign(_api_error(401, "", "no"), operation="x")
    assert "refused the API key" not in str(unknown) and "OPEN_SANDBOX_API_KEY" in str(unknown)


def test_the_caller_may_say_whether_a_key_was_sent() -> None:
    error = from_foreign(_api_error(401, "", "no"), operation="x", key_sent=False)
    assert "none was sent" in str(error)


# -- chains and SDK classes --------------------------------------------------------------------


def test_a_looping_foreign_chain_is_cut_and_the_result_chain_ends() -> None:
    first, second = httpx.ConnectError("a"), httpx.ConnectError("b")
    first.__cause__, second.__cause__ = second, first
    error = from_foreign(first, operation="x")
    assert error.__cause__ is first
    assert _chain_length(error) == 3


def test_raising_the_result_inside_the_handler_keeps_a_finite_chain() -> None:
    def fail() -> None:
        try:
            raise SandboxApiException("gone", status_code=404)
        except SandboxApiException as exc:
            raise from_foreign(exc, operation="run", sandbox_id="sb-1")  # noqa: B904

    with pytest.raises(SandboxUnavailableError) as info:
        fail()
    assert info.value.sandbox_id == "sb-1"
    assert _chain_length(info.value) == 2


def test_an_error_of_ours_comes_back_unchanged_and_translate_does_not_loop() -> None:
    ours = ServerError("boom")
    assert from_foreign(ours, operation="x") is ours

    def again() -> None:
        try:
            raise ours
        except ServerError as exc:
            translate(exc, action="x")

    with pytest.raises(ServerError) as info:
        again()
    assert info.value is ours and _chain_length(ours) == 1


def test_translate_raises_path_errors_as_they_are_and_network_oserrors_translated() -> None:
    missing = FileNotFoundError(2, "No such file or directory", "/x")
    with pytest.raises(FileNotFoundError):
        translate(missing, action="read a file")
    with pytest.raises(ServerError, match="connection refused"):
        translate(ConnectionRefusedError(111, "Connection refused"), action="read a file")


def test_sdk_classes_map_by_isinstance() -> None:
    argument = from_foreign(InvalidArgumentException("bad image"), operation="create a sandbox")
    assert isinstance(argument, ConfigurationError) and "bad image" in str(argument)
    ready = from_foreign(SandboxReadyTimeoutException("slow"), operation="start", sandbox_id="s")
    assert isinstance(ready, SandboxUnavailableError) and ready.sandbox_id == "s"
    busy = from_foreign(_api_error(503, "", "busy"), operation="x")
    assert isinstance(busy, ServerError) and busy.retryable and busy.status_code == 503
    assert is_lost_response(busy.__cause__)  # type: ignore[arg-type]


def test_an_html_page_is_named_not_pasted() -> None:
    page = b"<!DOCTYPE html><html>" + b"x" * 5000 + b"</html>"
    request = httpx.Request("GET", "http://127.0.0.1:3000/v1/sandboxes")
    response = httpx.Response(404, content=page, request=request)
    error = from_foreign(
        httpx.HTTPStatusError("404", request=request, response=response), operation="x"
    )
    assert "HTML page" in str(error) and "<html" not in str(error)


# -- execd answers -----------------------------------------------------------------------------


def test_execd_answers_map_to_the_tree() -> None:
    def answer(status: int, body: bytes) -> OpenSandboxError:
        return from_execd_response(
            status, body, operation="run a command", address="http://h:1", sandbox_id="sb"
        )

    own = answer(400, b'{"code": "INVALID_REQUEST", "message": "bad cwd"}')
    assert isinstance(own, ServerError) and own.status_code == 400 and not own.retryable
    assert "bad cwd" in str(own)
    gone = answer(404, b'{"detail": {"code": "SANDBOX_NOT_FOUND", "message": "no"}}')
    assert isinstance(gone, SandboxUnavailableError) and gone.sandbox_id == "sb"
    busy = answer(503, b"upstream unavailable")
    assert isinstance(busy, ServerError) and busy.retryable and "http://h:1" in str(busy)
    page = answer(502, b"<html>" + b"x" * 3000)
    assert "HTML page" in str(page) and "xxxx" not in str(page)
    assert isinstance(answer(401, b"{}"), AuthenticationError)
    assert parse_error_body(b'{"code": "DOCKER::FAIL", "message": "m"}') == (
        "DOCKER::FAIL",
        "m",
        False,
    )


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


_LOG_SCRIPT = """
import logging, sys
from opensandbox_core import Connection
if sys.argv[1] == "configured":
    Connection(domain="127.0.0.1:1", api_key="k").build_sdk_config()
logging.getLogger("opensandbox.transport._async_retry").warning("retrying POST x")
"""


@pytest.mark.parametrize(("mode", "printed"), [("bare", True), ("configured", False)])
def test_sdk_log_lines_stay_off_stderr_unless_logging_is_configured(
    mode: str, printed: bool
) -> None:
    # In a fresh interpreter: pytest's own log capture would hide the fallback printing here.
    done = subprocess.run(
        [sys.executable, "-c", _LOG_SCRIPT, mode], capture_output=True, text=True, check=True
    )
    assert ("retrying POST" in done.stderr) is printed


def test_translate_passes_the_address_and_key_knowledge_on() -> None:
    with pytest.raises(ServerError, match=r"at http://10\.0\.0\.9:8080 \(connection refused\)"):
        translate(httpx.ConnectError("x"), action="list sandboxes", address="http://10.0.0.9:8080")
    with pytest.raises(AuthenticationError, match="none was sent"):
        translate(_api_error(401, "", "no"), action="list sandboxes", key_sent=False)
