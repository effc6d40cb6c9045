"""The code facet's errors: branches of the core's one tree (`opensandbox_core._errors`).

```
OpenSandboxError
├── CodeTimeoutError (also TimeoutError)         a run outlived its timeout; has .execution
├── CodeContextNotFoundError (also LookupError)  no context of that id (never made, or deleted)
├── CodeContextBusyError                         another client runs code in that context
└── CodeInterpreterUnavailableError              the sandbox cannot run that language
```

An exception raised by the code itself is never one of these: it is the run's result
(`Execution.error`).
"""

from __future__ import annotations

from opensandbox_core._errors import OpenSandboxError

from ._model import Execution

__all__ = [
    "CodeContextBusyError",
    "CodeContextNotFoundError",
    "CodeInterpreterUnavailableError",
    "CodeTimeoutError",
]


class CodeTimeoutError(OpenSandboxError, TimeoutError):
    """A run took longer than its timeout: the kernel was interrupted, and the context keeps its
    state. `execution` holds what the run printed and showed until then."""

    def __init__(self, message: str, *, timeout: float, execution: Execution) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.execution = execution

    @property
    def stdout(self) -> str:
        return self.execution.stdout

    @property
    def stderr(self) -> str:
        return self.execution.stderr


class CodeContextNotFoundError(OpenSandboxError, LookupError):
    """No code context of this id in the sandbox: never made there, or deleted."""

    def __init__(self, message: str, *, context_id: str) -> None:
        super().__init__(message)
        self.context_id = context_id


class CodeContextBusyError(OpenSandboxError):
    """Another client (not this session) is running code in the context: execd runs one cell
    per context at a time. Runs of this session in one context wait for each other instead."""

    def __init__(self, message: str, *, context_id: str) -> None:
        super().__init__(message)
        self.context_id = context_id


class CodeInterpreterUnavailableError(OpenSandboxError):
    """The sandbox cannot run code in this language: its image has no Jupyter server that
    execd can reach, or no kernel for the language. The message says what the image needs."""

    def __init__(self, message: str, *, language: str) -> None:
        super().__init__(message)
        self.language = language
