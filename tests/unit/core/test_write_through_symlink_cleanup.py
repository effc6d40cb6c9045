"""A write that finds a symlink after it began uploading leaves no temporary file behind.

The overlapped write uploads to a temporary sibling while it inspects the target. When the
target turns out to be a symlink the upload is redone next to the link's target, and the first
temporary file must go. On a busy host execd may finish storing that first upload *after* the
client gave up on it, so the cleanup must wait for the upload to end before removing the file
(CI saw `.link.osb-….tmp` left in the directory of a v1.0.18 sandbox).
"""

from __future__ import annotations

import asyncio
import posixpath
from typing import Any

from opensandbox_core._files._atomic import AtomicWriter
from opensandbox_core._files._fallback import FileApi


class _Execd:
    """Stores uploads a little later than it answers would suggest, like a loaded execd."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.landing: list[asyncio.Task[None]] = []

    async def upload(self, path: str, data: bytes, **_: Any) -> None:
        async def land() -> None:
            await asyncio.sleep(0.05)
            self.files[path] = data

        task = asyncio.ensure_future(land())
        self.landing.append(task)
        await asyncio.shield(task)  # a cancelled request is still carried out by the server

    async def remove_files(self, paths: list[str]) -> None:
        for path in paths:
            self.files.pop(path, None)

    async def move(self, source: str, target: str) -> None:
        self.files[target] = self.files.pop(source)


class _Files:
    """`/d/link` is a symlink to the missing `/d/real`."""

    def __init__(self, execd: _Execd) -> None:
        self._execd = execd

    async def execd(self) -> _Execd:
        return self._execd

    async def target(self, path: str, *, create: bool = False) -> str:
        return path

    async def lstat(self, execd: _Execd, path: str) -> dict[str, Any] | None:
        await asyncio.sleep(0)  # the inspection answers while the upload is still in flight
        if path == "/d/link":
            return {"type": "symlink", "size": 4, "mode": 777}
        if path in execd.files:
            return {"type": "file", "size": len(execd.files[path]), "mode": 644}
        return None

    async def realpath(self, path: str) -> str:
        return "/d/real"

    async def file_api(self, execd: _Execd) -> FileApi:
        return FileApi(lstat_info=True, has_list=True)  # v1.0.19: inspected while uploading

    def known_file(self, path: str) -> int | None:
        return None

    def learn_file(self, path: str, mode: int = -1) -> None:
        pass

    def forget_file(self, path: str) -> None:
        pass


class _Life:
    async def fail(self, exc: BaseException, *_: Any, **__: Any) -> None:
        raise exc


async def test_a_write_through_a_symlink_leaves_only_the_target() -> None:
    files: dict[str, bytes] = {}
    execd = _Execd(files)
    writer = AtomicWriter(_Life(), _Files(execd))  # type: ignore[arg-type]

    content = b"through" * 10_000  # over what one command writes (`_inline`): uploaded
    await writer.write_bytes("/d/link", content)
    await asyncio.gather(*execd.landing)  # whatever the server was still doing has been done

    assert files == {"/d/real": content}, sorted(files)
    assert all(posixpath.dirname(p) == "/d" for p in files)
