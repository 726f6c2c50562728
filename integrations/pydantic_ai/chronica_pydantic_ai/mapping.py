"""How a pydantic-ai message becomes an actum and back, and where a context window may start.

Every ``ModelMessage`` (a ``ModelRequest`` or a ``ModelResponse``, with all its parts) is **one
actum**. Its content is the message's JSON as pydantic-ai's own ``ModelMessagesTypeAdapter``
writes it, so reading it back through the same adapter gives what the adapter itself would give:
every part, timestamp, usage figure, run id and provider detail included. Its kind, actor kind and
actor say who did what, for other agents that read the chronicum with filters:

- a request holding a tool's result (a ``ToolReturnPart``, or a ``RetryPromptPart`` naming a
  tool): a **tool response** by the agent's actor (the agent's runtime ran the tool);
- any other request holding a ``UserPromptPart``: a **human message** by the human actor (the
  system prompt sent with it stays in the content);
- any other request (system prompts or instructions only, a retry prompt for the output, an
  empty request): a **system message** by :data:`SYSTEM_ACTOR`;
- a response holding a ``ToolCallPart`` (a call the agent's runtime must answer): a **tool
  request** by the agent's actor, its text parts, if any, being the model's commentary;
- any other response holding a ``TextPart``: an **agent message** by the agent's actor (calls of
  the provider's built-in tools, answered inside the response, do not make it a tool request);
- any other response holding a ``ThinkingPart``: a **thought** by the agent's actor;
- any other response (files only, a compaction, no parts): an **agent message**.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import PydanticSerializationError

from chronica_core import ActorKind, Actum, ActumKind, InvalidActum

__all__ = [
    "SYSTEM_ACTOR",
    "answers_a_call",
    "message_actum",
    "message_kind",
    "message_of_actum",
    "message_of_content",
    "window",
]

SYSTEM_ACTOR: Final = "system"
"""The actor of requests that carry no user prompt and no tool result (system prompts, retries)."""


def answers_a_call(message: ModelMessage) -> bool:
    """Whether ``message`` is a request holding a tool's result, which answers a call before it.

    A tool's result is a ``ToolReturnPart`` (which pydantic-ai also uses for a tool call it asks
    the model to retry), or a ``RetryPromptPart`` naming a tool (older histories, hand-built ones).
    """
    if not isinstance(message, ModelRequest):
        return False
    return any(
        isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)
        for part in message.parts
    )


def message_kind(message: ModelMessage, actor: str, human_actor: str) -> tuple[ActumKind, ActorKind, str]:
    """Return ``(kind, actor kind, actor)`` for ``message`` by the rules in this module's docstring."""
    if isinstance(message, ModelRequest):
        if answers_a_call(message):
            return ActumKind.TOOL_RESPONSE, ActorKind.AGENT, actor
        if any(isinstance(part, UserPromptPart) for part in message.parts):
            return ActumKind.MESSAGE, ActorKind.HUMAN, human_actor
        return ActumKind.MESSAGE, ActorKind.SYSTEM, SYSTEM_ACTOR
    if any(isinstance(part, ToolCallPart) for part in message.parts):
        return ActumKind.TOOL_REQUEST, ActorKind.AGENT, actor
    if any(isinstance(part, TextPart) for part in message.parts):
        return ActumKind.MESSAGE, ActorKind.AGENT, actor
    if any(isinstance(part, ThinkingPart) for part in message.parts):
        return ActumKind.THOUGHT, ActorKind.AGENT, actor
    return ActumKind.MESSAGE, ActorKind.AGENT, actor


def message_content(message: ModelMessage, index: int) -> str:
    """Return ``message`` as ``ModelMessagesTypeAdapter`` writes it: one JSON object, as text.

    Raises:
        InvalidActum: (``field="content"``, ``index``) ``message`` is not a ``ModelRequest`` or
            ``ModelResponse``, or pydantic-ai cannot write it as JSON (text holding a lone
            surrogate, which UTF-8 cannot encode, or a value of a type it cannot serialize).
    """
    if not isinstance(message, (ModelRequest, ModelResponse)):
        raise InvalidActum(
            "content", f"must be a ModelRequest or ModelResponse, not {type(message).__name__}", index=index
        )
    try:
        written = ModelMessagesTypeAdapter.dump_json([message])
    except PydanticSerializationError as error:
        raise InvalidActum(
            "content", f"pydantic-ai cannot write this {message.kind} as JSON: {error}", index=index
        ) from error
    return written[1:-1].decode("utf-8")  # the list's one object, without its brackets


def message_actum(
    chronicum_id: str, message: ModelMessage, actor: str, human_actor: str, *, index: int = 0
) -> Actum:
    """Return the actum that records ``message`` in ``chronicum_id`` (see the module docstring).

    Args:
        chronicum_id: the chronicum the actum goes into.
        message: a ``ModelRequest`` or ``ModelResponse``.
        actor: the agent's actor id.
        human_actor: the actor of user prompts.
        index: the message's position in the batch it belongs to, for the error.

    Raises:
        InvalidActum: as :func:`message_content` says.
    """
    content = message_content(message, index)
    kind, actor_kind, writer = message_kind(message, actor, human_actor)
    return Actum(chronicum_id, kind, actor_kind, writer, content)


def message_of_content(content: str) -> ModelMessage | None:
    """Return the message ``content`` holds, or ``None`` when it is not a pydantic-ai message.

    An actum another writer recorded (a person's message through the CLI, another framework's
    item) holds no pydantic-ai message; such acta are not part of the history.
    """
    if not content.startswith("{"):
        return None
    try:
        messages = ModelMessagesTypeAdapter.validate_json(f"[{content}]")
    except ValidationError:
        return None
    return messages[0] if len(messages) == 1 else None


def message_of_actum(actum: Actum) -> ModelMessage | None:
    """Return the message an actum recorded, or ``None`` when it holds no pydantic-ai message."""
    return message_of_content(actum.content)


def window(messages: Sequence[ModelMessage], last_n: int | None, *, whole: bool = True) -> list[ModelMessage]:
    """Return the context window of ``messages`` (oldest first) that ``last_n`` asks for.

    Args:
        messages: the newest messages of a conversation, oldest first.
        last_n: how many of the newest messages to keep; ``None``, ``0`` or less keeps every one.
        whole: whether ``messages`` is the conversation from its start; when ``False``, its first
            message may answer a call that came before it.

    Returns:
        The newest ``last_n`` messages, less any leading request holding a tool's result (see
        :func:`answers_a_call`) whose call lies before the window: a result whose call was cut
        off is what providers reject. Such a request is left out whole, and so is the next one
        if it answers a call too, so the window starts with a user prompt, a system prompt or a
        model response. A window therefore holds at most ``last_n`` messages, fewer when the cut
        fell between a call and its result.

    The end is never cut: a tool call in the window has its result in the window whenever the
    stored history has it. Only a history whose last run stopped at calls nobody answered yet
    (deferred tools, a run cut short) ends with them, exactly as pydantic-ai left it.
    """
    if last_n is None or last_n <= 0:
        return list(messages)
    kept = list(messages[-last_n:])
    if whole and len(kept) == len(messages):
        return kept  # nothing was cut off
    while kept and answers_a_call(kept[0]):
        del kept[0]
    return kept
