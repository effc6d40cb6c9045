"""Building blocks for a framework adapter, framework-neutral (no I/O unless awaited).

The `run_code` tool both packages give a model (`CodeTool`, its `CodeToolResult` of text and
`CodeImage`s; docs/core.md, "Code as an agent's tool").

Keyword tables and signatures (`SessionKeywords`, `takes_keywords`), a backend's lifecycle (`SessionHandle`), a command's output shaped for an agent
(`run_for_agent`, `combined_output`, `PreviewLayout` for an output left in the sandbox), the commands and parsers
behind `DirectoryLister` (`ls_argv`, `FIND_LISTING`, ...), batch transfers with per-file codes (`upload_checked`,
`download_checked`, `transfer_code`), a file glob with the caller's matcher (`match_files`), a grep that reads files as
Python does (`grep_universal`), and
provisioning from the environment or a snapshot (`image_from_env`, `restore_spec`). Listed in
`docs/core.md#building-an-adapter`; the names stay the same within a minor version.
"""

from ._agent._editing import FILE_ERRORS
from ._agent._glob import ROOT_ERRORS, FileMatches, match_files
from ._agent._grep import grep_universal, python_glob, universal_lines
from ._agent._handle import SessionHandle
from ._agent._keywords import SessionKeywords
from ._agent._listing import (
    C_LOCALE,
    FIND_LISTING,
    PATH_ERRORS,
    ls_argv,
    parse_find_listing,
    parse_ls,
    path_error,
    unescape_name,
)
from ._agent._output import PreviewLayout, combined_output, head_lines, tail_lines
from ._agent._paths import TRANSFER_ERRNOS, execd_editable, is_utf8, sendable_path
from ._agent._provision import (
    IMAGE_ENV,
    CreatedSandboxes,
    find_snapshot,
    image_from_env,
    restore_spec,
)
from ._agent._run import (
    TIMEOUT_EXIT_CODE,
    AgentOutput,
    OffloadView,
    offload_for_agent,
    offload_timed_out,
    offload_view,
    run_for_agent,
    timed_out_output,
)
from ._agent._transfers import (
    TRANSFER_CODES,
    CheckedTransfer,
    TransferCode,
    download_checked,
    transfer_code,
    upload_checked,
)
from ._code_tools._render import CodeImage, CodeToolResult
from ._code_tools._tool import CodeTool
from ._keywords import takes_keywords, takes_keywords_after_id
from ._terminal_tools._scoped import ScopedTerminalTools
from ._validate._calls import split_snapshot

__all__ = [
    "C_LOCALE",
    "FILE_ERRORS",
    "FIND_LISTING",
    "IMAGE_ENV",
    "PATH_ERRORS",
    "ROOT_ERRORS",
    "TIMEOUT_EXIT_CODE",
    "TRANSFER_CODES",
    "TRANSFER_ERRNOS",
    "AgentOutput",
    "CheckedTransfer",
    "CodeImage",
    "CodeTool",
    "CodeToolResult",
    "CreatedSandboxes",
    "FileMatches",
    "OffloadView",
    "PreviewLayout",
    "ScopedTerminalTools",
    "SessionHandle",
    "SessionKeywords",
    "TransferCode",
    "combined_output",
    "download_checked",
    "execd_editable",
    "find_snapshot",
    "grep_universal",
    "head_lines",
    "image_from_env",
    "is_utf8",
    "ls_argv",
    "match_files",
    "offload_for_agent",
    "offload_timed_out",
    "offload_view",
    "parse_find_listing",
    "parse_ls",
    "path_error",
    "python_glob",
    "restore_spec",
    "run_for_agent",
    "sendable_path",
    "split_snapshot",
    "tail_lines",
    "takes_keywords",
    "takes_keywords_after_id",
    "timed_out_output",
    "transfer_code",
    "unescape_name",
    "universal_lines",
    "upload_checked",
]
