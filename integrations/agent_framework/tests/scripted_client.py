"""A scripted chat client: it answers with the replies it was given, in order, and never calls a model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

from agent_framework import (
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
)


class ScriptedChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Answers each model call with the next of ``replies``; runs the tools those replies call.

    A streamed run gets each reply as one update per content.

    ``seen`` holds, per model call, the messages the agent sent (the history it loaded, then the
    run's input and what the run produced so far), as ``to_dict()`` forms.
    """

    def __init__(self, replies: Sequence[Message]) -> None:
        super().__init__()
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any
    ) -> Awaitable[ChatResponse[Any]] | ResponseStream[ChatResponseUpdate, ChatResponse[Any]]:
        self.seen.append([message.to_dict() for message in messages])
        reply = self.replies.pop(0)
        if stream:

            async def updates() -> AsyncIterator[ChatResponseUpdate]:
                for content in reply.contents:  # one update per content, as a model streams them
                    yield ChatResponseUpdate(
                        role="assistant", contents=[content], author_name=reply.author_name
                    )

            return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

        async def response() -> ChatResponse[Any]:
            return ChatResponse(messages=[reply])

        return response()
