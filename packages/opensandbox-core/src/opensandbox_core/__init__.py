"""opensandbox-core: one sandbox on a self-hosted OpenSandbox server, for any agent loop.

```python
from opensandbox_core import AsyncSandboxSession, SandboxSpec

async with AsyncSandboxSession(SandboxSpec(image="python:3.13-slim")) as sandbox:
    result = await sandbox.commands.run("python3 -c 'print(6 * 7)'")
```

The connection comes from `OPEN_SANDBOX_DOMAIN` and `OPEN_SANDBOX_API_KEY` unless a `Connection` is
given. See `docs/core.md` for the guide.
"""

from ._code import (
    CodeContext,
    CodeContextBusyError,
    CodeContextNotFoundError,
    CodeError,
    CodeInterpreterUnavailableError,
    CodeResult,
    CodeTimeoutError,
    Execution,
)
from ._commands._background import BackgroundProcess
from ._commands._offload import OffloadedRun
from ._config import Connection, SandboxSpec
from ._create import EgressRule, NetworkPolicy, Volume
from ._errors import (
    AuthenticationError,
    CommandTimeoutError,
    ConfigurationError,
    EditError,
    InsecureSandboxWarning,
    NotTextError,
    OpenSandboxError,
    OutputLimitError,
    SandboxUnavailableError,
    ServerError,
    TerminalBusyError,
    TerminalClosedError,
    TerminalError,
    TerminalNotFoundError,
    TerminalTakenOverError,
    TerminalTimeoutError,
    UnsupportedDaemonError,
)
from ._files._grep import GrepResult
from ._session import AsyncSandboxSession
from ._sync import SandboxSession
from ._types import CommandResult, FileInfo, FileMatch, LinePage, TransferResult

__version__ = "0.3.0"

# The public face (issue 35): sessions, spec and connection, results, the error tree; at most 40
# names, held by tests/unit/test_public_api.py. The fleet (pools, keyed sandboxes, checkpoints,
# snapshots, the server's list) is `opensandbox_core.fleet`; what an adapter or a custom agent
# loop builds on is `opensandbox_core.adapters`.
__all__ = [
    # sessions, spec and connection
    "AsyncSandboxSession",
    "AuthenticationError",
    "BackgroundProcess",
    "CodeContext",
    "CodeContextBusyError",
    "CodeContextNotFoundError",
    "CodeError",
    "CodeInterpreterUnavailableError",
    "CodeResult",
    "CodeTimeoutError",
    # results and handles
    "CommandResult",
    "CommandTimeoutError",
    "ConfigurationError",
    "Connection",
    "EditError",
    "EgressRule",
    "Execution",
    "FileInfo",
    "FileMatch",
    "GrepResult",
    "InsecureSandboxWarning",
    "LinePage",
    "NetworkPolicy",
    "NotTextError",
    "OffloadedRun",
    # the error tree
    "OpenSandboxError",
    "OutputLimitError",
    "SandboxSession",
    "SandboxSpec",
    "SandboxUnavailableError",
    "ServerError",
    "TerminalBusyError",
    "TerminalClosedError",
    "TerminalError",
    "TerminalNotFoundError",
    "TerminalTakenOverError",
    "TerminalTimeoutError",
    "TransferResult",
    "UnsupportedDaemonError",
    "Volume",
    "__version__",
]
