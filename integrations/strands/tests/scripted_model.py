"""A scripted Strands model: it streams the replies it was given, in order, and never calls a model."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Message, Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

Output = TypeVar("Output", bound=BaseModel)


class ScriptedModel(Model):
    """Answers each model call with the next of ``replies`` (assistant messages of text and tool uses).

    ``seen`` holds, per call, the messages the agent sent (copies).
    """

    def __init__(self, replies: Sequence[Message]) -> None:
        self.replies = list(replies)
        self.seen: list[Messages] = []

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> Any:
        return {}

    def structured_output(
        self, output_model: type[Output], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Output | Any], None]:
        raise NotImplementedError("the scripted model answers with its script only")

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        self.seen.append(json.loads(json.dumps(messages, default=str)))
        reply = self.replies.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        uses_tool = False
        for block in reply["content"]:
            if "toolUse" in block:
                uses_tool = True
                use = block["toolUse"]
                yield {
                    "contentBlockStart": {
                        "start": {"toolUse": {"name": use["name"], "toolUseId": use["toolUseId"]}}
                    }
                }
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(use["input"])}}}}
            elif "reasoningContent" in block:
                text = block["reasoningContent"]["reasoningText"]["text"]
                yield {"contentBlockDelta": {"delta": {"reasoningContent": {"text": text}}}}
            else:
                yield {"contentBlockDelta": {"delta": {"text": block["text"]}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if uses_tool else "end_turn"}}
