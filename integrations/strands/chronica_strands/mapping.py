"""How a Strands message becomes acta and back, and the acta that keep an agent's state.

**Messages.** A message (``{"role": ..., "content": [blocks]}``) holds content blocks; its
consecutive blocks of one kind form a **part**, and each part is one actum, so a reply that says
something and then uses a tool is a ``message`` then a ``tool_request``:

- ``reasoningContent``: a ``thought``;
- ``toolUse``: a ``tool_request``;
- ``toolResult``: a ``tool_response``;
- anything else (``text``, ``image``, ``document``, ``video``, ``audio``, ``cachePoint``,
  ``guardContent``, ``citationsContent``, blocks newer than this module): a ``message``.

Who wrote it: the agent (actor: its ``agent_id``) for an ``assistant`` message and for tool
results (its runtime ran the tools, though Strands files them under ``user``); the person
(``human_actor``) for the rest of a ``user`` message.

An actum's ``content`` is readable: a part's text, a tool use as ``name(input JSON)``, a tool
result as its text; a part with nothing readable shows its block types, e.g. ``[cachePoint]``.
Its ``native`` form (:data:`MESSAGE_FORMAT` for a message's first part, :data:`PART_FORMAT` for
the others) is JSON holding the agent id, the message's index in the agent's conversation
(Strands' ``message_id``), its timestamps and the part as a message of its own (bytes as base64,
as Strands writes them), so the message reads back whole and equal.

**Bookkeeping.** What Strands keeps besides messages is written as acta of kind
``tool_response`` by the system actor :data:`STATE_ACTOR`: an agent's state
(:data:`AGENT_FORMAT`), a multi-agent's state (:data:`MULTI_AGENT_FORMAT`) and a message's later
version, e.g. redacted by a guardrail (:data:`UPDATE_FORMAT`). Other readers leave them out with
the tool exchanges.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from strands.types.content import ContentBlock, Message
from strands.types.session import SessionMessage, decode_bytes_values, encode_bytes_values

from chronica_core import ActorKind, Actum, ActumKind, Native
from chronica_core.readable import attributed

__all__ = [
    "AGENT_FORMAT",
    "MESSAGE_FORMAT",
    "MULTI_AGENT_FORMAT",
    "PART_FORMAT",
    "STATE_ACTOR",
    "UPDATE_FORMAT",
    "Part",
    "block_kind",
    "bookkeeping_actum",
    "foreign_message",
    "message_parts",
    "native_form",
    "readable",
]

MESSAGE_FORMAT: Final = "strands.message"
PART_FORMAT: Final = "strands.message-part"
UPDATE_FORMAT: Final = "strands.message-update"
AGENT_FORMAT: Final = "strands.agent"
MULTI_AGENT_FORMAT: Final = "strands.multi-agent"
FORMATS: Final = frozenset({MESSAGE_FORMAT, PART_FORMAT, UPDATE_FORMAT, AGENT_FORMAT, MULTI_AGENT_FORMAT})

STATE_ACTOR: Final = "chronica-strands:state"
"""The system actor of the acta keeping agent and multi-agent state and message updates."""

_KINDS: Final = {
    "reasoningContent": ActumKind.THOUGHT,
    "toolUse": ActumKind.TOOL_REQUEST,
    "toolResult": ActumKind.TOOL_RESPONSE,
}


def block_kind(block: Mapping[str, Any]) -> ActumKind:
    """Return the actum kind of a content block (see the module docstring)."""
    return next((_KINDS[key] for key in block if key in _KINDS), ActumKind.MESSAGE)


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _texts(items: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    for item in items:
        if "text" in item:
            yield str(item["text"])
        elif "json" in item:
            yield _json_text(item["json"])
        else:
            yield "[" + ", ".join(item) + "]"


def readable(block: Mapping[str, Any]) -> str:
    """Return what a person reads of a content block: text, ``name(input)``, a result; ``""`` if nothing."""
    if "text" in block:
        return str(block["text"])
    if "toolUse" in block:
        use = block["toolUse"]
        return f"{use.get('name', '')}({_json_text(use.get('input', {}))})"
    if "toolResult" in block:
        result = block["toolResult"]
        text = "\n".join(_texts(result.get("content", [])))
        return f"error: {text}" if result.get("status") == "error" else text
    if "reasoningContent" in block:
        return str(block["reasoningContent"].get("reasoningText", {}).get("text", ""))
    if "guardContent" in block:
        return str(block["guardContent"].get("text", {}).get("text", ""))
    if "citationsContent" in block:
        return "\n".join(_texts(block["citationsContent"].get("content", [])))
    if "document" in block:
        name = block["document"].get("name")
        return f"[document {name}]" if name else "[document]"
    return ""


@dataclass(frozen=True, slots=True)
class Part:
    """One actum of a message, before it is recorded.

    Attributes:
        actum: the actum (its ``answers`` is left to the writer, which knows the requests' ids).
        tool_use_ids: the ``toolUseId`` of each tool use (a ``tool_request``) or result (a
            ``tool_response``) it holds.
    """

    actum: Actum
    tool_use_ids: tuple[str, ...] = ()


def _runs(blocks: Sequence[ContentBlock]) -> list[tuple[ActumKind, list[ContentBlock]]]:
    """Consecutive blocks of one kind; one message run for a message without blocks."""
    runs: list[tuple[ActumKind, list[ContentBlock]]] = []
    for block in blocks:
        kind = block_kind(block)
        if runs and runs[-1][0] is kind:
            runs[-1][1].append(block)
        else:
            runs.append((kind, [block]))
    return runs or [(ActumKind.MESSAGE, [])]


def native_form(agent_id: str, session_message: SessionMessage, message: Message) -> str:
    """The JSON of a message part's native form: ``message`` as part of ``session_message``."""
    form = {
        "agent_id": agent_id,
        "message_id": session_message.message_id,
        "created_at": session_message.created_at,
        "updated_at": session_message.updated_at,
        "message": encode_bytes_values(message),
    }
    return json.dumps(form, ensure_ascii=False)


def message_parts(
    chronicum_id: str, agent_id: str, session_message: SessionMessage, human_actor: str
) -> list[Part]:
    """Return the parts that record ``session_message`` of ``agent_id`` (see the module docstring).

    Raises:
        TypeError: the message holds a value JSON cannot represent.
    """
    message = session_message.message
    parts: list[Part] = []
    for index, (kind, blocks) in enumerate(_runs(message.get("content", []))):
        text = "\n".join(filter(None, (readable(block) for block in blocks)))
        if not text and kind in (ActumKind.MESSAGE, ActumKind.THOUGHT):
            text = "[" + ", ".join(key for block in blocks for key in block) + "]" if blocks else "[empty]"
        by_person = message.get("role") == "user" and kind is not ActumKind.TOOL_RESPONSE
        actor_kind, actor = (ActorKind.HUMAN, human_actor) if by_person else (ActorKind.AGENT, agent_id)
        part = cast(Message, {**message, "content": blocks})
        native = Native(
            MESSAGE_FORMAT if index == 0 else PART_FORMAT, native_form(agent_id, session_message, part)
        )
        ids = tuple(
            str(block[key]["toolUseId"])
            for block in blocks
            for key in ("toolUse", "toolResult")
            if key in block
        )
        parts.append(Part(Actum(chronicum_id, kind, actor_kind, actor, text, native=native), ids))
    return parts


def parse_native(actum: Actum) -> tuple[str, dict[str, Any]] | None:
    """``(format, form)`` of an actum carrying one of this module's native forms, else ``None``."""
    if actum.native is None or actum.native.format not in FORMATS:
        return None
    form = json.loads(actum.native.data)
    return (actum.native.format, form) if isinstance(form, dict) else None


def session_message_of(form: Mapping[str, Any]) -> SessionMessage:
    """The session message a :data:`MESSAGE_FORMAT` or :data:`PART_FORMAT` form holds."""
    return SessionMessage(
        message=cast(Message, decode_bytes_values(form["message"])),
        message_id=int(form["message_id"]),
        created_at=str(form["created_at"]),
        updated_at=str(form["updated_at"]),
    )


def bookkeeping_actum(chronicum_id: str, native_format: str, form: Mapping[str, Any], content: str) -> Actum:
    """An actum of :data:`STATE_ACTOR` holding ``form`` in ``native_format``, readable as ``content``."""
    native = Native(native_format, json.dumps(form, ensure_ascii=False))
    return Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, STATE_ACTOR, content, native=native)


def foreign_message(actum: Actum) -> Message:
    """The message another writer's ``actum`` stands for, from its readable content.

    Strands messages have no author field and only the ``user`` and ``assistant`` roles: every
    other writer's actum is a ``user`` message, a person's message as its text, anyone else's as
    :func:`chronica_core.readable.attributed` text (``"concierge said: ..."``). Its
    ``tracking_id`` is the actum's id as a UUID, the same at every read.
    """
    message: Message = {"role": "user", "content": [{"text": attributed(actum)}]}
    with contextlib.suppress(ValueError):  # an actum not read from a store has no id
        message["tracking_id"] = str(uuid.UUID(hex=actum.id))
    return message
