"""The data model: chronica, acta, their kinds and the query for a context window."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar, cast

from chronica_core.errors import InvalidActum, InvalidChronicum

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_LAST_N",
    "ActaQuery",
    "ActorKind",
    "Actum",
    "ActumKind",
    "ChronicaPage",
    "Chronicum",
    "build_actum",
    "recorded_at",
]

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
        # directly, without that call per field. The instance is as frozen as ever. build_actum
        # builds the same instance another way: keep the two doing the same (setting the slots,
        # no more).
        _set_chronicum_id(self, chronicum_id)
        _set_kind(self, kind)
        _set_actor_kind(self, actor_kind)
        _set_actor(self, actor)
        _set_content(self, content)
        _set_id(self, id)
        _set_at(self, at)

    def to_dict(self) -> dict[str, Any]:
        """Return the actum's public JSON form, ready for ``json.dumps``.

        Keys: ``id``, ``chronicum_id``, ``kind`` and ``actor_kind`` (their string values),
        ``actor``, ``content`` and ``at`` (ISO 8601 in UTC ending in ``Z``, e.g.
        ``"2026-11-30T20:45:43.123456Z"``, or ``None`` before it is recorded). These names are
        stable; new keys may be added, never renamed.
        """
        return {
            "id": self.id,
            "chronicum_id": self.chronicum_id,
            "kind": str(self.kind),
            "actor_kind": str(self.actor_kind),
            "actor": self.actor,
            "content": self.content,
            "at": _time_text(self.at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Actum:
        """Build an actum from its JSON form (:meth:`to_dict`); ``Actum.from_dict(a.to_dict()) == a``.

        ``id``, ``content`` and ``at`` may be left out or null (``""``, ``""``, ``None``); keys it does not
        know are ignored, so a newer writer's form still reads. ``at`` becomes a UTC datetime.

        Raises:
            InvalidActum: ``data`` is not a mapping, or a field is missing or of the wrong type, an
                unknown kind, or an ``at`` that is not an ISO 8601 time with a UTC offset
                (``.field`` names it).
        """
        if not isinstance(data, Mapping):
            raise InvalidActum("actum", f"must be a mapping, not {type(data).__name__}")
        fields = _Fields(data, InvalidActum)
        return cls(
            fields.text("chronicum_id"),
            fields.kind(ActumKind, "kind"),
            fields.kind(ActorKind, "actor_kind"),
            fields.text("actor"),
            fields.text("content", ""),
            fields.text("id", ""),
            fields.time("at", required=False),
        )


_set_chronicum_id = vars(Actum)["chronicum_id"].__set__
_set_kind = vars(Actum)["kind"].__set__
_set_actor_kind = vars(Actum)["actor_kind"].__set__
_set_actor = vars(Actum)["actor"].__set__
_set_content = vars(Actum)["content"].__set__
_set_id = vars(Actum)["id"].__set__
_set_at = vars(Actum)["at"].__set__


class _ActumInTheMaking:
    """An :class:`Actum` being built by :data:`build_actum`: its very slots, none of them frozen.

    Plain attribute stores into slots cost a third of what ``Actum.__init__`` pays to get past
    the frozen dataclass's ``__setattr__``; once every field is set, the instance becomes an
    ``Actum`` (``__class__`` assignment, allowed between classes of the same slots), as frozen as
    any other from then on.
    """

    __slots__ = Actum.__slots__

    def __init__(
        self,
        chronicum_id: str,
        kind: ActumKind,
        actor_kind: ActorKind,
        actor: str,
        content: str,
        id: str,
        at: datetime | None,
    ) -> None:
        self.chronicum_id = chronicum_id
        self.kind = kind
        self.actor_kind = actor_kind
        self.actor = actor
        self.content = content
        self.id = id
        self.at = at
        self.__class__ = Actum  # type: ignore[assignment]


build_actum = cast(
    "Callable[[str, ActumKind, ActorKind, str, str, str, datetime | None], Actum]", _ActumInTheMaking
)
"""``build_actum(chronicum_id, kind, actor_kind, actor, content, id, at)``: the same ``Actum`` as
``Actum(chronicum_id, kind, actor_kind, actor, content, id, at)`` (every argument given, by
position), built without the constructor's keyword handling, for stores that turn rows into acta
by the thousand. Checks
nothing, as ``Actum`` does not; a missing argument raises ``TypeError`` (naming
``_ActumInTheMaking.__init__``). It sets the slots and nothing else, as ``Actum.__init__`` does:
whatever ``Actum.__init__`` is ever given to do must be done here too."""


def recorded_at(actum: Actum, at: datetime) -> Actum:
    """``actum`` as a store recorded it at ``at`` (a timezone-aware UTC datetime), every other field kept.

    The same ``Actum`` as ``dataclasses.replace(actum, at=at)``, built by :data:`build_actum` in a
    quarter of the time: a store answers every append with one. Checks nothing.
    """
    return build_actum(
        actum.chronicum_id, actum.kind, actum.actor_kind, actum.actor, actum.content, actum.id, at
    )


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

    def to_dict(self) -> dict[str, Any]:
        """Return the chronicum's public JSON form, ready for ``json.dumps``.

        Keys: ``id``, ``owner_id``, ``started_at`` and ``last_actum_at`` (ISO 8601 in UTC ending
        in ``Z``; ``last_actum_at`` is ``None`` while it has no acta). Stable, as for
        :meth:`Actum.to_dict`.
        """
        return {
            "id": self.id,
            "owner_id": self.owner_id,
            "started_at": _time_text(self.started_at),
            "last_actum_at": _time_text(self.last_actum_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chronicum:
        """Build a chronicum from its JSON form (:meth:`to_dict`); the inverse of it.

        ``last_actum_at`` may be left out (``None``); unknown keys are ignored.

        Raises:
            InvalidChronicum: ``data`` is not a mapping, or a field is missing, of the wrong type,
                or a time that is not ISO 8601 with a UTC offset (``.field`` names it).
        """
        if not isinstance(data, Mapping):
            raise InvalidChronicum("chronicum", f"must be a mapping, not {type(data).__name__}")
        fields = _Fields(data, InvalidChronicum)
        started_at = fields.time("started_at", required=True)
        assert started_at is not None  # required=True never returns None
        return cls(
            fields.text("id"),
            fields.text("owner_id"),
            started_at,
            fields.time("last_actum_at", required=False),
        )


@dataclass(frozen=True, slots=True)
class ChronicaPage:
    """One page of an owner's chronica (``Chronicarius.list_chronica``).

    Attributes:
        chronica: at most the page's limit of chronica, newest ``started_at`` first, ties by id.
        next_cursor: pass it as ``cursor`` for the next page; ``None`` on the last page.
    """

    chronica: list[Chronicum]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"chronica": [Chronicum.to_dict(), ...], "next_cursor": str | None}``."""
        return {
            "chronica": [chronicum.to_dict() for chronicum in self.chronica],
            "next_cursor": self.next_cursor,
        }


Kind = TypeVar("Kind", ActumKind, ActorKind)


def _time_text(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with ``Z``; microseconds only when there are any."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class _Fields:
    """Reads the fields of a JSON form, raising ``error(field, reason)`` for a bad one."""

    def __init__(self, data: Mapping[str, Any], error: type[InvalidActum] | type[InvalidChronicum]) -> None:
        self._data = data
        self._error = error

    def text(self, field: str, default: str | None = None) -> str:
        value = self._data.get(field)
        if value is None:  # left out, or null: the default where the field has one
            if default is None:
                raise self._error(field, "is missing")
            return default
        if not isinstance(value, str):
            raise self._error(field, f"must be a str, not {type(value).__name__}")
        return value

    def kind(self, enum: type[Kind], field: str) -> Kind:
        value = self.text(field)
        try:
            return enum(value)
        except ValueError:
            known = ", ".join(member.value for member in enum)
            raise self._error(field, f"unknown {field} {value!r}; expected one of {known}") from None

    def time(self, field: str, *, required: bool) -> datetime | None:
        value = self._data.get(field)
        if value is None:
            if required:
                raise self._error(field, "is missing")
            return None
        if not isinstance(value, str):
            raise self._error(field, f"must be an ISO 8601 str, not {type(value).__name__}")
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise self._error(field, f"{value!r} is not an ISO 8601 time") from None
        if moment.tzinfo is None:
            raise self._error(field, f"{value!r} has no UTC offset (write it with Z)")
        return moment.astimezone(UTC)


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
