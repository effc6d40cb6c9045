"""deepagents-opensandbox-backend: a Deep Agents sandbox backend on a self-hosted OpenSandbox.

```python
from deepagents import create_deep_agent
from deepagents_opensandbox_backend import OpenSandboxBackend

with OpenSandboxBackend.create(api_key="...") as backend:
    agent = create_deep_agent(model="anthropic:claude-sonnet-4-6", backend=backend)
    agent.invoke({"messages": "Write and run a script that prints the first ten primes"})
```

Setup, security and troubleshooting: the package README; design notes: docs/deepagents.md.
"""

from typing import TYPE_CHECKING, Any

from opensandbox_core import InsecureSandboxWarning

from ._backend import DEFAULT_IMAGE, OpenSandboxBackend
from ._code import code_tools
from ._terminal import TerminalMiddleware, terminal_tools
from ._threads import NAMESPACE_METADATA_KEY, THREAD_METADATA_KEY, ThreadSandboxBackend
from ._timetravel import (
    FORK_OF_METADATA_KEY,
    SANDBOX_FILES_KEY,
    SandboxFiles,
    TimeTravelSandboxBackend,
)

if TYPE_CHECKING:
    from ._provider import OpenSandboxProvider

__version__ = "0.3.0"


def __getattr__(name: str) -> Any:
    # deepagents-code's provider, imported on first use (the package never needs deepagents-code)
    if name == "OpenSandboxProvider":
        from ._provider import OpenSandboxProvider

        return OpenSandboxProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_IMAGE",
    "FORK_OF_METADATA_KEY",
    "NAMESPACE_METADATA_KEY",
    "SANDBOX_FILES_KEY",
    "THREAD_METADATA_KEY",
    "InsecureSandboxWarning",
    "OpenSandboxBackend",
    "OpenSandboxProvider",
    "SandboxFiles",
    "TerminalMiddleware",
    "ThreadSandboxBackend",
    "TimeTravelSandboxBackend",
    "__version__",
    "code_tools",
    "terminal_tools",
]
