"""How an Agents SDK item becomes an actum and back, and how a popped item is marked.

An item is a JSON object (``TResponseInputItem``). Its actum's content is that JSON, written so
that ``json.loads`` gives back an equal object; its kind, actor kind and actor say who did what:

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
  module): a message by the agent. The item's own ``type`` stays in the content, so it reads back unchanged.

A **tombstone** marks a popped item: a tool response by the system actor :data:`POP_ACTOR`
whose content is ``{"popped": "<actum id>", "pop": "<random nonce>"}``. No item maps to that
kind, actor kind and actor, so a tombstone is never mistaken for an item.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, cast

from agents import TResponseInputItem

from chronica_core import ActorKind, Actum, ActumKind

__all__ = [
    "POP_ACTOR",
    "item_actum",
    "item_of_actum",
    "tombstone",
    "tombstone_target",
]

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


def item_actum(chronicum_id: str, item: Mapping[str, Any], actor: str, human_actor: str) -> Actum:
    """Return the actum that records ``item`` in ``chronicum_id`` (see the module docstring).

    Raises:
        TypeError: ``item`` is not a mapping, or holds a value JSON cannot represent.
    """
    kind, actor_kind, writer = item_kind(item, actor, human_actor)
    return Actum(chronicum_id, kind, actor_kind, writer, item_content(item))


def item_of_actum(actum: Actum) -> TResponseInputItem:
    """Return the item an actum recorded: its content's JSON object."""
    return cast(TResponseInputItem, json.loads(actum.content))


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
