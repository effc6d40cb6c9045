"""A scripted chat model for one deepagents-code turn without a model service.

deepagents-code builds it from a profile's `config.toml` (`class_path`). The first call asks for
one `execute` tool call (the command comes from `OSB_DCODE_COMMAND`); the next call, which sees
the tool's result, answers with that result after `scripted answer:`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

COMMAND_ENV = "OSB_DCODE_COMMAND"


class ScriptedModel(BaseChatModel):
    """Calls `execute` once with `$OSB_DCODE_COMMAND`, then answers with its output."""

    model: str = "scripted"
    profile: dict[str, Any] | None = Field(
        default_factory=lambda: {"tool_calling": True, "max_input_tokens": 200_000}
    )

    @property
    def _llm_type(self) -> str:
        return "opensandbox-agents-scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self  # type: ignore[return-value]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            message = AIMessage(content=f"scripted answer: {results[-1].content}")
        else:
            command = os.environ[COMMAND_ENV]
            message = AIMessage(
                content="",
                tool_calls=[{"name": "execute", "args": {"command": command}, "id": "call-1"}],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])
