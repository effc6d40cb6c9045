"""The wire facet offline: one body builder, no command POST sent twice, bounded waits."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from datetime import timedelta
from http import HTTPStatus

import httpx
import pytest
from opensandbox.transport import RetryAsyncTransport, RetryPolicy

from opensandbox_core import AsyncSandboxSession, Connection, OpenSandboxError, SandboxSpec
from opensandbox_core._commands._background import ProcessStatus
from opensandbox_core._lifecycle._sandbox import SandboxLifecycle
from opensandbox_core._wire._events import CommandEvents, command_body, timeout_ms
from opensandbox_core.testing import FakeOpenSandbox, FakeOutcome
from opensandbox_core.testing._model import FakeCommand

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")


def test_one_body_builder_rounds_milliseconds_up() -> None:
    assert timeout_ms(0.0001) == 1
    assert timeout_ms(1.0) == 1000
    assert timeout_ms(1.0004) == 1001  # never less time than asked for
    assert command_body("true", cwd="/w", env={}, timeout=None) == {"command": "true", "cwd": "/w"}
    assert command_body("x", cwd=None, env={"A": "1"}, timeout=2.5, background=True) == {
        "command": "x",
        "envs": {"A": "1"},
        "timeout": 2500,
        "background": True,
    }


def test_one_event_reader_tells_id_output_exit_and_errors() -> None:
    seen: list[tuple[str, str]] = []
    ok = CommandEvents(output=lambda kind, text: seen.append((kind, text)))
    for event in (
        {"type": "init", "text": "id-1"},
        {"type": "stdout", "text": "a"},
        {"type": "ping", "text": "pong"},
        {"type": "stderr", "text": "b"},
    ):
        ok.handle(event)
    assert not ok.done() and ok.execution_id == "id-1" and ok.events == 4
    ok.handle({"type": "execution_complete"})
    assert ok.done() and ok.exit_code == 0 and ok.failure is None
    assert seen == [("stdout", "a"), ("stderr", "b")]
    exited = CommandEvents()
    exited.handle({"type": "error", "error": {"ename": "CommandExecError", "evalue": " 3 "}})
    assert exited.done() and exited.exit_code == 3 and exited.error is None
    assert exited.failure == "CommandExecError:  3 "  # what a background start reports
    broken = CommandEvents()
    broken.handle({"type": "init", "text": ""})
    broken.handle({"type": "error", "error": {"ename": "OSError", "evalue": "x" * 400}})
    assert broken.done() and broken.exit_code is None and broken.execution_id is None
    assert broken.error == broken.failure == ("OSError: " + "x" * 400)[:300]


class _ReadTimeouts(httpx.AsyncBaseTransport):
    """A transport whose response streams keep httpx's read timeout, which `MockTransport`
    ignores: a silence longer than it raises `httpx.ReadTimeout`, as a real connection does."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        limit = request.extensions.get("timeout", {}).get("read")
        stream = response.stream
        if limit is None or not isinstance(stream, AsyncIterable):
            return response

        async def chunks() -> AsyncIterator[bytes]:
            iterator = aiter(stream)
            while True:
                try:
                    async with asyncio.timeout(limit):
                        chunk = await anext(iterator)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise httpx.ReadTimeout(
                        "no data within the read timeout", request=request
                    ) from None
                yield chunk

        return httpx.Response(response.status_code, headers=response.headers, content=chunks())


async def test_a_silent_file_command_is_a_stall_but_a_silent_run_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file command answers at once, so its stream may stay silent only for the lifecycle's
    `stall_timeout`; a command the caller runs may be silent for as long as it runs."""
    monkeypatch.setattr(SandboxLifecycle, "stall_timeout", property(lambda self: 0.2))

    def slow(command: FakeCommand) -> FakeOutcome | None:
        if "sleepy" in command.command:
            return FakeOutcome(stdout=b"/sleepy\0", delay=0.6)
        return None

    fake = FakeOpenSandbox(on_command=slow)
    transport = _ReadTimeouts(fake.transport)
    connection = Connection(domain=fake.domain, api_key=fake.api_key, transport=transport)
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=connection) as sb:
        await sb.start()
        started = time.monotonic()
        assert (await sb.commands.run("echo sleepy", timeout=10)).exit_code == 0
        assert time.monotonic() - started >= 0.6
        started = time.monotonic()
        with pytest.raises(OpenSandboxError):
            await sb.files.realpath("/sleepy")  # `realpath` runs as a file command
        assert time.monotonic() - started < 0.5


async def test_a_command_post_is_never_sent_twice_through_a_retrying_transport() -> None:
    fake = FakeOpenSandbox()
    # A caller's transport that would retry a POST answered 503 (the SDK's opt-in).
    policy = RetryPolicy(
        max_retries=3,
        initial_backoff=timedelta(0),
        retryable_status_codes_non_idempotent=frozenset({HTTPStatus.SERVICE_UNAVAILABLE}),
    )
    retrying = RetryAsyncTransport(fake.transport, policy)
    connection = Connection(domain=fake.domain, api_key=fake.api_key, transport=retrying)
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=connection) as sb:
        await sb.start()
        before = fake.count("command")
        fake.fail_next("command", status=503)
        with pytest.raises(OpenSandboxError):
            await sb.commands.run("echo once")
        assert fake.count("command") == before + 1
        assert (await sb.commands.run("echo again")).stdout == "again\n"


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    listener.settimeout(0.05)
    stop = False

    def accept() -> None:
        while not stop:
            try:
                conn, _ = listener.accept()
                accepted.append(conn)
            except OSError:
                continue

    import threading

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop = True
        thread.join(2)
        for conn in accepted:
            conn.close()
        listener.close()


async def test_a_server_that_never_answers_fails_in_the_time_the_message_says(
    silent_server: int,
) -> None:
    connection = Connection(domain=f"127.0.0.1:{silent_server}", request_timeout=1.0)
    session = AsyncSandboxSession(
        SandboxSpec(image="img"), connection=connection, recover_timeout=1.0
    )
    started = time.monotonic()
    with pytest.raises(OpenSandboxError) as caught:
        await session.start()
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "within 1 s" in message and "in the 1 s after" in message, message
    assert "127.0.0.1" in message
    # One request timeout for the create and the recovery time, with a margin for the machine;
    # the SDK's retries of each listing would otherwise take several request timeouts more.
    assert 1.9 <= elapsed < 3.5, f"{elapsed:.2f} s"
    await session.aclose()


async def test_background_handles_reach_the_sandbox_through_the_facets() -> None:
    fake = FakeOpenSandbox()
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        # The fake runs a command to its end before its stream's completion event, so the
        # process has exited by the time the handle exists.
        process = await sb.commands.start_background("true")
        again = sb.commands.background(process.id)
        assert again.id == process.id
        status = await asyncio.wait_for(again.status(), 5)
        assert status == ProcessStatus(running=False, exit_code=0, error=None)
        assert fake.sandbox().statuses[process.id]["exit_code"] == 0
    asked = [r.url.path for r in fake.requests if r.url.path.startswith("/command/status/")]
    assert asked and set(asked) == {f"/command/status/{process.id}"}


async def test_a_background_wait_invents_no_exit_code() -> None:
    # execd's status of an ended process may carry no exit code: `wait` says None (it was -1,
    # which is also a real exit status), as a terminal's `wait` does.
    fake = FakeOpenSandbox()
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        process = await sb.commands.start_background("true")
        assert await asyncio.wait_for(process.wait(timeout=5), 10) == 0
        fake.sandbox().statuses[process.id]["exit_code"] = None
        assert await asyncio.wait_for(process.wait(timeout=5), 10) is None
