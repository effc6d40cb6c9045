"""The terminal's frame codec and connection against the REAL daemons' recorded `/pty` frames
(tests/data/execd-recordings, cases `pty_basic`, `pty_bytes`, `pty_replay`; v1.0.19 and v1.0.18).

Every recorded server frame is decoded as the recorder read it (channel, offset, bytes, JSON),
and each recorded connection is played back, frame by frame, by a WebSocket server to the core's
`Link`: the bytes it passes on are the recorded output exactly (replays deduplicated by offset),
and it ends as the recorded connection did (the exit code, or a close of the client's own).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from opensandbox_core._terminal import _frames
from opensandbox_core._terminal._link import Link, Target

DATA = Path(__file__).resolve().parents[2] / "data" / "execd-recordings"
VERSIONS = ["v1.0.19", "v1.0.18"]
CASES = ["pty_basic", "pty_bytes", "pty_replay"]


@cache
def recording(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{version}.json").read_text())
    return data


def connections(version: str, name: str) -> list[dict[str, Any]]:
    case = next(c for c in recording(version)["cases"] if c["name"] == name)
    return [
        e
        for e in case["exchanges"]
        if e.get("kind") == "websocket" and e["response"]["status"] == 101
    ]


def payload(frame: dict[str, Any]) -> bytes:
    """A recorded frame's payload; the one over 256 KiB (the 1 MiB replay of `pty_replay`) is
    recorded by digest, head and tail: rebuilt from them and checked against the digest."""
    if "b64" in frame:
        return base64.b64decode(frame["b64"])
    head, tail = base64.b64decode(frame["head_b64"]), base64.b64decode(frame["tail_b64"])
    fill = tail[:1]  # the output between is one byte repeated (`tr '\0' y`)
    rebuilt = head + fill * (frame["length"] - len(head) - len(tail)) + tail
    assert hashlib.sha256(rebuilt).hexdigest() == frame["sha256"]
    return rebuilt


def server_frames(exchange: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for frame in exchange["frames"]:
        if frame.get("from") == "server" and frame.get("opcode") in ("text", "binary"):
            yield frame


def all_server_frames() -> Iterator[Any]:
    for version in VERSIONS:
        for name in CASES:
            for index in range(len(connections(version, name))):
                yield pytest.param(version, name, index, id=f"{version}-{name}-{index}")


@pytest.mark.parametrize(("version", "name", "index"), list(all_server_frames()))
def test_every_recorded_server_frame_decodes_as_the_recorder_read_it(
    version: str, name: str, index: int
) -> None:
    for frame in server_frames(connections(version, name)[index]):
        data = payload(frame)
        decoded = _frames.decode(data.decode() if frame["opcode"] == "text" else data)
        if frame["opcode"] == "text":
            assert isinstance(decoded, _frames.Control)
            assert decoded.fields == frame["json"] and decoded.kind == frame["json"]["type"]
        elif frame.get("channel") == "replay":
            assert isinstance(decoded, _frames.Replay)
            assert decoded.offset == frame["offset"] and len(decoded.data) == frame["data_length"]
        else:
            assert isinstance(decoded, _frames.Output)
            assert len(decoded.data) == frame["data_length"]
            if "data_text" in frame:
                assert decoded.data == frame["data_text"].encode()


def test_client_frames_are_what_the_daemons_were_sent() -> None:
    exchange = connections("v1.0.19", "pty_basic")[0]
    sent = [f for f in exchange["frames"] if f.get("from") == "client" and "b64" in f]
    stdin = next(f for f in sent if f.get("channel") == "stdin")
    data = payload(stdin)[1:]
    assert _frames.stdin_frame(data) == payload(stdin)
    resize = next(f for f in sent if f.get("json", {}).get("type") == "resize")
    assert json.loads(_frames.resize_frame(100, 30)) == resize["json"]
    assert json.loads(_frames.PING) == {"type": "ping"}


def expected(exchange: dict[str, Any], offset: int) -> tuple[bytes, int]:
    """What a client that already has `offset` bytes gets from this connection, and the
    offset it then has: a replay that starts past `offset` leaves a gap (its bytes had left
    execd's buffer), one that starts before it is cut."""
    out = b""
    for frame in server_frames(exchange):
        if frame["opcode"] != "binary":
            continue
        data = payload(frame)
        if frame.get("channel") == "replay":
            kept = data[9:]
            out += kept[max(0, offset - frame["offset"]) :]
            offset = max(offset, frame["offset"] + len(kept))
        else:
            out += data[1:]
            offset += len(data) - 1
    return out, offset


async def play(exchange: dict[str, Any], offset: int, size: int) -> tuple[bytes, Link]:
    """Serve one recorded connection's server frames to a `Link` that holds `offset` bytes,
    until it has `size` bytes and the connection ended as recorded."""
    closes = [
        f for f in exchange["frames"] if f.get("from") == "server" and f.get("opcode") == "close"
    ]
    server_closes = bool(closes) and (closes[0]["close_reason"] or closes[0]["close_code"] != 1000)

    async def handler(connection: ServerConnection) -> None:
        for frame in server_frames(exchange):
            data = payload(frame)
            await connection.send(data.decode() if frame["opcode"] == "text" else data)
        if server_closes:
            await connection.close(closes[0]["close_code"], closes[0]["close_reason"])
        else:
            await connection.wait_closed()  # the recorder closed this one

    got = bytearray()
    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        link = Link(
            Target(f"ws://127.0.0.1:{port}/pty/x/ws", {}), got.extend, offset, asyncio.Event()
        )
        link.room.set()
        await link.open(since=offset or None, takeover=False, timeout=10)
        try:
            async with asyncio.timeout(10):
                while len(got) < size:
                    await asyncio.sleep(0.005)
                if server_closes:
                    await link.ended.wait()
        finally:
            await link.close()
    return bytes(got), link


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", CASES)
async def test_recorded_connections_give_their_output_exactly_once(version: str, name: str) -> None:
    for exchange in connections(version, name):
        replays = [f for f in server_frames(exchange) if f.get("channel") == "replay"]
        # From scratch, and as a client that already has part of the replayed output.
        offsets = [0] + [r["offset"] + r["data_length"] // 2 for r in replays]
        for offset in offsets:
            output, final = expected(exchange, offset)
            got, link = await play(exchange, offset, len(output))
            assert got == output and link.offset == final
            exits = [
                f["json"]["exit_code"]
                for f in server_frames(exchange)
                if f.get("json", {}).get("type") == "exit"
            ]
            if exits:  # execd's -1 (a signal, which one it does not say) is no code
                code = None if exits[0] == -1 else exits[0]
                assert link.reason == "exit" and link.exit_code == code


async def test_the_one_mebibyte_replay_is_kept_whole() -> None:
    exchange = connections("v1.0.19", "pty_replay")[-1]
    got, link = await play(exchange, 0, 1 << 20)
    frame = next(f for f in server_frames(exchange) if f.get("channel") == "replay")
    assert len(got) == frame["data_length"] == 1 << 20
    assert link.offset == frame["offset"] + len(got) == 1_200_162
    assert got.endswith(b"y\r\nbig-2\r\nbash-5.2# ")
