"""How many requests each file operation sends to execd, on each execd generation (issue 37).

Counted against the offline fake (`opensandbox_core.testing.FakeOpenSandbox`, whose `file_api`
answers like v1.0.19 or v1.0.18), per execd route. The files a command leaves (execd's output files, a write's marker) are
deleted in the background, many operations' worth in one request (`remove`, counted apart: see
the last tests). The counts are the minimum each promise needs:

- a read of a file the session knows as a regular file (it wrote it, or inspected it once): one
  download; an unknown path is inspected first (a download of a FIFO would take the data its
  writer sends), on v1.0.18 by a command;
- an atomic write of a small content (up to `_inline.INLINE_LIMIT` bytes), new file or not,
  known or not, on every generation: one command, which carries the content (`_files._inline`);
- a bigger content over a file the session knows: one upload (the content, then a marker file)
  and one rename command sent together;
- a bigger new file on v1.0.19: the upload and the inspection at once, then execd's own move; on
  v1.0.18 (whose file API cannot inspect a path without a command) the same two requests as a
  replacement.

A change that adds a request to one of these fails here; make the case for it in the issue.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable

import pytest

from opensandbox_core import AsyncSandboxSession, SandboxSpec
from opensandbox_core._files import _inline
from opensandbox_core._wire import _execd
from opensandbox_core.testing import FakeOpenSandbox

GENERATIONS = ("1.0.19", "1.0.18")
BIG = bytes(range(256)) * (_inline.INLINE_LIMIT // 256) + b"!"
"""Just over the size written in one command."""


@pytest.fixture(params=GENERATIONS)
async def counted(request: pytest.FixtureRequest) -> AsyncIterator[Counted]:
    fake = FakeOpenSandbox(file_api=request.param)
    async with AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        counted = Counted(fake, sb)
        await counted.requests(sb.commands.run("true"))  # created, probed
        await counted.requests(sb.files.write_bytes("/workspace/warm.txt", b"x"))  # file API learnt
        await counted.requests(sb.files.stat("/workspace/warm.txt"))  # and, on v1.0.18, its tools
        yield counted


class Counted:
    """A session on a fake, and the requests each awaited operation sent (settled: background
    clean-ups included)."""

    def __init__(self, fake: FakeOpenSandbox, session: AsyncSandboxSession) -> None:
        self.fake = fake
        self.session = session

    @property
    def generation(self) -> str:
        return self.fake.file_api

    async def requests(self, operation: Awaitable[object]) -> Counter[str]:
        before = len(self.fake.routes)
        await operation
        await self._settle()
        return Counter(self.fake.routes[before:])

    async def flushed(self) -> None:
        """Send the batched deletions now, and wait for them."""
        execd = (await self.session._life.context()).execd
        execd.flush_discards()
        await self._settle()

    async def _settle(self) -> None:
        """Wait for the session's background clean-ups (deleting a command's files)."""
        execd = (await self.session._life.context()).execd
        for _ in range(100):
            pending = set(execd._cleanups)
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)


async def test_a_known_file_is_read_with_one_download(counted: Counted) -> None:
    sb = counted.session
    await counted.requests(sb.files.write_bytes("/workspace/a.txt", b"hello"))
    assert await counted.requests(sb.files.read_bytes("/workspace/a.txt")) == {"download": 1}
    assert await sb.files.read_bytes("/workspace/a.txt") == b"hello"


async def test_an_unknown_file_is_inspected_once_then_read_with_one_download(
    counted: Counted,
) -> None:
    sb = counted.session
    counted.fake.sandbox().write("/workspace/made.txt", b"by a command")
    first = await counted.requests(sb.files.read_bytes("/workspace/made.txt"))
    if counted.generation == "1.0.19":
        assert first == {"info": 1, "download": 1}
    else:  # v1.0.18's info follows symlinks and has no type: `find` tells (its record is read
        # from the command's capture file)
        assert first == {"command": 1, "download": 2}
    assert await counted.requests(sb.files.read_bytes("/workspace/made.txt")) == {"download": 1}


async def test_a_small_write_is_one_command(counted: Counted) -> None:
    """New or not, known or not: the content goes inside one command, exact bytes included."""
    sb = counted.session
    box = counted.fake.sandbox()
    content = bytes(range(256)) + b"%s\\'-"
    sent = await counted.requests(sb.files.write_bytes("/workspace/new/deep/n.bin", content))
    assert sent == {"command": 1}
    assert box.read("/workspace/new/deep/n.bin") == content
    assert box.files["/workspace/new/deep/n.bin"].mode == 0o644
    sent = await counted.requests(sb.files.write_bytes("/workspace/new/deep/n.bin", b"v2"))
    assert sent == {"command": 1}
    box.write("/workspace/old.txt", b"old", 0o600)  # made by someone else: unknown
    sent = await counted.requests(sb.files.write_bytes("/workspace/old.txt", b"new"))
    assert sent == {"command": 1}
    assert (box.read("/workspace/old.txt"), box.files["/workspace/old.txt"].mode) == (b"new", 0o600)
    # The command's answer (the mode) makes the file known: the next read is one download.
    assert await counted.requests(sb.files.read_bytes("/workspace/old.txt")) == {"download": 1}


async def test_a_known_file_is_replaced_with_one_upload_and_one_rename(counted: Counted) -> None:
    sb = counted.session
    await counted.requests(sb.files.write_bytes("/workspace/r.txt", b"v1"))
    sent = await counted.requests(sb.files.write_bytes("/workspace/r.txt", BIG))
    assert sent == {"upload": 1, "command": 1}
    assert counted.fake.sandbox().read("/workspace/r.txt") == BIG


async def test_a_new_file(counted: Counted) -> None:
    sb = counted.session
    sent = await counted.requests(sb.files.write_bytes("/workspace/new/deep/n.txt", BIG))
    if counted.generation == "1.0.19":
        assert sent == {"upload": 1, "info": 1, "move": 1}  # the info while uploading
    else:
        assert sent == {"upload": 1, "command": 1}
    box = counted.fake.sandbox()
    assert box.read("/workspace/new/deep/n.txt") == BIG
    assert box.files["/workspace/new/deep/n.txt"].mode == 0o644


async def test_the_first_replacement_of_an_unknown_file(counted: Counted) -> None:
    sb = counted.session
    box = counted.fake.sandbox()
    box.write("/workspace/old.txt", b"old", 0o600)
    sent = await counted.requests(sb.files.write_bytes("/workspace/old.txt", BIG))
    if counted.generation == "1.0.19":
        assert sent == {"upload": 1, "info": 1, "command": 1}
    else:
        assert sent == {"upload": 1, "command": 1}
    assert (box.read("/workspace/old.txt"), box.files["/workspace/old.txt"].mode) == (BIG, 0o600)


async def test_no_marker_or_temporary_file_is_left(counted: Counted) -> None:
    sb = counted.session
    for content in (b"1", BIG, b"3" + BIG, b"4"):
        await counted.requests(sb.files.write_bytes("/workspace/m.txt", content))
    await counted.flushed()
    names = list(counted.fake.sandbox().files)
    assert not [n for n in names if ".osb-" in n or ".osbmark-" in n], names


async def test_a_command(counted: Counted) -> None:
    """For comparison: a command without output is one request."""
    assert await counted.requests(counted.session.commands.run("true")) == {"command": 1}


async def test_left_files_of_many_operations_go_in_one_deletion(
    counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What commands and writes leave is deleted in one background request for many
    operations: after `_DISCARD_DELAY` seconds, at `_DISCARD_BATCH` paths, or when the session
    closes; nothing is left behind."""
    monkeypatch.setattr(_execd, "_DISCARD_DELAY", 60.0)
    sb = counted.session
    box = counted.fake.sandbox()
    sent: Counter[str] = Counter()
    for n in range(4):
        sent += await counted.requests(sb.files.write_bytes("/workspace/k.txt", b"%d" % n + BIG))
        sent += await counted.requests(sb.commands.run("true"))
    assert sent["remove"] == 0
    left = [n for n in box.files if ".osbmark-" in n or n.endswith((".stdout", ".stderr"))]
    assert left
    assert await counted.requests(counted.flushed()) == {"remove": 1}
    assert not [n for n in box.files if n in left]
    # Past the batch size a deletion goes at once; the delay sends the rest by itself.
    monkeypatch.setattr(_execd, "_DISCARD_DELAY", 0.1)
    before = len(counted.fake.routes)
    for _ in range(_execd._DISCARD_BATCH // 2):
        await sb.commands.run("true")
    assert "remove" in counted.fake.routes[before:]
    await asyncio.sleep(0.3)
    await counted._settle()
    assert not [n for n in box.files if n.endswith((".stdout", ".stderr"))]


async def test_closing_the_session_deletes_what_is_left() -> None:
    """`aclose` (the sandbox keeps running) sends the deletions still waiting."""
    fake = FakeOpenSandbox(file_api="1.0.19")
    sb = AsyncSandboxSession(SandboxSpec(image="img"), connection=fake.connection())
    try:
        await sb.files.write_bytes("/workspace/c.txt", b"1")
        await sb.files.write_bytes("/workspace/c.txt", BIG)
        box = fake.sandbox()
        assert [n for n in box.files if ".osbmark-" in n]
        before = len(fake.routes)
        await sb.aclose()
        assert fake.routes[before:].count("remove") == 1
        assert not [n for n in box.files if ".osbmark-" in n or n.endswith((".stdout", ".stderr"))]
    finally:
        await sb.destroy()
