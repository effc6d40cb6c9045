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
    CodeInterpreter,
    CodeInterpreterUnavailableError,
    CodeResult,
    CodeTimeoutError,
    Execution,
)
from ._commands._background import BackgroundProcess, OutputChunk, ProcessStatus
from ._commands._facet import Commands
from ._commands._offload import OffloadedRun
from ._commands._run import OutputCallback
from ._config import Connection, SandboxSpec
from ._create import EgressRule, NetworkPolicy, Volume
from ._defaults import DEFAULT
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
from ._files._facet import Files
from ._files._grep import GrepMatch, GrepResult
from ._files._upload import SECRET_PATTERNS, DirectoryUpload, UploadOptions
from ._fleet._admin import SandboxSummary, destroy_sandbox, list_sandboxes, remove_sandboxes
from ._fleet._checkpoints import COPY_OF_METADATA_KEY, CheckpointFiles, FilesVersion
from ._fleet._keyed import KEY_METADATA_KEY, NAMESPACE_METADATA_KEY, KeyedSandboxes
from ._fleet._pool import SandboxPool
from ._fleet._snapshots import (
    SnapshotRef,
    SnapshotsUnsupportedError,
    delete_snapshot,
    get_snapshot,
    list_snapshots,
    restore_snapshot,
    snapshot_sandbox,
)
from ._images import default_entrypoint
from ._keywords import SpecField, keyword_defaults, spec_from_keywords
from ._lifecycle._guard import CANCEL_CLEANUP_WAIT, CreateGuard, discard_sandbox, run_to_completion
from ._lifecycle._operations import OperationScope, running_on_asyncio
from ._metadata import LIBRARY_KEY, OWNER_KEY
from ._session import AsyncSandboxSession
from ._sync import (
    BlockingBackgroundProcess,
    BlockingCode,
    BlockingCommands,
    BlockingFiles,
    BlockingTerminal,
    BlockingTerminals,
    SandboxSession,
    run_blocking,
)
from ._terminal._facet import OpeningTerminal, Terminals
from ._terminal._handle import Terminal
from ._terminal_tools._keys import keystrokes
from ._terminal_tools._specs import TerminalToolSpec
from ._terminal_tools._toolkit import TerminalTools
from ._types import BytesResult, CommandResult, FileInfo, FileMatch, LinePage, TransferResult
from ._wire._framing import Framing, decode_output

__version__ = "0.3.0"

__all__ = [
    "CANCEL_CLEANUP_WAIT",
    "COPY_OF_METADATA_KEY",
    "DEFAULT",
    "KEY_METADATA_KEY",
    "LIBRARY_KEY",
    "NAMESPACE_METADATA_KEY",
    "OWNER_KEY",
    "SECRET_PATTERNS",
    "AsyncSandboxSession",
    "AuthenticationError",
    "BackgroundProcess",
    "BlockingBackgroundProcess",
    "BlockingCode",
    "BlockingCommands",
    "BlockingFiles",
    "BlockingTerminal",
    "BlockingTerminals",
    "BytesResult",
    "CheckpointFiles",
    "CodeContext",
    "CodeContextBusyError",
    "CodeContextNotFoundError",
    "CodeError",
    "CodeInterpreter",
    "CodeInterpreterUnavailableError",
    "CodeResult",
    "CodeTimeoutError",
    "CommandResult",
    "CommandTimeoutError",
    "Commands",
    "ConfigurationError",
    "Connection",
    "CreateGuard",
    "DirectoryUpload",
    "EditError",
    "EgressRule",
    "Execution",
    "FileInfo",
    "FileMatch",
    "Files",
    "FilesVersion",
    "Framing",
    "GrepMatch",
    "GrepResult",
    "InsecureSandboxWarning",
    "KeyedSandboxes",
    "LinePage",
    "NetworkPolicy",
    "NotTextError",
    "OffloadedRun",
    "OpenSandboxError",
    "OpeningTerminal",
    "OperationScope",
    "OutputCallback",
    "OutputChunk",
    "OutputLimitError",
    "ProcessStatus",
    "SandboxPool",
    "SandboxSession",
    "SandboxSpec",
    "SandboxSummary",
    "SandboxUnavailableError",
    "ServerError",
    "SnapshotRef",
    "SnapshotsUnsupportedError",
    "SpecField",
    "Terminal",
    "TerminalBusyError",
    "TerminalClosedError",
    "TerminalError",
    "TerminalNotFoundError",
    "TerminalTakenOverError",
    "TerminalTimeoutError",
    "TerminalToolSpec",
    "TerminalTools",
    "Terminals",
    "TransferResult",
    "UnsupportedDaemonError",
    "UploadOptions",
    "Volume",
    "__version__",
    "decode_output",
    "default_entrypoint",
    "delete_snapshot",
    "destroy_sandbox",
    "discard_sandbox",
    "get_snapshot",
    "keystrokes",
    "keyword_defaults",
    "list_sandboxes",
    "list_snapshots",
    "remove_sandboxes",
    "restore_snapshot",
    "run_blocking",
    "run_to_completion",
    "running_on_asyncio",
    "snapshot_sandbox",
    "spec_from_keywords",
]
