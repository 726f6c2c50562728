"""How an Agents SDK item becomes an actum and back, how other writers' acta read, how a pop is marked.

**Writing.** An item is a JSON object (``TResponseInputItem``). Its actum carries the item's
**readable text** in ``content`` (:func:`item_text`: a message's text, a tool call's name and
arguments, a tool output's result, a reasoning summary) and the item itself in ``native``
(format :data:`NATIVE_FORMAT`, data the item's JSON, written so that ``json.loads`` gives back an
equal object). On a store without the ``native`` capability the content is the item's JSON, as
before there was a native form. Kind, actor kind and actor say who did what:

- a message (``"type": "message"``, or no ``type`` and a ``role``): by ``role`` — ``user`` is a
  human message by the human actor, ``assistant`` an agent message by the agent's actor,
  ``system`` and ``developer`` a system message by an actor named after the role, any other role a
  system message by ``system``;
- ``reasoning``: a thought by the agent;
- a tool call (``function_call``, ``computer_call``, ``mcp_call``, ``mcp_approval_request``,
  ``program``, any type ending in ``_call``): a tool request by the agent;
- a tool call's output (``function_call_output``, ``program_output``, ``mcp_approval_response``,
  ``mcp_list_tools``, any type ending in ``_output``): a tool response by the agent (its runtime
  ran the tool);
- any other type (``compaction``, ``item_reference``, ``additional_tools``, types newer than this
  module): a message by the agent.

**Reading** (:func:`item_of_actum`). An actum with this package's native form gives back its item
exactly; so does one written before there was a native form (no native, its content a JSON object
with a ``type`` or ``role``), unless another agent (another actor) wrote it: its items are not the
reading session's model's, so they are read as any other agent's. Anyone else's actum (a person
through the CLI, a plain agent, another framework) becomes a message from its readable content
(:mod:`chronica_core.readable`): a person's message ``{"role": "user", "content": text}``; another
agent's message an assistant message whose text names it (``"booking said: ..."``); a system
message a ``system`` message; other writers' thoughts and tool exchanges are left out unless
:class:`ForeignActa` asks for them, and then are assistant messages with attributed text (user
messages for a person's).

A **tombstone** marks a popped item: a tool response by the system actor :data:`POP_ACTOR`
whose content is ``{"popped": "<actum id>", "pop": "<random nonce>"}``. No item maps to that
kind, actor kind and actor, so a tombstone is never mistaken for an item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from agents import TResponseInputItem

from chronica_core import ActorKind, Actum, ActumKind
from chronica_core.model import Native
from chronica_core.readable import (
    ForeignActa,
    another_agents,
    answering_in_batch,
    attributed,
    is_native,
    readable,
    shown,
)

__all__ = [
    "NATIVE_FORMAT",
    "POP_ACTOR",
    "item_actum",
    "item_of_actum",
    "item_text",
    "linked",
    "tombstone",
    "tombstone_target",
]

NATIVE_FORMAT: Final = "openai-agents.item"
"""The format of this package's native form: the item's JSON."""

POP_ACTOR: Final = "chronica-openai-agents:pop"
"""The system actor of tombstones, the acta that mark a popped item."""

TOOL_REQUEST_TYPES: Final = frozenset({"mcp_approval_request", "program"})
"""Item types that are tool requests although they do not end in ``_call``."""

TOOL_RESPONSE_TYPES: Final = frozenset({"mcp_approval_response", "mcp_list_tools"})
"""Item types that are tool responses although they do not end in ``_output``."""

SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def item_content(item: Mapping[str, Any]) -> str:
    """Return ``item`` as JSON text that ``json.loads`` turns back into an equal object.

    Non-ASCII text is kept as it is (UTF-8 in the store); only a string holding a lone surrogate,
    which UTF-8 cannot encode, makes the whole item fall back to ASCII escapes.

    Raises:
        TypeError: ``item`` is not a mapping, or holds a value JSON cannot represent.
    """
    if not isinstance(item, Mapping):
        raise TypeError(f"a session item is a JSON object (a dict), not {type(item).__name__}")
    text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(item, separators=(",", ":"))
    return text


def item_kind(item: Mapping[str, Any], actor: str, human_actor: str) -> tuple[ActumKind, ActorKind, str]:
    """Return ``(kind, actor kind, actor)`` for ``item`` by the rules in this module's docstring."""
    item_type = item.get("type")
    role = item.get("role")
    if item_type == "message" or (item_type is None and role is not None):
        if role == "user":
            return ActumKind.MESSAGE, ActorKind.HUMAN, human_actor
        if role == "assistant":
            return ActumKind.MESSAGE, ActorKind.AGENT, actor
        return ActumKind.MESSAGE, ActorKind.SYSTEM, role if role in SYSTEM_ROLES else "system"
    if item_type == "reasoning":
        return ActumKind.THOUGHT, ActorKind.AGENT, actor
    if isinstance(item_type, str):
        if item_type.endswith("_call") or item_type in TOOL_REQUEST_TYPES:
            return ActumKind.TOOL_REQUEST, ActorKind.AGENT, actor
        if item_type.endswith("_output") or item_type in TOOL_RESPONSE_TYPES:
            return ActumKind.TOOL_RESPONSE, ActorKind.AGENT, actor
    return ActumKind.MESSAGE, ActorKind.AGENT, actor


def _part_text(part: object) -> str:
    """The text of one content part: its text or refusal, else a marker such as ``[image]``."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return ""
    for field in ("text", "refusal"):
        value = part.get(field)
        if isinstance(value, str):
            return value
    part_type = str(part.get("type", "part"))
    name = part.get("filename")
    kind = part_type.removeprefix("input_").removeprefix("output_")
    return f"[{kind} {name}]" if isinstance(name, str) else f"[{kind}]"


def _text(value: object) -> str:
    """A string as it is; a list of content parts as their texts, one a line; anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text for text in map(_part_text, value) if text)
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def item_text(item: Mapping[str, Any]) -> str:
    """Return the readable text of ``item``: what a person or another framework reads of it.

    A message's text (its text parts one a line; ``[image]`` and ``[file name]`` for other
    parts); a tool call's name and arguments (``weather({"city":"Tirana"})``); a tool output's
    result; a reasoning item's summary. Never empty for a message or a thought: one without text
    reads ``[message]`` / ``[reasoning]``, and an item of another type ``[<type>]``.
    """
    item_type = item.get("type")
    kind, _, _ = item_kind(item, "", "")
    if kind is ActumKind.MESSAGE and (item_type == "message" or item_type is None):
        return _text(item.get("content")) or "[message]"
    if kind is ActumKind.THOUGHT:
        summary = item.get("summary") or item.get("content")
        return _text(summary) or "[reasoning]"
    if kind is ActumKind.TOOL_REQUEST:
        name = item.get("name") or item.get("server_label") or item_type
        arguments = item.get("arguments", item.get("action", item.get("input", "")))
        return f"{name}({_text(arguments)})"
    if kind is ActumKind.TOOL_RESPONSE:
        if "output" in item:
            return _text(item["output"])
        if "approve" in item:
            return "approved" if item["approve"] else "denied"
        tools = item.get("tools")
        if isinstance(tools, list):
            names = [str(tool.get("name")) for tool in tools if isinstance(tool, Mapping)]
            return f"tools of {item.get('server_label', 'a server')}: {', '.join(names)}"
        return f"[{item_type}]"
    return f"[{item_type}]"


def item_actum(
    chronicum_id: str, item: Mapping[str, Any], actor: str, human_actor: str, *, native: bool = True
) -> Actum:
    """Return the actum that records ``item`` in ``chronicum_id`` (see the module docstring).

    Args:
        chronicum_id: the session's chronicum.
        item: the item (a JSON object).
        actor: the agent's actor id.
        human_actor: the writer of user messages.
        native: keep the item in ``native`` and its text in ``content``; ``False`` (a store
            without the ``native`` capability): the content is the item's JSON.

    Raises:
        TypeError: ``item`` is not a mapping, or holds a value JSON cannot represent.
    """
    data = item_content(item)
    kind, actor_kind, writer = item_kind(item, actor, human_actor)
    if not native:
        return Actum(chronicum_id, kind, actor_kind, writer, data)
    text = item_text(item)
    if not text.isascii():  # a lone surrogate, which UTF-8 cannot encode, is written as its escape
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return Actum(chronicum_id, kind, actor_kind, writer, text, native=Native(NATIVE_FORMAT, data))


def linked(items: Sequence[Mapping[str, Any]], acta: Sequence[Actum]) -> list[Actum]:
    """Return ``acta`` (one per item of one batch) with each tool output naming its call.

    A tool response whose item's ``call_id`` is that of a tool request earlier in the batch gets
    ``answers`` set to that request's actum, which gets an id of the batch's own (``"call-<index>"``;
    Chronicarius gives both their stored ids). Then a Chronica window or summary that holds an
    output holds its call too (``get_acta(tool_exchanges="whole")``), so no model is handed an
    output without its call. Outputs answering calls of an earlier batch are left as they are.
    For stores with the ``history`` capability.

    Args:
        items: the batch's items, in order.
        acta: their acta (:func:`item_actum`), in the same order.

    Returns:
        The acta, linked.
    """
    calls: dict[str, int] = {}  # call id -> index of the tool request that made it
    answering: dict[int, int] = {}  # index of a tool response -> index of the request it answers
    for index, (item, actum) in enumerate(zip(items, acta, strict=True)):
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            continue
        if actum.kind is ActumKind.TOOL_REQUEST:
            calls.setdefault(call_id, index)
        elif actum.kind is ActumKind.TOOL_RESPONSE and call_id in calls:
            answering[index] = calls[call_id]
    return answering_in_batch(acta, answering)


def _old_item(actum: Actum) -> TResponseInputItem | None:
    """The item an actum written without a native form holds as its content, if it holds one."""
    if actum.native is not None or not actum.content.startswith("{"):
        return None
    try:
        item = json.loads(actum.content)
    except ValueError:
        return None
    if not isinstance(item, dict):
        return None
    if not isinstance(item.get("type"), str) and not isinstance(item.get("role"), str):
        return None
    return cast(TResponseInputItem, item)


def item_of_actum(
    actum: Actum, foreign: ForeignActa | None = None, *, actor: str | None = None
) -> TResponseInputItem | None:
    """Return the item the model reads for ``actum``, or ``None`` when it is left out.

    This package's own acta give back their item exactly (from ``native``, or from the content
    of one written before there was a native form), except another agent's: with ``actor`` (the
    reading session's actor), an actum of actor kind ``agent`` by another actor is that agent's,
    not the reader's model's, and is read as anyone else's. Anyone else's are mapped from their
    readable content as the module docstring says.

    Args:
        actum: any actum of the chronicum.
        foreign: which other writers' thoughts and tool exchanges to show (default: none).
        actor: the reading session's actor; ``None`` reads every agent's items of this package
            back exactly, as the reader's own.

    Returns:
        The item, or ``None`` for another writer's thought or tool exchange ``foreign`` leaves out.
    """
    mine = not another_agents(actum, actor)
    if mine and actum.native is not None and is_native(actum, NATIVE_FORMAT):
        return cast(TResponseInputItem, json.loads(actum.native.data))
    own = _old_item(actum) if mine else None
    if own is not None:
        return own
    if not shown(actum, foreign or ForeignActa()):
        return None
    if actum.kind is ActumKind.MESSAGE:
        if actum.actor_kind is ActorKind.HUMAN:
            return cast(TResponseInputItem, {"role": "user", "content": readable(actum)})
        if actum.actor_kind is ActorKind.SYSTEM:
            return cast(TResponseInputItem, {"role": "system", "content": readable(actum)})
    role = "user" if actum.actor_kind is ActorKind.HUMAN else "assistant"
    return cast(TResponseInputItem, {"role": role, "content": attributed(actum)})


def tombstone(chronicum_id: str, popped_id: str, nonce: str) -> Actum:
    """Return the actum marking the actum ``popped_id`` as popped, by the pop that drew ``nonce``."""
    content = json.dumps({"popped": popped_id, "pop": nonce}, separators=(",", ":"))
    return Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, POP_ACTOR, content)


def tombstone_target(actum: Actum) -> tuple[str, str] | None:
    """Return ``(popped actum id, nonce)`` when ``actum`` is a tombstone, else ``None``."""
    if (
        actum.actor != POP_ACTOR
        or actum.actor_kind != ActorKind.SYSTEM
        or actum.kind != ActumKind.TOOL_RESPONSE
    ):
        return None
    try:
        content = json.loads(actum.content)
    except ValueError:
        return None
    if not isinstance(content, dict):
        return None
    popped, nonce = content.get("popped"), content.get("pop")
    if not isinstance(popped, str) or not isinstance(nonce, str):
        return None
    return popped, nonce
