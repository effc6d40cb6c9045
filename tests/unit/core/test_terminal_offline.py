"""Interactive terminals offline: the core's terminal stack (open, attach, the connection with
reconnect-and-replay, the setup typed into the shell, the end mark) against `_pty_fake`, a
WebSocket server that answers as the recorded daemons do, with a real `bash` in a real
pseudo-terminal behind it. The live tests (tests/live/core/test_terminals.py) do the same
against the testbed's daemon and the server's proxy."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest
from _pty_fake import TOKEN, FakePtyDaemon

from opensandbox_core import (
    ConfigurationError,
    TerminalBusyError,
    TerminalClosedError,
    TerminalNotFoundError,
    TerminalTakenOverError,
    TerminalTimeoutError,
)
from opensandbox_core._errors import from_foreign
from opensandbox_core._terminal import _link, _open
from opensandbox_core._terminal._handle import Terminal, let_go
from opensandbox_core._wire._events import Context
from opensandbox_core._wire._execd import ExecdClient
from opensandbox_core._wire._framing import Framing
from opensandbox_core.validation import ArgumentTypeError


class Life:
    """The lifecycle facet as the terminal stack sees it, on the fake's execd."""

    sandbox_id = "sbx-offline"

    def __init__(self, execd: ExecdClient, working_dir: str) -> None:
        self.execd = execd
        self.working_dir = working_dir
        self.renewals = 0

    async def renew_once(self) -> None:
        self.renewals += 1

    async def fail(self, exc: BaseException, action: str, *, execd: Any = None) -> NoReturn:
        raise from_foreign(exc, operation=action, sandbox_id=self.sandbox_id)

    async def context(self) -> Context:
        return Context(self.execd, Framing.LEGACY, self.working_dir, None)


class Env:
    def __init__(self, fake: FakePtyDaemon, life: Life) -> None:
        self.fake = fake
        self.life = life
        self.terminals: weakref.WeakSet[Terminal] = weakref.WeakSet()

    async def open(self, command: str | None = None, **kwargs: Any) -> Terminal:
        options = {"cwd": None, "cols": 80, "rows": 24, **kwargs}
        return await _open.open_terminal(self.life, command, register=self.terminals.add, **options)

    async def attach(self, terminal_id: str) -> Terminal:
        return await _open.attach_terminal(self.life, terminal_id, register=self.terminals.add)


@contextlib.asynccontextmanager
async def fake_env(tmp_path: Path, **options: Any) -> AsyncIterator[Env]:
    async with FakePtyDaemon(**options) as fake:
        execd = fake.client()
        try:
            yield Env(fake, Life(execd, str(tmp_path)))
        finally:
            await execd.aclose()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with fake_env(tmp_path) as made:
        yield made


KILL_WRAPPER = "read -r _ _ _ _ _ leader _ </proc/$$/stat; kill -9 $leader"
"""Typed into an interactive terminal: SIGKILL for the terminal's process (the core's wrapper,
the session leader), so that no end mark comes. Builtins only: no fork between the output
before it and the kill, so that output is within the fake daemon's loss window on a busy
machine too."""


async def until(check: Callable[[], bool], seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.01)


# -- driving programs ---------------------------------------------------------------------------


async def test_shell_answers_and_the_setup_is_not_in_the_output(env: Env) -> None:
    async with await env.open() as term:
        await term.write("echo $((6*7))\r")
        seen = await term.expect("42")
        assert seen.string.startswith(b"bash-")  # the first prompt, then the echo of the line
        assert b"\x1b]6464" not in seen.string and b"trap" not in seen.string
        assert term.exit_code is None


async def test_read_p_prompt_is_answered(env: Env) -> None:
    async with await env.open() as term:
        # The prompt as printed, not as typed: the typed line is echoed, and keys typed
        # before `read` runs are flushed by bash when it leaves readline.
        await term.write('q=name; read -p "Your $q? " n; echo "hello, $n!"\r')
        await term.expect("Your name? ")
        await term.write("Ada\r")
        await term.expect("hello, Ada!")


async def test_python_repl_reaches_a_computed_answer(env: Env) -> None:
    async with await env.open("python3 -i -q") as term:
        await term.expect(">>> ")
        await term.write("x = sum(range(101))\r")
        await term.expect(">>> ")
        await term.write("print(f'x={x * 2}')\r")
        found = await term.expect(re.compile(rb"x=(\d+)\r\n"))
        assert found.group(1) == b"10100"
        await term.expect(">>> ")
        await term.write(b"\x04")  # Ctrl-D ends python3, and with it the terminal
        assert await term.wait(10) == 0


async def test_ctrl_c_interrupts_the_program_in_the_foreground(env: Env) -> None:
    async with await env.open() as term:
        await term.write("sleep 600\r")
        await asyncio.sleep(0.3)
        await term.interrupt()
        await term.expect("^C")
        await term.write("echo rc=$?\r")
        await term.expect("rc=130")


@pytest.mark.parametrize(
    ("command", "keys", "code"),
    [
        (None, "exit 3\r", 3),
        ("exit 5", "", 5),
        ("exit 143", "", 143),  # an exit status, not a signal (bash's $? would say 143 too)
        ("kill -TERM $$", "", -15),  # as subprocess says: -N for signal N
        ("sleep 600", "\x03", -2),  # Ctrl-C kills the command with SIGINT
        (None, "kill -9 $$\r", -9),  # the interactive shell killed
        (None, "kill -HUP $$\r", -1),  # SIGHUP is 1: -1 is a signal's number, not "unknown"
    ],
)
async def test_exit_codes(env: Env, command: str | None, keys: str, code: int) -> None:
    async with await env.open(command) as term:
        if keys:
            await asyncio.sleep(0.2)
            await term.write(keys)
        assert await term.wait(10) == code
        assert term.exit_code == code


async def test_bytes_arrive_exactly(env: Env) -> None:
    async with await env.open() as term:
        await term.write("printf '\\377\\376x\\n'; printf 'x\\302\\205y\\n'; echo E\"\"ND1\r")
        seen = await term.expect("END1")
        assert b"\r\n\xff\xfex\r\nx\xc2\x85y\r\nEND1" in seen.string
        size = 3_000_000
        await term.write(f"head -c {size} /dev/zero | tr '\\0' y; echo E\"\"ND2\r")
        burst = await term.expect("END2", timeout=60)
        # The output is the run of `y`s just before END2 (the echo spells it E""ND2). Count that
        # run, not every `y`: a busy machine can make bash echo the typed line twice.
        before = burst.string.split(b"END2", 1)[0]
        assert len(before) - len(before.rstrip(b"y")) == size
        assert before.rstrip(b"y").endswith(b"\n")


# -- the daemon's habits -------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["late", "lost"])
async def test_the_last_bytes_before_an_exit_arrive(tmp_path: Path, loss: str) -> None:
    async with fake_env(tmp_path, exit_loss=loss) as env:
        async with await env.open() as term:
            await term.write("echo bye-$((1+1)); exit 3\r")
            assert await term.wait(10) == 3
            assert (await term.read(0.1)).endswith(b"bye-2\r\nexit\r\n")
        async with await env.open("printf 'last-line\\n'; exit 4") as term:
            assert await term.wait(10) == 4
            assert await term.read(0.1) == b"last-line\r\n"


@pytest.mark.parametrize("loss", ["late", "lost"])
async def test_without_the_end_mark_every_byte_the_daemon_kept_is_read(
    tmp_path: Path, loss: str
) -> None:
    async with fake_env(tmp_path, exit_loss=loss) as env:
        term = await env.open()
        session = env.fake.sessions[term.id]
        await term.write(f"printf 'last-words\\n'; {KILL_WRAPPER}\r")
        assert await term.wait(10) is None  # execd says -1: some signal, which is not known
        assert term.ended and term.exit_code is None
        got = b""
        while chunk := await term.read(0.1):
            got += chunk
        kept = session.kept_at_exit[0]
        assert kept.endswith(got)  # everything the daemon kept after the (hidden) setup
        assert (b"last-words\r\n" in got) == (loss == "late")
        if loss == "late":  # read by one more connection, which started a new shell: deleted
            await until(lambda: term.id not in env.fake.sessions)
        else:  # nothing more to read: the terminal is left as it is
            assert not env.fake.sessions[term.id].running
        await term.close()
        assert term.id not in env.fake.sessions


async def test_a_dropped_connection_is_made_again_without_losing_or_repeating(env: Env) -> None:
    async with await env.open() as term:
        await term.write('for i in $(seq 1 300); do echo n$i; sleep 0.002; done; echo D""ONE\r')
        await term.expect("n20\r\n")
        env.fake.drop(term.id)
        done = await term.expect("DONE", timeout=30)
        lines = re.findall(rb"\bn(\d+)\r\n", done.string)
        assert [int(n) for n in lines] == list(range(21, 301))  # n20 was consumed above
        assert env.fake.connections == 2


async def test_a_process_that_ends_while_the_connection_is_down(env: Env) -> None:
    term = await env.open()
    await term.write("echo up-$((1+1))\r")
    await term.expect("up-2")
    process = env.fake.sessions[term.id].process
    assert process is not None
    os.killpg(process.pid, signal.SIGKILL)  # it dies (reaped: the daemon says so at once) ...
    process.wait()
    env.fake.drop(term.id)  # ... while the connection drops, before any exit frame
    assert await term.wait(10) is None  # no end mark: the code is not known
    asked = env.fake.status_calls
    await asyncio.sleep(0.5)
    assert env.fake.status_calls == asked  # the end is taken once; nothing goes on asking
    await term.close()


@pytest.mark.parametrize("keepalive", [0.15, 100.0])
async def test_keep_alive_against_the_silence_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keepalive: float
) -> None:
    monkeypatch.setattr(_link, "KEEPALIVE", keepalive)
    async with fake_env(tmp_path, silence=1.0) as env, await env.open() as term:
        await asyncio.sleep(1.6)  # over the 1 s silence rule, also after a first keep-alive
        await term.write("echo still-$((1+1))\r")
        await term.expect("still-2")
        # Kept alive: one connection; without keep-alive the daemon dropped it after 1 s of
        # silence, and the terminal was reached again.
        if keepalive < 1:
            assert env.fake.connections == 1
        else:
            assert env.fake.connections >= 2


async def test_takeover_and_the_old_handles_error(env: Env) -> None:
    first = await env.open()
    await first.write("echo one-$((0+1))\r")
    await first.expect("one-1")
    second = await env.attach(first.id)
    await second.expect("one-1")  # from the replay
    with pytest.raises(TerminalTakenOverError):
        await first.expect("never", timeout=10)
    with pytest.raises(TerminalTakenOverError):
        await first.write("echo x\r")
    await second.write("echo two-$((1+1))\r")
    await second.expect("two-2")
    await second.close()
    await first.close()


@pytest.mark.parametrize("behind_proxy", [False, True], ids=["direct", "proxy"])
async def test_refusals_behind_the_servers_proxy_are_told_apart(
    tmp_path: Path, behind_proxy: bool
) -> None:
    async with fake_env(tmp_path, behind_proxy=behind_proxy) as env:
        first = await env.open()
        await first.write("echo one-$((0+1))\r")
        second = await env.attach(first.id)  # 409 (or close 1008), then the takeover
        await second.expect("one-1")
        with pytest.raises(TerminalTakenOverError):
            await first.expect("never", timeout=10)
        await second.close()
        with pytest.raises(TerminalNotFoundError):
            await env.attach(second.id)
    old_execd = fake_env(tmp_path, behind_proxy=behind_proxy, generation="1.0.18")
    async with old_execd as env, await env.open() as held:
        with pytest.raises(TerminalBusyError):
            await env.attach(held.id)


async def test_an_execd_without_takeover_refuses_clearly(tmp_path: Path) -> None:
    async with fake_env(tmp_path, generation="1.0.18") as env, await env.open() as first:
        with pytest.raises(TerminalBusyError, match="held by another client") as refused:
            await env.attach(first.id)
        assert refused.value.status_code == 409
        await first.write("echo still-$((2*2))\r")
        await first.expect("still-4")


async def test_detach_then_attach_replays_what_came_meanwhile(env: Env) -> None:
    first = await env.open()
    await first.write("sleep 0.3; echo later-$((2+3))\r")
    await first.detach()
    with pytest.raises(TerminalClosedError, match="detached"):
        await first.write("x")
    await asyncio.sleep(0.6)
    async with await env.attach(first.id) as again:
        seen = await again.expect("later-5")
        assert b"\x1b]6464" not in seen.string and b"trap" not in seen.string
        assert seen.string.startswith(b"bash-")


async def test_a_command_that_ended_while_detached_gives_its_code_on_attach(env: Env) -> None:
    term = await env.open("sleep 0.3; echo done-$((1+1)); exit 4")
    await term.detach()
    await asyncio.sleep(0.8)
    again = await env.attach(term.id)
    assert await again.wait(10) == 4
    assert await again.read(0.1) == b"done-2\r\n"
    await again.close()


async def test_a_shell_killed_while_detached_is_read_to_its_end(env: Env) -> None:
    term = await env.open()
    await term.write(f"(sleep 0.3; echo gone; {KILL_WRAPPER}) &\r")
    await term.expect("\r\n")
    await term.detach()
    await asyncio.sleep(0.8)
    again = await env.attach(term.id)
    assert await again.wait(10) is None  # no end mark: execd's -1 does not say which signal
    assert b"gone" in await again.read(0.1)
    assert term.id not in env.fake.sessions  # read to its end, then deleted
    await again.close()


# -- errors and the end --------------------------------------------------------------------------


async def test_unknown_and_closed_ids_are_not_found(env: Env) -> None:
    with pytest.raises(TerminalNotFoundError, match="0000-4000") as missing:
        await env.attach("00000000-0000-4000-8000-000000000000")
    assert isinstance(missing.value, LookupError)
    term = await env.open()
    await term.close()
    await term.close()  # idempotent
    assert term.ended and term.exit_code is None  # execd's SIGKILL: no code is made up
    with pytest.raises(TerminalNotFoundError, match=term.id):
        await env.attach(term.id)


async def test_a_cwd_the_daemon_cannot_use_is_a_configuration_error(
    env: Env, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="cwd") as bad:
        await env.open(cwd=str(tmp_path / "file" / "sub"))
    assert "session_id" not in str(bad.value)  # not the daemon's phantom id
    assert env.fake.sessions == {}
    with pytest.raises(ConfigurationError, match="cwd"):
        await env.open(cwd=str(tmp_path / "file" / "$x"))  # entered by the setup line
    await until(lambda: not env.fake.sessions)


@pytest.mark.parametrize("name", ["plain", "a$b ~c", "tab\there"])
async def test_the_terminal_starts_in_its_cwd_exactly(env: Env, tmp_path: Path, name: str) -> None:
    async with await env.open(cwd=name) as term:  # relative: under the working dir
        await term.write('pwd; echo E""ND\r')
        seen = await term.expect("END")
        assert f"{tmp_path / name}\r\n".encode() in seen.string


@pytest.mark.parametrize("after", [0.0, 0.002, 0.005, 0.01, 0.02, 0.05])
async def test_cancelling_open_leaves_no_terminal_behind(env: Env, after: float) -> None:
    try:
        async with asyncio.timeout(after):
            term = await env.open()
        await term.close()
    except TimeoutError:
        pass
    assert env.fake.sessions == {}  # deleted before the cancellation went on


async def test_expect_timeout_and_end_carry_the_output(env: Env) -> None:
    term = await env.open()
    await term.write("echo partial\r")
    await term.expect("partial")  # the echo of the line
    with pytest.raises(TerminalTimeoutError) as timed_out:
        await term.expect("never-printed", timeout=0.5)
    assert isinstance(timed_out.value, TimeoutError)
    assert b"partial\r\n" in timed_out.value.output
    await term.write("exit 2\r")
    with pytest.raises(TerminalClosedError) as ended:
        await term.expect("never-printed")
    assert ended.value.exit_code == 2 and b"exit" in ended.value.output
    assert await term.read(0.1) != b""  # nothing was consumed by the failed expects
    assert await term.read(0.1) == b""
    with pytest.raises(TerminalClosedError, match="exit code 2"):
        await term.write("x")
    await term.close()


async def test_resize(env: Env) -> None:
    async with await env.open(cols=100, rows=30) as term:
        await term.write("stty size\r")
        await term.expect("30 100")
        await term.resize(120, 40)
        await term.write("stty size\r")
        await term.expect("40 120")


async def test_bad_arguments_are_refused_before_any_request(env: Env) -> None:
    with pytest.raises(ConfigurationError, match="cols"):
        await env.open(cols=0)
    with pytest.raises(ArgumentTypeError):
        await env.open(command=["ls"])  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="terminal_id"):
        await env.attach("")
    assert env.fake.sessions == {}
    async with await env.open() as term:
        with pytest.raises(ArgumentTypeError):
            await term.write(5)  # type: ignore[arg-type]
        with pytest.raises(ArgumentTypeError, match="bytes"):
            await term.expect(re.compile("x"))  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await term.read(-1)


async def test_letting_go_detaches_and_secrets_are_never_shown(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # websockets' DEBUG records would print the headers
    term = await env.open()
    await term.write("echo logged-$((1+1))\r")
    await term.expect("logged-2")
    ours = [r for r in caplog.records if r.name != "websockets.server"]  # not the fake's log
    assert ours and not [r for r in ours if TOKEN in r.getMessage()]
    shown = [
        repr(term),
        repr(term._keeper.target),
        repr(term._keeper.link),
        repr(env.fake.endpoint),
    ]
    assert not [text for text in shown if TOKEN in text]
    await let_go(env.terminals)
    with pytest.raises(TerminalClosedError, match="detached") as closed:
        await term.write("x")
    assert TOKEN not in str(closed.value)
    assert env.fake.sessions[term.id].running  # it keeps running
    again = await env.attach(term.id)
    await again.close()
