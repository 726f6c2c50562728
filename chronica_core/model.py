"""The data model: chronica, acta, their kinds and the query for a context window."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

__all__ = ["MAX_ID_LENGTH", "MAX_LAST_N", "ActaQuery", "ActorKind", "Actum", "ActumKind", "Chronicum"]

MAX_ID_LENGTH = 255
"""The longest chronicum id, owner id, actor or idempotency key, in characters (every SQL backend
indexes them as ``VARCHAR(255)``). Longer ones are refused by ``Chronicarius`` before any store."""

MAX_LAST_N = 2**31 - 1
"""A ``last_n`` above this keeps every actum (as ``0`` does): no chronicum holds that many, and
every backend can bind it."""


class ActumKind(StrEnum):
    """What an actum is: a message, a thought, a tool request or a tool response."""

    MESSAGE = "message"
    THOUGHT = "thought"
    TOOL_REQUEST = "tool_request"
    TOOL_RESPONSE = "tool_response"


class ActorKind(StrEnum):
    """Who wrote an actum: a human, an agent or the system."""

    HUMAN = "human"
    AGENT = "agent"
    SYSTEM = "system"


@dataclass(frozen=True, slots=True, init=False)
class Actum:
    """One thing that happened in a chronicum.

    Attributes:
        chronicum_id: id of the chronicum the actum belongs to (non-empty ``str``).
        kind: an :class:`ActumKind` (``Chronicarius`` also accepts its string value).
        actor_kind: an :class:`ActorKind` (``Chronicarius`` also accepts its string value).
        actor: stable id of the writer, such as ``"ardian"`` or ``"booking"``.
        content: the text; may be empty only for tool requests and tool responses.
        id: 32 lowercase hex characters once recorded; ``Chronicarius`` replaces any id given.
        at: timezone-aware UTC moment the store wrote the actum; ``None`` before it is recorded.
            Advisory only: it never decides the order.
    """

    chronicum_id: str
    kind: ActumKind
    actor_kind: ActorKind
    actor: str
    content: str = ""
    id: str = ""
    at: datetime | None = None

    def __init__(
        self,
        chronicum_id: str,
        kind: ActumKind,
        actor_kind: ActorKind,
        actor: str,
        content: str = "",
        id: str = "",
        at: datetime | None = None,
    ) -> None:
        # The generated __init__ of a frozen dataclass sets each field through
        # object.__setattr__; context windows build acta by the thousand, so set the slots
        # directly (half the cost). The instance is as frozen as ever.
        _set_chronicum_id(self, chronicum_id)
        _set_kind(self, kind)
        _set_actor_kind(self, actor_kind)
        _set_actor(self, actor)
        _set_content(self, content)
        _set_id(self, id)
        _set_at(self, at)


_set_chronicum_id = vars(Actum)["chronicum_id"].__set__
_set_kind = vars(Actum)["kind"].__set__
_set_actor_kind = vars(Actum)["actor_kind"].__set__
_set_actor = vars(Actum)["actor"].__set__
_set_content = vars(Actum)["content"].__set__
_set_id = vars(Actum)["id"].__set__
_set_at = vars(Actum)["at"].__set__


@dataclass(frozen=True, slots=True)
class Chronicum:
    """One session, shared by one owner and any number of agents.

    Attributes:
        id: the chronicum id chosen by the app (non-empty ``str``).
        owner_id: the person it belongs to; never changes.
        started_at: timezone-aware UTC moment it was created.
        last_actum_at: timezone-aware UTC ``at`` of its newest actum, ``None`` while it has none.
    """

    id: str
    owner_id: str
    started_at: datetime
    last_actum_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ActaQuery:
    """Which acta of a chronicum a context window holds.

    Filters apply first, then the limit (rule R6).

    Attributes:
        actum_kinds: the kinds to keep; ``None`` keeps every kind. ``Chronicarius`` hands stores
            either ``None`` or a non-empty tuple.
        actor_kinds: the actor kinds to keep; ``None`` keeps every actor kind (same shape).
        last_n: keep only the newest ``last_n`` of what the filters left; ``0`` or negative keeps all.
            ``Chronicarius`` hands stores ``0`` for anything above :data:`MAX_LAST_N`.
    """

    actum_kinds: tuple[ActumKind, ...] | None = None
    actor_kinds: tuple[ActorKind, ...] | None = None
    last_n: int = 0
