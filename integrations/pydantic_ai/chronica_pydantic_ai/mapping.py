"""How a pydantic-ai message becomes an actum and back, and where a context window may start.

Every ``ModelMessage`` (a ``ModelRequest`` or a ``ModelResponse``, with all its parts) is **one
actum**. The message's JSON, as pydantic-ai's own ``ModelMessagesTypeAdapter`` writes it, is kept
(as its native form, see below), so reading it back through the same adapter gives what the
adapter itself would give: every part, timestamp, usage figure, run id and provider detail
included. Its kind, actor kind and actor say who did what, for other agents that read the
chronicum with filters:

- a request holding a tool's result (a ``ToolReturnPart``, or a ``RetryPromptPart`` naming a
  tool): a **tool response** by the agent's actor (the agent's runtime ran the tool);
- any other request holding a ``UserPromptPart``: a **human message** by the human actor (the
  system prompt sent with it stays in the native form, out of the readable content);
- any other request (system prompts or instructions only, a retry prompt for the output, an
  empty request): a **system message** by :data:`SYSTEM_ACTOR`;
- a response holding a ``ToolCallPart`` (a call the agent's runtime must answer): a **tool
  request** by the agent's actor, its text parts, if any, being the model's commentary;
- any other response holding a ``TextPart``: an **agent message** by the agent's actor (calls of
  the provider's built-in tools, answered inside the response, do not make it a tool request);
- any other response holding a ``ThinkingPart``: a **thought** by the agent's actor;
- any other response (files only, a compaction, no parts): an **agent message**.

**Content and native form.** On a store with the ``native`` capability, an actum's ``content`` is
the message's readable text (:func:`message_text`) and its ``native`` form (format
:data:`NATIVE_FORMAT`) is the message's JSON, which :func:`message_of_actum` reads back. On a
store without it, the content is the message's JSON, as before there was a native form.

**Reading** (:func:`message_of_actum`). An actum with this package's native form, or written before
there was one (no native form, its content a pydantic-ai message's JSON), gives back its message
exactly, unless another agent (another actor) wrote it: its responses and tool traffic are not the
reader's model's, so they are read as any other agent's. Anyone else's actum (a person through the
CLI, a plain agent, another framework) becomes a request from its readable content
(:mod:`chronica_core.readable`): a person's message a ``UserPromptPart``; a system message a
``SystemPromptPart``; another agent's message a ``UserPromptPart`` whose text names it
(``"booking said: ..."``), since pydantic-ai has no author field; other writers' thoughts and tool
exchanges are left out unless :class:`ForeignActa` asks for them, and then read as attributed user
prompts too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import PydanticSerializationError

from chronica_core import ActorKind, Actum, ActumKind, InvalidActum
from chronica_core.model import Native
from chronica_core.readable import (
    ForeignActa,
    another_agents,
    answering_in_batch,
    attributed,
    is_native,
    shown,
)

__all__ = [
    "NATIVE_FORMAT",
    "RECORD_FORMAT",
    "SYSTEM_ACTOR",
    "answers_a_call",
    "linked",
    "message_actum",
    "message_kind",
    "message_of_actum",
    "message_of_content",
    "message_text",
    "window",
]

NATIVE_FORMAT: Final = "pydantic-ai.message"
"""The format of this package's native form: the message's JSON as ``ModelMessagesTypeAdapter`` writes it."""

RECORD_FORMAT: Final = "pydantic-ai.conversation"
"""The native format of a ``ChronicaConversationStore`` record: bookkeeping, never part of a history."""

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
    chronicum_id: str,
    message: ModelMessage,
    actor: str,
    human_actor: str,
    *,
    index: int = 0,
    native: bool = True,
) -> Actum:
    """Return the actum that records ``message`` in ``chronicum_id`` (see the module docstring).

    Args:
        chronicum_id: the chronicum the actum goes into.
        message: a ``ModelRequest`` or ``ModelResponse``.
        actor: the agent's actor id.
        human_actor: the actor of user prompts.
        index: the message's position in the batch it belongs to, for the error.
        native: ``True``: readable content (:func:`message_text`) and the message's JSON as the
            native form (for a store with the ``native`` capability); ``False``: the message's
            JSON as the content, no native form.

    Raises:
        InvalidActum: as :func:`message_content` says.
    """
    written = message_content(message, index)
    kind, actor_kind, writer = message_kind(message, actor, human_actor)
    if not native:
        return Actum(chronicum_id, kind, actor_kind, writer, written)
    readable = message_text(message)
    return Actum(chronicum_id, kind, actor_kind, writer, readable, native=Native(NATIVE_FORMAT, written))


def linked(messages: Sequence[ModelMessage], acta: Sequence[Actum]) -> list[Actum]:
    """Return ``acta`` (one per message of one batch) with each tool result naming its call.

    A request holding tool results (:func:`answers_a_call`) whose calls a response earlier in the
    batch made gets ``answers`` set to that response's actum, which gets an id of the batch's own
    (``"call-<index>"``; Chronicarius gives both their stored ids). Then a Chronica window that
    holds a result holds its call too (``get_acta(tool_exchanges="whole")``). Results answering
    calls of an earlier batch are left as they are. For stores with the ``history`` capability.
    """
    calls: dict[str, int] = {}  # tool call id -> index of the response that made it
    answering: dict[int, int] = {}  # index of a request -> index of the response it answers
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            calls.update((p.tool_call_id, index) for p in message.parts if isinstance(p, ToolCallPart))
        elif answers_a_call(message):
            answered = [
                calls[p.tool_call_id]
                for p in message.parts
                if isinstance(p, (ToolReturnPart, RetryPromptPart)) and p.tool_call_id in calls
            ]
            if answered:
                answering[index] = answered[0]
    return answering_in_batch(acta, answering)


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


def message_of_actum(
    actum: Actum, foreign: ForeignActa | None = None, *, actor: str | None = None
) -> ModelMessage | None:
    """Return the message ``actum`` stands for in a pydantic-ai history, or ``None`` to leave it out.

    This package's acta (its native form, or its JSON content from before there was one) give
    back their message exactly, except another agent's: with ``actor`` (the reading agent's
    actor id), an actum of actor kind ``agent`` by another actor is that agent's, not the
    reader's model's, and is read as anyone else's. Anyone else's is mapped from its readable
    content as the module docstring says. ``None`` for another writer's thought or tool exchange
    that ``foreign`` (default: ``ForeignActa()``, messages only) does not ask for, and for the
    records a ``ChronicaConversationStore`` keeps (:data:`RECORD_FORMAT`).

    Args:
        actum: any actum of the chronicum.
        foreign: which other writers' thoughts and tool exchanges to show (default: none).
        actor: the reading agent's actor id; ``None`` reads every agent's acta of this package
            back exactly, as the reader's own.
    """
    if is_native(actum, RECORD_FORMAT):
        return None
    mine = not another_agents(actum, actor)
    if mine and is_native(actum, NATIVE_FORMAT):
        assert actum.native is not None  # is_native says so
        own = message_of_content(actum.native.data)
        if own is not None:
            return own
    elif mine and actum.native is None:
        old = message_of_content(actum.content)
        if old is not None:
            return old
    if not shown(actum, foreign or ForeignActa()):
        return None
    part: ModelRequestPart
    if actum.kind is ActumKind.MESSAGE and actum.actor_kind is ActorKind.SYSTEM:
        part = SystemPromptPart(actum.content)
    else:
        part = UserPromptPart(attributed(actum))
    if actum.at is not None:
        part = replace(part, timestamp=actum.at)  # when it was said, not when it was read
    return ModelRequest(parts=[part])


def message_text(message: ModelMessage) -> str:
    """Return the readable text of ``message``: what a person or another framework reads of it.

    A user prompt's text (``[image-url]``, ``[binary]`` and the like for other content); a tool
    result's result; a tool call's name and arguments (``find_table({"party":4})``), after any
    commentary; a model's text; a thought's text; a system prompt's text. Parts are one a line.
    Never empty: a message without text reads ``[request]`` or ``[response]``.
    """
    if isinstance(message, ModelRequest):
        if answers_a_call(message):
            lines = [_part_text(p) for p in message.parts if isinstance(p, (ToolReturnPart, RetryPromptPart))]
        elif any(isinstance(part, UserPromptPart) for part in message.parts):
            lines = [_part_text(p) for p in message.parts if isinstance(p, UserPromptPart)]
        else:
            lines = [_part_text(part) for part in message.parts]
    elif any(isinstance(part, ToolCallPart) for part in message.parts):
        lines = [_part_text(p) for p in message.parts if isinstance(p, (TextPart, ToolCallPart))]
    elif any(isinstance(part, TextPart) for part in message.parts):
        lines = [_part_text(p) for p in message.parts if isinstance(p, TextPart)]
    elif any(isinstance(part, ThinkingPart) for part in message.parts):
        lines = [_part_text(p) for p in message.parts if isinstance(p, ThinkingPart)]
    else:
        lines = [_part_text(part) for part in message.parts]
    return "\n".join(line for line in lines if line) or f"[{message.kind}]"


def _part_text(part: Any) -> str:
    """The readable text of one part of a message."""
    if isinstance(part, ToolReturnPart):
        return part.model_response_str()
    if isinstance(part, RetryPromptPart):
        return part.model_response()
    if isinstance(part, ToolCallPart):
        return f"{part.tool_name}({part.args_as_json_str()})"
    if isinstance(part, UserPromptPart):
        if isinstance(part.content, str):
            return part.content
        return "\n".join(_content_text(item) for item in part.content)
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content  # text, thinking, system prompt, instructions
    return f"[{getattr(part, 'part_kind', type(part).__name__)}]"


def _content_text(item: object) -> str:
    """The readable text of one item of a user prompt: its text, else its kind (``[image-url]``)."""
    if isinstance(item, str):
        return item
    content = getattr(item, "content", None)
    if isinstance(content, str):
        return content
    return f"[{getattr(item, 'kind', type(item).__name__)}]"


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
