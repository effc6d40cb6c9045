"""`ThreadSandboxBackend` and `TimeTravelSandboxBackend` answer every Deep Agents operation on
the thread's sandbox with `OpenSandboxBackend`'s native implementation, sync and async, inside a
real LangGraph run; with `python3` hidden from the sandbox's PATH, so that none of them can fall
back to BaseSandbox's `python3 -c` scripts.

Each operation through the thread backend must give exactly what the same call gives through the
thread's own `OpenSandboxBackend` (`for_thread`), on the same sandbox.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from deepagents_opensandbox_backend import (
    NAMESPACE_METADATA_KEY,
    OpenSandboxBackend,
    ThreadSandboxBackend,
    TimeTravelSandboxBackend,
)
from opensandbox_core.adapters import run_blocking
from opensandbox_core.fleet import destroy_sandbox, list_sandboxes

ROOT = "/workspace/thread-tools"
THREAD = "thread-tools"
HIDE_PYTHON = (
    "for p in /usr/bin/python3* /usr/local/bin/python3* /usr/bin/python; do "
    'if [ -e "$p" ]; then mv -- "$p" "$p.hidden"; fi; done; ! command -v python3'
)
SETUP = r"""
set -e
r="$1"; rm -rf -- "$r"; mkdir -p -- "$r/src/deep" "$r/with space" "$r/.git"
printf 'alpha needle\nbeta\r\nneedle gamma\n' > "$r/a.txt"
printf 'def f():\n    return "needle"\n' > "$r/src/deep/m.py"
printf 'needle in a space\n' > "$r/with space/s.txt"
printf 'needle in git\n' > "$r/.git/config"
"""


class _State(TypedDict):
    out: Any


def _graph(call: Callable[[], Any]) -> Any:
    graph = StateGraph(_State)
    graph.add_node("op", lambda state: {"out": call()})
    graph.add_edge(START, "op")
    graph.add_edge("op", END)
    return graph.compile()


def _agraph(call: Callable[[], Any]) -> Any:
    async def node(state: _State) -> _State:
        return {"out": await call()}

    graph = StateGraph(_State)
    graph.add_node("op", node)
    graph.add_edge(START, "op")
    graph.add_edge("op", END)
    return graph.compile()


def in_thread(call: Callable[[], Any]) -> Any:
    """`call()`'s result, called inside a LangGraph run of the thread THREAD."""
    config = {"configurable": {"thread_id": THREAD}}
    return _graph(call).invoke({"out": None}, config)["out"]


async def ain_thread(call: Callable[[], Any]) -> Any:
    config = {"configurable": {"thread_id": THREAD}}
    return (await _agraph(call).ainvoke({"out": None}, config))["out"]


def _cleanup(namespace: str) -> None:
    async def clean() -> None:
        for summary in await list_sandboxes(metadata={NAMESPACE_METADATA_KEY: namespace}):
            await destroy_sandbox(summary.id)

    run_blocking(clean())


@pytest.fixture(scope="module", params=[ThreadSandboxBackend, TimeTravelSandboxBackend])
def thread_backend(
    request: pytest.FixtureRequest, testbed_env: dict[str, str], sandbox_image: str
) -> Iterator[tuple[ThreadSandboxBackend, OpenSandboxBackend]]:
    """A thread backend, and its thread's own sandbox with a small tree and no python3."""
    namespace = f"tools-{uuid.uuid4().hex[:12]}"
    backend = request.param(namespace=namespace, image=sandbox_image)
    try:
        plain = backend.for_thread(THREAD)
        done = run_blocking(
            plain.session.commands.run(["bash", "-c", SETUP + HIDE_PYTHON, "s", ROOT])
        )
        assert done.exit_code == 0, done.stderr
        yield backend, plain
    finally:
        backend.close()
        _cleanup(namespace)


# (operation, args, kwargs): read-only operations, compared on the same tree.
READS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("ls", (ROOT,), {}),
    ("ls", (f"{ROOT}/missing",), {}),
    ("read", (f"{ROOT}/a.txt",), {}),
    ("read", (f"{ROOT}/a.txt", 1, 1), {}),
    ("read", (f"{ROOT}/missing",), {}),
    ("glob", ("**/*.txt", ROOT), {}),
    ("glob", ("*.py", ROOT), {}),
    ("grep", ("needle", ROOT), {}),
    ("grep", ("needle", ROOT, "*.txt"), {}),
    ("grep", ("needle", ROOT), {"max_count": 1}),
    ("download_files", ([f"{ROOT}/a.txt", f"{ROOT}/missing", "relative"],), {}),
    ("execute", ("printf 'out\\n'; printf 'err\\n' >&2; exit 3",), {}),
    ("execute", ("sleep 5",), {"timeout": 1}),
    ("execute_with_offload", ("seq 1 3000", f"{ROOT}-offload/big"), {"max_inline_bytes": 100}),
    ("execute_with_offload", ("echo small", f"{ROOT}-offload/small"), {"max_inline_bytes": 100}),
]


def test_every_read_operation_is_the_thread_sandboxs_native_answer(
    thread_backend: tuple[ThreadSandboxBackend, OpenSandboxBackend],
) -> None:
    backend, plain = thread_backend
    for name, args, kwargs in READS:
        got = in_thread(lambda n=name, a=args, k=kwargs: getattr(backend, n)(*a, **k))
        assert got == getattr(plain, name)(*args, **kwargs), name
    listing = in_thread(lambda: backend.ls(ROOT))
    assert listing.error is None and len(listing.entries or []) == 4
    found = in_thread(lambda: backend.grep("needle", ROOT))
    assert found.error is None and len(found.matches or []) == 4  # .git is skipped
    assert in_thread(lambda: backend.id) == plain.id


async def test_every_read_operation_async(
    thread_backend: tuple[ThreadSandboxBackend, OpenSandboxBackend],
) -> None:
    backend, plain = thread_backend
    for name, args, kwargs in READS:
        got = await ain_thread(lambda n=name, a=args, k=kwargs: getattr(backend, "a" + n)(*a, **k))
        assert got == await getattr(plain, "a" + name)(*args, **kwargs), name


def _changes(backend: Any, prefix: str) -> list[Any]:
    """The writing operations, each on its own file below `prefix`, and what they left."""
    return [
        backend.write(f"{prefix}/w.txt", "one\ntwo needle\n"),
        backend.upload_files([(f"{prefix}/u.bin", b"\x00\xff"), ("relative", b"x")]),
        backend.edit(f"{prefix}/w.txt", "two", "2"),
        backend.edit(f"{prefix}/w.txt", "absent", "x"),
        backend.read(f"{prefix}/w.txt"),
        backend.delete(f"{prefix}/u.bin"),
        backend.delete(f"{prefix}/u.bin"),
        backend.ls(prefix),
    ]


def _renamed(value: Any, old: str, new: str) -> Any:
    """`value` (protocol results: dataclasses, dicts, lists) with `old` replaced by `new` in
    every string."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_renamed(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, old, new) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {f.name: _renamed(getattr(value, f.name), old, new) for f in fields(value)}
        return dataclasses.replace(value, **changed)
    return value


def test_every_writing_operation_is_the_native_one(
    thread_backend: tuple[ThreadSandboxBackend, OpenSandboxBackend],
) -> None:
    backend, plain = thread_backend
    through = in_thread(lambda: _changes(backend, f"{ROOT}/through-thread"))
    direct = _changes(plain, f"{ROOT}/direct")
    assert _renamed(through, f"{ROOT}/through-thread", f"{ROOT}/direct") == direct
    assert through[0].error is None and through[2].occurrences == 1
    assert "2 needle" in str(through[4].file_data)


async def test_every_writing_operation_async(
    thread_backend: tuple[ThreadSandboxBackend, OpenSandboxBackend],
) -> None:
    backend, plain = thread_backend
    prefix = f"{ROOT}/through-thread-async"

    async def changes() -> list[Any]:
        return [
            await backend.awrite(f"{prefix}/w.txt", "one\ntwo needle\n"),
            await backend.aupload_files([(f"{prefix}/u.bin", b"\x00\xff")]),
            await backend.aedit(f"{prefix}/w.txt", "two", "2"),
            await backend.aread(f"{prefix}/w.txt"),
            await backend.adelete(f"{prefix}/u.bin"),
            await backend.als(prefix),
        ]

    through = await ain_thread(changes)
    assert through[0].error is None and through[2].occurrences == 1
    assert [e["path"] for e in through[5].entries or []] == [f"{prefix}/w.txt"]
    assert (await plain.aread(f"{prefix}/w.txt")) == through[3]
