"""Reads of files that execd cannot serve by download, offline, on both recorded generations.

execd answers a download of a /proc file or a FIFO with HTTP 500 "seeker can't seek" (recorded:
`files_special`), a device with an empty 200, a sysfs file with a body shorter than it claims.
The core reads such files with one bounded command (`dd` under `timeout`, printed as base64):
here the stand-in execd of `test_files_offline` answers the file routes (the recorded 500 where
a real execd gives it) and the commands run on this machine for real, on its own /proc, /dev,
FIFOs and sockets. A regular read still costs exactly what it did: no command, one download.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from test_files_offline import VERSIONS, Commands, Offline, _session, recorded, replay

from opensandbox_core import OutputLimitError
from opensandbox_core._files import _fallback as _files

CANNOT_SEEK = "seeker can't seek"


@pytest.fixture(params=VERSIONS)
async def offline(request: pytest.FixtureRequest, tmp_path: Path) -> Offline:
    version: str = request.param
    return _session(version, tmp_path, f"special-{version}-{os.urandom(4).hex()}")


@pytest.fixture(autouse=True)
def _short_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # A FIFO without a writer waits out the whole read time: keep it short here.
    monkeypatch.setattr(_files, "SPECIAL_READ_SECONDS", 0.5)


def _reads(commands: Commands) -> list[list[str]]:
    """The special-file read commands that ran (`dd` under `timeout`)."""
    return [a for a in commands.argvs if any("dd if=" in item for item in a)]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_recording_says_seeker_cannot_seek(version: str) -> None:
    """The answers this suite relies on are the recorded ones, on both generations."""
    for note in ("download /proc/self/status", "download /proc/version", "download /proc/self/mem"):
        answer = recorded(version, "files_special", note)["response"]
        assert answer["status"] == 500
        assert CANNOT_SEEK in answer["body_text"]
    fifo = recorded(
        version, "files_special", "download the fifo (a writer sends 9 bytes after 0.3 s)"
    )
    assert fifo["response"]["status"] == 500 and CANNOT_SEEK in fifo["response"]["body_text"]


async def test_cannot_seek_answer_falls_back_to_a_command(offline: Offline, tmp_path: Path) -> None:
    """A file that looks regular but whose download execd refuses with the recorded 500 (a /proc
    file behind a symlink, such as /etc/mtab) is read by one command, byte for byte."""
    session, daemon, commands = offline
    content = bytes(range(256)) * 3 + b"\xff\xfe not utf-8 \x00 end"
    path = tmp_path / "mtab"
    path.write_bytes(content)
    daemon.overrides[("GET", "/files/download", str(path))] = replay(
        recorded(daemon.version, "files_special", "download /proc/self/status")
    )
    assert await session.files.read_bytes(str(path)) == content
    assert daemon.count("GET", "/files/download", str(path)) == 1
    assert len(_reads(commands)) == 1
    # The same through read_range (its Range download gets the same 500) and iter_bytes.
    assert await session.files.read_range(str(path), 250, 10) == content[250:260]
    chunks = [c async for c in session.files.iter_bytes(str(path), chunk_size=100)]
    assert b"".join(chunks) == content and max(map(len, chunks)) == 100
    with pytest.raises(OutputLimitError):
        await session.files.read_bytes(str(path), max_size=len(content) - 1)
    assert await session.files.read_bytes(str(path), max_size=len(content)) == content


async def test_a_regular_read_sends_no_extra_request(offline: Offline, tmp_path: Path) -> None:
    session, daemon, commands = offline
    (tmp_path / "plain.txt").write_bytes(b"plain text\n")
    before = len(daemon.requests)
    assert await session.files.read_bytes("plain.txt") == b"plain text\n"
    sent = daemon.requests[before:]
    assert [r for m, r, q in sent if r == "/files/download"] == ["/files/download"]
    routes = {r for m, r, q in sent}
    # v1.0.19: info + download; v1.0.18: its inspection is one `find` command, then the download.
    assert routes <= {"/files/info", "/files/download"}
    assert _reads(commands) == []


async def test_proc_files_are_read_like_cat(offline: Offline) -> None:
    """A /proc entry (size 0 in execd's info) is never downloaded: one command reads it."""
    session, daemon, _commands = offline
    for path in ("/proc/version", "/proc/self/status"):
        daemon.overrides[("GET", "/files/download", path)] = replay(
            recorded(daemon.version, "files_special", f"download {path}")
        )
    expected = Path("/proc/version").read_bytes()
    assert expected and await session.files.read_bytes("/proc/version") == expected
    status = await session.files.read_bytes("/proc/self/status")
    assert status.startswith(b"Name:\t") and b"\nPid:\t" in status
    assert await session.files.read_range("/proc/version", 3, 7) == expected[3:10]
    assert await session.files.read_range("/proc/version", len(expected) + 5, 7) == b""
    chunks = [c async for c in session.files.iter_bytes("/proc/version", chunk_size=4)]
    assert b"".join(chunks) == expected and len(chunks[0]) == 4
    assert daemon.count("GET", "/files/download", "/proc/version") == 0
    with pytest.raises(OutputLimitError):
        await session.files.read_bytes("/proc/version", max_size=len(expected) - 1)
    with pytest.raises(OSError) as mem:
        await session.files.read_bytes("/proc/self/mem")
    assert mem.value.errno == errno.EIO and mem.value.filename == "/proc/self/mem"


async def test_devices_are_bounded(offline: Offline, monkeypatch: pytest.MonkeyPatch) -> None:
    session, daemon, _commands = offline
    monkeypatch.setattr(_files, "SPECIAL_READ_LIMIT", 4096)
    empty = recorded(daemon.version, "files_special", "download /dev/zero, Range bytes=0-15")
    assert empty["response"]["status"] == 200 and not empty["response"]["body_text"]
    for device in ("/dev/zero", "/dev/urandom", "/dev/null"):  # what execd answers: nothing
        daemon.overrides[("GET", "/files/download", device)] = replay(empty)
    assert await session.files.read_bytes("/dev/null") == b""
    with pytest.raises(OutputLimitError) as limited:
        await session.files.read_bytes("/dev/zero", max_size=16)
    assert limited.value.limit == 16 and "/dev/zero" in str(limited.value)
    with pytest.raises(OSError) as endless:
        await session.files.read_bytes("/dev/zero")
    assert endless.value.errno == errno.EFBIG and endless.value.filename == "/dev/zero"
    assert daemon.count("GET", "/files/download", "/dev/zero") == 0  # a device: never asked
    assert await session.files.read_range("/dev/zero", 100, 16) == b"\0" * 16
    assert len(await session.files.read_range("/dev/urandom", 0, 4096)) == 4096
    with pytest.raises(OSError) as big:
        await session.files.read_range("/dev/zero", 0, 4097)
    assert big.value.errno == errno.EFBIG


async def test_fifos_never_block(offline: Offline, tmp_path: Path) -> None:
    session, daemon, _commands = offline
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(TimeoutError) as timed_out:
        await session.files.read_bytes(str(fifo))
    elapsed = time.monotonic() - started
    assert timed_out.value.errno == errno.ETIMEDOUT and timed_out.value.filename == str(fifo)
    assert "FIFO" in str(timed_out.value)
    assert elapsed < _files.SPECIAL_READ_SECONDS + 5

    def writer() -> None:
        time.sleep(0.1)
        with open(fifo, "wb") as f:
            f.write(b"through the fifo")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert await session.files.read_bytes(str(fifo)) == b"through the fifo"
    finally:
        await asyncio.to_thread(thread.join, 5)
    assert daemon.count("GET", "/files/download", str(fifo)) == 0


async def test_sockets_and_loops_are_path_errors(offline: Offline, tmp_path: Path) -> None:
    session, _daemon, _commands = offline
    os.symlink("loop", tmp_path / "loop")
    with pytest.raises(OSError) as loop:
        await session.files.read_bytes(str(tmp_path / "loop"))
    assert loop.value.errno == errno.ELOOP and loop.value.filename == str(tmp_path / "loop")
    with pytest.raises(OSError) as ranged:
        await session.files.read_range(str(tmp_path / "loop"), 0, 4)
    assert ranged.value.errno == errno.ELOOP
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock"))
        with pytest.raises(OSError) as refused:
            await session.files.read_bytes(str(tmp_path / "sock"))
        assert refused.value.errno == errno.ENXIO and refused.value.filename == str(
            tmp_path / "sock"
        )
    finally:
        sock.close()


async def test_download_files_answers_per_file(offline: Offline, tmp_path: Path) -> None:
    """The batch never raises for a special path: one result per path, in order."""
    session, _daemon, _commands = offline
    os.mkfifo(tmp_path / "fifo")
    os.symlink("loop", tmp_path / "loop")
    (tmp_path / "ok.txt").write_bytes(b"ok")
    paths = ["/proc/version", str(tmp_path / "fifo"), str(tmp_path / "loop"), "ok.txt"]
    results = await session.files.download_files(paths)
    assert [r.path for r in results] == paths
    assert results[0].content == Path("/proc/version").read_bytes()
    assert isinstance(results[1].exception, TimeoutError) and results[1].error == "error"
    assert isinstance(results[2].exception, OSError) and results[2].exception.errno == errno.ELOOP
    assert results[3].content == b"ok" and results[3].error is None


def test_special_read_output_is_parsed_exactly() -> None:
    data, status, text = _files.parse_special_read("AAEC/w==", "")
    assert (data, status, text) == (b"\x00\x01\x02\xff", 0, "")
    data, status, text = _files.parse_special_read(
        "", "dd: failed to open '/x': Permission denied\nosb-read-status 1\n"
    )
    assert (data, status, text) == (b"", 1, "Permission denied")
    with pytest.raises(ValueError):
        _files.parse_special_read("not base64!", "")
    assert _files.read_by_command("/proc/cpuinfo") and _files.read_by_command("/sys/x/y")
    assert not _files.read_by_command("/procfs/x") and not _files.read_by_command("/tmp/proc/x")
    assert _files.base64_length(0) == 0 and _files.base64_length(4) == 8
