"""The fake server's data: sandboxes, files, commands and outcomes."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

Route = Literal[
    "create",
    "get",
    "list",
    "delete",
    "renew",
    "endpoint",
    "ping",
    "command",
    "status",
    "interrupt",
    "upload",
    "download",
    "info",
    "list_dir",
    "make_dirs",
    "move",
    "remove",
    "code",
]
"""The names of the routes that faults can be armed on."""

_EXECD_PORT = 44772
_TMP = "/tmp"  # noqa: S108  (the fake daemon's temp dir, inside the fake sandbox)
_TMP_MARK = "osb-tmp:"


@dataclass(frozen=True)
class FakeCommand:
    """One command as the fake execd received it (`body` is the whole request JSON)."""

    command: str
    cwd: str | None
    env: Mapping[str, str]
    timeout_ms: int | None
    sandbox: FakeSandbox
    body: Mapping[str, Any]

    @property
    def argv(self) -> list[str] | None:
        """The command split like a shell would split plain words, or None where it can't be."""
        try:
            return shlex.split(self.command)
        except ValueError:
            return None


@dataclass(frozen=True)
class FakeOutcome:
    """What a fake command prints and how it ends.

    `delay` is seconds before the command ends (a `timeout_ms` shorter than it kills the
    command like execd does); `exit_code` 0 ends with `execution_complete`, anything else with
    execd's `CommandExecError` event.
    """

    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    delay: float = 0.0


CommandHandler = Callable[[FakeCommand], FakeOutcome | None]


@dataclass
class FakeFile:
    """A file in a fake sandbox: its bytes and mode."""

    data: bytes
    mode: int = 0o644
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class FakeSandbox:
    """One fake sandbox: its metadata, its files and directories, its commands."""

    id: str
    metadata: dict[str, str]
    env: dict[str, str]
    created_at: datetime
    files: dict[str, FakeFile] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {"/", _TMP, "/workspace"})
    commands: list[FakeCommand] = field(default_factory=list)
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    interrupted: set[str] = field(default_factory=set)
    renewals: int = 0
    file_api: str = "1.0.19"
    """The execd file API it answers with: "1.0.19", or "1.0.18" (no `type` in `/files/info`,
    a missing path there is HTTP 500, no `/directories/list`)."""

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Put a file in the sandbox (its parent directories too)."""
        self._parents(path)
        self.files[path] = FakeFile(data, mode)

    def read(self, path: str) -> bytes:
        return self.files[path].data

    def _parents(self, path: str) -> None:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.dirs.add("/" + "/".join(parts[:i]))
