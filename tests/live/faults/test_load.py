"""Load, live and slow: lost create answers under concurrency, and a bounded soak."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import os
import resource
import time

import pytest

from opensandbox_core import AsyncSandboxSession, Connection, SandboxSpec
from opensandbox_core._metadata import OWNER_KEY
from opensandbox_core.fleet import list_sandboxes
from testbed.fault_tools import WithholdingProxy, run_asgi

pytestmark = pytest.mark.slow


async def test_twenty_creates_with_lost_answers(
    testbed_env: dict[str, str], sandbox_image: str
) -> None:
    proxy = WithholdingProxy(testbed_env["OPEN_SANDBOX_DOMAIN"], every=3, hold=25)
    with run_asgi(proxy.app) as domain:
        connection = Connection(domain=domain, request_timeout=10)
        sessions = [
            AsyncSandboxSession(
                SandboxSpec(image=sandbox_image), connection=connection, recover_timeout=60
            )
            for _ in range(20)
        ]
        try:
            results = await asyncio.gather(
                *(s.commands.run(f"echo {i}") for i, s in enumerate(sessions))
            )
            assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
            assert proxy.withheld >= 6, proxy.withheld
            for session in sessions:
                owned = await list_sandboxes(metadata={OWNER_KEY: session.owner_token})
                assert [s.id for s in owned] == [session.id], "a lost create left a duplicate"
                assert session.owned
            assert len({s.id for s in sessions}) == 20
        finally:
            await asyncio.gather(*(s.destroy() for s in sessions), return_exceptions=True)
        for session in sessions:
            assert await list_sandboxes(metadata={OWNER_KEY: session.owner_token}) == []


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _sockets() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


SOAK_SECONDS = float(os.environ.get("OSB_SOAK_SECONDS", "300"))


async def test_soak(sandbox_image: str) -> None:
    """4 sandboxes (2 per adapter), mixed commands and transfers, sha256 on every file."""
    from deepagents_opensandbox_backend import OpenSandboxBackend as DeepBackend
    from pydantic_ai_opensandbox import OpenSandboxBackend as PydanticBackend

    before_ids = {s.id for s in await list_sandboxes()}
    deep = [await DeepBackend.acreate(image=sandbox_image) for _ in range(2)]
    pyd = [PydanticBackend(image=sandbox_image) for _ in range(2)]
    # A failed check raises in its worker (and fails the test through gather); `rounds` proves
    # that every worker really completed rounds, so a soak that did nothing cannot pass.
    counts = {"commands": 0, "files": 0, "bytes": 0}
    rounds: dict[str, int] = {}
    samples: list[tuple[float, int, int]] = []
    rng = __import__("random").Random(7)

    async def pydantic_worker(b: PydanticBackend, n: int) -> None:
        i = 0
        while time.monotonic() < deadline:
            i += 1
            data = rng.randbytes(rng.choice([10, 4096, 200_000, 2_000_000]))
            path = f"/tmp/soak/{n}-{i % 20}.bin"
            await b.write_bytes(path, data)
            result = await b.run(["sha256sum", path])
            assert result.stdout.split()[0] == hashlib.sha256(data).hexdigest()
            assert await b.read_bytes(path) == data
            out = await b.run("seq 1 2000 | tail -n 3; echo err >&2", shell=True)  # noqa: S604
            assert out.stdout == "1998\n1999\n2000\n" and out.stderr == "err\n"
            counts["commands"] += 2
            counts["files"] += 2
            counts["bytes"] += 2 * len(data)
            rounds[f"pydantic-{n}"] = i

    async def deep_worker(b: DeepBackend, n: int) -> None:
        i = 0
        while time.monotonic() < deadline:
            i += 1
            files = [
                (f"/tmp/soak/{n}-{i % 20}-{k}.bin", rng.randbytes(rng.choice([1, 5000, 300_000])))
                for k in range(3)
            ]
            assert all(r.error is None for r in await b.aupload_files(files))
            down = await b.adownload_files([p for p, _ in files])
            for (_, data), got in zip(files, down, strict=True):
                assert got.error is None
                assert hashlib.sha256(got.content or b"").digest() == hashlib.sha256(data).digest()
            sums = await b.aexecute("sha256sum " + " ".join(p for p, _ in files))
            assert sums.exit_code == 0
            assert [line.split()[0] for line in sums.output.splitlines()] == [
                hashlib.sha256(d).hexdigest() for _, d in files
            ]
            assert (await b.aexecute("printf 'a\\n\\nb'")).output == "a\n\nb"
            counts["commands"] += 2
            counts["files"] += 6
            counts["bytes"] += 2 * sum(len(d) for _, d in files)
            rounds[f"deep-{n}"] = i

    async def sampler() -> None:
        while time.monotonic() < deadline:
            gc.collect()
            samples.append((time.monotonic() - start, _rss_kib(), _sockets()))
            await asyncio.sleep(10)

    start = time.monotonic()
    deadline = start + SOAK_SECONDS
    try:
        await asyncio.gather(
            *(pydantic_worker(b, n) for n, b in enumerate(pyd)),
            *(deep_worker(b, n + 10) for n, b in enumerate(deep)),
            sampler(),
        )
        gc.collect()
        samples.append((time.monotonic() - start, _rss_kib(), _sockets()))
        # Server side: each of the 4 sessions owns exactly its one sandbox, nothing more.
        ours = {b.id for b in deep} | {b.ref.id for b in pyd if b.ref}
        assert len(ours) == 4 and not ours & before_ids
        for session in [b.session for b in deep] + [b.session for b in pyd]:
            owned = await list_sandboxes(metadata={OWNER_KEY: session.owner_token})
            assert [s.id for s in owned] == [session.id]
    finally:
        for b in deep:
            await b.akill()
        for b in pyd:
            await b.aclose()
            await b.session.destroy()
    after = {s.id for s in await list_sandboxes()}
    assert not (ours & after), "a soak sandbox was left behind"
    warm = [s for s in samples if s[0] >= 60] or samples
    rss_growth = warm[-1][1] - warm[0][1]
    sock_growth = warm[-1][2] - warm[0][2]
    print(f"SOAK {SOAK_SECONDS:.0f}s counts={counts} samples={samples}")
    print(f"SOAK rss_growth_kib={rss_growth} socket_growth={sock_growth}")
    assert sorted(rounds) == ["deep-10", "deep-11", "pydantic-0", "pydantic-1"], rounds
    assert min(rounds.values()) >= 1, f"a worker completed no round: {rounds}"
    assert rss_growth < 64 * 1024, f"client memory grew by {rss_growth} KiB after warm-up"
    assert sock_growth <= 2, f"open sockets grew by {sock_growth}"
