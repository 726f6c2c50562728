"""How an Agent Framework ``Message`` becomes acta and back.

A message holds a list of contents. Its consecutive contents of one kind form a **part**, and
each part is one actum, so a reply that says something and then calls a tool is a ``message``
then a ``tool_request``:

- ``text_reasoning``: a ``thought``;
- ``function_call``, ``function_approval_request``, any type ending in ``_tool_call``: a
  ``tool_request``;
- ``function_result``, ``function_approval_response``, ``shell_command_output``, any type ending
  in ``_tool_result``: a ``tool_response``;
- anything else (``text``, ``data``, ``uri``, ``error``, ``usage``, types newer than this module):
  a ``message``.

Who wrote it follows the message's role: ``user`` is the human actor, ``system`` and
``developer`` the system actor named after the role, ``assistant`` and ``tool`` (the results of
tools the agent ran) the agent's actor; any other role is the system actor ``system``.

An actum's ``content`` is readable: a part's text, a tool call as ``name(arguments)``, a tool
result as its text; a part with no text at all shows its content types, e.g. ``[text_reasoning]``.
Its ``native`` form is the part as a message of its own (the role, author, id and properties of
the whole message, the part's contents), in :data:`NATIVE_FORMAT` for a message's first part and
:data:`PART_FORMAT` for the others, so the message reads back whole and equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_framework import Content, Message

from chronica_core import ActorKind, Actum, ActumKind, Native
from chronica_core.readable import attributed

__all__ = [
    "NATIVE_FORMAT",
    "PART_FORMAT",
    "Part",
    "content_kind",
    "foreign_message",
    "message_parts",
    "readable",
]

NATIVE_FORMAT: Final = "agent-framework.message"
"""The native format of a message's first part: ``Message.to_json()`` of that part."""

PART_FORMAT: Final = "agent-framework.message-part"
"""The native format of a message's later parts, which read back into the first part's message."""

REQUEST_TYPES: Final = frozenset({"function_call", "function_approval_request"})
RESPONSE_TYPES: Final = frozenset({"function_result", "function_approval_response", "shell_command_output"})
SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def content_kind(content_type: str) -> ActumKind:
    """Return the actum kind of a content of type ``content_type`` (see the module docstring)."""
    if content_type == "text_reasoning":
        return ActumKind.THOUGHT
    if content_type in REQUEST_TYPES or content_type.endswith("_tool_call"):
        return ActumKind.TOOL_REQUEST
    if content_type in RESPONSE_TYPES or content_type.endswith("_tool_result"):
        return ActumKind.TOOL_RESPONSE
    return ActumKind.MESSAGE


def _json_text(value: Any) -> str:
    """``value`` as text: a string as it is, anything else as JSON (``str()`` for what JSON cannot hold)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def readable(content: Content) -> str:
    """Return what a person reads of ``content``: its text, ``name(arguments)``, a result, a URI.

    ``""`` for a content with nothing readable (encrypted reasoning, usage counts).
    """
    form = content.to_dict()
    content_type = str(form.get("type", ""))
    if content_type == "function_call":
        return f"{form.get('name', '')}({_json_text(form.get('arguments', ''))})"
    if content_type == "function_result":
        if form.get("exception"):
            return f"error: {form['exception']}"
        return _json_text(form.get("result", ""))
    for key in ("text", "message", "uri", "output", "result"):
        value = form.get(key)
        if value:
            return _json_text(value)
    return ""


def _writer(role: str, actor: str, human_actor: str) -> tuple[ActorKind, str]:
    """Return ``(actor kind, actor)`` of a message of ``role`` (see the module docstring)."""
    if role == "user":
        return ActorKind.HUMAN, human_actor
    if role in ("assistant", "tool"):
        return ActorKind.AGENT, actor
    return ActorKind.SYSTEM, role if role in SYSTEM_ROLES else "system"


@dataclass(frozen=True, slots=True)
class Part:
    """One actum of a message, before it is recorded.

    Attributes:
        actum: the actum (no ``answers`` yet: the batch links it, see ``requests``/``answers``).
        requests: the call ids of the tool calls it holds (a ``tool_request``).
        answers: the call id of the first tool result it holds (a ``tool_response``), or ``""``.
    """

    actum: Actum
    requests: tuple[str, ...] = ()
    answers: str = ""


def _runs(contents: Sequence[Content]) -> Iterator[tuple[ActumKind, list[Content]]]:
    """Consecutive contents of one kind; one message run for a message without contents."""
    runs: list[tuple[ActumKind, list[Content]]] = []
    for content in contents:
        kind = content_kind(str(content.type))
        if runs and runs[-1][0] is kind:
            runs[-1][1].append(content)
        else:
            runs.append((kind, [content]))
    yield from runs or [(ActumKind.MESSAGE, [])]


def message_parts(chronicum_id: str, message: Message, actor: str, human_actor: str) -> list[Part]:
    """Return the parts that record ``message`` in ``chronicum_id``, in order (see the module docstring).

    Raises:
        TypeError: the message holds a value its ``to_json()`` cannot write.
    """
    actor_kind, writer = _writer(str(message.role), actor, human_actor)
    parts: list[Part] = []
    for index, (kind, contents) in enumerate(_runs(message.contents)):
        text = "\n".join(filter(None, (readable(content) for content in contents)))
        if not text and kind in (ActumKind.MESSAGE, ActumKind.THOUGHT):
            text = "[" + ", ".join(str(content.type) for content in contents) + "]" if contents else "[empty]"
        part = Message(
            message.role,
            contents,
            author_name=message.author_name,
            message_id=message.message_id,
            additional_properties=dict(message.additional_properties),
        )
        native = Native(NATIVE_FORMAT if index == 0 else PART_FORMAT, part.to_json())
        call_ids = [str(content.call_id) for content in contents if content.call_id]
        parts.append(
            Part(
                Actum(chronicum_id, kind, actor_kind, writer, text, native=native),
                requests=tuple(call_ids) if kind is ActumKind.TOOL_REQUEST else (),
                answers=call_ids[0] if kind is ActumKind.TOOL_RESPONSE and call_ids else "",
            )
        )
    return parts


def foreign_message(actum: Actum) -> Message:
    """Return the message another writer's ``actum`` stands for, from its readable content.

    A person's acta become ``user`` messages, the system's ``system`` messages and an agent's
    ``assistant`` messages with ``author_name`` set to the agent. A person's and the system's
    messages keep their text; anything else reads as :func:`chronica_core.readable.attributed`
    text (``"search said: ..."``), since not every chat client sends ``author_name`` to the model.
    """
    system_message = actum.actor_kind is ActorKind.SYSTEM and actum.kind is ActumKind.MESSAGE
    text = actum.content if system_message else attributed(actum)
    if actum.actor_kind is ActorKind.HUMAN:
        return Message("user", [text])
    if actum.actor_kind is ActorKind.SYSTEM:
        return Message("system", [text])
    return Message("assistant", [text], author_name=actum.actor)
