"""The blocking `SandboxSession` against the in-process fake: the twins added to match the
async session (iter_bytes, write_bytes(timeout=), sandbox_gone, run(plain_lines=)) behave like
their async originals."""

from __future__ import annotations

import pytest

from opensandbox_core import SandboxSession, SandboxSpec
from opensandbox_core.testing import FakeOpenSandbox


@pytest.mark.parametrize("framing", ["legacy", "modern"])
def test_blocking_twins_work(framing: str) -> None:
    fake = FakeOpenSandbox(framing=framing)  # type: ignore[arg-type]
    data = bytes(range(256)) * 40
    with SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        assert sb.commands.run("printf 'a\\r\\nb'").stdout == "a\r\nb"
        sb.files.write_bytes("/workspace/blob.bin", data, timeout=30)
        chunks = list(sb.files.iter_bytes("/workspace/blob.bin", chunk_size=1000))
        assert b"".join(chunks) == data
        assert len(chunks) >= 2  # streamed, not one read
        assert sb.files.read_range("/workspace/blob.bin", 10, 5) == data[10:15]
        assert sb.sandbox_gone() is False
        assert sb.owner_token == sb.async_session.owner_token
        sandbox_id = sb.id
    assert fake.deleted == [sandbox_id]
    gone = SandboxSession.attach(str(sandbox_id), connection=fake.connection())
    try:
        assert gone.sandbox_gone() is True
    finally:
        gone.close()


def test_iterating_part_way_then_stopping_closes_cleanly() -> None:
    fake = FakeOpenSandbox()
    with SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        sb.files.write_bytes("/workspace/big.bin", b"x" * 10_000)
        iterator = sb.files.iter_bytes("/workspace/big.bin", chunk_size=1000)
        first = next(iterator)
        assert first == b"x" * len(first) and first
        iterator.close()  # type: ignore[attr-defined]
        assert sb.commands.run("echo still").stdout == "still\n"
