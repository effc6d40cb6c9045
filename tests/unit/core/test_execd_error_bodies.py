"""execd error answers are parsed once (`_errors.parse_error_body`) and translated once
(`_errors.from_execd_response`), whether they reach the caller through `ExecdClient` or not."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from opensandbox_core import SandboxUnavailableError, ServerError
from opensandbox_core._errors import from_execd_response, parse_error_body
from opensandbox_core._wire._execd import ExecdClient, ExecdEndpoint, ExecdError

LONG = "/workspace/" + "x" * 700


def _client(status: int, body: bytes) -> ExecdClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body)

    endpoint = ExecdEndpoint(base_url="http://execd.test", headers={})
    return ExecdClient(endpoint, transport=httpx.MockTransport(answer), request_timeout=5)


def _raised(status: int, body: bytes) -> ExecdError:
    async def call() -> ExecdError:
        client = _client(status, body)
        try:
            with pytest.raises(ExecdError) as caught:
                await client.info(["/x"])
        finally:
            await client.aclose()
        return caught.value

    return asyncio.run(call())


def test_the_client_parses_bodies_like_the_boundary() -> None:
    body = json.dumps({"code": "RUNTIME_ERROR", "message": f"lstat {LONG}: file name too long"})
    exc = _raised(500, body.encode())
    code, message, from_execd = parse_error_body(body.encode(), limit=None)
    assert (exc.status, exc.code, exc.message, exc.from_execd) == (500, code, message, from_execd)
    assert exc.from_execd and exc.message.endswith("file name too long")  # kept whole
    assert len(parse_error_body(body.encode())[1]) == 500  # shown cut, as before


def test_proxy_and_plain_bodies() -> None:
    proxy = json.dumps({"detail": {"code": "SANDBOX::NOT_FOUND", "message": "no sandbox"}})
    exc = _raised(404, proxy.encode())
    assert (exc.code, exc.message, exc.from_execd) == ("SANDBOX::NOT_FOUND", "no sandbox", False)
    html = _raised(502, b"<html><body>bad gateway</body></html>")
    assert not html.from_execd and "HTML page" in html.message


def test_project_error_is_the_boundary_translation() -> None:
    body = json.dumps({"code": "INVALID_REQUEST", "message": "bad path"}).encode()
    exc = _raised(400, body)
    mapped = exc.project_error(operation="list a directory", address=None, sandbox_id="sb-1")
    same = from_execd_response(
        400, body, operation="list a directory", address=None, sandbox_id="sb-1"
    )
    assert isinstance(mapped, ServerError) and type(mapped) is type(same)
    assert str(mapped) == str(same) == "Could not list a directory in sandbox sb-1: bad path"
    gone = _raised(404, b'{"code": "SANDBOX::GONE", "message": "x"}').project_error(
        operation="read a file", address=None, sandbox_id="sb-1"
    )
    assert isinstance(gone, SandboxUnavailableError)
