"""Bench rows of the Deep Agents thread backends: each tool through `ThreadSandboxBackend`
against the same call through the thread's own `OpenSandboxBackend` (`for_thread`), on the
thread's sandbox, interleaved call by call. The target: within 1.2x of the plain backend.

Each pair alternates which side goes first, over an even number of rounds, so neither side
always pays for what the previous call left behind. `execute` of `true` takes a few
milliseconds and its spread is wide, so it gets four times the rounds (with five rounds, one
slow sample moved its median ratio from about 1.0x to 1.3x; with eight, `glob` read 1.38x).

The calls run with a LangGraph config in context (`var_child_runnable_config`, what a graph
node sees), so what is timed is the backend's own work: reading the thread id and picking the
thread's backend, then the native operation.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from typing import Any

from bench._stats import Sample, ratio

THREAD = "ThreadSandboxBackend"
PLAIN = "OpenSandboxBackend (same sandbox)"
GOAL = 1.2


def _file_text(index: int) -> str:
    body = "".join(f"    value_{j} = {index * 100 + j}\n" for j in range(40))
    return f"def function_{index}():\n{body}    return 'needle-{index}'\n"


async def thread_rows(image: str, files: int, reps: int) -> dict[str, Any]:
    """Per tool: the thread backend's and the plain backend's samples, and their ratio."""
    from langchain_core.runnables.config import var_child_runnable_config

    from deepagents_opensandbox_backend import ThreadSandboxBackend

    reps += reps % 2
    backend = ThreadSandboxBackend(namespace=f"bench-{secrets.token_hex(6)}", image=image)
    token = var_child_runnable_config.set({"configurable": {"thread_id": "bench"}})
    ops: dict[str, dict[str, Sample]] = {}
    root = "/workspace/bench-threads"

    def timed(op: str, name: str, call: Any) -> Any:
        started = time.perf_counter()
        result = call()
        ops.setdefault(op, {}).setdefault(name, Sample()).values.append(
            time.perf_counter() - started
        )
        if getattr(result, "error", None):
            raise AssertionError(f"{op} {name}: {result.error}")
        return result

    def pair(op: str, i: int, through: Any, plain: Any) -> tuple[Any, Any]:
        calls = [(THREAD, through), (PLAIN, plain)]
        done = {n: timed(op, n, c) for n, c in (calls if i % 2 == 0 else calls[::-1])}
        return done[THREAD], done[PLAIN]

    try:
        plain = await backend.afor_thread("bench")
        for i in range(files):
            pair(
                "write",
                i,
                lambda i=i: backend.write(f"{root}/a/f{i}.py", _file_text(i)),
                lambda i=i: plain.write(f"{root}/b/f{i}.py", _file_text(i)),
            )
        for i in range(files):
            a, b = pair(
                "read",
                i,
                lambda i=i: backend.read(f"{root}/a/f{i}.py"),
                lambda i=i: plain.read(f"{root}/a/f{i}.py"),
            )
            assert a == b, "read: thread and plain backends differ"
        for i in range(files):
            pair(
                "edit",
                i,
                lambda i=i: backend.edit(f"{root}/a/f{i}.py", f"'needle-{i}'", f"'found-{i}'"),
                lambda i=i: plain.edit(f"{root}/b/f{i}.py", f"'needle-{i}'", f"'found-{i}'"),
            )
        for i in range(reps):
            a, b = pair("ls", i, lambda: backend.ls(f"{root}/a"), lambda: plain.ls(f"{root}/a"))
            assert a == b, "ls differs"
            a, b = pair(
                "glob",
                i,
                lambda: backend.glob("**/*.py", root),
                lambda: plain.glob("**/*.py", root),
            )
            assert a == b, "glob differs"
            a, b = pair(
                "grep",
                i,
                lambda: backend.grep("found-1", root),
                lambda: plain.grep("found-1", root),
            )
            assert a == b and len(a.matches or []) >= 1, "grep differs"
        for i in range(4 * reps):
            a, b = pair(
                "execute", i, lambda: backend.execute("true"), lambda: plain.execute("true")
            )
            assert a.exit_code == b.exit_code == 0, "execute failed"
    finally:
        var_child_runnable_config.reset(token)
        with contextlib.suppress(Exception):
            await backend.adestroy_thread("bench")
        with contextlib.suppress(Exception):
            await backend.aclose()
    return {
        "ops": {op: {n: s.as_json() for n, s in v.items()} for op, v in ops.items()},
        "ratio": {op: ratio(v[THREAD], v[PLAIN]) for op, v in ops.items()},
        "goal": GOAL,
    }
