"""`run(..., plain_lines=True)`: the same exact result as the default path, for text lines."""

from __future__ import annotations

import time

from opensandbox_core import AsyncSandboxSession, SandboxSpec

_COMMAND = 'for i in $(seq 1 200); do echo "file-$i.txt"; done; echo; echo done >&2'


async def test_plain_lines_result_matches_the_exact_path(sandbox_image: str) -> None:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image)) as sb:
        exact = await sb.commands.run(_COMMAND)
        plain = await sb.commands.run(_COMMAND, plain_lines=True)
        assert (plain.exit_code, plain.stdout, plain.stderr) == (
            exact.exit_code,
            exact.stdout,
            exact.stderr,
        )
        assert plain.stdout.endswith("file-200.txt\n\n")
        assert plain.stderr == "done\n"
        capped = await sb.commands.run(_COMMAND, plain_lines=True, max_output=1024)
        assert capped.truncated and len(capped.stdout) <= 1024
        # Timing only, for the report (not asserted: the machine is shared).
        timings = []
        for flag in (False, True):
            started = time.perf_counter()
            for _ in range(5):
                await sb.commands.run("ls -1 /usr/bin | head -100", plain_lines=flag)
            timings.append((time.perf_counter() - started) / 5)
        print(
            f"run of a 100-line listing: exact {timings[0] * 1000:.1f} ms, plain {timings[1] * 1000:.1f} ms"
        )
