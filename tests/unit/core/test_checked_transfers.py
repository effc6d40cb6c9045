"""`upload_checked`, `download_checked` and `transfer_code` (opensandbox_core.adapters).

Two kinds of test: a recording stand-in for the session's two batch methods (what is sent, in
how many batches, and how the answers are put back in the caller's order), and the offline
session of `test_files_offline` (execd's file routes on a temporary directory of this machine)
for the codes that real path failures get.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from test_files_offline import Offline, _session

from opensandbox_core import (
    AsyncSandboxSession,
    SandboxUnavailableError,
    ServerError,
    TransferResult,
)
from opensandbox_core.adapters import (
    TRANSFER_CODES,
    TRANSFER_ERRNOS,
    CheckedTransfer,
    download_checked,
    transfer_code,
    upload_checked,
)


class Batches:
    """The session's `upload_files` / `download_files`, recording each batch; every path gets
    the result `answers` holds for it (success when absent)."""

    def __init__(self, answers: dict[str, TransferResult] | None = None) -> None:
        self.answers = answers or {}
        self.uploads: list[list[tuple[str, bytes]]] = []
        self.downloads: list[list[str]] = []

    def _answer(self, path: str, content: bytes | None) -> TransferResult:
        return self.answers.get(path, TransferResult(path=path, content=content))

    async def upload_files(self, files: Sequence[tuple[str, bytes]]) -> list[TransferResult]:
        self.uploads.append(list(files))
        return [self._answer(path, None) for path, _ in files]

    async def download_files(self, paths: Sequence[str]) -> list[TransferResult]:
        self.downloads.append(list(paths))
        return [self._answer(path, f"<{path}>".encode()) for path in paths]

    @property
    def files(self) -> Batches:
        return self

    def session(self) -> AsyncSandboxSession:
        return cast(AsyncSandboxSession, self)


def _failed(path: str, error: str, exc: BaseException | None) -> TransferResult:
    return TransferResult(path=path, error=error, exception=exc)


MISSING = _failed("/missing", "file_not_found", FileNotFoundError(errno.ENOENT, "x", "/missing"))


# -- transfer_code -----------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(TRANSFER_CODES))
def test_codes_about_the_file_are_kept(code: str) -> None:
    assert transfer_code(_failed("/p", code, OSError("x"))) == code


def test_success_has_no_code() -> None:
    assert transfer_code(TransferResult(path="/p", content=b"")) is None
    assert transfer_code(TransferResult(path="/p")) is None


@pytest.mark.parametrize(("number", "code"), sorted(TRANSFER_ERRNOS.items()))
def test_plain_oserrors_get_the_code_of_their_errno(number: int, code: str) -> None:
    assert code in TRANSFER_CODES
    assert transfer_code(_failed("/p", "error", OSError(number, "x", "/p"))) == code


@pytest.mark.parametrize(
    ("error", "exc"),
    [
        ("unavailable", SandboxUnavailableError("gone", sandbox_id="s")),
        ("error", ServerError("boom", status_code=500)),
        ("error", OSError(errno.ENOSPC, "No space left on device", "/p")),
        ("error", OSError("no errno")),
        ("error", RuntimeError("x")),
    ],
)
def test_failures_not_about_the_file_raise_the_exception_itself(
    error: str, exc: BaseException
) -> None:
    with pytest.raises(type(exc)) as raised:
        transfer_code(_failed("/p", error, exc))
    assert raised.value is exc


def test_a_failure_without_a_reason_says_so() -> None:
    with pytest.raises(RuntimeError, match=r"Transfer of '/p' failed without a reason \(error\)"):
        transfer_code(_failed("/p", "error", None))


# -- one batch, the caller's order -------------------------------------------------------------


async def test_upload_sends_the_sendable_paths_in_one_batch_in_order() -> None:
    batches = Batches({"/missing": MISSING})
    files: list[tuple[str, Any]] = [
        ("rel.txt", b"a"),
        ("/b", b"b"),
        ("", b"c"),
        ("/missing", bytearray(b"d")),
        ("/a/\0nul", b"e"),
        ("/e", memoryview(b"e")),
    ]
    done = await upload_checked(batches.session(), files)
    assert batches.uploads == [[("/b", b"b"), ("/missing", b"d"), ("/e", b"e")]]
    assert all(type(content) is bytes for _, content in batches.uploads[0])
    assert done == [
        CheckedTransfer("rel.txt", "invalid_path"),
        CheckedTransfer("/b"),
        CheckedTransfer("", "invalid_path"),
        CheckedTransfer("/missing", "file_not_found"),
        CheckedTransfer("/a/\0nul", "invalid_path"),
        CheckedTransfer("/e"),
    ]


async def test_download_puts_contents_back_in_order() -> None:
    batches = Batches({"/missing": MISSING})
    paths: list[Any] = ["/x", None, "/missing", "~/y", "/z", "/x"]
    done = await download_checked(batches.session(), paths)
    assert batches.downloads == [["/x", "/missing", "/z", "/x"]]
    assert [(d.path, d.content, d.error) for d in done] == [
        ("/x", b"</x>", None),
        (None, None, "invalid_path"),
        ("/missing", None, "file_not_found"),
        ("~/y", None, "invalid_path"),
        ("/z", b"</z>", None),
        ("/x", b"</x>", None),
    ]


async def test_nothing_sendable_sends_nothing() -> None:
    batches = Batches()
    assert await upload_checked(batches.session(), []) == []
    assert await download_checked(batches.session(), []) == []
    up = await upload_checked(batches.session(), [("rel", b"x"), ("\udcff", b"y")])
    down = await download_checked(batches.session(), ["rel", "/\udcff"])
    assert [u.error for u in up] == [d.error for d in down] == ["invalid_path"] * 2
    assert batches.uploads == [] and batches.downloads == []


async def test_content_that_is_not_bytes_raises_before_anything_is_sent() -> None:
    batches = Batches()
    files: list[tuple[str, Any]] = [("/ok", b"x"), ("/text", "text"), ("/later", b"y")]
    with pytest.raises(TypeError, match=r"^content for '/text' must be bytes, got str\.$"):
        await upload_checked(batches.session(), files)
    assert batches.uploads == []
    # A path that is refused anyway is reported, whatever its content.
    refused: list[tuple[str, Any]] = [("rel", None)]
    assert await upload_checked(batches.session(), refused) == [
        CheckedTransfer("rel", "invalid_path")
    ]


async def test_a_failure_not_about_the_file_raises_from_the_batch() -> None:
    gone = SandboxUnavailableError("gone", sandbox_id="s")
    batches = Batches({"/b": _failed("/b", "unavailable", gone)})
    with pytest.raises(type(gone)):
        await download_checked(batches.session(), ["/a", "/b"])
    with pytest.raises(type(gone)):
        await upload_checked(batches.session(), [("/a", b""), ("/b", b"")])


# -- real path failures (the offline session: execd's file routes on this machine) -------------


@pytest.fixture(params=["v1.0.19", "v1.0.18"])
async def offline(request: pytest.FixtureRequest, tmp_path: Path) -> Offline:
    return _session(request.param, tmp_path, f"checked-{request.param}-{os.urandom(4).hex()}")


async def test_real_path_failures_get_their_codes(offline: Offline, tmp_path: Path) -> None:
    session = offline[0]
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_bytes(b"old")
    os.symlink("loop", tmp_path / "loop")
    up = await upload_checked(
        session,
        [
            (str(tmp_path / "new.bin"), b"\x00\xff"),
            (str(tmp_path / "dir"), b"x"),
            (str(tmp_path / "file" / "child"), b"x"),
            ("relative.txt", b"x"),
        ],
    )
    assert [u.error for u in up] == [None, "is_directory", "not_a_directory", "invalid_path"]
    assert (tmp_path / "new.bin").read_bytes() == b"\x00\xff"
    assert not (tmp_path / "relative.txt").exists()
    paths = [str(tmp_path / name) for name in ("new.bin", "missing", "dir", "file/child", "loop")]
    down = await download_checked(session, paths)
    assert [(d.path, d.content, d.error) for d in down] == [
        (paths[0], b"\x00\xff", None),
        (paths[1], None, "file_not_found"),
        (paths[2], None, "is_directory"),
        (paths[3], None, "not_a_directory"),
        (paths[4], None, "invalid_path"),  # ELOOP: a plain OSError, classified by its errno
    ]
