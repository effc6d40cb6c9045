"""The terminal API's shape, offline: `session.terminals.open` awaited, in `async with` and in a
blocking `with`; what `expect` costs (bytes scanned and copied, counted); exit codes as execd's
frames give them; the terminal errors' one base class; the per-scope registry of terminal tools
(`ScopedTerminalTools`). The terminals here are `_pty_fake`'s (a real bash in a real pty)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from test_terminal_offline import Env, fake_env

from opensandbox_core import (
    AsyncSandboxSession,
    Connection,
    OpenSandboxError,
    ServerError,
    TerminalBusyError,
    TerminalClosedError,
    TerminalError,
    TerminalNotFoundError,
    TerminalTakenOverError,
    TerminalTimeoutError,
)
from opensandbox_core import _validate as validate_module
from opensandbox_core._sync import BlockingTerminals
from opensandbox_core._terminal import _frames, _handle
from opensandbox_core._terminal._facet import OpeningTerminal, Terminals
from opensandbox_core._terminal._handle import Terminal
from opensandbox_core._terminal._keeper import TerminalRef
from opensandbox_core._wire._execd import ExecdClient
from opensandbox_core.adapters import ScopedTerminalTools, TerminalTools


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with fake_env(tmp_path) as made:
        yield made


# -- open: awaited, `async with`, blocking `with` ------------------------------------------------


async def test_open_is_awaited_or_used_in_async_with(env: Env) -> None:
    terminals = Terminals(env.life)
    opening = terminals.open("cat")
    assert isinstance(opening, OpeningTerminal)
    async with opening as term:  # no `await` before `async with`
        assert isinstance(term, Terminal)
        await term.write("ping-1\r")
        await term.expect("ping-1\r\nping-1")  # the echo, then cat's copy
    assert term.ended and term.exit_code is None  # closed by the block: execd's SIGKILL
    assert term.id not in env.fake.sessions

    term = await terminals.open("exit 7")
    assert isinstance(term, Terminal)
    assert await term.wait(10) == 7
    await term.close()
    assert term.id not in env.fake.sessions


async def test_an_opening_terminal_opens_once(env: Env) -> None:
    opening = Terminals(env.life).open()
    term = await opening
    try:
        with pytest.raises(RuntimeError, match="opened already"):
            await opening
    finally:
        await term.close()


async def test_a_block_left_by_an_error_closes_the_terminal(env: Env) -> None:
    terminals = Terminals(env.life)
    seen: list[Terminal] = []

    async def block() -> None:
        async with terminals.open() as term:
            seen.append(term)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        await block()
    assert seen[0].ended
    assert seen[0].id not in env.fake.sessions


async def test_the_blocking_twin_opens_in_with_and_closes_at_its_end(env: Env) -> None:
    blocking = BlockingTerminals(Terminals(env.life))  # as `SandboxSession.terminals`

    def work() -> tuple[str, int | None, Terminal]:
        with blocking.open("read -r line; echo got-$line; exit 4") as term:
            term.write("x1\r")
            found = term.expect(re.compile(rb"got-(\w+)"))
            return found.group(1).decode(), term.wait(10), term.async_terminal

    word, code, term = await asyncio.to_thread(work)
    assert (word, code) == ("x1", 4)
    assert term.ended and term.id not in env.fake.sessions  # closed by the block


# -- what expect costs ---------------------------------------------------------------------------


class CountingBuffer(bytearray):
    """A terminal's unread output that counts the bytes copied out of it."""

    copied = 0

    def __getitem__(self, key: Any) -> Any:
        got = super().__getitem__(key)
        if isinstance(key, slice):
            self.copied += len(got)
        return got

    def __bytes__(self) -> bytes:
        self.copied += len(self)
        return bytes(memoryview(self))


class CountingPattern:
    """A compiled pattern that counts the bytes its searches cover and the searches made."""

    def __init__(self, regex: re.Pattern[bytes]) -> None:
        self.regex, self.pattern = regex, regex.pattern
        self.scanned = self.searches = 0

    def search(self, string: Any, pos: int = 0) -> re.Match[bytes] | None:
        self.scanned += len(string) - pos
        self.searches += 1
        return self.regex.search(string, pos)


class Life:
    sandbox_id = "sbx-offline"

    async def renew_once(self) -> None:
        pass

    async def fail(self, exc: BaseException, action: str, *, execd: Any = None) -> Any:
        raise exc


BACKLOG = 4 << 20  # unread output, already there when expect is called
ARRIVALS = 40  # then this many pieces, each a wake of expect


def _unconnected(terminal_id: str) -> TerminalRef:
    """A terminal that is never connected: only its output buffer is used."""
    endpoint = SimpleNamespace(base_url="http://127.0.0.1:9", headers={})
    return TerminalRef(
        terminal_id, cast(ExecdClient, SimpleNamespace(endpoint=endpoint)), Life(), setup=False
    )


@pytest.mark.parametrize("kind", ["literal", "regex"])
async def test_expect_costs_what_it_reads_not_the_buffer_each_wake(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    term = Terminal(_unconnected("t-1"))
    buffer = CountingBuffer(b"." * BACKLOG)
    term._pending = buffer
    counted: list[CountingPattern] = []

    def counting(pattern: object) -> Any:
        counted.append(CountingPattern(real(pattern)))
        return counted[-1]

    real = validate_module.terminal_pattern
    monkeypatch.setattr(validate_module, "terminal_pattern", counting)
    pattern: str | re.Pattern[bytes] = "END!" if kind == "literal" else re.compile(rb"E(N)D!")
    waiting = asyncio.ensure_future(term.expect(pattern, timeout=60))
    await until(lambda: len(counted) == 1 and counted[0].searches == 1)
    for n in range(ARRIVALS):
        term._arrived(b"-" * 100 + (b"EN" if n == ARRIVALS - 1 else b""))
        await until(lambda n=n: counted[0].searches == n + 2)  # type: ignore[misc]
    term._arrived(b"D!tail")
    found = await waiting
    end = BACKLOG + ARRIVALS * 100 + 4
    # Copied: the output consumed, once (it was the whole buffer at every wake).
    assert buffer.copied == end
    pieces = b"-" * 100 * (ARRIVALS - 1) + b"-" * 100 + b"END!"
    assert found.end() == end and found.string == b"." * BACKLOG + pieces
    assert term._pending == b"tail"
    # Scanned: the backlog once, then each arrival with at most a regex's reach before it (a
    # literal: its length).
    reach = _handle.REGEX_REACH if kind == "regex" else 4
    assert counted[0].scanned <= BACKLOG + (ARRIVALS + 2) * (reach + 110)


async def until(check: Any, seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0)


async def test_a_regex_that_looks_past_its_match_is_matched_as_on_the_whole_output() -> None:
    term = Terminal(_unconnected("t-2"))
    term._arrived(b"ab1 ab2-")
    found = await term.expect(re.compile(rb"ab\d(?=-)"), timeout=1)  # lookahead past its end
    assert found.group() == b"ab2" and found.string.startswith(b"ab1 ab2")
    assert await term.read(0) == b"-"
    term._arrived(b"xyz")
    with pytest.raises(TerminalTimeoutError) as missed:
        await term.expect("nope", timeout=0)
    assert missed.value.output == b"xyz"
    assert await term.read(0) == b"xyz"  # nothing consumed


# -- exit codes and errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ('{"type":"exit","exit_code":3}', 3),
        ('{"type":"exit","exit_code":0}', 0),
        ('{"type":"exit","exit_code":-1}', None),  # a signal: execd does not say which
        ('{"type":"exit"}', None),
        ('{"type":"exit","exit_code":true}', None),
    ],
)
def test_execds_exit_frame_gives_a_code_only_when_it_knows_one(
    frame: str, code: int | None
) -> None:
    decoded = _frames.decode(frame)
    assert isinstance(decoded, _frames.Control)
    assert decoded.exit_code == code


async def test_ctrl_c_right_after_open_reaches_the_command(env: Env) -> None:
    # The ready mark is printed as the command starts, and the setup ignores SIGINT until
    # then: a Ctrl-C at once ends the command (-2), never the setup (no exit code).
    for _ in range(3):
        async with Terminals(env.life).open("sleep 600") as term:
            await term.interrupt()
            assert await term.wait(10) == -2


@pytest.mark.parametrize(
    ("command", "keys", "code"),
    [
        ("exit 5", "", 5),
        ("kill -TERM $$", "", -15),
        ("exit 143", "", -15),  # the fallback's limit: bash's $? says 143 for both
        (None, "kill -9 $$\r", -9),  # the interactive shell killed
        (None, "exit 4\r", 4),
    ],
)
async def test_without_perl_the_exit_code_comes_from_bash(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str | None,
    keys: str,
    code: int,
) -> None:
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "perl").write_text("#!/bin/sh\nexit 127\n")  # an image without perl
    (shims / "perl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}:{os.environ['PATH']}")
    async with fake_env(tmp_path) as env, await env.open(command) as term:
        if keys:
            await asyncio.sleep(0.2)
            await term.write(keys)
        assert await term.wait(10) == code


def test_the_terminal_errors_have_one_base() -> None:
    for error, also in [
        (TerminalNotFoundError, LookupError),
        (TerminalTimeoutError, TimeoutError),
        (TerminalClosedError, EOFError),
        (TerminalTakenOverError, OpenSandboxError),
        (TerminalBusyError, OpenSandboxError),
    ]:
        assert issubclass(error, TerminalError) and issubclass(error, also)
    assert issubclass(TerminalError, OpenSandboxError)
    assert not issubclass(TerminalBusyError, ServerError)
    assert TerminalBusyError("held").status_code == 409
    assert not hasattr(_frames, "signal_frame")


# -- the per-scope registry of terminal tools ----------------------------------------------------


def session(sandbox_id: str) -> AsyncSandboxSession:
    return AsyncSandboxSession(sandbox_id=sandbox_id, connection=Connection(api_key="unit-key"))


def test_a_scope_keeps_its_tools_on_its_sandbox_and_gets_new_ones_on_another() -> None:
    scoped = ScopedTerminalTools(1000)
    first = session("sbx-a")
    tools = scoped.of("thread-1", first)
    assert isinstance(tools, TerminalTools) and scoped.of("thread-1", first) is tools
    later = session("sbx-a")  # a later run's session on the same sandbox: carried on
    assert scoped.of("thread-1", later) is tools and tools.session is later
    other = scoped.of("thread-1", session("sbx-b"))  # another sandbox: new tools
    assert other is not tools and other.session.id == "sbx-b"
    assert scoped.of("thread-2", later) is not other  # scopes are apart
    assert len(scoped) == 2


def test_at_most_cap_scopes_are_kept_the_least_recently_used_go() -> None:
    scoped = ScopedTerminalTools(1000, cap=3)
    on = session("sbx-a")
    kept = {name: scoped.of(name, on) for name in ("a", "b", "c")}
    scoped.of("a", on)  # used: "b" is now the least recent
    scoped.of("d", on)
    assert len(scoped) == 3
    assert scoped.of("a", on) is kept["a"] and scoped.of("c", on) is kept["c"]
    assert scoped.of("b", on) is not kept["b"]  # forgotten, made again


async def test_a_scope_that_lets_go_with_nothing_open_is_forgotten() -> None:
    scoped = ScopedTerminalTools(1000)
    on = session("sbx-a")
    tools = scoped.of("run", on)
    await scoped.let_go("run", close=False, session=session("sbx-a"))  # not its session: kept
    assert scoped.of("run", on) is tools
    await scoped.let_go("run", close=False)  # no terminal open: nothing to remember
    assert len(scoped) == 0
    scoped.of("run", on)
    await scoped.let_go("run", close=True)
    assert len(scoped) == 0
    await scoped.let_go("never", close=True)  # no I/O, no error


def test_scopes_are_taken_from_many_threads_at_once() -> None:
    scoped = ScopedTerminalTools(1000, cap=64)
    sessions = [session(f"sbx-{n}") for n in range(4)]
    got: list[tuple[str, TerminalTools]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def work(worker: int) -> None:
        start.wait()
        for n in range(300):
            scope = f"scope-{n % 16}"
            tools = scoped.of(scope, sessions[0])
            with lock:
                got.append((scope, tools))
            if worker == 0 and n % 50 == 0:
                scoped.of(f"other-{n}", sessions[1 + n % 3])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_scope: dict[str, set[int]] = {}
    for scope, tools in got:
        by_scope.setdefault(scope, set()).add(id(tools))
    assert all(len(ids) == 1 for ids in by_scope.values())  # one tools object per scope
    assert len(scoped) <= 64
