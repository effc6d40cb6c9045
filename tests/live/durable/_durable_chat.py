"""A scripted LangChain chat model for the durable tests: the next step follows from the history.

A fresh process resuming a thread rebuilds the model, so the script cannot be an iterator: the
step is chosen by counting the tool results since the last human message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

Step = str | tuple[str, dict[str, Any]]


def tool_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool results since the last human message."""
    out: list[ToolMessage] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            out = []
        elif isinstance(message, ToolMessage):
            out.append(message)
    return out


class HistoryScriptedModel(BaseChatModel):
    """Answers with `steps[n]`, n being the number of tool results so far in this turn.

    With `scripts`, a turn whose human message is one of its keys follows that script instead.
    """

    steps: list[Step]
    before_step: Callable[[int], None] | None = None
    scripts: dict[str, list[Step]] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "history-scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        n = len(tool_results(messages))
        if self.before_step is not None:
            self.before_step(n)
        prompts = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
        steps = self.scripts.get(prompts[-1], self.steps) if prompts else self.steps
        step = steps[n] if n < len(steps) else "done"
        if isinstance(step, str):
            message = AIMessage(content=step)
        else:
            name, args = step
            message = AIMessage(
                content="", tool_calls=[{"name": name, "args": args, "id": f"call_{n}"}]
            )
        return ChatResult(generations=[ChatGeneration(message=message)])
