"""A scripted chat client: it answers with the replies it was given, in order, and never calls a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_framework import BaseChatClient, ChatResponse, FunctionInvocationLayer, Message


class ScriptedChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Answers each model call with the next of ``replies``; runs the tools those replies call.

    ``seen`` holds, per model call, the messages the agent sent (the history it loaded, then the
    run's input and what the run produced so far), as ``to_dict()`` forms.
    """

    def __init__(self, replies: Sequence[Message]) -> None:
        super().__init__()
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    async def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> ChatResponse[Any]:
        if stream:
            raise NotImplementedError("the scripted client answers without streaming")
        self.seen.append([message.to_dict() for message in messages])
        return ChatResponse(messages=[self.replies.pop(0)])
