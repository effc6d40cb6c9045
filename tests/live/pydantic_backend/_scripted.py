"""A scripted model for the live tests: each model request takes the next step of a script."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

Step = str | tuple[str, dict[str, object]]
"""Final text, or (tool name, arguments)."""


@dataclass
class Script:
    steps: Sequence[Step]
    tool_returns: list[str] = field(default_factory=list)
    _next: int = 0

    def _step(self, messages: list[ModelMessage]) -> Step:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if part.part_kind in ("tool-return", "retry-prompt"):
                    self.tool_returns.append(str(getattr(part, "content", "")))
        step = self.steps[self._next] if self._next < len(self.steps) else "done"
        self._next += 1
        return step

    def _response(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = self._step(messages)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        name, args = step
        return ModelResponse(
            parts=[ToolCallPart(name, json.dumps(args), tool_call_id=uuid.uuid4().hex)]
        )

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        step = self._step(messages)
        if isinstance(step, str):
            yield step
            return
        name, args = step
        yield {
            0: DeltaToolCall(name=name, json_args=json.dumps(args), tool_call_id=uuid.uuid4().hex)
        }

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self._response, stream_function=self._stream)


def script(*steps: Step) -> Script:
    return Script(list(steps))
