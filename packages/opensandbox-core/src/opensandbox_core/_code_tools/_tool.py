"""`CodeTool`: the `run_code` tool of an agent, on a sandbox session's code interpreter.

The framework packages build their tool from it (`name`, `description`, `schema()` and `call`);
a custom agent loop can call it directly. A result is text for the model and the images the run
showed (`CodeToolResult`, see `_render`). What the model can act on comes back as a result: an
exception its code raised (with the traceback), a run that outlived its timeout (interrupted,
with the output until then), a bad argument or a kernel busy with another client's run (text
starting with `Error:`). What it cannot act on raises, as the session's other operations do: a
sandbox without a code interpreter (`CodeInterpreterUnavailableError`), a context the
application named that is gone, the sandbox gone, the server failing.

Kernels: unless given a `context`, the tool makes one context of its own in each sandbox it runs
in (a kernel whose working directory is the session's, where the other tools work), on its first
call there, and keeps using it: state carries over between calls and between agent runs that
use the same tool object. A context deleted meanwhile (or a kernel that died) is replaced, and
the result says that the earlier state is gone.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from opensandbox_core import _validate
from opensandbox_core._code._errors import (
    CodeContextBusyError,
    CodeContextNotFoundError,
    CodeTimeoutError,
)
from opensandbox_core._code._model import CodeContext
from opensandbox_core._errors import ConfigurationError
from opensandbox_core._session import AsyncSandboxSession

from ._render import CodeToolResult, render

__all__ = ["DEFAULT_MAX_OUTPUT", "DEFAULT_TIMEOUT", "MAX_TIMEOUT", "CodeTool"]

DEFAULT_TIMEOUT: Final = 120.0
"""Seconds a run may take when the model gives no `timeout` (two minutes)."""
MAX_TIMEOUT: Final = 3600.0
"""The longest `timeout` the tool takes (one hour)."""
DEFAULT_MAX_OUTPUT: Final = 16 * 1024
"""Characters of each output, traceback and value one result holds at most."""

_LANGUAGE_WORDS: Final = {
    "python": (
        "Python code in an IPython (Jupyter) kernel",
        "variables, imports and functions defined in one call are there in the next",
        " Figures come back as images: show a matplotlib figure with plt.show() (or display() "
        "it, or end the code with it); display() shows other rich values.",
    ),
    "bash": (
        "bash commands in a bash kernel (a shell that stays open)",
        "variables, functions and the current directory set in one call are there in the next",
        "",
    ),
}


class CodeTool:
    """The `run_code` tool: code run in a kernel of the sandbox, for a model (module docstring).

    ```python
    tool = CodeTool()
    first = await tool.run(session, "import math\\nr = 2")
    second = await tool.call(session, {"code": "math.pi * r ** 2"})
    print(second.text)  # execution 2: done / [result] / 12.566370614359172
    ```

    `language`: the kernel's (`python`, `bash`, or another the image has a kernel for);
    `context`: a `CodeContext` (or its id) to run in instead of the tool's own; `timeout`: the
    seconds a run may take when the model gives none; `max_output`: characters of each output,
    traceback and value a result holds at most. Construction does no I/O.
    """

    name: ClassVar[str] = "run_code"

    def __init__(
        self,
        *,
        language: str = "python",
        context: CodeContext | str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> None:
        self._language = _validate.code_language(language)
        _validate.code_context(context, CodeContext)
        self._given = context
        self._timeout = _validate.run_timeout(timeout, MAX_TIMEOUT)
        self._max_output = _validate.positive_int(max_output, "max_output")
        self._own: dict[str, CodeContext] = {}  # by sandbox id
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}

    def __repr__(self) -> str:
        return f"CodeTool(language={self._language!r}, timeout={self._timeout:g})"

    @property
    def language(self) -> str:
        return self._language

    @property
    def timeout(self) -> float:
        """Seconds a run may take when the model gives no `timeout`."""
        return self._timeout

    @property
    def description(self) -> str:
        """What the model reads about the tool."""
        what, state, extra = _LANGUAGE_WORDS.get(
            self._language,
            (
                f"{self._language} code in a Jupyter kernel",
                "what one call defines is there in the next",
                "",
            ),
        )
        where = (
            " It starts in the sandbox's working directory and shares the files of the other tools."
            if self._given is None
            else " It shares the files of the other tools."
        )
        return (
            f"Run {what} in the sandbox, and return what it printed, the value of its last "
            "expression, what it displayed and any error with its traceback. The kernel keeps "
            f"its state between calls, like the cells of one notebook: {state}, so build on "
            "earlier calls instead of repeating them." + extra + where + " A run longer than "
            f"`timeout` seconds (default {self._timeout:g}) is interrupted, as with Ctrl-C; "
            "the kernel keeps its state."
        )

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments (a new dict, for a framework to keep)."""
        return {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": f"The {self._language} code to run, as one notebook cell.",
                },
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_TIMEOUT,
                    "default": self._timeout,
                    "description": (
                        f"The most seconds the run may take (default {self._timeout:g}); past "
                        "it the run is interrupted."
                    ),
                },
            },
            "required": ["code"],
            "additionalProperties": False,
        }

    # -- running ------------------------------------------------------------------------------
    async def call(
        self, session: AsyncSandboxSession, arguments: Mapping[str, object]
    ) -> CodeToolResult:
        """Run the tool with the arguments a model sent (a bad one: an `Error:` result)."""
        try:
            checked = _validate.tool_arguments(arguments, self.schema(), self.name)
            code = _validate.code_text(checked["code"])
            limit = checked.get("timeout")
            if limit is not None:
                limit = _validate.run_timeout(limit, MAX_TIMEOUT)
        except ConfigurationError as exc:
            return CodeToolResult(f"Error: {exc}")
        return await self.run(session, code, timeout=limit)

    async def run(
        self, session: AsyncSandboxSession, code: str, *, timeout: float | None = None
    ) -> CodeToolResult:
        """Run `code` in the tool's context of `session`'s sandbox; `timeout` (seconds, at most
        `MAX_TIMEOUT`) instead of the tool's."""
        _validate.instance(
            session, AsyncSandboxSession, "session", "an opensandbox_core.AsyncSandboxSession"
        )
        limit = self._timeout if timeout is None else _validate.run_timeout(timeout, MAX_TIMEOUT)
        note = ""
        for attempt in (1, 2):
            context = await self._context(session)
            try:
                execution = await session.code.run(
                    code, context=context, language=self._language, timeout=limit
                )
            except CodeTimeoutError as exc:
                return self._with(
                    note, render(exc.execution, max_output=self._max_output, timed_out=limit)
                )
            except CodeContextBusyError as exc:
                return CodeToolResult(
                    f"Error: {exc} (the run did not start; try again in a moment)"
                )
            except CodeContextNotFoundError:
                if self._given is not None or attempt == 2:
                    raise
                self._forget(session, context)
                note = "[the earlier kernel of this tool is gone: this ran in a new one]\n"
                continue
            return self._with(note, render(execution, max_output=self._max_output))
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _with(note: str, result: CodeToolResult) -> CodeToolResult:
        return CodeToolResult(note + result.text, result.images) if note else result

    # -- the tool's own context per sandbox -------------------------------------------------------
    def _lock(self, key: str) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._guard:
            held = self._locks.get(key)
            if held is None or held[0] is not loop:
                held = self._locks[key] = (loop, asyncio.Lock())
            return held[1]

    async def _context(self, session: AsyncSandboxSession) -> CodeContext | str:
        if self._given is not None:
            return self._given
        working_dir = await session.working_dir()  # starts or attaches: the id is known
        key = session.id or ""
        async with self._lock(key):
            known = self._own.get(key)
            if known is None:
                known = await session.code.create_context(self._language, cwd=working_dir)
                self._own[key] = known
            return known

    def _forget(self, session: AsyncSandboxSession, context: CodeContext | str) -> None:
        key = session.id or ""
        with self._guard:
            if self._own.get(key) is context:
                del self._own[key]
