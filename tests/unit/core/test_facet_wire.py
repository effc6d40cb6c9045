"""The wire facet offline: one body builder, no command POST sent twice, bounded waits."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from http import HTTPStatus

import pytest
from opensandbox.transport import RetryAsyncTransport, RetryPolicy

from opensandbox_core import (
    AsyncSandboxSession,
    Connection,
    OpenSandboxError,
    ProcessStatus,
    SandboxSpec,
)
from opensandbox_core._wire._events import command_body, timeout_ms
from opensandbox_core.testing import FakeOpenSandbox

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
            await sb.run("echo once")
        assert fake.count("command") == before + 1
        assert (await sb.run("echo again")).stdout == "again\n"


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
        process = await sb.start_background("true")
        again = sb.background(process.id)
        assert again.id == process.id
        status = await asyncio.wait_for(again.status(), 5)
        assert status == ProcessStatus(running=False, exit_code=0, error=None)
        assert fake.sandbox().statuses[process.id]["exit_code"] == 0
    asked = [r.url.path for r in fake.requests if r.url.path.startswith("/command/status/")]
    assert asked and set(asked) == {f"/command/status/{process.id}"}
