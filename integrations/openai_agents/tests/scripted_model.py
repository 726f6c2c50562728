"""A model that answers from a script, so that ``Runner.run`` needs no network and no API key."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelResponse, TResponseInputItem, Usage
from agents.items import TResponseOutputItem, TResponseStreamEvent
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary


def say(text: str, message_id: str = "msg_1") -> ResponseOutputMessage:
    """The assistant's final message ``text``."""
    return ResponseOutputMessage(
        id=message_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def think(text: str) -> ResponseReasoningItem:
    """A reasoning item summarised as ``text``."""
    return ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text=text)]
    )


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    """A call of the function tool ``name``."""
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
    )


class ScriptedModel(Model):
    """Answers each model call with the next list of output items; keeps every input it was given."""

    def __init__(self, script: list[list[TResponseOutputItem]]) -> None:
        self.script = list(script)
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.inputs.append([{"role": "user", "content": input}] if isinstance(input, str) else list(input))
        if not self.script:
            raise AssertionError("the model was called more often than the script says")
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model does not stream")
        yield  # pragma: no cover - makes this an async generator, as the interface is
