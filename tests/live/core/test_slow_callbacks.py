"""A blocking session's slow `on_output` holds up neither another blocking session nor a
terminal of the process (its callbacks run off the portal loop), live."""

from __future__ import annotations

import threading

import pytest

from opensandbox_core import SandboxSession, SandboxSpec

# No execd generation changes what these tests check (see tests/live/conftest.py).
pytestmark = pytest.mark.daemon_neutral


def test_a_blocked_callback_stalls_no_other_blocking_work(sandbox_image: str) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(stream: str, text: str) -> None:
        entered.set()
        release.wait(120)

    with SandboxSession(SandboxSpec(image=sandbox_image)) as first:
        second = SandboxSession.attach(str(first.id))
        terminal = first.terminals.open()
        stuck = threading.Thread(target=lambda: first.commands.run("echo a", on_output=slow))
        stuck.start()
        try:
            assert entered.wait(60)
            done: list[str] = []

            def other_work() -> None:
                done.append(second.commands.run("echo b").stdout)
                terminal.write("echo $((6 * 7))x\r")
                terminal.expect("42x", timeout=30)
                done.append("terminal")

            other = threading.Thread(target=other_work)
            other.start()
            other.join(60)
            assert done == ["b\n", "terminal"] and stuck.is_alive()
        finally:
            release.set()
            stuck.join(60)
            terminal.close()
            second.close()
