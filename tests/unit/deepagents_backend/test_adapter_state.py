"""Where the Deep Agents adapter keeps what it learns: in the core, never in the adapter.

What a backend learns about its sandbox lives in the core: the line indexes of paged files on the
backend's session (they die with it). Which `ls` a sandbox has is found out by each listing
(busybox's refuses the options, then `find` lists), so nothing is learnt. No module of the adapter holds mutable state, so a thread backend
can build a backend per call and lose nothing.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib
import pkgutil
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from unit.core._page_files import PageFiles, lines

import deepagents_opensandbox_backend
from deepagents_opensandbox_backend import OpenSandboxBackend
from deepagents_opensandbox_backend._listing import (
    FIND_LISTING,
    DirectoryEntry,
    DirectoryListing,
    list_directory,
    ls_argv,
)
from opensandbox_core import AsyncSandboxSession, CommandResult, Connection, SandboxSpec

MIB = 1024 * 1024

PACKAGE = deepagents_opensandbox_backend.__name__
_MUTABLE = (
    dict,
    list,
    set,
    bytearray,
    weakref.WeakKeyDictionary,
    weakref.WeakValueDictionary,
    weakref.WeakSet,
)


def _holds_state(value: object) -> bool:
    if isinstance(value, _MUTABLE):
        return True
    # A cache the adapter defines (deepagents' own cached glob compiler is deepagents' state).
    return isinstance(value, functools._lru_cache_wrapper) and value.__module__.startswith(PACKAGE)


def test_no_module_of_the_adapter_holds_mutable_state() -> None:
    """Issue 21: no process-wide mutable state. A cache that must be process-wide would be
    listed here by name, with what it keys on documented where it is defined."""
    held = []
    for info in pkgutil.iter_modules(deepagents_opensandbox_backend.__path__):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for name, value in vars(module).items():
            if not name.startswith("__") and _holds_state(value):
                held.append(f"{info.name}.{name}: {type(value).__name__}")
    assert held == []


class _BusyboxSession:
    """A session whose `ls` has no `--quoting-style` (it refuses the option as busybox's does),
    recording the commands run: the `find` listing finds two entries."""

    def __init__(self) -> None:
        self.runs: list[Sequence[str]] = []
        self.commands = self  # `session.commands.run`

    async def run(
        self, command: Sequence[str], *, env: Mapping[str, str], plain_lines: bool
    ) -> CommandResult:
        self.runs.append(command)
        if command[0] == "ls":
            return CommandResult(1, "", "ls: unrecognized option: quoting-style=escape\n")
        every = base64.b64encode(b"./a\0./d\0").decode()
        dirs = base64.b64encode(b"./d\0").decode()
        return CommandResult(0, f"{every}\n=\n{dirs}\n", "")


def test_which_ls_the_sandbox_has_is_not_remembered() -> None:
    """Each listing finds out which `ls` the sandbox has (GNU's answers the one argv command;
    busybox's refuses it and the `find` listing follows), so a backend built per call loses
    nothing."""
    session: Any = _BusyboxSession()

    async def listings() -> list[object]:
        return [await list_directory(session, "/d") for _ in range(3)]

    listing = DirectoryListing("/d", (DirectoryEntry("/d/a", False), DirectoryEntry("/d/d", True)))
    assert asyncio.run(listings()) == [listing] * 3
    assert session.runs == [ls_argv("/d"), ["sh", "-c", FIND_LISTING, "ls", "/d"]] * 3


def _backend(files: PageFiles) -> OpenSandboxBackend:
    connection = Connection(domain="127.0.0.1:9", api_key="sk-unit")  # any request would fail
    session = AsyncSandboxSession(SandboxSpec(image="python:3.13-slim"), connection=connection)
    for name in ("stat", "realpath", "read_bytes", "read_range"):
        setattr(session.files, name, getattr(files, name))
    return OpenSandboxBackend(session)


def test_each_backend_keeps_its_own_page_indexes() -> None:
    """Each backend's session holds its own (opensandbox-core's `read_lines` cache)."""
    files = PageFiles({"/big.txt": lines(40_000)})  # about 2.4 MiB: paged by Range reads
    first, second = _backend(files), _backend(files)
    page = asyncio.run(first.aread("/big.txt", 0, 100))
    assert page.start_line == 1 and page.end_line == 100
    downloads = files.downloads
    asyncio.run(first.aread("/big.txt", 100, 100))
    assert files.downloads == downloads  # the backend's index answered: no whole-file try
    asyncio.run(second.aread("/big.txt", 100, 100))
    assert files.downloads == downloads + 1  # the other backend had no index of its own
    asyncio.run(second.aread("/big.txt", 200, 100))
    assert files.downloads == downloads + 1  # and now it has
