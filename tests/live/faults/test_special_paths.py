"""Special paths, live, through every file method of the core and both adapters.

execd cannot serve these by download (issue 24, recording `files_special`): /proc files and FIFOs
answer HTTP 500 "seeker can't seek", sysfs files claim 4096 bytes, devices claim none. The core
reads them like `cat` would, with one bounded command; what cannot be given whole is a builtin
OSError naming the path. Each case states the exact outcome for each package (the bytes, or the
error class, errno and the path in it) and every call returns within its bound.

One body per scenario runs for each package (`PACKAGES`); `Specials` holds what differs: the
calls each package has and how it reports a refusal. Deep Agents reports per file and never
raises: its refusals are the protocol's error codes.
"""

from __future__ import annotations

import asyncio
import errno
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from _drivers import PACKAGES, Driver, open_driver

from opensandbox_core import OutputLimitError

BASE = "/tmp/special"
SECONDS = (
    5.0  # opensandbox_core._files._fallback.SPECIAL_READ_SECONDS: a FIFO without a writer ends here
)
BOUND = SECONDS + 30  # every call returns within this (the read's limit, then slack)
SETUP = (
    f"mkdir -p {BASE} && cd {BASE} && ln -sfn loop loop && rm -f fifo fed && mkfifo fifo fed"
    " && truncate -s 10G sparse && printf secret > locked && chmod 000 locked"
    " && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\""
    " && echo ready"
)
FED = b"fed through the fifo\n"


class Refused(Exception):
    """A Deep Agents call that answered with an error (code or message) instead of raising."""

    def __init__(self, path: str, code: str) -> None:
        super().__init__(f"{path!r}: {code}")
        self.code = code


async def timed(call: Callable[[], Awaitable[Any]], bound: float = BOUND) -> Any:
    """The call's value or exception, asserting it came within `bound` seconds."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(bound + 5):
            return await call()
    except TimeoutError as exc:
        if time.monotonic() - started >= bound + 5:
            raise AssertionError(f"hung: {call}") from exc
        return exc
    except Exception as exc:
        return exc
    finally:
        assert time.monotonic() - started < bound, f"slow: {call}"


def oserror(outcome: object, code: int, path: str) -> None:
    """`outcome` is a builtin OSError with errno `code` naming `path`."""
    assert isinstance(outcome, OSError), (path, outcome)
    assert outcome.errno == code, (path, outcome)
    assert outcome.filename == path and path in str(outcome), (path, outcome)


@dataclass
class Specials:
    """One package's calls for these scenarios. `read` returns bytes or raises the package's
    refusal: a builtin OSError (core, Pydantic AI) or `Refused` with the protocol's code (Deep
    Agents); `refused(outcome, errno, path)` checks a refusal of an unreadable special file."""

    read: Callable[[str], Awaitable[bytes]]
    refused: Callable[[object, int, str], None]
    read_range: Callable[[str, int, int], Awaitable[bytes]] | None
    read_limited: Callable[[str, int], Awaitable[bytes]] | None
    iter_bytes: Callable[[str], Awaitable[list[bytes]]] | None
    stat: Callable[[str], Awaitable[tuple[bool, int]]] | None  # is_dir, size
    exists: Callable[[str], Awaitable[bool]] | None
    names: Callable[[str], Awaitable[list[str]]]
    write: Callable[[str, bytes], Awaitable[Any]]
    remove: Callable[[str], Awaitable[Any]] | None


def specials(driver: Driver) -> Specials:
    backend = driver.backend
    if driver.package == "core":

        async def core_iter(path: str) -> list[bytes]:
            return [c async for c in backend.files.iter_bytes(path, chunk_size=64)]

        async def core_stat(path: str) -> tuple[bool, int]:
            info = await backend.files.stat(path)
            return info.is_dir, info.size

        async def core_names(path: str) -> list[str]:
            return [e.name for e in await backend.files.list_dir(path)]

        return Specials(
            read=backend.files.read_bytes,
            refused=oserror,
            read_range=backend.files.read_range,
            read_limited=lambda p, n: backend.files.read_bytes(p, max_size=n),
            iter_bytes=core_iter,
            stat=core_stat,
            exists=backend.files.exists,
            names=core_names,
            write=backend.files.write_bytes,
            remove=backend.files.remove,
        )
    if driver.package == "pydantic_ai":

        async def pyd_stat(path: str) -> tuple[bool, int]:
            entry = await backend.stat(path)
            return bool(entry.is_dir), int(entry.size or 0)

        async def pyd_names(path: str) -> list[str]:
            return [e.path.rsplit("/", 1)[-1] for e in await backend.list_dir(path)]

        return Specials(
            read=backend.read_bytes,
            refused=oserror,
            read_range=None,
            read_limited=None,
            iter_bytes=None,
            stat=pyd_stat,
            exists=backend.exists,
            names=pyd_names,
            write=backend.write_bytes,
            remove=backend.remove,
        )

    async def deep_read(path: str) -> bytes:
        (result,) = await backend.adownload_files([path])
        if result.error is not None or result.content is None:
            raise Refused(path, str(result.error))
        return bytes(result.content)

    def deep_refused(outcome: object, code: int, path: str) -> None:
        assert isinstance(outcome, Refused) and outcome.code == "invalid_path", (path, outcome)

    async def deep_names(path: str) -> list[str]:
        listed = await backend.als(path)
        if listed.error:
            raise Refused(path, listed.error)
        return [e["path"].rsplit("/", 1)[-1] for e in listed.entries or []]

    async def deep_write(path: str, data: bytes) -> None:
        (result,) = await backend.aupload_files([(path, data)])
        if result.error is not None:
            raise Refused(path, result.error)

    return Specials(
        read=deep_read,
        refused=deep_refused,
        read_range=None,
        read_limited=None,
        iter_bytes=None,
        stat=None,
        exists=None,
        names=deep_names,
        write=deep_write,
        remove=None,
    )


async def _cat(driver: Driver, path: str) -> bytes:
    """What `cat` gives for `path` in the sandbox (base64, so the bytes are exact)."""
    code, out = await driver.run(f"base64 -w0 {path}", 30)
    assert code == 0, (path, out)
    import base64

    return base64.b64decode(out)


async def _sys_file(driver: Driver) -> str:
    """A readable sysfs file of this container with some content."""
    script = (
        "for f in /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/osrelease"
        " /sys/fs/cgroup/cgroup.controllers /sys/devices/system/cpu/online"
        ' /sys/class/net/lo/address; do [ -r "$f" ] && [ -s "$f" -o -n "$(head -c1 "$f")" ]'
        ' && { echo "$f"; exit 0; }; done; exit 1'
    )
    code, out = await driver.run(script, 30)
    assert code == 0, f"no readable sysfs file in the container: {out!r}"
    return out.strip()


@pytest.mark.parametrize("package", PACKAGES)
async def test_proc_and_sys_files_read_like_cat(package: str, sandbox_image: str) -> None:
    async with open_driver(package, sandbox_image) as driver:
        ops = specials(driver)
        sysfile = await _sys_file(driver)
        for path in ("/proc/version", "/proc/cpuinfo", "/proc/meminfo", sysfile):
            expected = await _cat(driver, path)
            got = await timed(lambda p=path: ops.read(p))
            if path in ("/proc/version", sysfile):  # stable between two reads
                assert got == expected and expected, (path, got)
            else:  # a line or two (clock speeds, free memory) moves between two reads
                assert isinstance(got, bytes), (path, got)
                assert got.split(b"\n")[0] == expected.split(b"\n")[0], (path, got[:80])
                assert abs(len(got) - len(expected)) < 200, (path, len(got), len(expected))
        status = await timed(lambda: ops.read("/proc/self/status"))
        assert isinstance(status, bytes) and status.startswith(b"Name:\t"), status
        assert b"processor" in await ops.read("/proc/cpuinfo")
        ops.refused(await timed(lambda: ops.read("/proc/self/mem")), errno.EIO, "/proc/self/mem")
        version = await _cat(driver, "/proc/version")
        if ops.read_range is not None:
            assert await timed(lambda: ops.read_range("/proc/version", 2, 9)) == version[2:11]
            assert await ops.read_range(sysfile, 0, 1 << 20) == await _cat(driver, sysfile)
            assert await ops.read_range("/proc/version", len(version) + 1, 4) == b""
        if ops.iter_bytes is not None:
            chunks = await timed(lambda: ops.iter_bytes("/proc/version"))
            assert b"".join(chunks) == version and max(map(len, chunks)) <= 64
        if ops.read_limited is not None:
            limited = await timed(lambda: ops.read_limited("/proc/version", len(version) - 1))
            assert isinstance(limited, OutputLimitError), limited
            assert await ops.read_limited("/proc/version", len(version)) == version
        if ops.stat is not None:
            assert await timed(lambda: ops.stat("/proc/version")) == (False, 0)
        if package == "core":
            info = await driver.session.files.stat("/proc/version")
            assert (info.kind, info.is_file) == ("file", True)
        if ops.exists is not None:
            assert await ops.exists("/proc/self/status")
            assert not await ops.exists("/proc/self/no-such-entry")
        assert "status" in await timed(lambda: ops.names("/proc/self"))
        # Writing or removing under /proc is refused as a path error, never a server error.
        written = await timed(lambda: ops.write("/proc/version", b"x"))
        if package == "deepagents":
            assert isinstance(written, Refused), written
            assert written.code in ("permission_denied", "invalid_path", "file_not_found")
        else:
            assert isinstance(written, OSError) and "/proc/version" in str(written), written
        if ops.remove is not None:
            removed = await timed(lambda: ops.remove("/proc/version"))
            assert isinstance(removed, OSError) and "/proc/version" in str(removed), removed
        assert await _cat(driver, "/proc/version") == version


@pytest.mark.parametrize("package", PACKAGES)
async def test_a_symlink_into_proc_reads_like_cat(package: str, sandbox_image: str) -> None:
    """/etc/mtab looks like a symlink to a regular file; execd's download of it answers
    "seeker can't seek" (it is /proc/self/mounts), and the core reads it by command then."""
    async with open_driver(package, sandbox_image) as driver:
        ops = specials(driver)
        expected = await _cat(driver, "/etc/mtab")
        assert expected.startswith(b"overlay / ") or b" / " in expected
        assert await timed(lambda: ops.read("/etc/mtab")) == expected


@pytest.mark.long
@pytest.mark.parametrize("package", PACKAGES)
async def test_devices_fifos_sockets_and_loops(package: str, sandbox_image: str) -> None:
    async with open_driver(package, sandbox_image) as driver:
        assert (await driver.run(SETUP, 60)) == (0, "ready\n")
        ops = specials(driver)
        assert await timed(lambda: ops.read("/dev/null")) == b""
        for device in ("/dev/zero", "/dev/urandom"):  # no end: never read whole
            ops.refused(await timed(lambda d=device: ops.read(d)), errno.EFBIG, device)
        if ops.read_limited is not None:
            limited = await timed(lambda: ops.read_limited("/dev/zero", 16))
            assert isinstance(limited, OutputLimitError) and "/dev/zero" in str(limited)
        if ops.read_range is not None:
            assert await timed(lambda: ops.read_range("/dev/zero", 7, 16)) == b"\0" * 16
            assert len(await ops.read_range("/dev/urandom", 0, 4096)) == 4096
        # A FIFO without a writer: the read's time limit, then a timeout naming it.
        started = time.monotonic()
        blocked = await timed(lambda: ops.read(f"{BASE}/fifo"))
        assert time.monotonic() - started >= SECONDS - 1
        ops.refused(blocked, errno.ETIMEDOUT, f"{BASE}/fifo")
        if ops.read_range is not None:
            blocked = await timed(lambda: ops.read_range(f"{BASE}/fifo", 0, 4))
            ops.refused(blocked, errno.ETIMEDOUT, f"{BASE}/fifo")
        # A FIFO with a writer: what the writer sent.
        writer = f"nohup sh -c 'printf \"{FED.decode()[:-1]}\\n\" > {BASE}/fed' >/dev/null 2>&1 &"
        assert (await driver.run(writer, 30))[0] == 0
        assert await timed(lambda: ops.read(f"{BASE}/fed")) == FED
        ops.refused(await timed(lambda: ops.read(f"{BASE}/sock")), errno.ENXIO, f"{BASE}/sock")
        ops.refused(await timed(lambda: ops.read(f"{BASE}/loop")), errno.ELOOP, f"{BASE}/loop")
        if ops.read_range is not None:
            looped = await timed(lambda: ops.read_range(f"{BASE}/loop", 0, 4))
            ops.refused(looped, errno.ELOOP, f"{BASE}/loop")
        if ops.stat is not None:
            for path in ("/dev/zero", f"{BASE}/fifo", f"{BASE}/sock"):
                assert await timed(lambda p=path: ops.stat(p)) == (False, 0), path
        if package == "core":
            for path in ("/dev/zero", f"{BASE}/fifo", f"{BASE}/sock"):
                info = await driver.session.files.stat(path)
                assert (info.kind, info.is_file, info.is_dir) == ("other", False, False), path
            loop = await driver.session.files.stat(f"{BASE}/loop")
            assert (loop.kind, loop.is_file, loop.is_dir) == ("symlink", False, False)
        if ops.exists is not None:
            for path in ("/dev/zero", f"{BASE}/fifo", f"{BASE}/sock", f"{BASE}/loop"):
                assert await timed(lambda p=path: ops.exists(p)) is True, path
        names = await timed(lambda: ops.names(BASE))
        assert {"fifo", "fed", "sock", "loop", "sparse", "locked"} <= set(names), names
        # Writing over a FIFO, a device or through a loop is refused; the FIFO stays a FIFO.
        for path in (f"{BASE}/fifo", "/dev/zero", f"{BASE}/loop"):
            written = await timed(lambda p=path: ops.write(p, b"x"))
            assert isinstance(written, OSError | Refused), (path, written)
        assert (await driver.run(f"test -p {BASE}/fifo && test -c /dev/zero", 30))[0] == 0


@pytest.mark.parametrize("package", PACKAGES)
async def test_huge_sparse_and_unreadable_files(package: str, sandbox_image: str) -> None:
    async with open_driver(package, sandbox_image) as driver:
        assert (await driver.run(SETUP, 60)) == (0, "ready\n")
        ops = specials(driver)
        sparse = f"{BASE}/sparse"
        if ops.stat is not None:
            assert await timed(lambda: ops.stat(sparse)) == (False, 10 << 30)
        if ops.read_limited is not None:  # refused from its size, before any byte is sent
            limited = await timed(lambda: ops.read_limited(sparse, 1 << 20), bound=10)
            assert isinstance(limited, OutputLimitError) and sparse in str(limited)
        if ops.read_range is not None:
            assert await timed(lambda: ops.read_range(sparse, 5 << 30, 16), 10) == b"\0" * 16
            assert await ops.read_range(sparse, (10 << 30) - 4, 16) == b"\0" * 4
        if ops.remove is not None:
            assert await timed(lambda: ops.remove(sparse)) is None
            assert ops.exists is not None and not await ops.exists(sparse)
        # The command user is root, which reads a mode-000 file anyway: the core has no
        # per-call user, so an unreadable file cannot be made here (root reads it like cat).
        assert await timed(lambda: ops.read(f"{BASE}/locked")) == b"secret"


@pytest.mark.long
@pytest.mark.parametrize("package", PACKAGES)
async def test_deep_agents_tools_never_raise_on_special_paths(
    package: str, sandbox_image: str
) -> None:
    if package != "deepagents":
        pytest.skip("the Deep Agents tools only (the other packages raise by design)")
    async with open_driver(package, sandbox_image) as driver:
        assert (await driver.run(SETUP, 60)) == (0, "ready\n")
        backend = driver.backend
        paths = [
            "/proc/cpuinfo",
            "/proc/self/mem",
            "/dev/null",
            "/dev/zero",
            f"{BASE}/fifo",
            f"{BASE}/sock",
            f"{BASE}/loop",
            f"{BASE}/locked",
        ]
        results = await timed(lambda: backend.adownload_files(paths), bound=BOUND * 2)
        assert not isinstance(results, BaseException), results
        assert [r.path for r in results] == paths
        by_path = {r.path: r for r in results}
        assert b"processor" in (by_path["/proc/cpuinfo"].content or b"")
        assert by_path["/dev/null"].content == b"" and by_path["/dev/null"].error is None
        assert by_path[f"{BASE}/locked"].content == b"secret"
        for path in [*paths[3:7], "/proc/self/mem"]:
            assert by_path[path].error == "invalid_path", (path, by_path[path])
        # The same through the blocking twin (what the tools call from a thread).
        blocking = await timed(lambda: asyncio.to_thread(backend.download_files, paths[:2]))
        assert [r.error for r in blocking] == [None, "invalid_path"], blocking
        page = await timed(lambda: backend.aread("/proc/cpuinfo"))
        assert page.error is None and "processor" in str(page.file_data), page
        for path in ("/dev/zero", f"{BASE}/fifo", f"{BASE}/sock", f"{BASE}/loop"):
            answer = await timed(lambda p=path: backend.aread(p))
            assert not isinstance(answer, BaseException), (path, answer)
            assert answer.error and path in answer.error, (path, answer)
        listed = await timed(lambda: backend.als("/proc/self"))
        assert not isinstance(listed, BaseException) and listed.error is None, listed
        assert "/proc/self/status" in [e["path"] for e in listed.entries or []]
        edited = await timed(lambda: backend.aedit("/proc/version", "Linux", "Xinux"))
        assert not isinstance(edited, BaseException) and edited.error, edited
        found = await timed(lambda: backend.agrep("secret", path=BASE))
        assert not isinstance(found, BaseException), found
        globbed = await timed(lambda: backend.aglob("*", path=BASE))
        assert not isinstance(globbed, BaseException), globbed
        # Regular files are listed beside the FIFO, socket and loop (which glob does not match).
        assert globbed.error is None, globbed
        assert {"locked", "sparse"} <= {
            m["path"].rsplit("/", 1)[-1] for m in globbed.matches or []
        }, globbed
