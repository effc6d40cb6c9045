"""The core's commands and file API on the testbed's busybox image (no python3, bash or GNU
tools): every call answers as it does on the Debian image, byte for byte.

On execd 1.0.18 (no `/directories/list`, no `type` in `/files/info`), for paths with `$` and
for `..`, the core stats, lists and resolves by commands: GNU `find -printf` and `realpath` on
Debian, POSIX scripts (`stat -c`, `readlink`) where the sandbox lacks them; same answers.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from opensandbox_core import AsyncSandboxSession, SandboxSpec

pytestmark = [
    pytest.mark.execd_profiles("1.0.18", "1.0.19", "1.1"),
    pytest.mark.asyncio(loop_scope="module"),
]

ROOT = "/workspace/core-bb"
NAMES = ["plain.txt", "with space.txt", "it's.txt", "é中文.txt", "-dash.txt", 'q"uote']


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(
    testbed_env: dict[str, str], sandbox_image: str
) -> AsyncIterator[dict[str, AsyncSandboxSession]]:
    busybox = testbed_env.get("OSB_TESTBED_BUSYBOX_IMAGE") or os.environ.get(
        "OSB_TESTBED_BUSYBOX_IMAGE"
    )
    if not busybox:
        pytest.fail("OSB_TESTBED_BUSYBOX_IMAGE unset: restart the testbed (it builds the image)")
    async with (
        AsyncSandboxSession(SandboxSpec(image=sandbox_image, lifetime=900)) as debian,
        AsyncSandboxSession(SandboxSpec(image=busybox, lifetime=900)) as bb,
    ):
        yield {"debian": debian, "busybox": bb}


# What differs from one sandbox (or run) to the next, whatever the image: compared as present.
_VARYING = ("modified_at", "duration", "execution_id")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: (v is not None) if k in _VARYING else _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


async def _outcome(call: Any) -> Any:
    try:
        return _plain(await call)
    except Exception as exc:  # the same error type and text on both images
        return (type(exc).__name__, str(exc))


async def test_the_image_has_no_python3_bash_or_gnu_tools(
    sessions: dict[str, AsyncSandboxSession],
) -> None:
    result = await sessions["busybox"].commands.run(
        "for c in python3 python bash; do command -v $c || echo no-$c; done; find --version"
    )
    assert result.stdout.splitlines()[:3] == ["no-python3", "no-python", "no-bash"]
    assert "GNU" not in result.output


async def test_commands_answer_as_on_debian(sessions: dict[str, AsyncSandboxSession]) -> None:
    calls = [
        ("printf 'a\\nb\\r\\nc'; printf 'err\\n' >&2; exit 7", {}),
        ("printf '\\377\\000\\302\\205end'", {}),
        (["printf", "%s|", "it's", "$(id)", "a b"], {}),
        ("echo $FOO; pwd", {"env": {"FOO": "bar baz"}, "cwd": "/tmp"}),
        ("seq 1 20000 | tail -n 2", {}),
    ]
    got: dict[str, list[Any]] = {}
    for name, session in sessions.items():
        got[name] = [await _outcome(session.commands.run(cmd, **kw)) for cmd, kw in calls]
    assert got["busybox"] == got["debian"]


async def _file_calls(s: AsyncSandboxSession, root: str, names: list[str]) -> list[Any]:
    out: list[Any] = [await _outcome(s.files.make_dir(f"{root}/sub dir/deeper"))]
    for i, file in enumerate(names):
        out.append(await _outcome(s.files.write_bytes(f"{root}/{file}", bytes([i]) * 100 + b"\n")))
    first, last = f"{root}/{names[0]}", f"{root}/{names[-1]}"
    return [
        *out,
        await _outcome(s.files.read_bytes(last)),
        await _outcome(s.files.read_range(first, 10, 5)),
        await _outcome(s.files.list_dir(root)),
        await _outcome(s.files.stat(last)),
        await _outcome(s.files.stat(f"{root}/sub dir")),
        await _outcome(s.files.exists(last)),
        await _outcome(s.files.exists(f"{root}/missing")),
        await _outcome(s.files.stat(f"{root}/missing")),
        await _outcome(s.files.write_bytes(f"{root}/edit.txt", b"one two one\n")),
        await _outcome(s.files.edit(f"{root}/edit.txt", "two", "2")),
        await _outcome(s.files.read_bytes(f"{root}/edit.txt")),
        await _outcome(s.files.remove(last)),
        await _outcome(s.files.remove(f"{root}/sub dir")),
        await _outcome(s.files.list_dir(root)),
        await _outcome(s.files.read_bytes(f"{root}/sub dir")),
    ]


async def test_the_file_api_answers_as_on_debian(
    sessions: dict[str, AsyncSandboxSession],
) -> None:
    got = {n: await _file_calls(s, ROOT, NAMES) for n, s in sessions.items()}
    assert got["busybox"] == got["debian"]


async def test_paths_with_a_dollar_answer_as_on_debian(
    sessions: dict[str, AsyncSandboxSession],
) -> None:
    names = ["$HOME.txt", "a$b", "${x}.txt", "-$dash", "nl\n$name", "it's $(id)"]
    got = {n: await _file_calls(s, f"{ROOT}/$dollar", names) for n, s in sessions.items()}
    assert got["busybox"] == got["debian"]


async def test_paths_with_dotdot_answer_as_on_debian(
    sessions: dict[str, AsyncSandboxSession],
) -> None:
    got: dict[str, list[Any]] = {}
    for name, s in sessions.items():
        await s.files.write_bytes(f"{ROOT}/dd/sub/f.txt", b"x\n")
        got[name] = [
            await _outcome(s.files.realpath(f"{ROOT}/dd/sub/../sub/f.txt")),
            await _outcome(s.files.read_bytes(f"{ROOT}/dd/sub/../sub/f.txt")),
            await _outcome(s.files.write_bytes(f"{ROOT}/dd/sub/../g.txt", b"g\n")),
            await _outcome(s.files.list_dir(f"{ROOT}/dd/sub/..")),
        ]
    assert got["busybox"] == got["debian"]
