"""A command ready to send: what `CommandRunner.prepare` makes of `run`'s and `start_background`'s
arguments (checked, its `cwd` placed), and the execd request body built from it.

No I/O: the checks and the placing are `CommandRunner.prepare`'s; this only holds the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opensandbox_core._wire._events import Context, command_body

from ._capture import CAPTURE_ENV, Capture

__all__ = ["CommandRequest"]


@dataclass(frozen=True)
class CommandRequest:
    """A checked command, ready to send (`CommandRunner.prepare`): the text and `cwd` field execd
    gets (see `CommandRunner.literal_cwd`), the directory it starts in, its environment and time
    limit, and the context it is sent in."""

    ctx: Context
    text: str
    cwd: str
    workdir: str
    env: Mapping[str, str]
    limit: float | None

    def captured(self, capture: Capture) -> CommandRequest:
        """The same command run by `capture`'s script, which finds it in `CAPTURE_ENV`."""
        env = {**self.env, CAPTURE_ENV: self.text}
        return dataclasses.replace(self, text=capture.script(), env=env)

    def body(self, *, background: bool = False) -> dict[str, Any]:
        """The JSON body of execd's `POST /command` that runs it."""
        return command_body(
            self.text, cwd=self.cwd, env=self.env, timeout=self.limit, background=background
        )
