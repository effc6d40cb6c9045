"""Building blocks for a framework adapter, framework-neutral (no I/O unless awaited).

Keyword tables and signatures (`SessionKeywords`, `takes_keywords`, `takes_keywords_after_id`),
blocking twins of an adapter's own async methods on the core's portal loop (`twin` with
`on_self=True`), an agent's terminal tools per scope (`ScopedTerminalTools`), the `run_code`
tool both packages give a model (`CodeTool`, its `CodeToolResult` of text and `CodeImage`s;
docs/core.md, "Code as an agent's tool"), and provisioning from the environment or a snapshot
(`IMAGE_ENV`, `image_from_env`, `split_snapshot`, `restore_spec`, `CreatedSandboxes`). What a
framework's tools promise beyond the core (its texts, error codes, exit codes, glob dialect,
listing order) is the adapter's own translation, built on the session's facets. Listed in
`docs/core.md#building-an-adapter`; the names stay the same within a minor version.
"""

from ._agent._keywords import SessionKeywords
from ._agent._provision import IMAGE_ENV, CreatedSandboxes, image_from_env, restore_spec
from ._code_tools._render import CodeImage, CodeToolResult
from ._code_tools._tool import CodeTool
from ._keywords import takes_keywords, takes_keywords_after_id
from ._sync import twin
from ._terminal_tools._scoped import ScopedTerminalTools
from ._validate._calls import split_snapshot

__all__ = [
    "IMAGE_ENV",
    "CodeImage",
    "CodeTool",
    "CodeToolResult",
    "CreatedSandboxes",
    "ScopedTerminalTools",
    "SessionKeywords",
    "image_from_env",
    "restore_spec",
    "split_snapshot",
    "takes_keywords",
    "takes_keywords_after_id",
    "twin",
]
