"""A loopback HTTP proxy in front of the server that loses the answer of some creates.

Every `every`-th `POST /v1/sandboxes` is forwarded and carried out by the server (the sandbox
exists), but the client gets `504 Gateway Timeout` instead of the answer, as from an ingress
whose upstream connection broke after the request went through. The core treats a 502/503/504 on
a create as a lost answer and finds its sandbox by its ownership tag; the SDK never re-sends a
POST on a status. Loopback only (`testbed.fault_tools.run_asgi` binds 127.0.0.1).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

_HOP = ("content-length", "transfer-encoding", "content-encoding", "connection")


class LosingProxy:
    """ASGI app forwarding to `upstream` (host:port); `lost` holds the ids whose answer it ate."""

    def __init__(self, upstream: str, *, every: int) -> None:
        self.upstream = f"http://{upstream}"
        self.every = every
        self.creates = 0
        self.lost: list[str] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.lower() != b"host"]
        query = scope["query_string"].decode()
        url = self.upstream + scope["path"] + (f"?{query}" if query else "")
        async with httpx.AsyncClient(timeout=120) as client:
            answer = await client.request(scope["method"], url, headers=headers, content=body)
        status, content = answer.status_code, answer.content
        out = [(k.encode(), v.encode()) for k, v in answer.headers.items() if k.lower() not in _HOP]
        if scope["method"] == "POST" and scope["path"].rstrip("/") == "/v1/sandboxes":
            with self._lock:
                self.creates += 1
                lose = answer.is_success and self.creates % self.every == 0
                if lose:
                    self.lost.append(str(answer.json()["id"]))
            if lose:
                status, content = 504, b'{"code": "GATEWAY_TIMEOUT", "message": "upstream lost"}'
                out = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": content})
