"""Bench section `wire` (issue 37): each core operation against the one request execd needs for
it, sent by hand.

On one sandbox per execd profile (the testbed daemon takes the profile from the sandbox's
environment; a real execd image is one generation whatever it says), interleaved round by round:

- `run("true")` against `POST /command`, its event stream read to `execution_complete`;
- `write_bytes` of 4 KiB against one `POST /files/upload` of the same bytes to a path of its own;
- `read_bytes` of 4 KiB against one `GET /files/download` of the same file;
- 1 MiB written and read back against one upload and one download.

The raw side is a kept-alive httpx client on the sandbox's execd endpoint (URL and headers from
the session's public `get_endpoint(44772)`), one request, no checks; the core side writes the
same path each round (a replacement, after the first), and reads a file it wrote. The contents
are random bytes: the worst case for the core's one-command small write (`_files._inline`), whose
command spends four characters on a byte that is not printable ASCII.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from bench._stats import interleave, ratio

EXECD_PORT = 44772
PROFILES = ("1.0.19", "1.0.18")
KIB4 = 4096
MIB = 1024 * 1024
GOALS = {
    "command `true`": 1.3,
    "write_bytes 4 KiB": 2.0,
    "read_bytes 4 KiB": 1.3,
    "write + read 1 MiB": 1.5,
}


def _files(session: Any) -> Any:
    """The session's file methods (`session.files` once the facets have landed)."""
    return getattr(session, "files", session)


def _commands(session: Any) -> Any:
    """The session's command methods (`session.commands` once the facets have landed)."""
    return getattr(session, "commands", session)


def _multipart(path: str, data: bytes) -> tuple[bytes, dict[str, str]]:
    boundary = "bench-" + secrets.token_hex(8)
    meta = json.dumps({"path": path, "mode": 644})
    body = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
        f"Content-Type: application/json\r\n\r\n{meta}\r\n"
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="file"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


class _Raw:
    """One request by hand, on a kept-alive client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def command(self, text: str) -> None:
        async with self.client.stream("POST", "/command", json={"command": text}) as response:
            response.raise_for_status()
            seen = b""
            async for chunk in response.aiter_bytes():
                seen += chunk
                if b'"execution_complete"' in seen:
                    return  # the rest (execd's one-second hold) is not waited for
        raise AssertionError("the command stream ended without execution_complete")

    async def upload(self, path: str, data: bytes) -> None:
        body, headers = _multipart(path, data)
        response = await self.client.post("/files/upload", content=body, headers=headers)
        response.raise_for_status()

    async def download(self, path: str) -> bytes:
        response = await self.client.get("/files/download", params={"path": path})
        response.raise_for_status()
        content: bytes = response.content
        return content


def _pairs(
    session: Any, raw: _Raw, base: str
) -> dict[str, dict[str, Callable[[], Awaitable[Any]]]]:
    """Per row: the core's op and the raw request(s), each a no-argument coroutine function."""
    files, commands = _files(session), _commands(session)
    small, big = os.urandom(KIB4), os.urandom(MIB)

    async def core_round_trip() -> None:
        await files.write_bytes(f"{base}/core-1m.bin", big)
        assert await files.read_bytes(f"{base}/core-1m.bin") == big

    async def raw_round_trip() -> None:
        await raw.upload(f"{base}/raw-1m.bin", big)
        await raw.download(f"{base}/raw-1m.bin")

    return {
        "command `true`": {
            "core": lambda: commands.run("true"),
            "raw": lambda: raw.command("true"),
        },
        "write_bytes 4 KiB": {
            "core": lambda: files.write_bytes(f"{base}/core-4k.bin", small),
            "raw": lambda: raw.upload(f"{base}/raw-4k.bin", small),
        },
        "read_bytes 4 KiB": {
            "core": lambda: files.read_bytes(f"{base}/core-4k.bin"),
            "raw": lambda: raw.download(f"{base}/core-4k.bin"),
        },
        "write + read 1 MiB": {"core": core_round_trip, "raw": raw_round_trip},
    }


async def _profile(ctx: Any, profile: str, reps: int) -> dict[str, Any]:
    import httpx

    from opensandbox_core import AsyncSandboxSession, SandboxSpec

    spec = SandboxSpec(ctx.image, lifetime=900, container_env={"OSB_EXECD_PROFILE": profile})
    async with AsyncSandboxSession(spec) as session:
        await _commands(session).run("true")
        url, headers = await session.get_endpoint(EXECD_PORT)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            base = f"/tmp/bench-wire-{secrets.token_hex(4)}"
            await _files(session).write_bytes(f"{base}/core-4k.bin", b"")  # the folder
            rows: dict[str, Any] = {}
            for row, pair in _pairs(session, _Raw(client), base).items():
                samples = await interleave(pair, reps)
                rows[row] = {
                    "core": samples["core"].as_json(),
                    "raw": samples["raw"].as_json(),
                    "ratio": ratio(samples["core"], samples["raw"]),
                }
            return rows


async def wire(ctx: Any) -> dict[str, Any]:
    reps = ctx.reps(40, 15)
    out: dict[str, Any] = {"repetitions": reps, "profiles": {}}
    for profile in PROFILES:
        out["profiles"][profile] = await _profile(ctx, profile, reps)
    return out
