"""What a framework adapter or a custom agent loop builds on, framework-neutral (no I/O unless
awaited). Listed in `docs/core.md#building-an-adapter`; the names stay the same within a minor
version.

- A new sandbox from an adapter's keywords: `spec_from_keywords` (one table of keyword -> spec
  field, the caller's keywords checked against `spec=`), and `default_entrypoint` (the container
  command a spec without one gets).
- A backend's lifecycle: `OperationScope` (a create that no failure or cancellation leaves half
  done, operations counted, clients closed after the last, a failed run's sandbox discarded).
- Blocking code on the core's portal loop: `run_blocking`, and `twin` for an adapter's own async
  methods (`on_self=True`).
- Agent tools: terminals (`TerminalTools`, their `TerminalToolSpec`s, and `ScopedTerminalTools`,
  the tools of each scope), and the `run_code` tool (`CodeTool`, its `CodeToolResult` of text
  and images; docs/core.md, "Code as an agent's tool").
- The types of `session.files.upload_dir` (`UploadOptions`, `DirectoryUpload`), and
  `decode_output` (bytes of command output decoded as execd's events carry them).

What a framework's tools promise beyond the core (its texts, error codes, exit codes, glob
dialect, listing order, its keyword signatures and provisioning) is the adapter's own
translation, built on the session's facets.
"""

from ._code_tools._render import CodeToolResult
from ._code_tools._tool import CodeTool
from ._files._upload import DirectoryUpload, UploadOptions
from ._images import default_entrypoint
from ._keywords import spec_from_keywords
from ._lifecycle._operations import OperationScope
from ._portal import run_blocking
from ._sync import twin
from ._terminal_tools._scoped import ScopedTerminalTools
from ._terminal_tools._specs import TerminalToolSpec
from ._terminal_tools._toolkit import TerminalTools
from ._wire._framing import decode_output

__all__ = [
    "CodeTool",
    "CodeToolResult",
    "DirectoryUpload",
    "OperationScope",
    "ScopedTerminalTools",
    "TerminalToolSpec",
    "TerminalTools",
    "UploadOptions",
    "decode_output",
    "default_entrypoint",
    "run_blocking",
    "spec_from_keywords",
    "twin",
]
