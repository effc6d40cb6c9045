"""execd's error answers as a session's caller sees them: parsed once by the wire client and
translated once (`_errors.from_foreign`, through the lifecycle's `fail`).

Every test drives the public API (`AsyncSandboxSession` on `opensandbox_core.testing`'s fake)
and arms one execd route with the answer under test, so the production path runs end to end:
`ExecdClient` raises `ExecdError`, the facet hands it to `fail`, which asks the server whether
the sandbox is gone only when the answer alone cannot tell (counted here as `GET` requests of
the sandbox), and raises the project's error.
"""

from __future__ import annotations

import errno
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    AuthenticationError,
    Connection,
    SandboxSpec,
    SandboxUnavailableError,
    ServerError,
)
from opensandbox_core.testing import FakeOpenSandbox

LONG = "/workspace/" + "x" * 700
FILE = "/workspace/a.txt"


class Armed:
    """The fake's transport, where an armed execd route gets the armed answer once."""

    def __init__(self, fake: FakeOpenSandbox) -> None:
        self.fake = fake
        self._armed: dict[tuple[str, str], httpx.Response] = {}
        self.transport = httpx.MockTransport(self._handle)

    def arm(self, method: str, path: str, status: int, body: bytes | dict[str, object]) -> None:
        content = json.dumps(body).encode() if isinstance(body, dict) else body
        self._armed[(method, path)] = httpx.Response(status, content=content)

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.host.startswith("execd-"):
            answer = self._armed.pop((request.method, request.url.path), None)
            if answer is not None:
                return answer
        return await self.fake.transport.handle_async_request(request)


@pytest.fixture
def fake() -> FakeOpenSandbox:
    return FakeOpenSandbox()


@pytest.fixture
def armed(fake: FakeOpenSandbox) -> Armed:
    return Armed(fake)


@pytest.fixture
async def sb(fake: FakeOpenSandbox, armed: Armed) -> AsyncIterator[AsyncSandboxSession]:
    connection = Connection(domain=fake.domain, api_key=fake.api_key, transport=armed.transport)
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=connection) as session:
        await session.files.write_bytes(FILE, b"hi")  # started
        await session.files.exists("/workspace")  # the file API learnt
        yield session


def probes(fake: FakeOpenSandbox) -> int:
    """How many times the sandbox was looked up on the server (the gone probe does it once)."""
    return fake.count("get")


async def test_execd_refusing_the_request_is_a_server_error_without_a_probe(
    fake: FakeOpenSandbox, armed: Armed, sb: AsyncSandboxSession
) -> None:
    armed.arm("GET", "/files/info", 400, {"code": "INVALID_REQUEST", "message": "bad path"})
    before = probes(fake)
    with pytest.raises(ServerError) as caught:
        await sb.files.stat(FILE)
    assert str(caught.value) == f"Could not inspect a path in sandbox {sb.id}: bad path"
    assert caught.value.status_code == 400 and not caught.value.retryable
    assert caught.value.__cause__ is None  # execd's answer is the whole story
    assert probes(fake) == before


async def test_a_command_execd_refuses_names_the_command(
    fake: FakeOpenSandbox, armed: Armed, sb: AsyncSandboxSession
) -> None:
    armed.arm("POST", "/command", 400, {"code": "INVALID_REQUEST", "message": "bad body"})
    with pytest.raises(ServerError, match=rf"^Could not run a command in sandbox {sb.id}: bad"):
        await sb.commands.run("true")


@pytest.mark.parametrize(
    ("text", "cls", "code"),
    [
        (f"lstat {FILE}: permission denied", PermissionError, errno.EACCES),
        (f"open {FILE}: is a directory", IsADirectoryError, errno.EISDIR),
        # Matched on its end: the message is kept whole, not cut at 500 characters for display.
        (f"lstat {LONG}: file name too long", OSError, errno.ENAMETOOLONG),
    ],
)
async def test_path_texts_are_builtin_errors_of_the_callers_path(
    fake: FakeOpenSandbox,
    armed: Armed,
    sb: AsyncSandboxSession,
    text: str,
    cls: type[OSError],
    code: int,
) -> None:
    armed.arm("GET", "/files/download", 500, {"code": "RUNTIME_ERROR", "message": text})
    before = probes(fake)
    with pytest.raises(OSError) as caught:
        await sb.files.read_bytes(FILE)
    assert type(caught.value) is cls
    assert caught.value.errno == code and caught.value.filename == FILE
    assert probes(fake) == before


async def test_a_write_refused_for_its_temporary_file_names_the_callers_path(
    armed: Armed, sb: AsyncSandboxSession
) -> None:
    armed.arm(
        "POST",
        "/files/upload",
        500,
        {"code": "RUNTIME_ERROR", "message": "open /workspace/.a.txt.osb-1: permission denied"},
    )
    with pytest.raises(PermissionError) as caught:
        await sb.files.write_bytes(FILE, b"new" * 20_000)  # uploaded (over `_inline`'s size)
    assert caught.value.filename == FILE


async def test_execd_404_of_a_path_is_file_not_found(armed: Armed, sb: AsyncSandboxSession) -> None:
    armed.arm("GET", "/files/download", 404, {"code": "FILE_NOT_FOUND", "message": "gone"})
    with pytest.raises(FileNotFoundError) as caught:
        await sb.files.read_bytes(FILE)
    assert caught.value.errno == errno.ENOENT and caught.value.filename == FILE


async def test_a_proxy_error_asks_whether_the_sandbox_is_gone_and_names_the_address(
    fake: FakeOpenSandbox, armed: Armed, sb: AsyncSandboxSession
) -> None:
    armed.arm("GET", "/directories/list", 503, b"upstream unavailable")
    before = probes(fake)
    with pytest.raises(ServerError) as caught:
        await sb.files.list_dir("/workspace")
    message = str(caught.value)
    assert message.startswith(f"Could not list a directory in sandbox {sb.id}: HTTP 503 upstream")
    assert f"(http://execd-{sb.id}.fake:44772)" in message
    assert caught.value.status_code == 503 and caught.value.retryable
    assert probes(fake) == before + 1


async def test_an_html_page_is_named_not_pasted(armed: Armed, sb: AsyncSandboxSession) -> None:
    armed.arm("GET", "/directories/list", 502, b"<html><body>" + b"x" * 3000 + b"</body></html>")
    with pytest.raises(ServerError) as caught:
        await sb.files.list_dir("/workspace")
    assert "HTML page" in str(caught.value) and "xxxx" not in str(caught.value)
    assert caught.value.retryable


async def test_a_sandbox_deleted_meanwhile_is_unavailable(
    fake: FakeOpenSandbox, armed: Armed, sb: AsyncSandboxSession
) -> None:
    proxy = {"detail": {"code": "SANDBOX::NOT_FOUND", "message": "no sandbox"}}
    armed.arm("GET", "/directories/list", 404, proxy)
    assert sb.id is not None
    fake.sandboxes.pop(sb.id)  # deleted by someone else: the server no longer knows it
    with pytest.raises(SandboxUnavailableError) as caught:
        await sb.files.list_dir("/workspace")
    assert caught.value.sandbox_id == sb.id
    assert str(caught.value) == (
        f"Sandbox {sb.id} is gone (deleted, expired or its daemon died): could not list a "
        "directory."
    )


async def test_a_refused_api_key_at_the_proxy_is_an_authentication_error(
    fake: FakeOpenSandbox, armed: Armed, sb: AsyncSandboxSession
) -> None:
    armed.arm("GET", "/directories/list", 401, {"code": "MISSING_API_KEY", "message": "no key"})
    before = probes(fake)
    with pytest.raises(AuthenticationError, match="none was sent") as caught:
        await sb.files.list_dir("/workspace")
    assert "OPEN_SANDBOX_API_KEY" in str(caught.value)
    assert probes(fake) == before


async def test_a_background_status_error_is_translated_by_the_same_boundary(
    fake: FakeOpenSandbox, armed: Armed, sb: AsyncSandboxSession
) -> None:
    process = await sb.commands.start_background("true")
    armed.arm("GET", f"/command/status/{process.id}", 500, {"code": "X", "message": "boom"})
    with pytest.raises(ServerError) as caught:
        await process.status()
    assert str(caught.value) == (
        f"Could not read a background process's status in sandbox {sb.id}: HTTP 500 boom"
    )
    assert caught.value.status_code == 500 and not caught.value.retryable
