"""Code in a Jupyter kernel for a deep agent: `code_tools(backend)`, the core's `CodeTool` as a
LangChain `StructuredTool` (docs/deepagents.md#code-interpreter).

The tool's result is the core's text; when the run showed images, the `ToolMessage` content is a
list of LangChain's standard content blocks instead: the text block, then one image block per
image (`{"type": "image", "base64": ..., "mime_type": "image/png"}`), which the chat model
integrations send to the model as images. Verified on 2026-12-06 with deepagents 0.7.32 and
langchain-core 1.8.3 (`test_deepagents_code.py`).
"""

from __future__ import annotations

import base64
from typing import Any

from langchain_core.messages.content import create_image_block, create_text_block
from langchain_core.tools import BaseTool

from opensandbox_core import CodeContext, CodeInterpreterUnavailableError
from opensandbox_core.adapters import CodeTool, CodeToolResult

from ._scope import Backend, SandboxScope

__all__ = ["code_tools", "message_content"]


def message_content(result: CodeToolResult) -> str | list[Any]:
    """The tool message's content: the text, or the text and image content blocks."""
    if not result.images:
        return result.text
    blocks: list[Any] = [create_text_block(result.text)]
    for image in result.images:
        data = base64.b64encode(image.data).decode("ascii")
        blocks.append(create_image_block(base64=data, mime_type=image.mime_type))
    return blocks


class _Code(SandboxScope):
    """The `CodeTool` on the backend's sandbox, or on each LangGraph thread's sandbox."""

    def __init__(self, backend: Backend, tool: CodeTool) -> None:
        super().__init__(backend, "code")
        self._tool = tool

    async def call(self, scope: str, arguments: dict[str, Any]) -> str | list[Any]:
        session = await self.session(scope)
        try:
            result = await self._tool.call(session, arguments)
        except CodeInterpreterUnavailableError as exc:  # it says what the image needs
            raise ValueError(str(exc)) from exc
        return message_content(result)

    def tools(self) -> list[BaseTool]:
        tool = self._tool
        return [self.tool(tool.name, tool.description, tool.schema(), self.call)]


def code_tools(
    backend: Backend,
    *,
    language: str = "python",
    timeout: float = 120.0,
    max_output: int = 16 * 1024,
    context: CodeContext | str | None = None,
) -> list[BaseTool]:
    """A `run_code` tool that gives a deep agent a Jupyter kernel in the backend's sandbox.

    ```python
    backend = OpenSandboxBackend.create(image="opensandbox/code-interpreter:v1.1.0")
    agent = create_deep_agent(model=..., backend=backend, tools=code_tools(backend))
    ```

    The kernel keeps its state between calls (variables, imports); what the code prints, its
    last value and its traceback come back as text, the figures it shows as image content
    blocks of the tool message. The sandbox's image needs a Jupyter server, as the
    `opensandbox/code-interpreter` images have; otherwise the tool raises `ValueError`. With a
    `ThreadSandboxBackend` the tool runs in the current LangGraph thread's sandbox.

    `language`: the kernel's (`python`, `bash`, ...); `timeout`: seconds a run may take when
    the model gives none (past it the run is interrupted, the kernel keeps its state);
    `max_output`: characters of each output, traceback and value a result holds at most;
    `context`: a context (or its id) to run in instead of the tool's own (one per sandbox,
    starting in the backend's working directory).
    """
    tool = CodeTool(language=language, context=context, timeout=timeout, max_output=max_output)
    return _Code(backend, tool).tools()
