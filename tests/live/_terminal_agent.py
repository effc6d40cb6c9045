"""An agent's work with the terminal tools, written once for both frameworks' scripted models.

The "model" answers a `read -p` prompt, drives `python3 -i` to a computed answer (it reads the
REPL's answer from a tool result and writes it into the sandbox), and interrupts a `sleep 600`
with Ctrl-C. Each step is chosen from the tool results so far, as a model would: the terminal's
id comes from `terminal_start`'s result, the answer from the REPL's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

WORKDIR = "/workspace/terminal-agent"
Step = tuple[str, dict[str, Any]] | str
"""A tool call (name, arguments), or the final answer."""

_FIRST_LINE = re.compile(r"terminal (\S+): (.*)")


def terminal_state(result: str) -> tuple[str, str]:
    """(id, state) from a tool result's first line."""
    match = _FIRST_LINE.match(result)
    assert match is not None, f"not a terminal tool result: {result!r}"
    return match.group(1), match.group(2)


_SENDS: list[tuple[str, str | None]] = [
    ('read -p "Name? " n; echo "hello $n" | tee greeting.txt<Enter>', "Name? "),
    ("Ada<Enter>", "hello Ada"),
    ("python3 -i<Enter>", ">>> "),
    ("6*7<Enter>", ">>> "),
    ("<Ctrl-D>", "# "),
    ("echo {answer} > answer.txt<Enter>", "# "),
    ("sleep 600<Enter>", None),
    ("<Ctrl-C>", "# "),
    ("echo rc=$?<Enter>", "rc=130"),
]
"""The keys the model sends after `terminal_start` (and what it waits for), in order."""


@dataclass
class TerminalAgent:
    """The script. Before the step that presses Ctrl-C (`interrupts_next`), the framework's glue
    checks that a `sleep` runs in the sandbox and records it in `sleep_seen`, so the interrupt
    is shown to stop a running program."""

    sleep_seen: list[bool] = field(default_factory=list)

    @staticmethod
    def interrupts_next(results: list[str]) -> bool:
        return 0 < len(results) <= len(_SENDS) and _SENDS[len(results) - 1][0] == "<Ctrl-C>"

    def step(self, results: list[str]) -> Step:
        n = len(results)
        if n == 0:
            return "terminal_start", {"cwd": WORKDIR}
        tid = terminal_state(results[0])[0]
        if n <= len(_SENDS):
            keys, wait_for = _SENDS[n - 1]
            if "{answer}" in keys:
                keys = keys.format(answer=self.answer(results))
            arguments: dict[str, Any] = {"terminal_id": tid, "keys": keys}
            if wait_for is not None:
                arguments["wait_for"] = wait_for
            return "terminal_send", arguments
        if n == len(_SENDS) + 1:
            return "terminal_close", {"terminal_id": tid}
        return f"Greeted Ada; 6*7 = {self.answer(results)}; interrupted the sleep."

    @staticmethod
    def answer(results: list[str]) -> str:
        """The REPL's answer to 6*7, as the model reads it from the fifth tool result."""
        found = re.search(r"^6\*7\n(\d+)\n>>> $", results[4], re.M)
        assert found is not None, f"no answer in {results[4]!r}"
        return found.group(1)


def check_results(results: list[str], agent: TerminalAgent) -> str:
    """Assert on what the tools returned to the model; returns the terminal's id."""
    assert len(results) == 11, results
    tid, state = terminal_state(results[0])
    assert state == "running" and results[0].endswith("# "), results[0]
    states = [terminal_state(r) for r in results[1:]]
    assert all(i == tid for i, _ in states), states
    assert states[0][1] == "running; 'Name? ' appeared", results[1]
    assert "\nAda\nhello Ada" in results[2], results[2]
    assert "Python 3" in results[3] and results[3].endswith(">>> "), results[3]
    assert results[4].split("\n", 1)[1] == "6*7\n42\n>>> ", results[4]
    assert results[7].split("\n", 1)[1] == "sleep 600\n", results[7]  # running: no prompt
    assert agent.sleep_seen == [True]
    assert states[7][1] == "running; '# ' appeared" and "^C" in results[8], results[8]
    assert "rc=130" in results[9], results[9]
    assert states[9][1] == "closed", results[10]
    return tid
