"""What one framework's integration shows of acta another writer recorded: shared by every integration.

Every integration reads every actum of a chronicum. Its own (those whose :class:`Native` form has
its format) it reads back exactly; anyone else's (a person through the CLI, a plain agent,
another framework) it maps to the nearest thing its framework has, from the actum's readable
``content``, never from another framework's native form:

- a person's message becomes the user's message;
- another agent's message becomes a message of that agent (the framework's name field where it
  has one, else :func:`attributed` text such as ``"concierge said: ..."``);
- other agents' thoughts and tool exchanges are left out unless asked for (:func:`shown`).

An actum written before there were native forms (or on a store without the ``native``
capability) may hold a framework's JSON as its content; :func:`readable` gives the text inside
it, so that no framework hands another's JSON document to its model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from chronica_core.model import ActorKind, Actum, ActumKind

__all__ = [
    "ForeignActa",
    "another_agents",
    "answering_in_batch",
    "attributed",
    "is_native",
    "readable",
    "shown",
]


@dataclass(frozen=True, slots=True)
class ForeignActa:
    """Which acta of other writers an integration hands its framework.

    A system's thoughts and tool acta (actor kind ``system``) are never shown: integrations keep
    their bookkeeping as such acta.

    Attributes:
        thoughts: other agents' thoughts too (default: left out).
        tool_exchanges: other writers' tool requests and responses too (default: left out).
    """

    thoughts: bool = False
    tool_exchanges: bool = False


_TOOLS: Final = frozenset({ActumKind.TOOL_REQUEST, ActumKind.TOOL_RESPONSE})


def is_native(actum: Actum, native_format: str) -> bool:
    """Whether ``actum`` carries a native form of ``native_format`` (its integration's own)."""
    return actum.native is not None and actum.native.format == native_format


def another_agents(actum: Actum, actor: str | None) -> bool:
    """Whether ``actum`` is another agent's than the reading one's (``actor``).

    Such an actum is read as anyone else's, even in the reader's own framework's native form: what
    another agent said or did is not the reader's model's. ``actor`` ``None``: no agent is another.
    """
    return actor is not None and actum.actor_kind is ActorKind.AGENT and actum.actor != actor


def answering_in_batch(acta: Sequence[Actum], answering: Mapping[int, int]) -> list[Actum]:
    """Return ``acta`` (one batch) with each tool response naming the request it answers.

    The response at index ``i`` gets ``answers`` set to the request at index ``answering[i]``,
    which gets an id of the batch's own (``"call-<index>"``); ``Chronicarius.record_acta`` gives
    both their stored ids. Then a window that holds the response holds its request too
    (``get_acta(tool_exchanges="whole")``). For stores with the ``history`` capability.

    Args:
        acta: the batch's acta, in order.
        answering: index of a tool response -> index of the tool request (earlier in the batch)
            it answers.

    Returns:
        The acta, linked (the same acta where ``answering`` is empty).
    """
    called = set(answering.values())
    out: list[Actum] = []
    for index, actum in enumerate(acta):
        if index in called:
            actum = replace(actum, id=f"call-{index}")
        elif index in answering:
            actum = replace(actum, answers=f"call-{answering[index]}")
        out.append(actum)
    return out


def shown(actum: Actum, foreign: ForeignActa) -> bool:
    """Whether an integration hands another writer's ``actum`` to its framework, by ``foreign``.

    Messages always; thoughts and tool exchanges only when ``foreign`` asks for them, and never
    a system's: those are integrations' bookkeeping (a popped item's tombstone, a saved
    conversation's record, an agent's state), not anything a model was told. A summary is a
    message.
    """
    if actum.kind is ActumKind.MESSAGE:
        return True
    if actum.actor_kind is ActorKind.SYSTEM:
        return False
    if actum.kind is ActumKind.THOUGHT:
        return foreign.thoughts
    return actum.kind in _TOOLS and foreign.tool_exchanges


_TEXT_KEYS: Final = ("text", "content", "output", "refusal")
"""Keys whose string value is text a person reads, in the JSON forms integrations wrote."""

_NESTED_KEYS: Final = ("content", "parts", "summary", "function_call", "function_response", "output")
"""Keys under which that text is nested (message parts, an event's content, a call)."""


def _texts(node: Any) -> list[str]:
    """The readable pieces of a framework's JSON form, in order (see :func:`readable`)."""
    if isinstance(node, list):
        return [text for child in node for text in _texts(child)]
    if not isinstance(node, dict):
        return []
    name = node.get("name", node.get("tool_name"))
    arguments = node.get("arguments", node.get("args"))
    if isinstance(name, str) and arguments is not None:
        shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return [f"{name}({shown})"]
    texts: list[str] = []
    for key in _TEXT_KEYS:
        if isinstance(node.get(key), str) and node[key]:
            texts.append(node[key])
    for key in _NESTED_KEYS:
        if isinstance(node.get(key), (dict, list)):
            texts.extend(_texts(node[key]))
    if not texts and isinstance(node.get("response"), dict):
        texts.append(json.dumps(node["response"], ensure_ascii=False))
    return texts


def readable(actum: Actum) -> str:
    """``actum``'s readable text: its content, or the text inside a framework's JSON content.

    An actum with a native form has readable content by the rules every integration follows.
    One without (written before there were native forms, or on a store without the ``native``
    capability) may hold an integration's JSON: an Agents SDK item, an ADK event, a pydantic-ai
    message. Its text parts, a call's ``name(arguments)`` and a tool's output are then given,
    one a line; content that is not such JSON, or holds no text, is given as it is.
    """
    content = actum.content
    if actum.native is not None or not content.startswith("{"):
        return content
    try:
        form = json.loads(content)
    except ValueError:
        return content
    return "\n".join(_texts(form)) or content


def attributed(actum: Actum) -> str:
    """``actum``'s content as a framework without an author field shows another writer's.

    A person's message is its text as it is; anyone else's is prefixed with who wrote it and
    what it is: ``"concierge said: ..."``, ``"concierge thought: ..."``, ``"search called a
    tool: ..."``, ``"search got a tool's answer: ..."``. The text is :func:`readable`'s.
    """
    if actum.actor_kind is ActorKind.HUMAN and actum.kind is ActumKind.MESSAGE:
        return readable(actum)
    verb = {
        ActumKind.MESSAGE: "said",
        ActumKind.THOUGHT: "thought",
        ActumKind.TOOL_REQUEST: "called a tool",
        ActumKind.TOOL_RESPONSE: "got a tool's answer",
    }[actum.kind]
    return f"{actum.actor} {verb}: {readable(actum)}"
