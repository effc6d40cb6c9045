"""execd's code interpreter routes (`/code`, `/code/context`, `/code/contexts`), on the same
HTTP client as commands and files (`_execd.ExecdClient`, one per event loop).

Every failure leaves as an httpx exception or an `ExecdError` (`_execd._raise_for`); the code
facet (`opensandbox_core._code`) decides what execd's answers mean (its unknown-context 500, its
busy answer inside a 200 stream) and sends the rest to the lifecycle's error boundary.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from ._execd import ExecdClient, _raise_for
from ._framing import EventSplitter

__all__ = [
    "code_events",
    "create_context",
    "delete_context",
    "interrupt_code",
    "list_contexts",
]


def _http(execd: ExecdClient) -> httpx.AsyncClient:
    return execd._client


async def code_events(
    execd: ExecdClient, body: Mapping[str, Any], *, read_timeout: float | None = None
) -> AsyncGenerator[dict[str, Any]]:
    """POST /code and yield its events as they arrive, the last object included when it comes
    without its blank line (execd's busy answer). Closing the generator closes the stream: execd
    holds no `/code` stream open after its end, and a client that leaves does not stop the code.
    """
    client = _http(execd)
    base = client.timeout
    timeout = httpx.Timeout(base.connect, read=read_timeout, write=base.write, pool=None)
    request = client.build_request(
        "POST",
        "/code",
        json=dict(body),
        headers={"Accept": "text/event-stream", "Cache-Control": "no-cache"},
        timeout=timeout,
    )
    response = await client.send(request, stream=True)
    try:
        await _raise_for(response)
        splitter = EventSplitter()
        async for chunk in response.aiter_bytes():
            for event in splitter.feed(chunk):
                yield event
        for event in splitter.close():
            yield event
    finally:
        await response.aclose()


async def create_context(
    execd: ExecdClient, language: str, cwd: str | None, *, timeout: float
) -> dict[str, Any]:
    """POST /code/context: `{"id", "language"}` (and `cwd` when sent). execd never answers for a
    language without a kernel, so the caller bounds it (`timeout`: a read timeout here too)."""
    body: dict[str, Any] = {"language": language}
    if cwd is not None:
        body["cwd"] = cwd
    response = await _http(execd).post("/code/context", json=body, timeout=timeout)
    await _raise_for(response)
    data = response.json()
    return data if isinstance(data, dict) else {}


async def list_contexts(execd: ExecdClient, language: str | None) -> list[dict[str, Any]]:
    """GET /code/contexts (of one language, or all)."""
    params = {"language": language} if language else None
    response = await _http(execd).get("/code/contexts", params=params)
    await _raise_for(response)
    data = response.json()
    return [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []


async def delete_context(execd: ExecdClient, context_id: str) -> None:
    """DELETE /code/contexts/{id}: Jupyter stops the kernel (0.1-0.4 s); 404 for an unknown id."""
    path = f"/code/contexts/{quote(context_id, safe='')}"
    response = await _http(execd).delete(path, timeout=30.0)
    await _raise_for(response)


async def interrupt_code(execd: ExecdClient, context_id: str) -> None:
    """DELETE /code?id=: interrupt the context's kernel (Jupyter's kernel interrupt)."""
    response = await _http(execd).delete("/code", params={"id": context_id}, timeout=10.0)
    await _raise_for(response)
