"""Building blocks for a framework adapter, framework-neutral (no I/O unless awaited).

Keyword tables and signatures (`SessionKeywords`, `takes_keywords`, `takes_keywords_after_id`),
blocking twins of an adapter's own async methods on the core's portal loop (`twin` with
`on_self=True`), an agent's terminal tools per scope (`ScopedTerminalTools`), the `run_code`
tool both packages give a model (`CodeTool`, its `CodeToolResult` of text and `CodeImage`s;
docs/core.md, "Code as an agent's tool"), and provisioning from the environment or a snapshot
(`IMAGE_ENV`, `image_from_env`, `split_snapshot`, `restore_spec`, `CreatedSandboxes`); and what
a backend or a custom agent loop builds its lifecycle and tools on: a spec from keywords
(`SpecField`, `keyword_defaults`, `spec_from_keywords`, `default_entrypoint`), a guarded create
(`CreateGuard`, `discard_sandbox`), operations that share a session (`OperationScope`,
`running_on_asyncio`), the blocking portal (`run_blocking`), terminals as an agent's tools
(`TerminalTools`, `TerminalToolSpec`), directory uploads' options and result (`UploadOptions`,
`DirectoryUpload`, `SECRET_PATTERNS`) and decoding output bytes (`decode_output`). What a
framework's tools promise beyond the core (its texts, error codes, exit codes, glob dialect,
listing order) is the adapter's own translation, built on the session's facets. Listed in
`docs/core.md#building-an-adapter`; the names stay the same within a minor version.
"""

from ._agent._keywords import SessionKeywords
from ._agent._provision import IMAGE_ENV, CreatedSandboxes, image_from_env, restore_spec
from ._code_tools._render import CodeToolResult
from ._code_tools._tool import CodeTool
from ._files._upload import SECRET_PATTERNS, DirectoryUpload, UploadOptions
from ._images import default_entrypoint
from ._keywords import (
    SpecField,
    keyword_defaults,
    spec_from_keywords,
    takes_keywords,
    takes_keywords_after_id,
)
from ._lifecycle._guard import CreateGuard, discard_sandbox
from ._lifecycle._operations import OperationScope, running_on_asyncio
from ._portal import run_blocking
from ._sync import twin
from ._terminal_tools._scoped import ScopedTerminalTools
from ._terminal_tools._specs import TerminalToolSpec
from ._terminal_tools._toolkit import TerminalTools
from ._validate._calls import split_snapshot
from ._wire._framing import decode_output

__all__ = [
    "IMAGE_ENV",
    "SECRET_PATTERNS",
    "CodeTool",
    "CodeToolResult",
    "CreateGuard",
    "CreatedSandboxes",
    "DirectoryUpload",
    "OperationScope",
    "ScopedTerminalTools",
    "SessionKeywords",
    "SpecField",
    "TerminalToolSpec",
    "TerminalTools",
    "UploadOptions",
    "decode_output",
    "default_entrypoint",
    "discard_sandbox",
    "image_from_env",
    "keyword_defaults",
    "restore_spec",
    "run_blocking",
    "running_on_asyncio",
    "spec_from_keywords",
    "split_snapshot",
    "takes_keywords",
    "takes_keywords_after_id",
    "twin",
]
