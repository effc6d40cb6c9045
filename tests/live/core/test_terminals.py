"""Interactive terminals, live: execd's `/pty` through the core, directly and through the
server's proxy (`use_server_proxy=True`), on every execd profile.

One sandbox serves the module; each test opens its own terminals on it, through a session of
its own (direct or proxied). Tests that need a daemon knob (the exit-loss bug, a short silence
rule) make a sandbox of their own with it in its env (the testbed's daemon only).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio

from opensandbox_core import (
    AsyncSandboxSession,
    ConfigurationError,
    Connection,
    SandboxSession,
    SandboxSpec,
    TerminalBusyError,
    TerminalClosedError,
    TerminalNotFoundError,
    TerminalTakenOverError,
)
from opensandbox_core._terminal import _link
from opensandbox_core._terminal._handle import Terminal
from opensandbox_core._wire._execd import ExecdClient, ExecdError

module_loop = pytest.mark.asyncio(loop_scope="module")
VIA = [pytest.param(False, id="direct"), pytest.param(True, id="proxy")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox_id(sandbox_image: str) -> AsyncIterator[str]:
    async with AsyncSandboxSession(SandboxSpec(image=sandbox_image, lifetime=1200)) as owner:
        yield await owner.start()


@asynccontextmanager
async def attached(sandbox_id: str, proxy: bool = False) -> AsyncIterator[AsyncSandboxSession]:
    session = AsyncSandboxSession.attach(sandbox_id, connection=Connection(use_server_proxy=proxy))
    try:
        yield session
    finally:
        await session.aclose()


@pytest_asyncio.fixture(loop_scope="module", params=VIA)
async def session(sandbox_id: str, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    async with attached(sandbox_id, request.param) as made:
        yield made


async def drain(term: Terminal) -> bytes:
    """Everything still unread (the process has ended)."""
    out = b""
    while chunk := await term.read(0.2):
        out += chunk
    return out


# -- driving programs ---------------------------------------------------------------------------


@module_loop
async def test_shell_echo_prompt_and_repl(session: AsyncSandboxSession) -> None:
    async with session.terminals.open() as term:
        await term.write("echo $((6*7))\r")
        seen = await term.expect("42")
        assert b"\x1b]6464" not in seen.string and b"trap" not in seen.string
        # A prompt answered: the prompt as printed (the typed line is echoed too).
        await term.write('q=name; read -p "Your $q? " n; echo "hello, $n!"\r')
        await term.expect("Your name? ")
        await term.write("Ada\r")
        await term.expect("hello, Ada!")
        # python3 -i driven to a computed answer.
        await term.write("python3 -i -q\r")
        await term.expect(">>> ")
        await term.write("x = sum(i * i for i in range(10))\r")
        await term.expect(">>> ")
        await term.write("print('x =', x + 1)\r")
        found = await term.expect(re.compile(rb"x = (\d+)\r\n"))
        assert found.group(1) == b"286"
        await term.write("exit()\r")
        await term.write("echo back-in-$((1+1))\r")
        await term.expect("back-in-2")


@module_loop
async def test_ctrl_c_stops_sleep(session: AsyncSandboxSession) -> None:
    async with session.terminals.open() as term:
        await term.write("sleep 600\r")
        await asyncio.sleep(0.5)
        await term.interrupt()
        await term.expect("^C")
        await term.write("echo rc=$?\r")
        await term.expect("rc=130")


@module_loop
@pytest.mark.parametrize(
    ("command", "keys", "code"),
    [
        (None, "exit 3\r", 3),
        ("printf 'cmd-out\\n'; exit 5", "", 5),
        ("exit 143", "", 143),  # a status, not a signal (bash's $? is 143 for both)
        ("kill -TERM $$", "", -15),  # -N for signal N, as subprocess gives it
        ("sleep 600", "\x03", -2),  # Ctrl-C kills the command with SIGINT
        (None, "kill -9 $$\r", -9),  # the interactive shell killed
        (None, "kill -HUP $$\r", -1),  # SIGHUP is signal 1
    ],
    ids=[
        "shell-exit-3",
        "command-exit-5",
        "command-exit-143",
        "command-sigterm",
        "command-ctrl-c",
        "shell-sigkill",
        "shell-sighup",
    ],
)
async def test_exit_codes(
    session: AsyncSandboxSession, command: str | None, keys: str, code: int
) -> None:
    async with session.terminals.open(command) as term:
        if keys:
            await asyncio.sleep(0.3)
            await term.write(keys)
        assert await term.wait(30) == code
        assert term.exit_code == code and term.ended
        out = await drain(term)
        if command and "cmd-out" in command:
            assert out == b"cmd-out\r\n"  # the command's output exactly, nothing of the setup
        if keys == "exit 3\r":
            assert out.endswith(b"exit 3\r\nexit\r\n")


@module_loop
async def test_ctrl_c_right_after_open_reaches_the_command(session: AsyncSandboxSession) -> None:
    async with session.terminals.open("sleep 600") as term:
        await term.interrupt()  # at once: the setup never takes it, the command does
        assert await term.wait(30) == -2


@module_loop
async def test_command_starts_in_cwd_with_its_own_process(session: AsyncSandboxSession) -> None:
    await session.files.make_dir("/tmp/term cwd $x")
    async with session.terminals.open("pwd; tty; echo $$", cwd="/tmp/term cwd $x") as term:
        assert await term.wait(30) == 0
        lines = (await drain(term)).split(b"\r\n")
        assert lines[0] == b"/tmp/term cwd $x"
        assert lines[1].startswith(b"/dev/pts/")


@module_loop
async def test_bytes_are_exact(session: AsyncSandboxSession) -> None:
    await session.commands.run("head -c 3000000 /dev/urandom > /tmp/term-blob")
    blob = await session.files.read_bytes("/tmp/term-blob")
    async with session.terminals.open() as term:
        await term.write("printf '\\377\\376x\\n'; printf 'x\\302\\205y\\n'; echo E\"\"ND1\r")
        seen = await term.expect("END1")
        assert b"\r\n\xff\xfex\r\nx\xc2\x85y\r\nEND1" in seen.string
        # A burst of megabytes, in raw mode (no \n -> \r\n), compared byte for byte.
        begin, end = "<BLOB-BEGIN-7c1e>", "<BLOB-END-7c1e>"
        await term.write(
            f"stty raw -echo; printf '%s' '{begin[:5]}''{begin[5:]}'; cat /tmp/term-blob; "
            f"printf '%s' '{end[:5]}''{end[5:]}'; stty sane\r"
        )
        await term.expect(begin)
        got = await term.expect(end, timeout=120)
        body = got.string[: got.start()]
        assert hashlib.sha256(body).hexdigest() == hashlib.sha256(blob).hexdigest()
        assert body == blob


@module_loop
async def test_resize(session: AsyncSandboxSession) -> None:
    async with session.terminals.open(cols=100, rows=30) as term:
        await term.write("stty size\r")
        await term.expect("30 100")
        await term.resize(132, 43)
        await term.write("stty size\r")
        await term.expect("43 132")


# -- reaching a terminal again -------------------------------------------------------------------


@module_loop
async def test_detach_then_attach_replays(sandbox_id: str, session: AsyncSandboxSession) -> None:
    term = await session.terminals.open()
    await term.write("sleep 0.5; echo meanwhile-$((4+4))\r")
    await term.detach()
    with pytest.raises(TerminalClosedError, match="detached"):
        await term.write("x")
    await asyncio.sleep(1.0)
    async with attached(sandbox_id, proxy=True) as other:
        again = await other.terminals.attach(term.id)
        seen = await again.expect("meanwhile-8")
        assert b"\x1b]6464" not in seen.string and b"trap" not in seen.string
        await again.write("echo still-$((1+1))\r")
        await again.expect("still-2")
        await again.close()


@module_loop
async def test_session_aclose_detaches_its_terminals(sandbox_id: str) -> None:
    async with attached(sandbox_id) as first:
        term = await first.terminals.open()
        await term.write("echo first-$((2+2))\r")
        await term.expect("first-4")
    # Closed: detached (no takeover needed, on any execd), the shell still runs.
    async with attached(sandbox_id) as second:
        again = await second.terminals.attach(term.id)
        await again.expect("first-4")
        await again.write("echo second-$((3+3))\r")
        await again.expect("second-6")
        await again.close()


@module_loop
@pytest.mark.execd_profiles("1.0.19", "1.1")
async def test_takeover_leaves_the_old_handle_a_clear_error(sandbox_id: str) -> None:
    async with attached(sandbox_id) as first, attached(sandbox_id, proxy=True) as second:
        old = await first.terminals.open()
        await old.write("echo mine-$((5+5))\r")
        await old.expect("mine-10")
        new = await second.terminals.attach(old.id)
        await new.expect("mine-10")
        with pytest.raises(TerminalTakenOverError, match=old.id):
            await old.expect("never", timeout=20)
        with pytest.raises(TerminalTakenOverError):
            await old.write("x")
        await new.write("echo yours-$((6+6))\r")
        await new.expect("yours-12")
        await new.close()


@module_loop
@pytest.mark.execd_profiles("1.0.18")
async def test_execd_without_takeover_refuses_clearly(sandbox_id: str) -> None:
    async with (
        attached(sandbox_id) as first,
        attached(sandbox_id) as second,
        first.terminals.open() as held,
    ):
        with pytest.raises(TerminalBusyError, match="held by another client") as refused:
            await second.terminals.attach(held.id)
        assert refused.value.status_code == 409
        await held.write("echo unharmed-$((7+7))\r")
        await held.expect("unharmed-14")


CHILD = """
import sys
from opensandbox_core import SandboxSession

with SandboxSession.attach(sys.argv[1]) as session:  # attached: never destroyed here
    term = session.terminals.attach(sys.argv[2])
    term.expect("parent-21")
    term.write("echo child-$((6*7))\\r")
    term.expect("child-42")
"""  # leaving `with` closes the session, which detaches the terminal


@module_loop
async def test_another_process_attaches_with_the_blocking_api(sandbox_id: str) -> None:
    async with attached(sandbox_id) as session:
        await _from_another_process(sandbox_id, session)


async def _from_another_process(sandbox_id: str, session: AsyncSandboxSession) -> None:
    term = await session.terminals.open()
    await term.write("echo parent-$((3*7))\r")
    await term.expect("parent-21")
    await term.detach()
    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", textwrap.dedent(CHILD), sandbox_id, term.id],
        env=os.environ,
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr.decode()[-2000:]
    again = await session.terminals.attach(term.id)
    await again.expect("child-42")
    await again.close()


def test_blocking_terminal(sandbox_id: str) -> None:
    with SandboxSession.attach(sandbox_id) as session:
        with session.terminals.open('read -r line; echo "got:$line"; exit 7') as term:
            term.write("blocking\r")
            term.expect("got:blocking")
            assert term.wait(30) == 7
        assert term.exit_code == 7
        with session.terminals.open("kill -TERM $$") as term:
            assert term.wait(30) == -15
        with session.terminals.open() as term:  # left open: `with` closes it
            term.write("echo open-$((1+2))\r")
            term.expect("open-3")
        assert term.async_terminal.ended and term.exit_code is None
        with pytest.raises(TerminalNotFoundError):
            session.terminals.attach(term.id)


@module_loop
async def test_open_awaited_or_in_async_with(session: AsyncSandboxSession) -> None:
    async with session.terminals.open() as term:  # no `await`: closed at the end of the block
        await term.write("echo in-block-$((2+5))\r")
        await term.expect("in-block-7")
    assert term.ended and term.exit_code is None  # closed: execd's SIGKILL, no code made up
    with pytest.raises(TerminalNotFoundError):
        await session.terminals.attach(term.id)
    awaited = await session.terminals.open("kill -TERM $$")  # awaited: the caller closes it
    try:
        assert await awaited.wait(30) == -15
    finally:
        await awaited.close()
    assert awaited.exit_code == -15  # close() keeps a known code


# -- errors, the end, and what is left behind ----------------------------------------------------


@module_loop
async def test_unknown_and_closed_ids(session: AsyncSandboxSession) -> None:
    with pytest.raises(TerminalNotFoundError, match="0000-4000-8000") as missing:
        await session.terminals.attach("00000000-0000-4000-8000-000000000000")
    assert isinstance(missing.value, LookupError)
    term = await session.terminals.open()
    await term.write("sleep 600\r")
    await term.close()
    await term.close()
    assert term.ended and term.exit_code is None
    with pytest.raises(TerminalNotFoundError, match=term.id):
        await session.terminals.attach(term.id)


@module_loop
async def test_a_cwd_execd_cannot_use(session: AsyncSandboxSession) -> None:
    await session.files.write_bytes("/tmp/term-a-file", b"x")
    with pytest.raises(ConfigurationError, match="cwd") as bad:
        await session.terminals.open(cwd="/tmp/term-a-file/sub")
    assert "session_id" not in str(bad.value)


@module_loop
@pytest.mark.parametrize("after", [0.0, 0.005, 0.015, 0.03, 0.06, 0.1])
async def test_cancelled_open_leaves_no_terminal(
    session: AsyncSandboxSession, monkeypatch: pytest.MonkeyPatch, after: float
) -> None:
    execd = (await session._life.context()).execd
    made: list[str] = []
    create = ExecdClient.pty_create

    async def spy(self: ExecdClient, cwd: str | None) -> str:  # the real call, ids noted
        terminal_id = await create(self, cwd)
        made.append(terminal_id)
        return terminal_id

    monkeypatch.setattr(ExecdClient, "pty_create", spy)
    try:
        async with asyncio.timeout(after):
            await session.terminals.open()
    except TimeoutError:
        pass
    else:
        pytest.skip(f"open_terminal took less than {after} s: nothing was cancelled")
    # What a cancelled open made is deleted before the cancellation goes on.
    for terminal_id in made:
        with pytest.raises(ExecdError) as gone:
            await execd.pty_status(terminal_id)
        assert gone.value.status == 404


# -- the daemon's habits (knobs of the testbed's daemon) -----------------------------------------


@asynccontextmanager
async def knob_sandbox(image: str, **env: str) -> AsyncIterator[AsyncSandboxSession]:
    async with AsyncSandboxSession(SandboxSpec(image=image, container_env=env)) as sandbox:
        yield sandbox


@module_loop
@pytest.mark.testbed_daemon
async def test_exit_loss_always_loses_nothing_the_daemon_kept(sandbox_image: str) -> None:
    async with knob_sandbox(sandbox_image, OSB_EXECD_PTY_EXIT_LOSS="always") as owner:
        sid = await owner.start()
        async with attached(sid, proxy=True) as session:
            async with session.terminals.open() as term:
                await term.write("echo bye-$((1+1)); exit 3\r")
                assert await term.wait(30) == 3
                assert (await drain(term)).endswith(b"bye-2\r\nexit\r\n")
            async with session.terminals.open("printf 'last-line\\n'; exit 4") as term:
                assert await term.wait(30) == 4
                assert await drain(term) == b"last-line\r\n"
            # No end mark (the core's wrapper, the session leader, killed): what the daemon
            # kept, and only that, is read; the exit code is not known.
            term = await session.terminals.open()
            await term.write(
                "printf 'before\\n'; sleep 0.3; printf 'last-words\\n'; "
                "kill -9 $(cut -d' ' -f6 /proc/$$/stat)\r"
            )
            assert await term.wait(30) is None
            out = await drain(term)
            assert b"before\r\n" in out and b"last-words\r\n" not in out  # `always` dropped it
            status = await (await session._life.context()).execd.pty_status(term.id)
            assert term._keeper.offset == status["output_offset"]  # every byte it kept
            await term.close()


@module_loop
@pytest.mark.testbed_daemon  # the knobs are the testbed daemon's
@pytest.mark.execd_profiles("1.0.19")  # the same client code on every profile: one run is enough
@pytest.mark.parametrize("keepalive", [0.5, 1000.0], ids=["kept-alive", "no-keepalive"])
async def test_the_silence_rule_never_ends_a_terminal(
    sandbox_image: str, monkeypatch: pytest.MonkeyPatch, keepalive: float
) -> None:
    monkeypatch.setattr(_link, "KEEPALIVE", keepalive)
    env = {"OSB_EXECD_PTY_IDLE_S": "2", "OSB_EXECD_PTY_PING_S": "1000"}
    async with knob_sandbox(sandbox_image, **env) as owner:
        sid = await owner.start()
        async with attached(sid, proxy=True) as session, await session.terminals.open() as term:
            await term.write("echo idle-$((2+2))\r")
            await term.expect("idle-4")
            link = term._keeper.link
            await asyncio.sleep(4.5)
            await term.write("echo awake-$((3+3))\r")
            seen = await term.expect("awake-6")
            assert b"idle-4" not in seen.string  # nothing repeated by the replay
            # Kept alive, the connection stays; without keep-alive the daemon ended it and
            # the terminal was reached again with replay.
            assert (term._keeper.link is link) == (keepalive < 2)
