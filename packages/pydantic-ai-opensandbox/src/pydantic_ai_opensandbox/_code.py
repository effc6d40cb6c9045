"""`OpenSandboxCodeInterpreter`: opensandbox-core's `CodeTool` as a `run_code` tool on the run's
sandbox (the workspace's), code run in a Jupyter kernel there.

Name, description, argument schema and result text are the core's (the same in the Deep Agents
package). The images a run shows go back to the model as `BinaryContent` through `ToolReturn`:
the text is the tool's return value, the images its content. Verified on 2026-12-06 with
pydantic-ai-slim 2.62.0 and 2.78.0 (`test_pydantic_code.py`, `test_pydantic_code_tool.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import BinaryContent, ToolReturn
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT, RunContext, Tool
from pydantic_ai.toolsets import FunctionToolset

from opensandbox_core import (
    CodeContext,
    CodeInterpreterUnavailableError,
)
from opensandbox_core.adapters import CodeTool, CodeToolResult

from ._capability import OpenSandbox, workspace_sandbox
from ._translate import settings_checked

__all__ = ["OpenSandboxCodeInterpreter", "tool_return"]


def tool_return(result: CodeToolResult) -> str | ToolReturn:
    """What the tool returns: the text alone, or with the images as the model's content."""
    if not result.images:
        return result.text
    content: list[str | BinaryContent] = []
    for number, image in enumerate(result.images, 1):
        content.append(f"run_code image {number} ({image.mime_type}, {len(image.data):,} bytes):")
        content.append(BinaryContent(image.data, media_type=image.mime_type))
    return ToolReturn(return_value=result.text, content=content)


@dataclass(kw_only=True)
class OpenSandboxCodeInterpreter(AbstractCapability[AgentDepsT]):
    """A `run_code` tool: code run in a Jupyter kernel of the run's OpenSandbox sandbox, whose
    state carries over between calls; what it prints, its last value and its traceback come back
    as text, the figures it shows as images.

    ```python
    agent = Agent(
        model,
        capabilities=[OpenSandbox(image='opensandbox/code-interpreter:v1.1.0'), OpenSandboxCodeInterpreter()],
    )
    ```

    The run's workspace must be an OpenSandbox sandbox (from `OpenSandbox`, or an
    `OpenSandboxBackend` given as `workspace=`) whose image has a Jupyter server, as the
    `opensandbox/code-interpreter` images do; otherwise the tool raises `UserError`. The kernel
    starts in the workspace's working directory. It is this capability's own, one per sandbox,
    kept across runs on that sandbox (the same capability object).
    """

    language: str = "python"
    """The kernel's language: `'python'`, `'bash'`, or another the image has a kernel for."""

    timeout: float = 120.0
    """Seconds a run may take when the model gives no `timeout`; past it the run is interrupted
    and the kernel keeps its state. At most 3600."""

    max_output: int = 16 * 1024
    """Characters of each output, traceback and value one result holds at most."""

    context: CodeContext | str | None = None
    """A context (or its id) to run in instead of the capability's own: one the application
    made with `session.code.create_context()`, to share its state with the model."""

    _tool: CodeTool = field(init=False, repr=False)
    _toolset: FunctionToolset[AgentDepsT] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        with settings_checked():
            self._tool = CodeTool(
                language=self.language,
                context=self.context,
                timeout=self.timeout,
                max_output=self.max_output,
            )

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(wrapped_by=[OpenSandbox])  # done before it closes the session

    def get_toolset(self) -> FunctionToolset[AgentDepsT]:
        if self._toolset is None:
            tool = self._tool
            run = Tool.from_schema(
                self._run, tool.name, tool.description, tool.schema(), takes_ctx=True
            )
            self._toolset = FunctionToolset([run], id="opensandbox_code")
        return self._toolset

    async def _run(self, ctx: RunContext[AgentDepsT], **arguments: Any) -> str | ToolReturn:
        async with workspace_sandbox(ctx, "OpenSandboxCodeInterpreter") as backend:
            try:
                result = await self._tool.call(backend.session, arguments)
            except CodeInterpreterUnavailableError as exc:  # it says what the image needs
                raise UserError(str(exc)) from exc
        return tool_return(result)
