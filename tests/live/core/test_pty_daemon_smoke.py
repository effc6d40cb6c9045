"""The sandbox's execd serves the interactive terminal (`/pty`) through a real server.

A smoke check of the daemon the sandboxes run, not of the core's terminal API: a session
creates the sandbox, then a raw WebSocket client (the `websockets` library) opens a pty session
on its execd, directly and through the server's proxy (which relays the upgrade), types
`echo hi`, and leaves the shell with `exit 0`. Every recorded execd generation serves `/pty`,
so this holds on each profile and on a real execd image.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec

pytestmark = pytest.mark.live


async def _read_texts(ws: ClientConnection, texts: list[dict]) -> None:
    """Every text frame until the connection ends (raises ConnectionClosed)."""
    while True:
        message = await ws.recv()
        if isinstance(message, str):
            texts.append(json.loads(message))


@pytest.mark.parametrize("use_server_proxy", [False, True], ids=["direct", "server-proxy"])
async def test_a_pty_session_runs_echo_hi(sandbox_image: str, use_server_proxy: bool) -> None:
    connection = Connection(use_server_proxy=use_server_proxy)
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image), connection=connection) as sb:
        assert (await sb.commands.run("true")).exit_code == 0  # started and reachable
        endpoint = (await sb._life.context()).execd.endpoint  # the project's own session
        headers = dict(endpoint.headers)
        async with httpx.AsyncClient(base_url=endpoint.base_url, headers=headers) as http:
            created = await http.post("/pty", json={}, timeout=30)
            assert created.status_code == 201, created.text
            sid = created.json()["session_id"]
            url = re.sub(r"^http", "ws", endpoint.base_url) + f"/pty/{sid}/ws"
            output = b""
            texts: list[dict] = []
            async with connect(url, additional_headers=headers, close_timeout=1) as ws:
                first = json.loads(await ws.recv(decode=True))
                assert first == {"type": "connected", "session_id": sid, "mode": "pty"}
                await ws.send(b"\x00echo h''i\r")  # the echo of the line is not the answer
                while b"\r\nhi\r\n" not in output:
                    message = await ws.recv()
                    if isinstance(message, bytes) and message[:1] == b"\x01":
                        output += message[1:]
                await ws.send(b"\x00exit 0\r")
                with pytest.raises(ConnectionClosed) as ended:
                    await _read_texts(ws, texts)
            assert {"type": "exit", "exit_code": 0} in texts
            close = ended.value.rcvd
            assert close is not None and (close.code, close.reason) == (1000, "process exited")
            state = await http.get(f"/pty/{sid}", timeout=30)
            assert state.json()["running"] is False
            assert (await http.delete(f"/pty/{sid}", timeout=30)).status_code == 200
