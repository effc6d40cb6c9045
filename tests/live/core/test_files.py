"""Native file transfer against the live testbed: exact bytes, atomic writes, builtin errors."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
from collections.abc import AsyncIterator

import pytest

from opensandbox_core import AsyncSandboxSession, ConfigurationError, OutputLimitError


async def test_binary_round_trip_and_parents(session: AsyncSandboxSession) -> None:
    data = bytes(range(256)) * 41
    await session.write_bytes("deep/er/data.bin", data)
    assert await session.read_bytes("deep/er/data.bin") == data
    info = await session.stat("deep/er/data.bin")
    assert (info.size, info.mode, info.is_file, info.kind) == (len(data), 0o644, True, "file")
    assert (await session.run("sha256sum deep/er/data.bin")).stdout.split()[0] == hashlib.sha256(
        data
    ).hexdigest()


async def test_overwrite_keeps_mode_and_is_atomic(session: AsyncSandboxSession) -> None:
    await session.write_bytes("/tmp/script.sh", b"#!/bin/sh\necho v1\n")
    await session.run("chmod 750 /tmp/script.sh")
    await session.write_bytes("/tmp/script.sh", b"#!/bin/sh\necho v2\n")
    assert (await session.stat("/tmp/script.sh")).mode == 0o750
    assert (await session.run("/tmp/script.sh")).stdout == "v2\n"
    leftovers = (await session.run("ls -a /tmp | grep -c osb- || true")).stdout.strip()
    assert leftovers == "0"


async def test_explicit_mode(session: AsyncSandboxSession) -> None:
    await session.write_bytes("/tmp/m.txt", b"x", mode=0o600)
    assert (await session.stat("/tmp/m.txt")).mode == 0o600


async def test_path_errors_are_builtin(session: AsyncSandboxSession) -> None:
    await session.make_dir("/tmp/dir")
    await session.write_bytes("/tmp/file", b"data")
    with pytest.raises(FileNotFoundError):
        await session.read_bytes("/tmp/missing")
    with pytest.raises(FileNotFoundError):
        await session.stat("/tmp/missing")
    with pytest.raises(IsADirectoryError):
        await session.read_bytes("/tmp/dir")
    with pytest.raises(IsADirectoryError):
        await session.write_bytes("/tmp/dir", b"x")
    with pytest.raises(NotADirectoryError):
        await session.write_bytes("/tmp/file/child", b"x")
    with pytest.raises(NotADirectoryError):
        await session.list_dir("/tmp/file")
    with pytest.raises(FileExistsError):
        await session.make_dir("/tmp/file")
    with pytest.raises(FileNotFoundError):
        await session.remove("/tmp/missing")
    with pytest.raises(ConfigurationError):
        await session.read_bytes("bad\0path")
    assert not await session.exists("/tmp/file/child")


async def test_remove_refuses_working_dir_and_ancestors(session: AsyncSandboxSession) -> None:
    workdir = await session.working_dir()
    for path in (".", workdir, os.path.dirname(workdir), "/", workdir + "/"):
        with pytest.raises(ValueError):
            await session.remove(path)
    assert await session.exists(workdir)
    await session.write_bytes("tree/a/b.txt", b"x")
    await session.remove("tree")
    assert not await session.exists("tree")


async def test_fifo_never_blocks_a_read(session: AsyncSandboxSession) -> None:
    await session.run("mkfifo /tmp/fifo")
    async with asyncio.timeout(20):
        with pytest.raises(OSError):
            await session.read_bytes("/tmp/fifo")


async def test_symlinks(session: AsyncSandboxSession) -> None:
    await session.write_bytes("/tmp/target", b"old")
    await session.run("ln -s /tmp/target /tmp/link && mkdir -p /tmp/d && ln -s /tmp/d /tmp/dlink")
    await session.write_bytes("/tmp/link", b"new")
    assert await session.read_bytes("/tmp/target") == b"new"
    assert await session.realpath("/tmp/link") == "/tmp/target"
    assert (await session.stat("/tmp/dlink")).is_dir
    names = {
        e.name: e.is_dir for e in await session.list_dir("/tmp") if e.name in ("d", "dlink", "link")
    }
    assert names == {"d": True, "dlink": True, "link": False}
    assert await session.realpath("/tmp/dlink/missing") == "/tmp/d/missing"


async def test_list_dir_and_exists(session: AsyncSandboxSession) -> None:
    await session.write_bytes("ls/b.txt", b"b")
    await session.write_bytes("ls/a.txt", b"aa")
    await session.make_dir("ls/sub")
    entries = await session.list_dir("ls")
    assert [(e.name, e.is_dir, e.size if not e.is_dir else None) for e in entries] == [
        ("a.txt", False, 2),
        ("b.txt", False, 1),
        ("sub", True, None),
    ]
    assert await session.exists("ls/sub")
    assert not await session.exists("ls/none")


async def test_batch_results_in_order(session: AsyncSandboxSession) -> None:
    await session.make_dir("/tmp/adir")
    results = await session.upload_files(
        [("/tmp/u1", b"1"), ("/tmp/adir", b"x"), ("bad\0", b"x"), ("/tmp/u2", b"2")]
    )
    assert [r.error for r in results] == [None, "is_directory", "invalid_path", None]
    downloads = await session.download_files(["/tmp/u1", "/tmp/nope", "/tmp/adir", "/tmp/u2"])
    assert [(d.error, d.content) for d in downloads] == [
        (None, b"1"),
        ("file_not_found", None),
        ("is_directory", None),
        (None, b"2"),
    ]


async def test_read_limit(session: AsyncSandboxSession) -> None:
    await session.write_bytes("/tmp/big", b"x" * 5000)
    with pytest.raises(OutputLimitError):
        await session.read_bytes("/tmp/big", max_size=1000)


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def test_256_mib_round_trip_with_bounded_memory(session: AsyncSandboxSession) -> None:
    chunk = os.urandom(1 << 20)
    total = 256
    expected = hashlib.sha256()
    for _ in range(total):
        expected.update(chunk)

    async def produce() -> AsyncIterator[bytes]:
        for _ in range(total):
            yield chunk

    before = _rss_mib()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    await session.write_bytes("/tmp/huge.bin", produce(), timeout=600)
    digest = hashlib.sha256()
    size = 0
    async for part in session.iter_bytes("/tmp/huge.bin"):
        digest.update(part)
        size += len(part)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - max(peak_before, before)
    assert size == total << 20
    assert digest.hexdigest() == expected.hexdigest()
    print(f"256 MiB round trip: peak RSS grew by {grown:.1f} MiB")
    assert grown < 64, f"client memory grew by {grown:.0f} MiB for a streamed 256 MiB transfer"
    await session.remove("/tmp/huge.bin")
