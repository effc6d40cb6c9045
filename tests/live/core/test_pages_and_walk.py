"""`read_lines`, `walk_files`, `glob` and `run_bytes` on a real sandbox.

Each answer is checked against an oracle that does not share the code under test: the pages
against the lines Python splits from the bytes written, the walk against `os.walk` run by the
image's own python3, `run_bytes` against the bytes a file holds.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import AsyncIterator

import pytest

from opensandbox_core import (
    AsyncSandboxSession,
    CommandTimeoutError,
    NotTextError,
    OutputLimitError,
    SandboxSpec,
)

MIB = 1024 * 1024
ROOT = "/workspace/walk"


@pytest.fixture
async def sandbox(sandbox_image: str) -> AsyncIterator[AsyncSandboxSession]:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image), max_output=4 * MIB) as session:
        yield session


def _lines(data: bytes) -> list[str]:
    lines = re.split(r"\r\n|\r|\n", data.decode())
    return lines[:-1] if lines[-1] == "" else lines


@pytest.mark.parametrize("size", [300_000, 6 * MIB])
async def test_pages_join_to_the_file(sandbox: AsyncSandboxSession, size: int) -> None:
    unit = "".join(f"{i} é中🎉 {'y' * (i % 90)}\r\n" if i % 7 else f"{i}\r" for i in range(999))
    whole = (unit * (size // len(unit.encode()) + 1)).encode()[:size]
    data = whole.decode("utf-8", "ignore").encode() + b"tail"  # cut on a character edge
    path = f"/workspace/pages/$HOME {size}.txt"  # a name execd would rewrite
    await sandbox.files.write_bytes(path, data)
    expected = _lines(data)
    got: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await sandbox.files.read_lines(path, offset, 7000)
        assert page.offset == offset and page.size == len(data)
        got.extend(page.text.split("\n"))
        offset = page.next_offset
    assert got == expected
    assert page.total_lines == len(expected)
    jump = await sandbox.files.read_lines(path, len(expected) - 3, 10)  # forward, then back
    assert jump.text.split("\n") == expected[-3:] and jump.next_offset is None
    back = await sandbox.files.read_lines(path, 5, 2)
    assert back.text.split("\n") == expected[5:7]
    past = await sandbox.files.read_lines(path, len(expected) + 10, 5)
    assert (past.text, past.end, past.total_lines) == ("", len(expected) + 10, len(expected))


async def test_a_changed_file_is_read_again(sandbox: AsyncSandboxSession) -> None:
    path = "/workspace/pages/changing.txt"
    old = b"".join(b"old %07d\n" % i for i in range(300_000))  # 3.6 MiB: Range reads
    await sandbox.files.write_bytes(path, old)
    first = await sandbox.files.read_lines(path, 0, 1000)
    second = await sandbox.files.read_lines(path, first.end, 1000)
    assert second.text.startswith("old 0001000")
    await sandbox.files.write_bytes(path, old.replace(b"old", b"new"))  # same size
    third = await sandbox.files.read_lines(path, second.end, 1000)
    assert third.text.startswith("new 0002000")
    await sandbox.files.write_bytes(path, b"short\n")
    assert (await sandbox.files.read_lines(path, third.end, 10)).total_lines == 1


async def test_errors(sandbox: AsyncSandboxSession) -> None:
    await sandbox.files.write_bytes(
        "/workspace/pages/img.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    )
    with pytest.raises(NotTextError) as caught:
        await sandbox.files.read_lines("/workspace/pages/img.png")
    assert caught.value.binary
    late = b"ok\n" * 600_000 + b"\xff\n"  # 1.8 MiB: paged; the bad byte only at the end
    await sandbox.files.write_bytes("/workspace/pages/late.txt", late)
    assert (await sandbox.files.read_lines("/workspace/pages/late.txt", 0, 3)).text == "ok\nok\nok"
    with pytest.raises(NotTextError) as caught:
        await sandbox.files.read_lines("/workspace/pages/late.txt", 599_998, 3)
    assert not caught.value.binary
    with pytest.raises(IsADirectoryError):
        await sandbox.files.read_lines("/workspace/pages")
    with pytest.raises(FileNotFoundError):
        await sandbox.files.read_lines("/workspace/pages/missing.txt")
    empty = "/workspace/pages/empty.txt"
    await sandbox.files.write_bytes(empty, b"")
    assert (await sandbox.files.read_lines(empty)).total_lines == 0


SETUP = r"""
set -e
r="$1"
rm -rf -- "$r"
mkdir -p -- "$r/src/deep" "$r/sp ace/\$HOME" "$r/.git" "$r/$(printf 'nl\nd')"
for name in "a.py" "it's.py" '$(touch x).py' '`id`.py' 'a\b.py' '-e' 'x*y.py' ".hidden.py"; do
  printf 'x\n' > "$r/src/$name"
done
printf 'x\n' > "$r/src/deep/b.py"; printf 'x\n' > "$r/sp ace/\$HOME/c.py"
printf 'x\n' > "$r/$(printf 'cr\rname')"; printf 'x\n' > "$r/$(printf 'bad\377name')"
printf 'x\n' > "$r/.git/config"; printf 'x\n' > "$r/$(printf 'nl\nd')/f"
ln -s src/a.py "$r/link.py"; ln -s /etc/hostname "$r/outside"; ln -s src "$r/dirlink"
ln -s missing "$r/dangling"; mkfifo "$r/fifo"
"""
ORACLE = r"""
import os, sys
root = sys.argv[1]
real = os.path.realpath(root)
out = []
for top, dirs, files in os.walk(root):
    for name in files:
        full = os.path.join(top, name)
        rel = os.path.relpath(full, root)
        if os.path.islink(full):
            target = os.path.realpath(full)
            if os.path.isfile(full) and (target + "/").startswith(real + "/"):
                out.append((rel, True))
        elif os.path.isfile(full):
            out.append((rel, False))
print(repr(sorted(out)))
"""


async def test_walk_and_glob_match_os_walk(sandbox: AsyncSandboxSession) -> None:
    done = await sandbox.commands.run(["bash", "-c", SETUP, "setup", ROOT])
    assert done.exit_code == 0, done.stderr
    oracle = await sandbox.commands.run(["python3", "-c", ORACLE, ROOT])
    expected = ast.literal_eval(oracle.stdout)
    found = await sandbox.files.walk(ROOT)
    assert [(m.relative, m.is_symlink) for m in found] == expected
    assert "bad\udcffname" in {m.relative for m in found}  # os.fsdecode's name for 0xFF
    assert all(m.path == f"{ROOT}/{m.relative}" for m in found)
    py = await sandbox.files.glob("*.py", path=ROOT)
    assert [m.relative for m in py] == sorted(
        rel for rel, _ in expected if os.path.basename(rel).endswith(".py")
    )
    assert [m.relative for m in await sandbox.files.glob("sp ace/$HOME/*.py", path=ROOT)] == [
        "sp ace/$HOME/c.py"
    ]
    assert [m.relative for m in await sandbox.files.glob("$(touch x).py", path=ROOT)] == [
        "src/$(touch x).py"
    ]
    assert (await sandbox.commands.run(["test", "-e", f"{ROOT}/x"])).exit_code == 1  # nothing ran
    relative = await sandbox.files.glob("src/*.py", path="walk")  # against the working directory
    assert relative and all(m.path.startswith("walk/src/") for m in relative)
    with pytest.raises(FileNotFoundError):
        await sandbox.files.walk(f"{ROOT}/missing")
    with pytest.raises(NotADirectoryError):
        await sandbox.files.walk(f"{ROOT}/src/a.py")


async def test_run_bytes_is_exact(sandbox: AsyncSandboxSession) -> None:
    data = os.urandom(3 * MIB // 2)
    await sandbox.files.write_bytes("/workspace/random.bin", data)
    result = await sandbox.commands.run_bytes("cat /workspace/random.bin; echo oops >&2; exit 7")
    assert result.stdout == data and result.exit_code == 7 and result.stderr == "oops\n"
    every = await sandbox.commands.run_bytes(["printf", "".join(f"\\{b:03o}" for b in range(256))])
    assert every.stdout == bytes(range(256)) and every.exit_code == 0
    with pytest.raises(OutputLimitError):
        await sandbox.commands.run_bytes("head -c 4000000 /dev/zero")  # over max_output as base64
    with pytest.raises(CommandTimeoutError) as caught:
        await sandbox.commands.run_bytes("printf 'before\\n'; sleep 30", timeout=2)
    assert caught.value.stdout in ("", "before\n")  # the partial line, when it arrived
