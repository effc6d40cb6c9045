"""The benchmark sections. Each returns a JSON-able dict; `_report` renders them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._machine import CpuMeter
from bench._stats import Sample, interleave, quantile, ratio
from bench._threads import thread_rows

MIB = 1024 * 1024
SIZES = {"4 KiB": 4096, "1 MiB": MIB, "8 MiB": 8 * MIB, "64 MiB": 64 * MIB}
ONE_MIB_COMMAND = "yes 0123456789abcde | head -c 1048576"
SKIP_OVER_SECONDS = 60.0


@dataclass
class Context:
    """What every section shares: the settings, one sandbox, and the clients on it."""

    image: str
    quick: bool
    server_pid: int | None
    core: Any = None  # opensandbox_core.AsyncSandboxSession (created, owned)
    sdk: Any = None  # opensandbox.Sandbox connected to the same sandbox
    deepagents: Any = None  # deepagents_opensandbox_backend.OpenSandboxBackend (connected)
    pydantic: Any = None  # pydantic_ai_opensandbox.OpenSandboxBackend (by ref)
    notes: list[str] = field(default_factory=list)

    def reps(self, full: int, quick: int) -> int:
        return quick if self.quick else full


def sdk_config() -> Any:
    from opensandbox.config import ConnectionConfig

    return ConnectionConfig()


async def open_clients(ctx: Context) -> None:
    """Create the shared sandbox through the core, and attach every other client to it."""
    from opensandbox import Sandbox

    from opensandbox_core import AsyncSandboxSession, SandboxSpec

    ctx.core = AsyncSandboxSession(SandboxSpec(ctx.image, lifetime=3600))
    await ctx.core.start()
    sandbox_id = ctx.core.id
    ctx.sdk = await Sandbox.connect(
        sandbox_id, connection_config=sdk_config(), skip_health_check=True
    )
    try:
        from deepagents_opensandbox_backend import OpenSandboxBackend as DeepAgentsBackend

        ctx.deepagents = await DeepAgentsBackend.aconnect(sandbox_id)
        DeepAgentsBackend.connect(sandbox_id)  # warms the blocking façade's loop too
    except Exception as exc:  # an adapter being finished elsewhere must not stop the rest
        ctx.notes.append(f"Deep Agents adapter unavailable: {type(exc).__name__}: {exc}")
    try:
        from pydantic_ai.workspaces import WorkspaceRef

        from pydantic_ai_opensandbox import OpenSandboxBackend as PydanticBackend

        ctx.pydantic = PydanticBackend(ref=WorkspaceRef(provider="opensandbox", id=sandbox_id))
        await ctx.pydantic.working_dir()
    except Exception as exc:
        ctx.notes.append(f"Pydantic AI adapter unavailable: {type(exc).__name__}: {exc}")
        ctx.pydantic = None


async def close_clients(ctx: Context) -> None:
    # The sandbox first, shielded: an interrupt during the clean-up must not leave it behind.
    if ctx.core is not None:
        await asyncio.shield(ctx.core.destroy())
    if ctx.pydantic is not None:
        with contextlib.suppress(Exception):
            await ctx.pydantic.aclose()
    if ctx.sdk is not None:
        with contextlib.suppress(Exception):
            await ctx.sdk.close()
    if ctx.deepagents is not None:
        with contextlib.suppress(Exception):
            await ctx.deepagents.aclose()


def _stats(samples: Mapping[str, Sample]) -> dict[str, Any]:
    return {name: s.as_json() for name, s in samples.items()}


# -- 1. command round trip ------------------------------------------------------------------------


def _sdk_stdout(execution: Any) -> str:
    return "".join(m.text for m in execution.logs.stdout)


async def commands(ctx: Context) -> dict[str, Any]:
    from deepagents.backends.sandbox import BaseSandbox  # noqa: F401 - fail early if missing

    reps = ctx.reps(15, 4)
    out: dict[str, Any] = {"repetitions": reps, "cases": {}}
    da = ctx.deepagents
    for label, command, size in (("true", "true", 0), ("1 MiB stdout", ONE_MIB_COMMAND, MIB)):
        variants: dict[str, Any] = {"core run": lambda c=command: ctx.core.commands.run(c)}
        if da is not None:
            variants["deepagents aexecute"] = lambda c=command: da.aexecute(c)

            async def sync_execute(c: str = command) -> Any:
                return da.execute(c)  # blocking façade (its own loop), as sync agents call it

            variants["deepagents execute (sync)"] = sync_execute
        if ctx.pydantic is not None:
            variants["pydantic-ai run"] = lambda c=command: ctx.pydantic.run(c, shell=True)  # noqa: S604
        variants["raw SDK commands.run"] = lambda c=command: ctx.sdk.commands.run(c)

        def check(name: str, result: Any, size: int = size) -> None:
            if name.startswith("raw SDK"):
                text = _sdk_stdout(result)
            elif name.startswith("deepagents"):
                text = result.output
            else:
                text = result.stdout
            if name.startswith("raw SDK"):
                # The SDK drops the line breaks of some framings; count the payload bytes only.
                text = text.replace("\n", "")
                expected = size - size // 16
            else:
                expected = size
            if len(text) != expected:
                raise AssertionError(f"{name}: {len(text)} bytes of output, expected {expected}")

        samples = await interleave(variants, reps, check=check)
        sdk, core = samples["raw SDK commands.run"], samples["core run"]
        out["cases"][label] = {
            "stats": _stats(samples),
            "ratio_to_sdk": {name: ratio(s, sdk) for name, s in samples.items()},
            "ratio_to_core": {name: ratio(s, core) for name, s in samples.items()},
        }
    return out


# -- 2. file transfer -----------------------------------------------------------------------------


class _CommandsOnly:
    """Only `SupportsCommands`, by delegation: pydantic-ai then moves files through its shell."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def ref(self) -> Any:
        return self._inner.ref

    async def working_dir(self) -> str:
        return str(await self._inner.working_dir())

    async def run(
        self,
        command: Any,
        *,
        shell: bool = False,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        return await self._inner.run(command, shell=shell, env=env, timeout=timeout)


def text_payload(size: int) -> str:
    """ASCII text of exactly `size` bytes in 64-byte numbered lines (usable as str and bytes)."""
    lines = size // 64
    body = "".join(f"{i:063d}\n" for i in range(lines))
    return body + "x" * (size - len(body))


_PAGE_LINES = 6000  # 64-byte lines: about 420 KB a page, under BaseSandbox.read's 500 KiB cap


def _page_text(result: Any) -> str:
    if result.error:
        raise AssertionError(result.error)
    data = result.file_data
    content = data["content"] if isinstance(data, Mapping) else data.content
    return str(content)


def _read_all(read: Any, path: str) -> int:
    """Page through a text file with a Deep Agents `read`; return the number of lines seen."""
    offset, lines = 0, 0
    for _ in range(100_000):
        result = read(path, offset, _PAGE_LINES)
        lines += len(_page_text(result).splitlines())
        if result.next_offset is None:
            return lines
        offset = result.next_offset
    raise AssertionError("paging did not end")


def _transfer_variants(ctx: Context, size: int, text: str, data: bytes) -> dict[str, Any]:
    """name -> (write coroutine factory, read coroutine factory), all on the shared sandbox."""
    variants: dict[str, Any] = {}
    base = "/workspace/bench-transfer"
    core = ctx.core

    async def core_write() -> None:
        await core.files.write_bytes(f"{base}/core.bin", data)

    async def core_read() -> int:
        return len(await core.files.read_bytes(f"{base}/core.bin"))

    variants["core native"] = (core_write, core_read)
    if ctx.pydantic is not None:
        from pydantic_ai.workspaces import Workspace

        native, shell = Workspace(ctx.pydantic), Workspace(_CommandsOnly(ctx.pydantic))  # type: ignore[arg-type]

        async def pa_write() -> None:
            await native.write_bytes(f"{base}/pa.bin", data)

        async def pa_read() -> int:
            return len(await native.read_bytes(f"{base}/pa.bin"))

        async def shell_write() -> None:
            await shell.write_bytes(f"{base}/shell.bin", data)

        async def shell_read() -> int:
            return len(await shell.read_bytes(f"{base}/shell.bin"))

        variants["pydantic-ai native"] = (pa_write, pa_read)
        variants["pydantic-ai shell fallback"] = (shell_write, shell_read)
    if ctx.deepagents is not None:
        from deepagents.backends.sandbox import BaseSandbox

        da = ctx.deepagents
        want_lines = len(text.splitlines())

        async def da_write() -> None:
            result = da.write(f"{base}/da.txt", text)
            assert not result.error, result.error

        async def da_read() -> int:
            lines = _read_all(da.read, f"{base}/da.txt")
            assert lines == want_lines, (lines, want_lines)
            return size

        async def base_write() -> None:
            result = BaseSandbox.write(da, f"{base}/base.txt", text)
            assert not result.error, result.error

        async def base_read() -> int:
            lines = _read_all(lambda p, o, n: BaseSandbox.read(da, p, o, n), f"{base}/base.txt")
            assert lines == want_lines, (lines, want_lines)
            return size

        variants["deepagents adapter write/read"] = (da_write, da_read)
        variants["deepagents BaseSandbox default"] = (base_write, base_read)
    sdk = ctx.sdk

    async def sdk_write() -> None:
        await sdk.files.write_file(f"{base}/sdk.bin", data)

    async def sdk_read() -> int:
        return len(await sdk.files.read_bytes(f"{base}/sdk.bin"))

    variants["raw SDK"] = (sdk_write, sdk_read)
    return variants


async def transfers(ctx: Context) -> dict[str, Any]:
    reps_for = {"4 KiB": (9, 3), "1 MiB": (7, 3), "8 MiB": (3, 2), "64 MiB": (3, 1)}
    limit = SKIP_OVER_SECONDS
    out: dict[str, Any] = {"sizes": {}, "skipped": {}}
    last: dict[str, tuple[int, float]] = {}  # variant -> (size, median round trip s)
    for label, size in SIZES.items():
        text = text_payload(size)
        data = text.encode()
        variants = _transfer_variants(ctx, size, text, data)
        for name in list(variants):
            # Projected from the last size of at least 1 MiB (below that, latency rules).
            if name in last and last[name][0] >= MIB:
                prev_size, prev_time = last[name]
                # Deep Agents reads page through the file, and every page reads the whole file
                # again (in the sandbox, or downloaded by the adapter): quadratic in the size.
                growth = 2.0 if name.startswith("deepagents") else 1.25
                projected = prev_time * (size / prev_size) ** growth
                if projected > limit:
                    out["skipped"].setdefault(label, {})[name] = round(projected, 1)
                    del variants[name]
        reps = ctx.reps(*reps_for[label])
        rounds: dict[str, Any] = {}
        split: dict[str, list[tuple[float, float]]] = {}
        for name, (write, read) in variants.items():

            async def both(
                name: str = name,
                write: Any = write,
                read: Any = read,
                size: int = size,
                split: dict[str, list[tuple[float, float]]] = split,
            ) -> float:
                started = time.perf_counter()
                await write()
                mid = time.perf_counter()
                got = await read()
                end = time.perf_counter()
                if got != size:
                    raise AssertionError(f"{name}: read {got} bytes, expected {size}")
                split.setdefault(name, []).append((mid - started, end - mid))
                return end - started

            rounds[name] = both
        # One warm-up round only for small sizes: a warm-up at 64 MiB would double the run time.
        samples = await interleave(rounds, reps, warmup=1 if size <= MIB else 0)
        writes = {n: Sample([w for w, _ in split[n][-reps:]]) for n in rounds}
        reads = {n: Sample([r for _, r in split[n][-reps:]]) for n in rounds}
        for name, sample in samples.items():
            last[name] = (size, sample.median)
        sdk = samples.get("raw SDK")
        shell = samples.get("pydantic-ai shell fallback")
        out["sizes"][label] = {
            "repetitions": reps,
            "round_trip": _stats(samples),
            "write": _stats(writes),
            "read": _stats(reads),
            "ratio_to_sdk": {n: ratio(s, sdk) for n, s in samples.items()} if sdk else {},
            "shell_over_native": {n: ratio(shell, s) for n, s in samples.items()} if shell else {},
        }
    with contextlib.suppress(Exception):
        await ctx.core.files.remove("/workspace/bench-transfer")
    return out


# -- 2b. client memory, one subprocess per variant ------------------------------------------------


MEMORY_VARIANTS = (
    ("core", "write"),
    ("core", "read"),
    ("core", "stream"),
    ("pydantic-ai", "write"),
    ("pydantic-ai", "read"),
    ("deepagents", "write"),
    ("deepagents", "read"),
    ("sdk", "write"),
    ("sdk", "read"),
    ("sdk", "stream"),
)


async def memory(ctx: Context) -> dict[str, Any]:
    size = 64 * MIB
    path = "/workspace/bench-memory/source.bin"
    await ctx.core.files.write_bytes(path, os.urandom(size))
    out: dict[str, Any] = {"size_mib": size // MIB, "variants": {}}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        for client, direction in MEMORY_VARIANTS:
            if client == "deepagents" and ctx.deepagents is None:
                continue
            if client == "pydantic-ai" and ctx.pydantic is None:
                continue
            args = [sys.executable, "-m", "bench._memory", client, direction, ctx.core.id]
            args += [path, str(size)]
            proc = await asyncio.to_thread(
                subprocess.run, args, env=env, capture_output=True, text=True, timeout=300
            )
            key = f"{client} {direction}"
            if proc.returncode != 0:
                out["variants"][key] = {"error": proc.stderr.strip()[-500:]}
                continue
            out["variants"][key] = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        with contextlib.suppress(Exception):
            await ctx.core.files.remove("/workspace/bench-memory")
    return out


# -- 3. create to first command -------------------------------------------------------------------


class _Timed(float):
    """An op's own elapsed time (so that clean-up outside the timed part is not counted)."""


async def create(ctx: Context) -> dict[str, Any]:
    from datetime import timedelta

    from opensandbox import Sandbox

    from opensandbox_core import AsyncSandboxSession, SandboxSpec

    image = ctx.image
    reps = ctx.reps(5, 2)

    async def core() -> _Timed:
        started = time.perf_counter()
        session = AsyncSandboxSession(SandboxSpec(image))
        try:
            result = await session.commands.run("true")
            elapsed = time.perf_counter() - started
            assert result.exit_code == 0
        finally:
            await session.destroy()
        return _Timed(elapsed)

    async def sdk() -> _Timed:
        started = time.perf_counter()
        sandbox = None
        try:
            sandbox = await Sandbox.create(
                image,
                connection_config=sdk_config(),
                timeout=timedelta(minutes=10),
                entrypoint=["tail", "-f", "/dev/null"],
                resource={"cpu": "1", "memory": "2Gi"},
            )
            await sandbox.commands.run("true")
            elapsed = time.perf_counter() - started
        finally:
            if sandbox is not None:
                with contextlib.suppress(Exception):
                    await sandbox.kill()
                with contextlib.suppress(Exception):
                    await sandbox.close()
        return _Timed(elapsed)

    from opensandbox_core.fleet import SandboxPool

    pool = SandboxPool(SandboxSpec(image), size=1)

    async def pooled() -> _Timed:
        # Waiting for the refill is not part of the measured time: a warm pool is the premise.
        while pool.ready_count < 1:
            await asyncio.sleep(0.05)
        started = time.perf_counter()
        session = await pool.acquire()
        try:
            result = await session.commands.run("true")
            elapsed = time.perf_counter() - started
            assert result.exit_code == 0
        finally:
            await session.destroy()
        return _Timed(elapsed)

    await pool.start()
    try:
        samples = await interleave(
            {"core": core, "raw SDK": sdk, "core from a warm pool": pooled},
            reps,
            warmup=0,
            timed=_Timed,
        )
    finally:
        await pool.aclose()
    return {
        "repetitions": reps,
        "stats": _stats(samples),
        "ratio": ratio(samples["core"], samples["raw SDK"]),
        "pool_ratio": ratio(samples["core from a warm pool"], samples["core"]),
    }


# -- 4. scale -------------------------------------------------------------------------------------


async def scale(ctx: Context) -> dict[str, Any]:
    from opensandbox_core import AsyncSandboxSession, SandboxSpec

    reps = ctx.reps(3, 1)
    extra = [AsyncSandboxSession(SandboxSpec(ctx.image, lifetime=3600)) for _ in range(3)]
    out: dict[str, Any] = {"repetitions": reps, "cases": []}
    try:
        await asyncio.gather(*(s.start() for s in extra))
        layouts = {"1 sandbox": [ctx.core], "4 sandboxes": [ctx.core, *extra]}
        for command in ("true", "sleep 1"):
            for n in (1, 8, 32):
                per_worker = 1 if command != "true" else max(2, 48 // n)
                runs: dict[str, list[dict[str, Any]]] = {name: [] for name in layouts}
                cpu: dict[str, list[dict[str, float]]] = {name: [] for name in layouts}
                for rep in range(reps):
                    order = list(layouts) if rep % 2 == 0 else list(reversed(layouts))
                    for name in order:
                        sessions = layouts[name]
                        meter = CpuMeter(ctx.server_pid)
                        meter.start()
                        runs[name].append(await _burst(sessions, command, n, per_worker))
                        cpu[name].append(meter.stop())
                for name in layouts:
                    latencies = [x for r in runs[name] for x in r["latencies"]]
                    walls = [r["wall"] for r in runs[name]]
                    counts = [r["count"] for r in runs[name]]
                    out["cases"].append(
                        {
                            "command": command,
                            "concurrency": n,
                            "layout": name,
                            "commands_per_run": counts[0],
                            "wall_s": Sample(walls).as_json(),
                            "throughput_per_s": Sample(
                                [c / w for c, w in zip(counts, walls, strict=True)]
                            ).as_json(),
                            "latency_median_s": quantile(latencies, 0.5),
                            "latency_p90_s": quantile(latencies, 0.9),
                            "cpu_percent": _mean_cpu(cpu[name]),
                        }
                    )
    finally:
        await asyncio.gather(*(s.destroy() for s in extra), return_exceptions=True)
    return out


async def _burst(sessions: list[Any], command: str, n: int, per_worker: int) -> dict[str, Any]:
    latencies: list[float] = []

    async def worker(index: int) -> None:
        session = sessions[index % len(sessions)]
        for _ in range(per_worker):
            started = time.perf_counter()
            result = await session.commands.run(command, timeout=60)
            latencies.append(time.perf_counter() - started)
            assert result.exit_code == 0

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(n)))
    return {"wall": time.perf_counter() - started, "count": n * per_worker, "latencies": latencies}


def _mean_cpu(samples: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for s in samples for k in s}
    return {k: round(sum(s.get(k, 0.0) for s in samples) / len(samples), 1) for k in sorted(keys)}


# -- 5. Deep Agents file tools --------------------------------------------------------------------


def _file_text(index: int) -> str:
    body = "".join(f"    value_{j} = {index * 100 + j}\n" for j in range(40))
    return f"def function_{index}():\n{body}    return 'needle-{index}'\n"


NATIVE = "adapter (native)"
BASE = "BaseSandbox default"
PAGED_SIZES_MIB = (1, 2, 8, 16, 64)


async def deepagents_tools(ctx: Context) -> dict[str, Any]:
    """Each Deep Agents file tool of the adapter against BaseSandbox's default (its `python3 -c`
    scripts through the same `execute`), interleaved call by call on one sandbox; then a paged
    `read` of large text files against the core's `read_bytes` of the same file."""
    from deepagents.backends.sandbox import BaseSandbox

    da = ctx.deepagents
    files = 40 if ctx.quick else 200
    root = "/workspace/bench-tools"
    ops: dict[str, dict[str, Sample]] = {}

    def timed(op: str, name: str, call: Any) -> Any:
        started = time.perf_counter()
        result = call()
        ops.setdefault(op, {}).setdefault(name, Sample()).values.append(
            time.perf_counter() - started
        )
        if getattr(result, "error", None):
            raise AssertionError(f"{op} {name}: {result.error}")
        return result

    def pair(op: str, i: int, native: Any, base: Any) -> tuple[Any, Any]:
        """Both variants, alternating which goes first; their results must be equal."""
        calls = [(NATIVE, native), (BASE, base)]
        results = {
            name: timed(op, name, call) for name, call in (calls if i % 2 == 0 else calls[::-1])
        }
        return results[NATIVE], results[BASE]

    out: dict[str, Any] = {"files": files}
    try:
        for i in range(files):
            pair(
                "write",
                i,
                lambda i=i: da.write(f"{root}/a/f{i}.py", _file_text(i)),
                lambda i=i: BaseSandbox.write(da, f"{root}/b/f{i}.py", _file_text(i)),
            )
        for i in range(files):
            a, b = pair(
                "read",
                i,
                lambda i=i: da.read(f"{root}/a/f{i}.py"),
                lambda i=i: BaseSandbox.read(da, f"{root}/a/f{i}.py"),
            )
            assert a == b, f"read f{i}: native and BaseSandbox differ"
        for i in range(files):  # each edit on its own copy, so both see the same file
            pair(
                "edit",
                i,
                lambda i=i: da.edit(f"{root}/a/f{i}.py", f"'needle-{i}'", f"'found-{i}'"),
                lambda i=i: BaseSandbox.edit(
                    da, f"{root}/b/f{i}.py", f"'needle-{i}'", f"'found-{i}'"
                ),
            )
        for i in range(ctx.reps(15, 5)):
            a, b = pair(
                "ls", i, lambda: da.ls(f"{root}/a"), lambda: BaseSandbox.ls(da, f"{root}/a")
            )
            assert a == b, "ls: native and BaseSandbox differ"
            a, b = pair(
                "glob",
                i,
                lambda: da.glob("**/*.py", root),
                lambda: BaseSandbox.glob(da, "**/*.py", root),
            )
            assert a == b and len(a.matches or []) == 2 * files, "glob results differ"
            a, b = pair(
                "grep",
                i,
                lambda: da.grep("found-1", root),
                lambda: BaseSandbox.grep(da, "found-1", root),
            )
            assert a == b and len(a.matches or []) >= 2, "grep results differ"
        out["ops"] = {op: _stats(v) for op, v in ops.items()}
        out["speedup"] = {op: ratio(v[BASE], v[NATIVE]) for op, v in ops.items()}
        out["implementation"] = {
            "write": "native upload",
            "read": "native download",
            "ls": "native: one argv `ls` command, escaped names as plain lines",
            "glob": "native: one `find` command as one base64 line, BaseSandbox's matcher",
            "edit": "native: download + execd's in-place /files/replace",
            "grep": "native: the core's literal grep, one argv command (find + grep -F)",
        }
        out["paged"] = await _paged_reads(ctx, f"{root}/paged")
        out["threads"] = await thread_rows(ctx.image, files, ctx.reps(32, 24))
    finally:
        with contextlib.suppress(Exception):
            await ctx.core.files.remove(root)
    return out


def _read_pages(read: Any, path: str) -> tuple[int, int]:
    """Page through a text file with a Deep Agents `read`: (pages, bytes of content)."""
    offset, size = 0, 0
    for pages in range(1, 100_000):
        result = read(path, offset, _PAGE_LINES)
        size += len(_page_text(result).encode()) + 1
        if result.next_offset is None:
            return pages, size
        offset = result.next_offset
    raise AssertionError("paging did not end")


async def _paged_reads(ctx: Context, base: str) -> dict[str, Any]:
    """A Deep Agents `read` of a whole text file page by page (6000 lines, about 375 KiB a
    page) against the core's `read_bytes` of the same file, interleaved; per size."""
    da = ctx.deepagents
    sizes = PAGED_SIZES_MIB
    out: dict[str, Any] = {"page_lines": _PAGE_LINES, "sizes": {}}
    for mib in sizes:
        path = f"{base}/text-{mib}.txt"
        data = text_payload(mib * MIB).encode()
        await ctx.core.files.write_bytes(path, data)
        pages: dict[str, int] = {}

        async def paged(path: str = path, pages: dict[str, int] = pages) -> int:
            count, size = await asyncio.to_thread(_read_pages, da.read, path)
            pages["n"] = count
            return size

        async def whole(path: str = path) -> int:
            return len(await ctx.core.files.read_bytes(path))

        def check(name: str, got: Any, size: int = len(data)) -> None:
            if not size - 64 <= got <= size:
                raise AssertionError(f"{name}: {got} bytes, expected about {size}")

        reps = ctx.reps(5, 2) if mib < 64 else ctx.reps(2, 1)
        samples = await interleave(
            {"deepagents read, all pages": paged, "core read_bytes": whole}, reps, check=check
        )
        per_page = Sample([v / pages["n"] for v in samples["deepagents read, all pages"].values])
        out["sizes"][f"{mib} MiB"] = {
            "repetitions": reps,
            "pages": pages["n"],
            "stats": _stats(samples),
            "per_page": per_page.as_json(),
            "ratio_to_read_bytes": ratio(
                samples["deepagents read, all pages"], samples["core read_bytes"]
            ),
        }
        await ctx.core.files.remove(path)
    return out


# -- 7. execd generations side by side -------------------------------------------------------------

# The testbed daemon's generation profiles, chosen per sandbox through its env. The ratios are
# to `1.1` (events that keep their line endings: no raw-file reads needed for exact output).
GENERATIONS = ("1.0.19", "1.0.18", "1.1")


async def generations(ctx: Context) -> dict[str, Any]:
    """`true`, 1 MiB stdout and an 8 MiB write + read through the core, one sandbox per testbed
    execd profile on the same server, interleaved in one run."""
    from opensandbox_core import AsyncSandboxSession, SandboxSpec

    image_tag = os.environ.get("OSB_TESTBED_EXECD_IMAGE", "")
    if image_tag and "testbed-execd" not in image_tag:
        return {"skipped": f"the server runs execd image {image_tag}, not the testbed daemon"}
    sessions: dict[str, Any] = {}
    out: dict[str, Any] = {"profiles": list(GENERATIONS), "cases": {}}
    try:
        for profile in GENERATIONS:
            spec = SandboxSpec(
                ctx.image, lifetime=3600, container_env={"OSB_EXECD_PROFILE": profile}
            )
            session = AsyncSandboxSession(spec)
            sessions[profile] = session
            await session.start()
            framing = session.framing
            out.setdefault("framing", {})[profile] = framing
        payload = text_payload(8 * MIB).encode()
        base = "/workspace/bench-generations.bin"

        def command(profile: str, text: str) -> Any:
            return lambda: sessions[profile].commands.run(text)

        async def transfer(profile: str) -> int:
            session = sessions[profile]
            await session.files.write_bytes(base, payload)
            return len(await session.files.read_bytes(base))

        cases: dict[str, tuple[dict[str, Any], int, Any]] = {
            "true": ({p: command(p, "true") for p in GENERATIONS}, ctx.reps(21, 5), 0),
            "1 MiB stdout": (
                {p: command(p, ONE_MIB_COMMAND) for p in GENERATIONS},
                ctx.reps(9, 3),
                MIB,
            ),
            "8 MiB write + read": (
                {p: (lambda p=p: transfer(p)) for p in GENERATIONS},
                ctx.reps(5, 2),
                8 * MIB,
            ),
        }
        for label, (variants, reps, size) in cases.items():

            def check(name: str, result: Any, size: int = size, label: str = label) -> None:
                got = result if isinstance(result, int) else len(result.stdout.encode())
                if got != size:
                    raise AssertionError(f"{label} on {name}: {got} bytes, expected {size}")

            samples = await interleave(variants, reps, check=check)
            modern = samples["1.1"]
            out["cases"][label] = {
                "repetitions": reps,
                "stats": _stats(samples),
                "ratio_to_1.1": {p: ratio(s, modern) for p, s in samples.items()},
            }
    finally:
        for session in sessions.values():
            with contextlib.suppress(Exception):
                await asyncio.shield(session.destroy())
    return out
