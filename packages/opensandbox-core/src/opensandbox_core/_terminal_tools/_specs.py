"""What the terminal tools tell a model: their names, descriptions and argument schemas.

Written once here and handed to every framework as it is (`TerminalTools.specs`): the Deep Agents
and Pydantic AI packages build their tools from these, so both show a model the same tools.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

__all__ = ["DEFAULT_WAIT", "MAX_WAIT", "SPECS", "TerminalToolSpec"]

DEFAULT_WAIT: Final = 10.0
"""Seconds a tool call waits for output when the model gives no `timeout`."""
MAX_WAIT: Final = 600.0
"""The longest `timeout` a tool call takes (ten minutes)."""


@dataclass(frozen=True)
class TerminalToolSpec:
    """One terminal tool as a model sees it: `name`, `description`, and `parameters` (a JSON
    schema of its arguments). `method` is the `TerminalTools` coroutine that runs it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    method: str

    def schema(self) -> dict[str, Any]:
        """`parameters` as a new dict, for a framework to keep (and change if it must)."""
        return copy.deepcopy(dict(self.parameters))


def _schema(properties: dict[str, dict[str, Any]], required: tuple[str, ...]) -> Mapping[str, Any]:
    return MappingProxyType(
        {
            "type": "object",
            "properties": properties,
            "required": list(required),
            "additionalProperties": False,
        }
    )


_OUTPUT = (
    " The result's first line is `terminal <id>: <state>`; the output follows as text (line "
    "endings as \\n, bytes that are not UTF-8 as U+FFFD, nothing else changed). When one call "
    "gets more output than a result holds, the start is left out and the result says how many "
    "bytes."
)
_WAITING = (
    "Returns as soon as `wait_for` appears in the output, else once the output has been quiet "
    "for half a second; at most `timeout` seconds."
)

_TERMINAL_ID = {
    "type": "string",
    "minLength": 1,
    "description": "The terminal's id, as terminal_start returned it.",
}
_WAIT_FOR = {
    "type": "string",
    "minLength": 1,
    "description": (
        "Text to wait for in the output, such as a prompt ('>>> ', 'Name? ', '$ '); it is "
        "matched literally (line endings as \\n) in the output after the terminal's echo of "
        "the typed line. Omit it to return when the output goes quiet."
    ),
}
_TIMEOUT = {
    "type": "number",
    "minimum": 0,
    "maximum": MAX_WAIT,
    "default": DEFAULT_WAIT,
    "description": f"The most seconds to wait for output (default {DEFAULT_WAIT:g}).",
}

SPECS: Final = (
    TerminalToolSpec(
        name="terminal_start",
        description=(
            "Open an interactive terminal in the sandbox and return its id with its first "
            "output. Use a terminal for programs that ask for input or run until stopped: "
            "prompts (read -p, [Y/n]), REPLs (python3 -i, psql), a long program to watch and "
            "interrupt. Without `command` it runs an interactive bash shell; with one it runs "
            "that command line, and the terminal ends when it does. Waits up to `timeout` "
            "seconds for the first output, then until the output is quiet for half a second "
            "(or `wait_for` appears). The terminal keeps running after this call: type into it "
            "with terminal_send, watch it with terminal_read, end it with terminal_close." + _OUTPUT
        ),
        parameters=_schema(
            {
                "command": {
                    "type": "string",
                    "minLength": 1,
                    "description": (
                        "A shell command line to run in the terminal, such as 'python3 -i'. "
                        "Omit it for an interactive bash shell."
                    ),
                },
                "cwd": {
                    "type": "string",
                    "minLength": 1,
                    "description": (
                        "The directory to start in (relative paths start at the working "
                        "directory). Omit it for the working directory."
                    ),
                },
                "wait_for": _WAIT_FOR,
                "timeout": _TIMEOUT,
            },
            (),
        ),
        method="start",
    ),
    TerminalToolSpec(
        name="terminal_send",
        description=(
            "Type keys into a terminal and return the output that follows. Text is typed as "
            "it is, and a line break is Enter. Keys that text cannot carry go in angle "
            "brackets: <Enter>, <Tab>, <Esc>, <Backspace>, <Delete>, <Up>, <Down>, <Left>, "
            "<Right>, <Home>, <End>, <PageUp>, <PageDown>, <F1> to <F12>, <Ctrl-C> (interrupt "
            "the running program), <Ctrl-D> (end of input), <Ctrl-Z> and any <Ctrl-letter>. A "
            "'<' that starts no key name is typed as it is; <lt> types '<' where it would. "
            + _WAITING
            + _OUTPUT
        ),
        parameters=_schema(
            {
                "terminal_id": _TERMINAL_ID,
                "keys": {
                    "type": "string",
                    "description": (
                        "What to type, such as 'ls -la<Enter>', 'y<Enter>', '6*7<Enter>' or "
                        "'<Ctrl-C>'."
                    ),
                },
                "wait_for": _WAIT_FOR,
                "timeout": _TIMEOUT,
            },
            ("terminal_id", "keys"),
        ),
        method="send",
    ),
    TerminalToolSpec(
        name="terminal_read",
        description=(
            "Return what a terminal printed since the last call, waiting up to `timeout` "
            "seconds for output to arrive, then until it is quiet for half a second (or until "
            "`wait_for` appears). Use it to watch a long program or to wait for a prompt." + _OUTPUT
        ),
        parameters=_schema(
            {"terminal_id": _TERMINAL_ID, "wait_for": _WAIT_FOR, "timeout": _TIMEOUT},
            ("terminal_id",),
        ),
        method="read",
    ),
    TerminalToolSpec(
        name="terminal_close",
        description=(
            "End a terminal: stop its program (and everything it started) and free the "
            "terminal. Returns the output it printed that was not returned yet. Close "
            "terminals you no longer need."
        ),
        parameters=_schema({"terminal_id": _TERMINAL_ID}, ("terminal_id",)),
        method="close",
    ),
)
"""The four terminal tools, in the order a model meets them."""
