"""The route to execd, live (`opensandbox_core._lifecycle._reach.Route`).

On the testbed's Docker server every endpoint but port 8080's is `host:<port>/proxy/<port>`,
execd's own port included: the session then talks to execd at the root of that address, not
through execd's proxy to itself. A session through the server's proxy keeps its endpoint as given.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pytest

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec

pytestmark = [pytest.mark.live, pytest.mark.daemon_neutral]

EXECD_PORT = 44772


async def _exercise(session: AsyncSandboxSession) -> None:
    """A command, a write and a read, and a terminal: every kind of request execd gets."""
    assert (await session.commands.run("echo routed")).stdout == "routed\n"
    await session.files.write_bytes("/tmp/route.bin", b"\x00route\xff")
    assert await session.files.read_bytes("/tmp/route.bin") == b"\x00route\xff"
    async with session.terminals.open() as term:  # the /pty WebSocket
        await term.write("echo term-$((6*7))\r")
        await term.expect("term-42", timeout=30)


async def test_execd_is_reached_at_its_root_not_through_its_own_proxy(
    sandbox_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="opensandbox_core._lifecycle._reach")
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as session:
        await _exercise(session)
        given, _ = await session.get_endpoint(EXECD_PORT)
        parts = urlsplit(given)
        assert parts.path == f"/proxy/{EXECD_PORT}", given  # the testbed's Docker form
        root = f"{parts.scheme}://{parts.netloc}"
        execd = (await session._life.context()).execd
        assert execd.endpoint.base_url == root
        assert any("reached directly at " + root in r.getMessage() for r in caplog.records)
        # Another session attached to the same sandbox takes the route remembered for it.
        async with AsyncSandboxSession(sandbox_id=session.id) as attached:
            assert (await attached.commands.run("echo attached")).stdout == "attached\n"
            assert (await attached._life.context()).execd.endpoint.base_url == root


async def test_a_session_through_the_server_proxy_keeps_its_endpoint(
    sandbox_image: str, testbed_env: dict[str, str]
) -> None:
    connection = Connection(
        domain=testbed_env["OPEN_SANDBOX_DOMAIN"],
        api_key=testbed_env["OPEN_SANDBOX_API_KEY"],
        use_server_proxy=True,
    )
    async with AsyncSandboxSession(
        SandboxSpec(image=sandbox_image), connection=connection
    ) as session:
        await _exercise(session)
        execd = (await session._life.context()).execd
        path = urlsplit(execd.endpoint.base_url).path
        assert path == f"/v1/sandboxes/{session.id}/proxy/{EXECD_PORT}", path
