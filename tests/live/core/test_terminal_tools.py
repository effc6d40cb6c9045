"""`TerminalTools` against the testbed: what a model's terminal tools return, and what they do in
the sandbox (the frameworks' tools are these; their agent runs are in the adapters' live tests)."""

from __future__ import annotations

import asyncio
import re

from opensandbox_core import AsyncSandboxSession
from opensandbox_core.adapters import TerminalTools, run_blocking

FIRST_LINE = re.compile(r"terminal (\S+): (.*)")


def terminal_id(result: str) -> str:
    match = FIRST_LINE.match(result)
    assert match is not None, result
    return match.group(1)


def state(result: str) -> str:
    match = FIRST_LINE.match(result)
    assert match is not None, result
    return match.group(2)


def output(result: str) -> str:
    return result.split("\n", 1)[1]


async def test_terminal_tools_answer_a_prompt_drive_a_repl_and_interrupt(
    session: AsyncSandboxSession,
) -> None:
    tools = TerminalTools(session)
    started = await tools.start(cwd="tools-home")
    tid = terminal_id(started)
    assert state(started) == "running"
    assert output(started).endswith("# ")  # the shell's prompt, nothing of the core's setup

    asked = await tools.send(
        tid, 'read -p "Name? " n; echo "hello $n" > greeting<Enter>', wait_for="Name? "
    )
    assert state(asked) == "running; 'Name? ' appeared"
    answered = await tools.send(tid, "Ada<Enter>", wait_for="# ")
    assert output(answered).startswith("Ada\n")
    assert (await session.files.read_bytes("tools-home/greeting")) == b"hello Ada\n"

    repl = await tools.send(tid, "python3 -i<Enter>", wait_for=">>> ")
    assert "Python 3" in output(repl)
    computed = await tools.send(tid, "6*7<Enter>", wait_for=">>> ")
    assert output(computed) == "6*7\n42\n>>> "
    await tools.send(tid, "<Ctrl-D>", wait_for="# ")

    slept = await tools.send(tid, "sleep 600<Enter>")
    assert state(slept) == "running" and output(slept) == "sleep 600\n"
    assert (await session.commands.run("pgrep -x sleep")).exit_code == 0
    interrupted = await tools.send(tid, "<Ctrl-C>", wait_for="# ")
    assert state(interrupted) == "running; '# ' appeared"
    assert output(interrupted).startswith("^C")
    status = await tools.send(tid, "echo rc=$?<Enter>", wait_for="rc=130")
    assert "rc=130" in output(status)
    assert (await session.commands.run("pgrep -x sleep")).exit_code == 1  # no sleep left
    closed = await tools.close(tid)
    assert state(closed).startswith("closed")


async def test_terminal_tools_report_an_exit_and_refuse_what_cannot_be_done(
    session: AsyncSandboxSession,
) -> None:
    tools = TerminalTools(session)
    ended = await tools.start("echo bye; exit 3")
    tid = terminal_id(ended)
    assert state(ended) == "exited with code 3; the terminal is closed"
    assert output(ended) == "bye\n"
    again = await tools.send(tid, "ls<Enter>")
    assert again.startswith(f"Error: the process of terminal {tid} exited with code 3")
    assert tools.terminals == []
    unknown = await tools.read("3c8a1e5e-9f5c-4e0c-9d7e-000000000000")
    assert unknown.startswith("Error: there is no terminal 3c8a1e5e")
    assert (await tools.call("terminal_read", {"id": tid})).startswith(
        "Error: terminal_read has no argument id"
    )
    assert (await tools.call("terminal_send", {"terminal_id": tid})) == (
        "Error: terminal_send needs keys."
    )
    too_long = await tools.call("terminal_read", {"terminal_id": tid, "timeout": 3600})
    assert too_long == "Error: timeout must be between 0 and 600 seconds, got 3600."
    bad_cwd = await tools.start(cwd="/etc/hostname/below-a-file")
    assert bad_cwd.startswith("Error: ") and "/etc/hostname/below-a-file" in bad_cwd


async def test_terminal_tools_keep_the_tail_of_long_output_and_say_how_much_they_left_out(
    session: AsyncSandboxSession,
) -> None:
    tools = TerminalTools(session, max_output=1000)
    started = await tools.start("head -c 50000 /dev/zero | tr '\\0' x; echo; echo END")
    assert state(started) == "exited with code 0; the terminal is closed"
    lines = started.split("\n")
    left_out = re.fullmatch(r"\[([\d,]+) bytes of output left out here; .*\]", lines[1])
    assert left_out is not None, lines[1]
    kept = "\n".join(lines[2:])
    assert kept.endswith("x\nEND\n")
    # Nothing lost unsaid: what was left out plus what came is what the terminal printed
    # (50,000 x, then CR LF, END, CR LF; the result shows each CR LF as LF).
    assert int(left_out.group(1).replace(",", "")) + len(kept) + 2 == 50000 + 2 + 3 + 2


async def test_terminal_tools_reach_a_terminal_again_without_repeating_output(
    session: AsyncSandboxSession,
) -> None:
    tools = TerminalTools(session)
    tid = terminal_id(await tools.start())
    await tools.send(tid, "echo first-$((1+1))<Enter>", wait_for="first-2")
    await tools.send(tid, "sleep 1; echo meanwhile-$((5+5))<Enter>")
    await tools.detach_all()  # a run ended: the shell goes on with no client
    await asyncio.sleep(2)
    later = await tools.read(tid, wait_for="meanwhile-10")
    assert state(later) == "running; 'meanwhile-10' appeared"
    assert output(later).startswith("meanwhile-10\n"), later  # printed while detached, once

    # The session lets go of its terminals when it closes (a backend's close()): the next call
    # reaches the terminal again, with nothing repeated.
    await tools.send(tid, "echo before-close<Enter>", wait_for="before-close")
    await session.aclose()
    after = await tools.send(tid, "echo after-close<Enter>", wait_for="after-close")
    assert state(after) == "running; 'after-close' appeared", after
    assert "echo before-close" not in after and "meanwhile" not in after

    # Another process's tools (no memory of this terminal) reach it by id, with what the
    # sandbox kept of it, and say so.
    await tools.detach_all()
    async with AsyncSandboxSession(sandbox_id=session.id) as other:
        fresh = TerminalTools(other)
        seen = await fresh.read(tid, timeout=1)
        assert seen.split("\n")[1].startswith(f"[reached terminal {tid} again"), seen
        assert "first-2" in seen and "meanwhile-10" in seen
        await fresh.detach_all()

    # A later run's session on the same sandbox carries these tools on.
    async with AsyncSandboxSession(sandbox_id=session.id) as later_run:
        tools.rebind(later_run)
        third = await tools.send(tid, "echo third-$((3+3))<Enter>", wait_for="third-6")
        # Only what came after the last result: at most the prompt that followed it, then this.
        assert output(third).removeprefix("bash-5.2# ").startswith("echo third"), third
        assert not any(old in third for old in ("first", "meanwhile", "close"))
        await tools.close(tid)


async def test_terminal_tools_blocking_and_async_calls_share_a_terminal(
    session: AsyncSandboxSession,
) -> None:
    tools = TerminalTools(session)
    # Opened on the blocking portal loop, as a framework's blocking tool does ...
    started = await asyncio.to_thread(run_blocking, tools.start("python3 -i", wait_for=">>> "))
    tid = terminal_id(started)
    # ... and driven from this loop: the call runs on the terminal's own loop.
    computed = await tools.send(tid, "6*7<Enter>", wait_for=">>> ")
    assert "42" in output(computed)
    closed = await asyncio.to_thread(run_blocking, tools.close(tid))
    assert state(closed) == "closed"


async def test_terminal_close_ends_the_process_and_everything_it_started(
    session: AsyncSandboxSession,
) -> None:
    tools = TerminalTools(session)
    tid = terminal_id(await tools.start("sleep 600 & sleep 700", timeout=1))
    assert (await session.commands.run("pgrep -x sleep | wc -l")).output.strip() == "2"
    closed = await tools.close(tid)
    assert state(closed) == "closed"
    for _ in range(50):
        if (await session.commands.run("pgrep -x sleep")).exit_code == 1:
            break
        await asyncio.sleep(0.1)
    assert (await session.commands.run("pgrep -x sleep")).exit_code == 1
    assert (await tools.close(tid)) == f"terminal {tid}: already closed"
