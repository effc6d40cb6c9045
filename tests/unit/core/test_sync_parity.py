"""The blocking façade keeps up with the async session: every public method and property of
`AsyncSandboxSession`, of its facets and of its handles has a blocking twin with the same parameters:
names, kinds and defaults, in order. Checked from the live classes, so a method added to the
async side without its twin fails here."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from opensandbox_core import AsyncSandboxSession, BackgroundProcess, SandboxSession
from opensandbox_core._code import CodeInterpreter
from opensandbox_core._commands._facet import Commands
from opensandbox_core._files._facet import Files
from opensandbox_core._sync import (
    BlockingBackgroundProcess,
    BlockingCode,
    BlockingCommands,
    BlockingFiles,
    BlockingTerminal,
    BlockingTerminals,
)
from opensandbox_core._terminal._facet import Terminals
from opensandbox_core._terminal._handle import Terminal

# Async name -> blocking name, where the blocking one is spelled differently on purpose.
RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}
# Blocking-only members: the way back to the async object, and `BackgroundProcess.id`, which
# the async handle sets per instance (a class-level property on the blocking one).
BLOCKING_ONLY = {"async_session", "async_process", "async_terminal", "id"}
# Constructors that must match: the session's (a blocking handle wraps an async one instead).
SAME_CONSTRUCTOR = {AsyncSandboxSession}

PAIRS = [
    (AsyncSandboxSession, SandboxSession),
    (BackgroundProcess, BlockingBackgroundProcess),
    (Terminal, BlockingTerminal),
    (Commands, BlockingCommands),
    (Files, BlockingFiles),
    (Terminals, BlockingTerminals),
    (CodeInterpreter, BlockingCode),
]


def public_members(cls: type) -> dict[str, Any]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    if cls in SAME_CONSTRUCTOR or cls is SandboxSession:
        names.add("__init__")
    if hasattr(cls, "__aenter__"):
        names |= {"__aenter__", "__aexit__"}
    return {n: inspect.getattr_static(cls, n) for n in names}


def shape(member: Any) -> tuple[str, list[tuple[str, Any, Any]]]:
    """What the twin must match: its kind and its parameters (name, kind, default)."""
    if isinstance(member, property):
        return "property", []
    kind = type(member).__name__  # function, classmethod, staticmethod
    function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
    params = [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]
    return kind, params


def pairs(async_cls: type, blocking_cls: type) -> list[tuple[str, str]]:
    members = public_members(async_cls)
    return [(n, RENAMED.get(n, n)) for n in sorted(members)]


CASES = [
    pytest.param(a, b, name, twin, id=f"{a.__name__}.{name}")
    for a, b in PAIRS
    for name, twin in pairs(a, b)
]


@pytest.mark.parametrize(("async_cls", "blocking_cls", "name", "twin"), CASES)
def test_every_async_member_has_a_blocking_twin(
    async_cls: type, blocking_cls: type, name: str, twin: str
) -> None:
    check_twin(async_cls, blocking_cls, name, twin)


def check_twin(async_cls: type, blocking_cls: type, name: str, twin: str) -> None:
    """Fails (AssertionError) unless `blocking_cls.twin` is a blocking twin of `async_cls.name`."""
    member = inspect.getattr_static(async_cls, name)
    assert hasattr(blocking_cls, twin), f"{blocking_cls.__name__} has no twin of {name}"
    blocking = inspect.getattr_static(blocking_cls, twin)
    a_kind, a_params = shape(member)
    b_kind, b_params = shape(blocking)
    if name.startswith("__a"):  # __aexit__(*exc_info) vs __exit__(*exc_info): same params
        a_kind = b_kind
    assert a_kind == b_kind, f"{name}: {a_kind} vs {b_kind}"
    assert a_params == b_params, f"{name}: parameters differ"
    if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member):
        assert not inspect.iscoroutinefunction(blocking), f"{twin} must block, not be async"
        assert not inspect.isasyncgenfunction(blocking), f"{twin} must block, not be async"


@pytest.mark.parametrize(("async_cls", "blocking_cls"), PAIRS)
def test_no_blocking_member_without_an_async_one(async_cls: type, blocking_cls: type) -> None:
    expected = {RENAMED.get(n, n) for n in public_members(async_cls)}
    extra = set(public_members(blocking_cls)) - expected - BLOCKING_ONLY
    assert not extra, f"{blocking_cls.__name__} has members the async side lacks: {extra}"


def test_background_id_is_kept() -> None:
    class Session:
        pass

    process = BackgroundProcess(Session(), "exec-1")  # type: ignore[arg-type]
    assert BlockingBackgroundProcess(process).id == process.id == "exec-1"


def test_the_check_catches_a_missing_or_different_twin() -> None:
    """The comparison itself fails on a drifted façade (so the parity tests above can fail)."""

    class Async:
        async def go(self, x: int, *, y: int = 1) -> None: ...

        async def extra(self) -> None: ...

    class Drifted:
        def go(self, x: int, *, y: int = 2) -> None: ...

    class Twin:
        def go(self, x: int, *, y: int = 1) -> None: ...

        def extra(self) -> None: ...

    class StillAsync:
        async def go(self, x: int, *, y: int = 1) -> None: ...

    check_twin(Async, Twin, "go", "go")  # a true twin passes
    check_twin(Async, Twin, "extra", "extra")
    with pytest.raises(AssertionError, match="go: parameters differ"):
        check_twin(Async, Drifted, "go", "go")  # another default
    with pytest.raises(AssertionError, match="Drifted has no twin of extra"):
        check_twin(Async, Drifted, "extra", "extra")
    with pytest.raises(AssertionError, match="go must block, not be async"):
        check_twin(Async, StillAsync, "go", "go")
