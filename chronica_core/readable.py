"""What one framework's integration shows of acta another writer recorded: shared by every integration.

Every integration reads every actum of a chronicum. Its own (those whose :class:`Native` form has
its format) it reads back exactly; anyone else's (a person through the CLI, a plain agent,
another framework) it maps to the nearest thing its framework has, from the actum's readable
``content``, never from another framework's native form:

- a person's message becomes the user's message;
- another agent's message becomes a message of that agent (the framework's name field where it
  has one, else :func:`attributed` text such as ``"concierge said: ..."``);
- other agents' thoughts and tool exchanges are left out unless asked for (:func:`shown`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from chronica_core.model import ActorKind, Actum, ActumKind

__all__ = ["ForeignActa", "attributed", "is_native", "shown"]


@dataclass(frozen=True, slots=True)
class ForeignActa:
    """Which acta of other writers an integration hands its framework.

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


def shown(actum: Actum, foreign: ForeignActa) -> bool:
    """Whether an integration hands another writer's ``actum`` to its framework, by ``foreign``.

    Messages always; thoughts and tool exchanges only when ``foreign`` asks for them. A summary
    is a message.
    """
    if actum.kind is ActumKind.MESSAGE:
        return True
    if actum.kind is ActumKind.THOUGHT:
        return foreign.thoughts
    return actum.kind in _TOOLS and foreign.tool_exchanges


def attributed(actum: Actum) -> str:
    """``actum``'s content as a framework without an author field shows another writer's.

    A person's message is its content as it is; anyone else's is prefixed with who wrote it and
    what it is: ``"concierge said: ..."``, ``"concierge thought: ..."``, ``"search called a
    tool: ..."``, ``"search got a tool's answer: ..."``.
    """
    if actum.actor_kind is ActorKind.HUMAN and actum.kind is ActumKind.MESSAGE:
        return actum.content
    verb = {
        ActumKind.MESSAGE: "said",
        ActumKind.THOUGHT: "thought",
        ActumKind.TOOL_REQUEST: "called a tool",
        ActumKind.TOOL_RESPONSE: "got a tool's answer",
    }[actum.kind]
    return f"{actum.actor} {verb}: {actum.content}"
