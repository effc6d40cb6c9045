"""A blocking session's `on_output` runs off the portal loop (`_sync._OffLoop`, through `twin`):
one slow callback does not hold up the process's other blocking sessions; the callback still
sees every piece, in order, and what it raises reaches the call. Against the in-process fake."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from opensandbox_core import OpenSandboxError, SandboxSession, SandboxSpec
from opensandbox_core.testing import FakeCodeInterpreter, FakeOpenSandbox
from opensandbox_core.testing._code import FakeCell

pytestmark = pytest.mark.filterwarnings("ignore::opensandbox_core.InsecureSandboxWarning")


def _recorder(pieces: list[tuple[str, str, str]]) -> Callable[[str, str], None]:
    """A plain `on_output` that keeps each piece with the name of the thread it ran on."""

    def record(stream: str, text: str) -> None:
        pieces.append((stream, text, threading.current_thread().name))

    return record


def test_a_slow_callback_does_not_hold_up_another_blocking_session() -> None:
    fake = FakeOpenSandbox()
    entered, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def slow(stream: str, text: str) -> None:
        seen.append(text)
        entered.set()
        release.wait(60)

    with (
        SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as first,
        SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as second,
    ):
        stuck = threading.Thread(target=lambda: first.commands.run("echo a", on_output=slow))
        stuck.start()
        try:
            assert entered.wait(30)
            done: list[str] = []
            other = threading.Thread(
                target=lambda: done.append(second.commands.run("echo b").stdout)
            )
            other.start()
            other.join(30)
            # The other session's command ended while the callback still blocks.
            assert done == ["b\n"] and not release.is_set() and stuck.is_alive()
        finally:
            release.set()
            stuck.join(30)
        assert seen == ["a\n"]


def test_callbacks_run_in_order_off_the_portal_thread_and_their_errors_reach_the_call() -> None:
    fake = FakeOpenSandbox()
    pieces: list[tuple[str, str, str]] = []
    record = _recorder(pieces)

    with SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        result = sb.commands.run("printf 'one\\ntwo\\nthree\\n'", on_output=record)
        assert result.stdout == "one\ntwo\nthree\n"
        assert "".join(text for _, text, _ in pieces) == result.stdout
        assert all(stream == "stdout" for stream, _, _ in pieces)
        assert all(name.startswith("opensandbox-core-callback") for _, _, name in pieces)

        def boom(stream: str, text: str) -> None:
            raise ValueError("from the callback")

        with pytest.raises(OpenSandboxError, match="from the callback"):  # as from an async one
            sb.commands.run("echo x", on_output=boom)

        async def async_callback(stream: str, text: str) -> None:
            pieces.append((stream, text, threading.current_thread().name))

        pieces.clear()
        sb.commands.run("echo y", on_output=async_callback)
        assert [(s, t) for s, t, _ in pieces] == [("stdout", "y\n")]
        assert pieces[0][2] == "opensandbox-core-portal"  # an async callback stays on the loop


def test_a_blocking_code_run_calls_on_output_off_the_portal_thread() -> None:
    """`session.code.run` is made by the same twin as `commands.run`, callbacks included."""
    cell = FakeCell(outputs=(("stdout", "o1\n"), ("stderr", "e1\n"), ("stdout", "o2\n")))
    fake = FakeOpenSandbox(code=FakeCodeInterpreter(on_cell=lambda code, kernel: cell))
    pieces: list[tuple[str, str, str]] = []

    with SandboxSession(SandboxSpec(image="img"), connection=fake.connection()) as sb:
        execution = sb.code.run("three outputs", on_output=_recorder(pieces))
    assert execution.stdout == "o1\no2\n"
    # what execd streamed (it loses the last output), each piece on the callback thread
    assert [(s, t) for s, t, _ in pieces] == [("stdout", "o1\n"), ("stderr", "e1\n")]
    assert all(name.startswith("opensandbox-core-callback") for _, _, name in pieces)
