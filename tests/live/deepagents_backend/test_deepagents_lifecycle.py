"""Ownership, attach by id, context managers, timeouts and the async side."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepagents_opensandbox_backend import OpenSandboxBackend
from opensandbox_core import SandboxUnavailableError

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


def _exists(sandbox_id: str) -> bool:
    try:
        OpenSandboxBackend.connect(sandbox_id).close()
    except SandboxUnavailableError:
        return False
    return True


def test_attached_backend_never_destroys_unless_forced(testbed_env: dict[str, str]) -> None:
    with OpenSandboxBackend.create() as owner:
        owner.write("/workspace/shared.txt", "from the owner")
        attached = OpenSandboxBackend.connect(owner.id)
        assert attached.id == owner.id and attached.owned is False
        assert attached.read("/workspace/shared.txt").file_data == {
            "content": "from the owner",
            "encoding": "utf-8",
        }
        attached.kill()
        attached.kill()
        assert owner.execute("echo alive").output == "alive\n"
        with OpenSandboxBackend.connect(owner.id) as again:
            assert again.execute("cat /workspace/shared.txt").output == "from the owner"
        assert owner.execute("echo still").output == "still\n"
        OpenSandboxBackend.connect(owner.id).kill(force=True)
        assert not _exists(owner.id)
    # owner.kill() on exit is quiet although the sandbox is already gone


def test_with_block_deletes_what_it_created(testbed_env: dict[str, str]) -> None:
    with OpenSandboxBackend.create() as backend:
        sandbox_id = backend.id
        assert backend.owned
    assert not _exists(sandbox_id)
    backend.kill()  # idempotent
    with pytest.raises(SandboxUnavailableError):
        backend.execute("true")


def test_connect_to_a_missing_sandbox_fails_clearly(testbed_env: dict[str, str]) -> None:
    with pytest.raises(SandboxUnavailableError, match="not found"):
        OpenSandboxBackend.connect("00000000-0000-0000-0000-000000000000")


def test_execute_timeouts(backend: OpenSandboxBackend) -> None:
    started = time.monotonic()
    result = backend.execute("echo before; sleep 30; echo AFTER", timeout=2)
    assert time.monotonic() - started < 15
    assert result.exit_code == 124
    assert result.output.startswith("before\n")
    assert "AFTER" not in result.output
    assert result.output.rstrip().endswith(
        "was stopped; the output above is what it printed before that."
    )
    assert "timed out after 2 seconds" in result.output
    # the command really stopped: nothing sleeps on
    assert "sleep 30" not in backend.execute("ps -eo args").output
    assert backend.execute("sleep 1; echo done", timeout=0).output == "done\n"
    with pytest.raises(ValueError):
        backend.execute("true", timeout=-1)


def test_output_is_exactly_what_was_printed(backend: OpenSandboxBackend) -> None:
    result = backend.execute("printf 'a\\n\\n b\\n'; printf 'E1\\n\\nE2' >&2; exit 7")
    assert (result.output, result.exit_code, result.truncated) == ("a\n\n b\nE1\n\nE2", 7, False)
    assert backend.execute("printf '\\377ok'").output == "\ufffdok"


def test_large_output_is_complete_and_huge_output_is_flagged(backend: OpenSandboxBackend) -> None:
    big = backend.execute("head -c 3000000 /dev/zero | tr '\\0' x")
    assert len(big.output) == 3_000_000 and not big.truncated
    huge = backend.execute("head -c 20000000 /dev/zero | tr '\\0' y")
    assert huge.truncated and huge.exit_code == 0
    assert huge.output.startswith("yyyy")


async def test_native_async_side(testbed_env: dict[str, str]) -> None:
    async with await OpenSandboxBackend.acreate() as backend:
        results = await asyncio.gather(
            *(backend.aexecute(f"echo {i}") for i in range(8)),
        )
        assert [r.output for r in results] == [f"{i}\n" for i in range(8)]
        up = await backend.aupload_files([("/workspace/a.bin", b"\x00\x01"), ("rel", b"")])
        assert [u.error for u in up] == [None, "invalid_path"]
        down = await backend.adownload_files(["/workspace/a.bin", "/workspace/none"])
        assert [(d.content, d.error) for d in down] == [
            (b"\x00\x01", None),
            (None, "file_not_found"),
        ]
        assert (await backend.awrite("/workspace/w.txt", "x\ny")).error is None
        page = await backend.aread("/workspace/w.txt", 1, 1)
        assert page.file_data == {"content": "y", "encoding": "utf-8"}
        edit = await backend.aedit("/workspace/w.txt", "y", "z")
        assert edit.error is None and edit.occurrences == 1
        timed = await backend.aexecute("sleep 20", timeout=1)
        assert timed.exit_code == 124
        other = await OpenSandboxBackend.aconnect(backend.id)
        assert (await other.aexecute("cat /workspace/w.txt")).output == "x\nz"
        await other.akill()
        sandbox_id = backend.id
    assert not await asyncio.to_thread(_exists, sandbox_id)
