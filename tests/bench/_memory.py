"""Child process: peak client memory (ru_maxrss) of one 64 MiB transfer by one client.

`python -m bench._memory CLIENT DIRECTION SANDBOX_ID SOURCE_PATH SIZE` prints one JSON line.
The baseline is the resident set after imports, connecting, a small warm-up transfer and (for a
write) allocating the payload; the peak resident set (VmHWM, reset at the baseline through
/proc/self/clear_refs) during the transfer minus that baseline is reported. For
`read`, the returned bytes are themselves `SIZE` bytes: `overhead_mib` subtracts them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> float:
    """Reset the peak RSS (VmHWM) to the current RSS; return the current RSS in MiB.

    ru_maxrss is not used: on Linux it carries over the parent's peak across fork and exec, and
    it keeps transient peaks from before the baseline.
    """
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_mib("VmRSS")


def _peak_mib() -> float:
    return _status_mib("VmHWM")


async def _main(
    client: str, direction: str, sandbox_id: str, source: str, size: int
) -> dict[str, Any]:
    target = source + f".{client}.out"
    small = b"x" * 4096
    if client == "core":
        from opensandbox_core import AsyncSandboxSession

        session = AsyncSandboxSession.attach(sandbox_id)
        await session.files.write_bytes(target, small)
        await session.files.read_bytes(target)

        async def write(data: bytes) -> None:
            await session.files.write_bytes(target, data)

        async def read() -> int:
            return len(await session.files.read_bytes(source))

        async def stream() -> int:
            return sum([len(c) async for c in session.files.iter_bytes(source)])

        close: Any = session.aclose
    elif client == "sdk":
        from opensandbox import Sandbox
        from opensandbox.config import ConnectionConfig

        sandbox = await Sandbox.connect(
            sandbox_id, connection_config=ConnectionConfig(), skip_health_check=True
        )
        await sandbox.files.write_file(target, small)
        await sandbox.files.read_bytes(target)

        async def write(data: bytes) -> None:
            await sandbox.files.write_file(target, data)

        async def read() -> int:
            return len(await sandbox.files.read_bytes(source))

        async def stream() -> int:
            total = 0
            chunks = await sandbox.files.read_bytes_stream(source, chunk_size=1 << 20)
            async for chunk in chunks:
                total += len(chunk)
            return total

        close = sandbox.close
    elif client == "pydantic-ai":
        from pydantic_ai.workspaces import Workspace, WorkspaceRef

        from pydantic_ai_opensandbox import OpenSandboxBackend

        backend = OpenSandboxBackend(ref=WorkspaceRef(provider="opensandbox", id=sandbox_id))
        workspace = Workspace(backend)
        await workspace.write_bytes(target, small)
        await workspace.read_bytes(target)

        async def write(data: bytes) -> None:
            await workspace.write_bytes(target, data)

        async def read() -> int:
            return len(await workspace.read_bytes(source))

        stream = read
        close = backend.aclose
    elif client == "deepagents":
        from deepagents_opensandbox_backend import OpenSandboxBackend

        backend = await OpenSandboxBackend.aconnect(sandbox_id)
        await backend.aupload_files([(target, small)])
        await backend.adownload_files([target])

        async def write(data: bytes) -> None:
            [result] = await backend.aupload_files([(target, data)])
            assert not result.error, result.error

        async def read() -> int:
            [result] = await backend.adownload_files([source])
            assert not result.error and result.content is not None, result.error
            return len(result.content)

        stream = read
        close = backend.aclose
    else:
        raise SystemExit(f"unknown client {client!r}")
    try:
        # One allocation, every page written: no transient peak that would hide the transfer's.
        payload = os.urandom(size) if direction == "write" else b""
        baseline = _reset_peak()
        if direction == "write":
            await write(payload)
            got = size
        elif direction == "read":
            got = await read()
        else:
            got = await stream()
        peak = _peak_mib()
    finally:
        await close()
    if got != size:
        raise SystemExit(f"transferred {got} bytes, expected {size}")
    above = peak - baseline
    held = size / (1024 * 1024) if direction == "read" else 0.0
    return {
        "baseline_mib": round(baseline, 1),
        "peak_mib": round(peak, 1),
        "above_baseline_mib": round(above, 1),
        "result_held_mib": held,
        "overhead_mib": round(above - held, 1),
    }


if __name__ == "__main__":
    client, direction, sandbox_id, source, size = sys.argv[1:6]
    print(json.dumps(asyncio.run(_main(client, direction, sandbox_id, source, int(size)))))
