"""An in-memory stand-in for the session calls `read_lines` makes (`stat`, `realpath`,
`read_bytes`, `read_range`), counting each, for the paging unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from opensandbox_core import FileInfo, OutputLimitError


def lines(count: int, tag: bytes = b"") -> bytes:
    """`count` lines of 63 bytes each, numbered, starting with `tag`."""
    return b"".join(b"%s%062d\n" % (tag, i) for i in range(count))


class PageFiles:
    """Files by path; `replace` makes a new version (a later mtime)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.changed = datetime(2026, 12, 1, tzinfo=UTC)
        self.stats = 0
        self.downloads = 0
        self.ranges: list[tuple[str, int, int]] = []

    def replace(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self.changed += timedelta(seconds=1)

    def _data(self, path: str) -> bytes:
        if path not in self.files:
            raise FileNotFoundError(2, "No such file or directory", path)
        return self.files[path]

    async def realpath(self, path: str) -> str:
        return path

    async def stat(self, path: str) -> FileInfo:
        self.stats += 1
        if path.endswith("/"):
            return FileInfo(path=path, kind="directory", size=4096, mode=0o755, is_dir=True)
        return FileInfo(
            path=path,
            kind="file",
            size=len(self._data(path)),
            mode=0o644,
            modified_at=self.changed,
            is_file=True,
        )

    async def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        self.downloads += 1
        if path.endswith("/"):
            raise IsADirectoryError(21, "Is a directory", path)
        data = self._data(path)
        max_size = len(data) if max_size is None else max_size
        if len(data) > max_size:
            raise OutputLimitError(f"{path} is over {max_size} bytes.", limit=max_size)
        return data

    async def read_range(self, path: str, offset: int, length: int) -> bytes:
        self.ranges.append((path, offset, length))
        return self.files[path][offset : offset + length]
