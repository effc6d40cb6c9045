"""A small HTTP client for one sandbox's execd, bound to one event loop.

The SDK's command and file adapters hide what the session needs to control: the raw event texts
(to rebuild output exactly), the execution id (to interrupt on timeout or cancellation), streaming
bodies in both directions (bounded memory for large files), and status codes with execd's error
codes (to tell a missing path from a missing sandbox). So commands and files go through this
client, addressed with the endpoint and headers that the SDK resolved (direct or server proxy).

Every failure leaves this module as an httpx exception or an `ExecdError` (an error answer, its
body parsed once by `_failures.parse_error_body`); the facets turn them into the project's errors
through the lifecycle's `fail`, that is `_errors.from_foreign` (the one translator).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Coroutine,
    Mapping,
)
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from opensandbox_core._errors import ExecdError as ExecdError  # raised here, read by the facets
from opensandbox_core._failures import parse_error_body, url_address

from ._framing import EventSplitter

logger = logging.getLogger(__name__)

EXECD_PORT = 44772
_UPLOAD_SLICE = 1 << 20
# How long a stream the caller stopped reading is drained before it is closed: execd holds a
# stream for 1 s after its last event (EXECD_API_GRACE_SHUTDOWN), plus room for a loaded machine.
_DRAIN_LIMIT = 4.0
# Files left by commands (execd's output files, capture files, a write's marker) are deleted in
# the background, several operations' worth in one request: at most this many paths, and no
# later than this many seconds after the first of them was left (`aclose` sends the rest).
_DISCARD_BATCH = 48
_DISCARD_DELAY = 1.0


@dataclass(frozen=True)
class ExecdEndpoint:
    """Where one sandbox's execd answers, and the headers each request needs."""

    base_url: str
    headers: Mapping[str, str]

    def __repr__(self) -> str:  # headers may hold the API key (server proxy mode)
        return f"ExecdEndpoint(base_url={self.base_url!r})"


async def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    body = await response.aread()
    code, message, from_execd = parse_error_body(body, limit=None)
    address = url_address(response.request.url)
    raise ExecdError(response.status_code, code, message, from_execd=from_execd, address=address)


class ExecdClient:
    """HTTP calls to one execd. Not thread-safe; one per event loop."""

    def __init__(
        self,
        endpoint: ExecdEndpoint,
        *,
        transport: httpx.AsyncBaseTransport | None,
        request_timeout: float,
    ) -> None:
        self.endpoint = endpoint
        self._owns_transport = transport is None
        self._transport = transport or httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=64)
        )
        self._timeout = httpx.Timeout(request_timeout)
        self._cleanups: set[asyncio.Task[None]] = set()
        self._discards: list[str] = []
        self._discard_timer: asyncio.TimerHandle | None = None
        self._client = httpx.AsyncClient(
            base_url=endpoint.base_url,
            headers=dict(endpoint.headers),
            transport=self._transport,
            timeout=self._timeout,
        )

    async def aclose(self) -> None:
        if self._cleanups or self._discards:  # send and finish pending deletions (bounded)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):
                    while self._cleanups or self._discards:
                        self.flush_discards()
                        await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._discard_timer is not None:
            self._discard_timer.cancel()
            self._discard_timer = None
        await self._client.aclose()
        if self._owns_transport:
            await self._transport.aclose()

    # -- basics ---------------------------------------------------------------------------
    async def ping(self, timeout: float = 2.0) -> bool:
        return await self.ping_status(timeout) == 200

    async def ping_status(self, timeout: float = 2.0) -> int | None:
        """The status of `GET /ping` (200: execd answers), or None when nothing answered."""
        try:
            response = await self._client.get("/ping", timeout=timeout)
        except httpx.HTTPError:
            return None
        return response.status_code

    # -- commands -------------------------------------------------------------------------
    async def run_events(
        self, body: Mapping[str, Any], *, read_timeout: float | None = None
    ) -> AsyncGenerator[dict[str, Any]]:
        """POST /command and yield its events as they arrive. No read timeout unless given (the
        longest silence allowed between two chunks; execd sends a keep-alive every 3 s).

        A caller that stops early (at the completion event, on a timeout) never closes the
        connection under execd: the rest of the stream is read in the background until execd
        ends it (`_drain_later`). Real execd forwards every signal it receives to every command
        it runs, and a write to a connection its client already closed gives it a SIGPIPE: an
        early close would kill whatever else runs in the sandbox at that moment.
        """
        timeout = httpx.Timeout(
            self._timeout.connect, read=read_timeout, write=self._timeout.write, pool=None
        )
        request = self._client.build_request(
            "POST",
            "/command",
            json=dict(body),
            headers={"Accept": "text/event-stream", "Cache-Control": "no-cache"},
            timeout=timeout,
        )
        response = await self._client.send(request, stream=True)
        chunks = response.aiter_bytes()
        ended = False
        try:
            await _raise_for(response)
            splitter = EventSplitter()
            async for chunk in chunks:
                for event in splitter.feed(chunk):
                    yield event
            ended = True
            for event in splitter.close():
                yield event
        except Exception:
            ended = True  # a failed read or an error answer: nothing is left to drain
            raise
        finally:
            if ended or response.is_closed:
                await response.aclose()
            else:
                self._drain_later(response, chunks)

    def _drain_later(self, response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
        """Read what is left of a command stream in the background, so that execd ends it (it
        holds a stream open for a second after the last event), then close it; bounded."""

        async def drain() -> None:
            try:
                async with asyncio.timeout(_DRAIN_LIMIT):
                    async for _ in chunks:
                        pass
            except Exception as exc:  # a stream that ends badly (upstream #1277) is fine here
                logger.debug("a command stream ended with %s while drained", type(exc).__name__)
            finally:
                await response.aclose()

        task = asyncio.get_running_loop().create_task(drain())
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def read_head(self, path: str, limit: int) -> bytes | None:
        """The first `limit` bytes of a file (one HTTP Range request), or None if it is missing.

        Reads no more than `limit` bytes even where a server ignores the Range header.
        """
        headers = {"Range": f"bytes=0-{max(limit, 1) - 1}"}
        kept = bytearray()
        async with self._client.stream(
            "GET", "/files/download", params={"path": path}, headers=headers
        ) as response:
            if response.status_code == 404:
                return None
            if response.status_code == 416:  # an empty file, on some servers
                return b""
            await _raise_for(response)
            async for chunk in response.aiter_bytes():
                kept += chunk[: limit - len(kept)]
                if len(kept) >= limit:
                    break
        return bytes(kept[:limit])

    def discard_later(self, paths: list[str], *, after: Awaitable[object] | None = None) -> None:
        """Delete files in the background, off the caller's path: with the files of the next
        operations in one request (`flush_discards`: at `_DISCARD_BATCH` paths, after
        `_DISCARD_DELAY` seconds, or at `aclose`); with `after`, only once that has ended
        (whatever its outcome)."""
        if after is None:
            self._queue_discards(paths)
            return

        async def once_ended() -> None:
            with contextlib.suppress(BaseException):
                await after
            self._queue_discards(paths)

        self.later(once_ended())

    def _queue_discards(self, paths: list[str]) -> None:
        self._discards.extend(paths)
        if len(self._discards) >= _DISCARD_BATCH:
            self.flush_discards()
        elif self._discard_timer is None:
            loop = asyncio.get_running_loop()
            self._discard_timer = loop.call_later(_DISCARD_DELAY, self.flush_discards)

    def flush_discards(self) -> None:
        """Send the deletions that wait for company now (one background request)."""
        if self._discard_timer is not None:
            self._discard_timer.cancel()
            self._discard_timer = None
        paths, self._discards = self._discards, []
        if paths:
            self.later(self.discard_files(paths))

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a clean-up in the background (`aclose` waits for it); it must not raise."""
        task = asyncio.get_running_loop().create_task(work)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    async def discard_files(self, paths: list[str]) -> None:
        """Delete files (missing ones are fine); never raises, only logs."""
        try:
            response = await self._client.delete(
                "/files", params=[("path", p) for p in paths], timeout=10.0
            )
            await _raise_for(response)
        except (httpx.HTTPError, ExecdError) as exc:
            logger.debug("could not delete %d execd output files (%s)", len(paths), exc)

    async def interrupt(self, execution_id: str) -> None:
        response = await self._client.delete("/command", params={"id": execution_id}, timeout=10.0)
        await _raise_for(response)

    async def command_status(self, execution_id: str) -> dict[str, Any]:
        response = await self._client.get(f"/command/status/{quote(execution_id, safe='')}")
        await _raise_for(response)
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def command_logs(
        self, execution_id: str, cursor: int | None, max_bytes: int
    ) -> tuple[str, int | None, bool]:
        """A background command's output after `cursor`, at most `max_bytes` of it (the rest is
        skipped), with the next cursor and whether anything was skipped."""
        params = {"cursor": cursor} if cursor is not None else None
        kept = bytearray()
        truncated = False
        async with self._client.stream(
            "GET", f"/command/{quote(execution_id, safe='')}/logs", params=params
        ) as response:
            await _raise_for(response)
            raw = response.headers.get("EXECD-COMMANDS-TAIL-CURSOR")
            async for chunk in response.aiter_bytes():
                room = max_bytes - len(kept)
                if len(chunk) > room:
                    truncated = True
                kept += chunk[: max(room, 0)]
        next_cursor = int(raw) if raw and raw.lstrip("-").isdigit() else None
        return bytes(kept).decode("utf-8", "replace"), next_cursor, truncated

    # -- files ----------------------------------------------------------------------------
    async def info(self, paths: list[str]) -> dict[str, dict[str, Any]]:
        response = await self._client.get("/files/info", params=[("path", p) for p in paths])
        await _raise_for(response)
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def list_dir(self, path: str) -> list[dict[str, Any]]:
        response = await self._client.get("/directories/list", params={"path": path, "depth": 1})
        await _raise_for(response)
        data = response.json()
        return data if isinstance(data, list) else []

    async def make_dirs(self, paths: Mapping[str, int]) -> None:
        body = {p: {"mode": mode} for p, mode in paths.items()}
        response = await self._client.post("/directories", json=body)
        await _raise_for(response)

    async def remove_dirs(self, paths: list[str]) -> None:
        response = await self._client.delete("/directories", params=[("path", p) for p in paths])
        await _raise_for(response)

    async def remove_files(self, paths: list[str]) -> None:
        response = await self._client.delete("/files", params=[("path", p) for p in paths])
        await _raise_for(response)

    async def move(self, src: str, dest: str) -> None:
        response = await self._client.post("/files/mv", json=[{"src": src, "dest": dest}])
        await _raise_for(response)

    async def upload(
        self,
        path: str,
        data: bytes | AsyncIterable[bytes],
        *,
        mode: int,
        owner: str | None = None,
        group: str | None = None,
        timeout: float | None = None,
        marker: str | None = None,
    ) -> None:
        """Upload one file (multipart: a `metadata` part, then a `file` part), streamed.

        With `marker`, an empty file of that name follows in the same request: execd writes the
        pairs of a form one after the other, each to its end (mode and owner set), so the
        marker appears only once the file is complete (`_files._atomic` waits for it)."""
        meta: dict[str, Any] = {"path": path, "mode": mode}
        if owner:
            meta["owner"] = owner
        if group:
            meta["group"] = group
        content, headers = _multipart(meta, data, marker)
        request_timeout = httpx.Timeout(
            self._timeout.connect, read=timeout, write=timeout, pool=self._timeout.pool
        )
        response = await self._client.post(
            "/files/upload", content=content, headers=headers, timeout=request_timeout
        )
        await _raise_for(response)

    async def open_download(self, path: str) -> httpx.Response:
        """`GET /files/download`, streamed: the response once its headers are in, for the caller
        to read and close (`aclose`). An error answer raises `ExecdError` (the response closed)."""
        request = self._client.build_request("GET", "/files/download", params={"path": path})
        response = await self._client.send(request, stream=True)
        try:
            await _raise_for(response)
        except BaseException:
            await response.aclose()
            raise
        return response

    async def download(self, path: str, *, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """Stream a file's bytes (no read timeout beyond the per-chunk request timeout)."""
        async with self._client.stream("GET", "/files/download", params={"path": path}) as response:
            await _raise_for(response)
            async for chunk in response.aiter_bytes(chunk_size):
                yield chunk

    async def download_range(self, path: str, start: int, length: int) -> bytes:
        """Up to `length` bytes of a file from byte `start` (one HTTP Range request): fewer at
        the end of the file, none past it.

        Where a server ignores the Range header (200), the bytes before `start` are skipped
        and the transfer stops after `length` bytes.
        """
        if length <= 0:
            return b""
        headers = {"Range": f"bytes={start}-{start + length - 1}"}
        kept = bytearray()
        async with self._client.stream(
            "GET", "/files/download", params={"path": path}, headers=headers
        ) as response:
            if response.status_code == 416:  # the range starts at or past the end
                return b""
            await _raise_for(response)
            ignored = response.status_code == 200
            skip = start if ignored else 0
            async for chunk in response.aiter_bytes():
                if skip:
                    dropped = min(skip, len(chunk))
                    chunk, skip = chunk[dropped:], skip - dropped
                kept += chunk[: length - len(kept)]
                # A 206 body is read to its end, which keeps the connection for the next call.
                if ignored and len(kept) >= length:
                    break
        return bytes(kept)

    async def replace(self, path: str, old: str, new: str) -> None:
        """Replace every occurrence of `old` (not empty) with `new` in a file, in place."""
        response = await self._client.post("/files/replace", json={path: {"old": old, "new": new}})
        await _raise_for(response)

    # -- interactive terminals (`_terminal`; the WebSocket itself is `_terminal._link`) -----
    async def pty_create(self, cwd: str | None) -> str:
        """`POST /pty`: a new terminal's id (its shell starts at the first connection). execd
        creates `cwd` if it is missing; a `cwd` it cannot use is an `ExecdError` (HTTP 500)."""
        response = await self._client.post("/pty", json={"cwd": cwd} if cwd else {})
        await _raise_for(response)
        data = response.json()
        session_id = data.get("session_id") if isinstance(data, dict) else None
        if not isinstance(session_id, str) or not session_id:
            raise ExecdError(
                response.status_code,
                "",
                f"no terminal id in the answer to POST /pty ({len(response.content)} bytes)",
                from_execd=False,
                address=url_address(response.request.url),
            )
        return session_id

    async def pty_status(self, session_id: str) -> dict[str, Any]:
        """`GET /pty/{id}`: `running` and `output_offset` (bytes the terminal printed so far)."""
        response = await self._client.get(f"/pty/{quote(session_id, safe='')}")
        await _raise_for(response)
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def pty_delete(self, session_id: str) -> None:
        """`DELETE /pty/{id}`: kill the terminal's process group and forget the terminal."""
        response = await self._client.delete(f"/pty/{quote(session_id, safe='')}")
        await _raise_for(response)

    async def pty_forget(self, session_id: str) -> None:
        """`pty_delete` in a clean-up: logs instead of raising."""
        try:
            await self.pty_delete(session_id)
        except Exception as exc:  # a clean-up: reported, never raised
            logger.warning("could not delete terminal %s (%s)", session_id, type(exc).__name__)


def _pair(boundary: str, meta: Mapping[str, Any]) -> bytes:
    """A `metadata` part and the head of the `file` part that follows it."""
    return (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
        "Content-Type: application/json\r\n\r\n"
        f"{json.dumps(dict(meta))}\r\n"
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="file"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()


def _multipart(
    meta: Mapping[str, Any], data: bytes | AsyncIterable[bytes], marker: str | None = None
) -> tuple[bytes | AsyncIterator[bytes], dict[str, str]]:
    """The body and headers of an upload: a `metadata` part, then a `file` part with `data`
    (and, with `marker`, a second pair: an empty file of that name).

    Small bodies are sent whole; larger bytes are sliced with a known length (joining head, data
    and tail into one body would hold a second copy of the file: 64 MiB more client memory for
    a 64 MiB file), and an async iterable is streamed as it comes.
    """
    boundary = "osb-" + _random_token()
    head = _pair(boundary, meta)
    tail = f"\r\n--{boundary}--\r\n".encode()
    if marker is not None:
        tail = b"\r\n" + _pair(boundary, {"path": marker, "mode": 600}) + tail
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if isinstance(data, bytes | bytearray | memoryview) and len(data) <= _UPLOAD_SLICE:
        content = b"".join((head, bytes(data), tail))
        headers["Content-Length"] = str(len(content))
        return content, headers
    if isinstance(data, bytes | bytearray | memoryview):
        view = memoryview(data).cast("B")
        headers["Content-Length"] = str(len(head) + view.nbytes + len(tail))

        async def whole() -> AsyncIterator[bytes]:
            yield head
            for start in range(0, view.nbytes, _UPLOAD_SLICE):
                yield bytes(view[start : start + _UPLOAD_SLICE])
            yield tail

        return whole(), headers

    async def stream() -> AsyncIterator[bytes]:
        yield head
        async for chunk in data:
            yield chunk
        yield tail

    return stream(), headers


def _random_token() -> str:
    import secrets

    return secrets.token_hex(12)
