"""Native file transfer against the live testbed: exact bytes, atomic writes, builtin errors."""

from __future__ import annotations

import asyncio
import hashlib
import os
import posixpath
import resource
from collections.abc import AsyncIterator

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    OutputLimitError,
    SandboxSpec,
)


async def test_binary_round_trip_and_parents(session: AsyncSandboxSession) -> None:
    data = bytes(range(256)) * 41
    await session.files.write_bytes("deep/er/data.bin", data)
    assert await session.files.read_bytes("deep/er/data.bin") == data
    info = await session.files.stat("deep/er/data.bin")
    assert (info.size, info.mode, info.is_file, info.kind) == (len(data), 0o644, True, "file")
    assert (await session.commands.run("sha256sum deep/er/data.bin")).stdout.split()[
        0
    ] == hashlib.sha256(data).hexdigest()


async def test_overwrite_keeps_mode_and_is_atomic(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("/tmp/script.sh", b"#!/bin/sh\necho v1\n")
    await session.commands.run("chmod 750 /tmp/script.sh")
    await session.files.write_bytes("/tmp/script.sh", b"#!/bin/sh\necho v2\n")
    assert (await session.files.stat("/tmp/script.sh")).mode == 0o750
    assert (await session.commands.run("/tmp/script.sh")).stdout == "v2\n"
    leftovers = (await session.commands.run("ls -a /tmp | grep -c osb- || true")).stdout.strip()
    assert leftovers == "0"


async def test_explicit_mode(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("/tmp/m.txt", b"x", mode=0o600)
    assert (await session.files.stat("/tmp/m.txt")).mode == 0o600


async def test_path_errors_are_builtin(session: AsyncSandboxSession) -> None:
    await session.files.make_dir("/tmp/dir")
    await session.files.write_bytes("/tmp/file", b"data")
    with pytest.raises(FileNotFoundError):
        await session.files.read_bytes("/tmp/missing")
    with pytest.raises(FileNotFoundError):
        await session.files.stat("/tmp/missing")
    with pytest.raises(IsADirectoryError):
        await session.files.read_bytes("/tmp/dir")
    with pytest.raises(IsADirectoryError):
        await session.files.write_bytes("/tmp/dir", b"x")
    with pytest.raises(NotADirectoryError):
        await session.files.write_bytes("/tmp/file/child", b"x")
    with pytest.raises(NotADirectoryError):
        await session.files.list_dir("/tmp/file")
    with pytest.raises(FileExistsError):
        await session.files.make_dir("/tmp/file")
    with pytest.raises(FileNotFoundError):
        await session.files.remove("/tmp/missing")
    with pytest.raises(ConfigurationError):
        await session.files.read_bytes("bad\0path")
    assert not await session.files.exists("/tmp/file/child")


async def test_remove_refuses_working_dir_and_ancestors(session: AsyncSandboxSession) -> None:
    workdir = await session.working_dir()
    for path in (".", workdir, os.path.dirname(workdir), "/", workdir + "/"):
        with pytest.raises(ValueError):
            await session.files.remove(path)
    assert await session.files.exists(workdir)
    await session.files.write_bytes("tree/a/b.txt", b"x")
    await session.files.remove("tree")
    assert not await session.files.exists("tree")


async def test_fifo_never_blocks_a_read(session: AsyncSandboxSession) -> None:
    await session.commands.run("mkfifo /tmp/fifo")
    async with asyncio.timeout(20):
        with pytest.raises(OSError):
            await session.files.read_bytes("/tmp/fifo")


async def test_symlinks(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("/tmp/target", b"old")
    await session.commands.run(
        "ln -s /tmp/target /tmp/link && mkdir -p /tmp/d && ln -s /tmp/d /tmp/dlink"
    )
    await session.files.write_bytes("/tmp/link", b"new")
    assert await session.files.read_bytes("/tmp/target") == b"new"
    assert await session.files.realpath("/tmp/link") == "/tmp/target"
    assert (await session.files.stat("/tmp/dlink")).is_dir
    names = {
        e.name: e.is_dir
        for e in await session.files.list_dir("/tmp")
        if e.name in ("d", "dlink", "link")
    }
    assert names == {"d": True, "dlink": True, "link": False}
    assert await session.files.realpath("/tmp/dlink/missing") == "/tmp/d/missing"


async def test_list_dir_and_exists(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("ls/b.txt", b"b")
    await session.files.write_bytes("ls/a.txt", b"aa")
    await session.files.make_dir("ls/sub")
    entries = await session.files.list_dir("ls")
    assert [(e.name, e.is_dir, e.size if not e.is_dir else None) for e in entries] == [
        ("a.txt", False, 2),
        ("b.txt", False, 1),
        ("sub", True, None),
    ]
    assert await session.files.exists("ls/sub")
    assert not await session.files.exists("ls/none")


async def test_batch_results_in_order(session: AsyncSandboxSession) -> None:
    await session.files.make_dir("/tmp/adir")
    results = await session.files.upload_files(
        [("/tmp/u1", b"1"), ("/tmp/adir", b"x"), ("bad\0", b"x"), ("/tmp/u2", b"2")]
    )
    assert [r.error for r in results] == [None, "is_directory", "invalid_path", None]
    downloads = await session.files.download_files(["/tmp/u1", "/tmp/nope", "/tmp/adir", "/tmp/u2"])
    assert [(d.error, d.content) for d in downloads] == [
        (None, b"1"),
        ("file_not_found", None),
        ("is_directory", None),
        (None, b"2"),
    ]


async def test_read_limit(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("/tmp/big", b"x" * 5000)
    with pytest.raises(OutputLimitError):
        await session.files.read_bytes("/tmp/big", max_size=1000)


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
    await session.files.write_bytes("/tmp/huge.bin", produce(), timeout=600)
    digest = hashlib.sha256()
    size = 0
    async for part in session.files.iter_bytes("/tmp/huge.bin"):
        digest.update(part)
        size += len(part)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - max(peak_before, before)
    assert size == total << 20
    assert digest.hexdigest() == expected.hexdigest()
    print(f"256 MiB round trip: peak RSS grew by {grown:.1f} MiB")
    assert grown < 64, f"client memory grew by {grown:.0f} MiB for a streamed 256 MiB transfer"
    await session.files.remove("/tmp/huge.bin")


DOLLAR_NAMES = [
    "price$5.txt",
    "pid$$.txt",
    "brace${}.txt",
    "x$HOMEy",
    "$HOME",
    "${HOME}",
    "at$@star$*",
    "ends-with$",
    "~",
    "~root",
]


async def _names_on_disk(session: AsyncSandboxSession, directory: str) -> list[str]:
    result = await session.commands.run(["find", directory, "-mindepth", "1", "-printf", "%P\\0"])
    assert result.exit_code == 0, result.stderr
    return sorted(n for n in result.stdout.split("\0") if n)


async def test_dollar_and_tilde_names_are_taken_literally(session: AsyncSandboxSession) -> None:
    """execd expands `$` and a leading `~` in paths; the core never lets it."""
    base = "/tmp/dollar"
    for name in DOLLAR_NAMES:
        for path in (f"{base}/{name}", f"{base}/in$1dir/{name}", f"dollar-rel/{name}"):
            data = f"content of {path}".encode()
            await session.files.write_bytes(path, data)
            assert await session.files.read_bytes(path) == data, path
            info = await session.files.stat(path)
            assert (info.kind, info.size, info.name) == ("file", len(data), name), path
            parent = path.rsplit("/", 1)[0]
            assert name in [e.name for e in await session.files.list_dir(parent)], path
    expected = sorted([*DOLLAR_NAMES, "in$1dir", *(f"in$1dir/{n}" for n in DOLLAR_NAMES)])
    assert await _names_on_disk(session, base) == expected
    await session.files.make_dir(f"{base}/made$1/${{x}}")
    assert (await session.files.stat(f"{base}/made$1/${{x}}")).is_dir
    for name in DOLLAR_NAMES:
        await session.files.remove(f"{base}/{name}")
        assert not await session.files.exists(f"{base}/{name}")
    await session.files.remove(f"{base}/in$1dir")
    await session.files.remove(f"{base}/made$1")
    assert await _names_on_disk(session, base) == []
    home = (await session.commands.run(["sh", "-c", 'printf %s "$HOME"'])).stdout
    assert "dollar" not in (await session.commands.run(["ls", "-A", home or "/root"])).stdout


async def test_dotdot_resolves_like_the_kernel(session: AsyncSandboxSession) -> None:
    await session.commands.run(
        ["sh", "-c", "mkdir -p /tmp/kd/real/inner && ln -s real/inner /tmp/kd/jump"]
    )
    await session.files.write_bytes("/tmp/kd/jump/../via-link.txt", b"x")
    assert await session.files.read_bytes("/tmp/kd/real/via-link.txt") == b"x"
    await session.files.write_bytes("/tmp/kd/missing/../up.txt", b"y")  # like mkdir -p, then ..
    assert await session.files.read_bytes("/tmp/kd/up.txt") == b"y"
    assert await session.files.read_bytes("/tmp/kd/missing/../up.txt") == b"y"
    with pytest.raises(FileNotFoundError):
        await session.files.read_bytes("/tmp/kd/other-missing/../up.txt")
    assert [e.name for e in await session.files.list_dir("/tmp/kd/jump/..")] == [
        "inner",
        "via-link.txt",
    ]
    await session.files.write_bytes("../kd-up.txt", b"z")  # relative to the working dir
    workdir = await session.working_dir()
    assert (
        await session.files.read_bytes(posixpath.join(posixpath.dirname(workdir), "kd-up.txt"))
        == b"z"
    )


async def test_setuid_setgid_and_sticky_bits_are_applied(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("/tmp/suid.sh", b"#!/bin/sh\n", mode=0o4755)
    mode = await session.commands.run(["stat", "-c", "%a", "/tmp/suid.sh"])
    assert mode.stdout == "4755\n"
    await session.files.write_bytes(
        "/tmp/suid.sh", b"#!/bin/sh\necho 2\n"
    )  # an overwrite keeps them
    assert (await session.commands.run(["stat", "-c", "%a", "/tmp/suid.sh"])).stdout == "4755\n"
    await session.files.write_bytes("/tmp/sticky", b"", mode=0o1600)
    assert (await session.commands.run(["stat", "-c", "%a", "/tmp/sticky"])).stdout == "1600\n"


@pytest.mark.testbed_daemon("1.0.18")
async def test_v1_0_18_file_api_gives_the_same_results(sandbox_image: str) -> None:
    """A sandbox whose execd has v1.0.18's file API (no /directories/list, /files/info follows
    symlinks and has no type, missing paths are 500): every core file operation still works."""
    from opensandbox_core._files._filesystem import file_api_cache as _file_api_cache

    spec = SandboxSpec(image=sandbox_image, container_env={"OSB_EXECD_PROFILE": "1.0.18"})
    async with AsyncSandboxSession(spec) as sb:
        await sb.files.write_bytes("/tmp/v18/a.txt", b"aa")
        await sb.commands.run(
            ["sh", "-c", "cd /tmp/v18 && ln -s a.txt link && ln -s nowhere dangling && mkdir d"]
        )
        assert await sb.files.read_bytes("/tmp/v18/link") == b"aa"
        assert sb.id is not None  # the read inspected the link: the file API is known
        api = _file_api_cache[(sb.connection.resolved_domain(), sb.id)]
        assert not api.lstat_info and not api.has_list, "the sandbox runs a v1.0.19 file API"
        entries = {
            e.name: (e.kind, e.is_dir, e.is_file) for e in await sb.files.list_dir("/tmp/v18")
        }
        assert entries == {
            "a.txt": ("file", False, True),
            "d": ("directory", True, False),
            "dangling": ("symlink", False, False),
            "link": ("symlink", False, True),
        }
        assert await sb.files.exists("/tmp/v18/dangling")
        assert not await sb.files.exists("/tmp/v18/missing")
        with pytest.raises(FileNotFoundError):
            await sb.files.stat("/tmp/v18/missing")
        with pytest.raises(FileNotFoundError):
            await sb.files.read_bytes("/tmp/v18/missing")
        with pytest.raises(NotADirectoryError):
            await sb.files.list_dir("/tmp/v18/a.txt")
        await sb.files.write_bytes("/tmp/v18/link", b"through")
        assert await sb.files.read_bytes("/tmp/v18/a.txt") == b"through"
        await sb.files.make_dir("/tmp/v18/d/e")
        await sb.files.remove("/tmp/v18/d")
        assert not await sb.files.exists("/tmp/v18/d")
        await sb.files.write_bytes("/tmp/v18/price$5.txt", b"5")
        assert await _names_on_disk(sb, "/tmp/v18") == sorted(
            ["a.txt", "dangling", "link", "price$5.txt"]
        )


async def test_a_dollar_cwd_is_entered_literally(session: AsyncSandboxSession) -> None:
    await session.files.make_dir("/tmp/cwd/p$$q/${HOME}")
    result = await session.commands.run("pwd; ls -A ..", cwd="/tmp/cwd/p$$q/${HOME}")
    assert result.stdout == "/tmp/cwd/p$$q/${HOME}\n${HOME}\n"
    process = await session.commands.start_background(["pwd"], cwd="/tmp/cwd/p$$q")
    assert await process.wait(timeout=30) == 0
    assert (await process.read_output()).text == "/tmp/cwd/p$$q\n"
    with pytest.raises(FileNotFoundError):
        await session.commands.run("pwd", cwd="/tmp/cwd/missing$1")
