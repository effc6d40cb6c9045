"""Every Deep Agents tool gives the same result on the busybox image as on the Debian image.

The testbed's busybox image (`OSB_TESTBED_BUSYBOX_IMAGE`) holds Debian's busybox-static and
nothing else: no python3, no bash, no GNU tools. The same tree of files (names with spaces, `$`,
quotes; a long file for paging) is laid out on a sandbox of each image, every tool runs the
same calls on both, and the results must be equal field for field (timestamps only compared as
present or absent). Through `OpenSandboxBackend` and through `ThreadSandboxBackend` (its calls
run inside a LangGraph run that carries the thread id, as an agent's tool calls do).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import pytest
from deepagents.backends.sandbox import BaseSandbox
from langgraph.graph import END, START, StateGraph

from deepagents_opensandbox_backend import OpenSandboxBackend, ThreadSandboxBackend

LONG = "".join(f"line {i} of the long file\n" for i in range(1, 3001))
TREE = {
    "notes.txt": "alpha\nbeta it's here\n$(touch x) and `id`\nx*y literal, a\\b, -e\n",
    "dir with space/a.py": "print('alpha')\n# TODO: it's done\n",
    "dir with space/sub/b.md": "# b\nalpha again\n",
    "long.txt": LONG,  # (and `$HOME/c.txt`, made by _lay_out)
    "empty.txt": "",
}
THREAD = "busybox-thread"
_HAS_OFFLOAD = hasattr(BaseSandbox, "execute_with_offload")


class Side:
    """One image's sandbox, through one backend class."""

    def __init__(self, backend: Any, thread: bool) -> None:
        self.backend = backend
        self.thread = thread

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        def op() -> Any:
            return getattr(self.backend, name)(*args, **kwargs)

        return _in_langgraph_run(op) if self.thread else op()


class _State(TypedDict):
    out: Any


def _in_langgraph_run(op: Callable[[], Any]) -> Any:
    """`op()` inside a LangGraph run of thread THREAD (where an agent's tools run)."""
    graph = StateGraph(_State)
    graph.add_node("op", lambda state: {"out": op()})
    graph.add_edge(START, "op")
    graph.add_edge("op", END)
    config: Any = {"configurable": {"thread_id": THREAD}}
    return graph.compile().invoke({"out": None}, config)["out"]


def _plain(value: Any) -> Any:
    """Results as plain data, timestamps replaced by whether they are there."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {
            k: (v is not None) if k in ("modified_at", "created_at") else _plain(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def busybox_image(testbed_env: dict[str, str]) -> str:
    image = testbed_env.get("OSB_TESTBED_BUSYBOX_IMAGE") or os.environ.get(
        "OSB_TESTBED_BUSYBOX_IMAGE"
    )
    if not image:
        pytest.fail("OSB_TESTBED_BUSYBOX_IMAGE unset: restart the testbed (it builds the image)")
    return image


@pytest.fixture(scope="module", params=["plain", "thread"])
def sides(
    request: pytest.FixtureRequest, sandbox_image: str, busybox_image: str
) -> Iterator[dict[str, Side]]:
    """{"debian": ..., "busybox": ...} of one backend class."""
    made: dict[str, Side] = {}
    threads: list[ThreadSandboxBackend] = []
    try:
        for name, image in (("debian", sandbox_image), ("busybox", busybox_image)):
            if request.param == "plain":
                made[name] = Side(OpenSandboxBackend.create(image=image, timeout=900), False)
            else:
                backend = ThreadSandboxBackend(
                    namespace=f"busybox-{uuid.uuid4().hex[:10]}", image=image, timeout=900
                )
                threads.append(backend)
                made[name] = Side(backend, True)
        yield made
    finally:
        for side in made.values():
            if not side.thread:
                side.backend.close()
        for backend in threads:
            backend.destroy_thread(THREAD)


def _lay_out(side: Side, root: str) -> None:
    files = [(f"{root}/{rel}", text.encode()) for rel, text in TREE.items()]
    results = side.call("upload_files", files)
    assert [r.error for r in results] == [None] * len(files), results
    # a folder named `$HOME` (the backend refuses to upload to a path with `$`, as execd would
    # expand it), made by a command
    made = side.call("execute", f"mkdir '{root}/$HOME' && echo 'alpha beta' > '{root}/$HOME/c.txt'")
    assert made.exit_code == 0, made


def _same(sides: dict[str, Side], tool: str, calls: Callable[[Side, str], list[Any]]) -> None:
    root = f"/workspace/bb-{tool}"
    got = {}
    for name, side in sides.items():
        _lay_out(side, root)
        got[name] = _plain(calls(side, root))
    assert got["busybox"] == got["debian"]


def _left(side: Side, root: str) -> Any:
    """What is in `root` now, by a command (independent of the `ls` tool)."""
    return side.call("execute", f"cd '{root}' && ls -a . *").output


def _ls(side: Side, root: str) -> list[Any]:
    return [
        side.call("ls", root),
        side.call("ls", f"{root}/dir with space"),
        side.call("ls", f"{root}/$HOME"),
        side.call("ls", f"{root}/missing"),
    ]


def _read(side: Side, root: str) -> list[Any]:
    return [
        side.call("read", f"{root}/notes.txt"),
        side.call("read", f"{root}/long.txt", offset=100, limit=50),
        side.call("read", f"{root}/long.txt", offset=2990),
        side.call("read", f"{root}/empty.txt"),
        side.call("read", f"{root}/missing.txt"),
    ]


def _write(side: Side, root: str) -> list[Any]:
    return [
        side.call("write", f"{root}/new dir/new.txt", "new\ncontent it's\n"),
        side.call("read", f"{root}/new dir/new.txt"),
        side.call("write", f"{root}/notes.txt", "again\n"),
        side.call("read", f"{root}/notes.txt"),
    ]


def _edit(side: Side, root: str) -> list[Any]:
    return [
        side.call("edit", f"{root}/notes.txt", "beta", "BETA"),
        side.call("edit", f"{root}/dir with space/a.py", "alpha", "omega", replace_all=True),
        side.call("edit", f"{root}/notes.txt", "not there", "x"),
        side.call("edit", f"{root}/long.txt", "of the long file", "x"),  # many: refused
        side.call("edit", f"{root}/missing.txt", "a", "b"),
        side.call("read", f"{root}/notes.txt"),
    ]


def _glob(side: Side, root: str) -> list[Any]:
    return [
        side.call("glob", "**/*.txt", root),
        side.call("glob", "*.py", f"{root}/dir with space"),
        side.call("glob", "**/*", f"{root}/dir with space"),
        side.call("glob", "*.none", root),
    ]


def _grep(side: Side, root: str) -> list[Any]:
    return [
        side.call("grep", pattern, root, glob)
        for pattern, glob in (
            ("alpha", None),
            ("it's", None),
            ("$(touch x)", None),
            ("`id`", None),
            ("a\\b", None),
            ("-e", None),
            ("x*y", "*.txt"),
            ("alpha", "*.md"),
            ("alpha", "**/*.md"),  # a glob with `/`: BaseSandbox's other route
            ("it's", "dir with space/*.py"),
            ("$(touch x)", "*"),
            ("nowhere", None),
        )
    ] + [_left(side, root)]  # and nothing was run: no file `x` appeared


def _delete(side: Side, root: str) -> list[Any]:
    return [
        side.call("delete", f"{root}/notes.txt"),
        side.call("delete", f"{root}/missing.txt"),
        side.call("delete", f"{root}/dir with space"),
        _left(side, root),
    ]


def _execute(side: Side, root: str) -> list[Any]:
    return [
        side.call("execute", f"cd '{root}' && cat notes.txt && echo err >&2; exit 3"),
        side.call("execute", "printf 'no newline'"),
        side.call("execute", f"ls '{root}/dir with space'"),
    ]


def _execute_with_offload(side: Side, root: str) -> list[Any]:
    out = []
    for command in ("echo small", f"cat '{root}/long.txt'"):
        out.append(
            side.call("execute_with_offload", command, f"{root}/capture.txt", max_inline_bytes=4096)
        )
        kept = side.call("download_files", [f"{root}/capture.txt"])[0]
        out.append((kept.content, kept.error))
    return out


TOOLS: dict[str, Callable[[Side, str], list[Any]]] = {
    "ls": _ls,
    "read": _read,
    "write": _write,
    "edit": _edit,
    "glob": _glob,
    "grep": _grep,
    "delete": _delete,
    "execute": _execute,
}
if _HAS_OFFLOAD:
    TOOLS["execute_with_offload"] = _execute_with_offload


@pytest.mark.execd_profiles("1.0.18", "1.0.19", "1.1")
@pytest.mark.parametrize("tool", list(TOOLS))
def test_the_tool_answers_on_busybox_as_on_debian(tool: str, sides: dict[str, Side]) -> None:
    _same(sides, tool, TOOLS[tool])
