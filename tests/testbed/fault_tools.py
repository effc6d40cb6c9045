"""Tools for fault tests: a TCP proxy that stalls on demand, an HTTP proxy that withholds create
answers, an extra opensandbox-server that a test may stop and restart, and expiry helpers.

The testbed's shared server is never stopped: tests that restart a server use their own
(`restartable_server`, built on `testbed._extra.extra_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from testbed import _server
from testbed._extra import ExtraServer
from testbed._proc import terminate


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- a TCP proxy that stops forwarding on demand -------------------------------------------------


class StallingProxy:
    """Loopback TCP proxy to `upstream`. `stall()` stops moving bytes both ways (connections stay
    open, like a dead network path); `resume()` moves them again."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.flowing = threading.Event()
        self.flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.2)
        self.domain = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.2)
        try:
            while not self._closed.is_set():
                if not self.flowing.is_set():
                    time.sleep(0.05)  # stalled: read nothing, send nothing
                    continue
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                while not self.flowing.is_set() and not self._closed.is_set():
                    time.sleep(0.05)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self.flowing.set()
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()
        self._thread.join(timeout=5)


# -- an HTTP proxy that withholds some create answers -----------------------------------------------


class WithholdingProxy:
    """Forwards every request to the server; the answer to every `every`-th POST /v1/sandboxes is
    held back for `hold` seconds (the sandbox exists, the client never hears of it in time)."""

    def __init__(self, upstream: str, *, every: int, hold: float) -> None:
        self.upstream = f"http://{upstream}"
        self.every = every
        self.hold = hold
        self.creates = 0
        self.withheld = 0
        self._lock = threading.Lock()

    async def app(self, scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.lower() != b"host"]
        query = scope["query_string"].decode()
        url = self.upstream + scope["path"] + ("?" + query if query else "")
        async with httpx.AsyncClient(timeout=120) as client:
            response = await client.request(scope["method"], url, headers=headers, content=body)
        if scope["method"] == "POST" and scope["path"].rstrip("/") == "/v1/sandboxes":
            with self._lock:
                self.creates += 1
                hold = self.creates % self.every == 0
                self.withheld += hold
            if hold:
                await asyncio.sleep(self.hold)
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [
                    (k.encode(), v.encode())
                    for k, v in response.headers.items()
                    if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.content})


@contextlib.contextmanager
def run_asgi(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", interface="asgi3")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


# -- an opensandbox-server of the test's own, which it may stop and start again --------------------


class RestartableServer:
    def __init__(self, server: ExtraServer) -> None:
        self.server = server
        self.pid: int | None = server.pid

    @property
    def domain(self) -> str:
        return self.server.domain

    @property
    def api_key(self) -> str | None:
        return self.server.api_key

    def stop(self) -> None:
        if self.pid is not None:
            terminate(self.pid, group=True, grace=15, name="test opensandbox-server")
            self.pid = None

    def start(self) -> None:
        assert self.pid is None
        directory: Path = self.server.directory
        self.pid = _server.start_server(
            port=self.server.port,
            api_key=self.server.api_key,
            config_path=directory / "sandbox.toml",
            log_path=directory / "server.log",
            pidfile=directory / "server.pid",
        )


# -- expiry ----------------------------------------------------------------------------------------


def expire_soon(domain: str, api_key: str | None, sandbox_id: str, seconds: float = 2.0) -> None:
    """Move a sandbox's expiry to `seconds` from now (the server's own timer then deletes it).

    Creating needs a lifetime of at least 60 s; a renewal has no lower bound."""
    when = (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    response = httpx.post(
        f"http://{domain}/v1/sandboxes/{sandbox_id}/renew-expiration",
        json={"expiresAt": when},
        headers={"OPEN-SANDBOX-API-KEY": api_key or ""},
        timeout=10,
    )
    response.raise_for_status()


def wait_gone(domain: str, api_key: str | None, sandbox_id: str, budget: float = 60) -> None:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        response = httpx.get(
            f"http://{domain}/v1/sandboxes/{sandbox_id}",
            headers={"OPEN-SANDBOX-API-KEY": api_key or ""},
            timeout=10,
        )
        if response.status_code == 404:
            return
        time.sleep(0.5)
    raise AssertionError(f"sandbox {sandbox_id} did not expire within {budget} s")
