"""`read_bytes` of a file the session knows as a regular file (`_files._transfers`): one download,
awaited in the caller's task, its body read whole when the declared length is small; a download
whose answer does not begin within `_SLOW_ANSWER` is given up and the path inspected (a path that
became a FIFO blocks execd's download). Offline, on the stand-in execd of `test_files_offline`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from test_files_offline import VERSIONS, FakeExecd, Offline, _session

from opensandbox_core import OutputLimitError
from opensandbox_core._files import _transfers
from opensandbox_core._wire._execd import ExecdClient


class _SlowDownloads(httpx.AsyncBaseTransport):
    """The fake's answers, the next `slow` downloads only after `delay` seconds."""

    def __init__(self, daemon: FakeExecd, delay: float) -> None:
        self.inner = httpx.MockTransport(daemon.handler)
        self.delay = delay
        self.slow = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/files/download" and self.slow:
            self.slow -= 1
            await asyncio.sleep(self.delay)
        return await self.inner.handle_async_request(request)


@pytest.fixture(params=VERSIONS)
async def offline(request: pytest.FixtureRequest, tmp_path: Path) -> Offline:
    version: str = request.param
    return _session(version, tmp_path, f"known-{version}-{os.urandom(4).hex()}")


def _slowed(offline: Offline, delay: float) -> _SlowDownloads:
    """The session's execd client replaced by one whose downloads can be delayed."""
    session, daemon, _ = offline
    transport = _SlowDownloads(daemon, delay)
    clients = session._life.clients()
    assert clients.execd is not None
    clients.execd = ExecdClient(clients.execd.endpoint, transport=transport, request_timeout=10)
    return transport


async def test_a_known_file_costs_one_download_read_whole(offline: Offline, tmp_path: Path) -> None:
    session, daemon, _ = offline
    content = os.urandom(4096)
    await session.files.write_bytes(str(tmp_path / "k.bin"), content)
    before = len(daemon.requests)
    assert await session.files.read_bytes(str(tmp_path / "k.bin")) == content
    assert [r[:2] for r in daemon.requests[before:]] == [("GET", "/files/download")]
    with pytest.raises(OutputLimitError):  # the declared length says so: nothing is read
        await session.files.read_bytes(str(tmp_path / "k.bin"), max_size=4095)
    assert await session.files.read_bytes(str(tmp_path / "k.bin"), max_size=4096) == content


async def test_a_long_known_file_streams_into_one_buffer(
    offline: Offline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, _, _ = offline
    monkeypatch.setattr(_transfers, "_WHOLE_BODY", 100)
    content = os.urandom(5000)
    await session.files.write_bytes(str(tmp_path / "long.bin"), content)
    assert await session.files.read_bytes(str(tmp_path / "long.bin")) == content


async def test_a_download_that_does_not_begin_is_given_up_for_an_inspection(
    offline: Offline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, daemon, commands = offline
    monkeypatch.setattr(_transfers, "_SLOW_ANSWER", 0.05)
    path = str(tmp_path / "slow.bin")
    await session.files.write_bytes(path, b"slow but regular")
    transport = _slowed(offline, delay=1.0)
    transport.slow = 1
    before, ran = len(daemon.requests), len(commands.argvs)
    async with asyncio.timeout(0.9):  # not waited for: given up after _SLOW_ANSWER
        assert await session.files.read_bytes(path) == b"slow but regular"
    routes = [r[1] for r in daemon.requests[before:]]
    assert routes.count("/files/download") == 1  # the slow one never reached the daemon
    assert routes[-1] == "/files/download"
    # inspected first: execd's lstat on v1.0.19, a command on v1.0.18 (its file API has none)
    assert "/files/info" in routes or len(commands.argvs) > ran
    # The file is known again: the next read is one download.
    before = len(daemon.requests)
    assert await session.files.read_bytes(path) == b"slow but regular"
    assert [r[1] for r in daemon.requests[before:]] == ["/files/download"]
