"""pydantic-ai-opensandbox: a sandbox on your own OpenSandbox server as a Pydantic AI workspace.

`OpenSandbox` is the capability to give an agent; `OpenSandboxBackend` is the workspace backend, for
applications that create or attach to a sandbox themselves and pass it to a run as `workspace=`;
`OpenSandboxTerminal` gives the model interactive terminals; `OpenSandboxCodeInterpreter` a
`run_code` tool (a Jupyter kernel in the sandbox, figures back as images). The README is the guide.

Verified on 2026-11-29 with pydantic-ai-slim 2.62.0, pydantic-ai-harness 0.62.0 and
opensandbox-server 1.1.1.
"""

from ._backend import CREATE_METADATA_KEY, OpenSandboxBackend
from ._capability import OpenSandbox
from ._code import OpenSandboxCodeInterpreter
from ._terminal import OpenSandboxTerminal

__version__ = "0.3.0"

__all__ = [
    "CREATE_METADATA_KEY",
    "OpenSandbox",
    "OpenSandboxBackend",
    "OpenSandboxCodeInterpreter",
    "OpenSandboxTerminal",
    "__version__",
]
