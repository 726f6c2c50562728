"""The data model: chronica, acta, their kinds and the query for a context window."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol, TypeVar, cast

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
    "ForkPoint",
    "Native",
    "Span",
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


@dataclass(frozen=True, slots=True)
class Native:
    """A framework's own form of an actum, kept beside its readable content.

    The framework that wrote it reads it back exactly; every other reader uses the actum's
    ``content``. Kept by stores with the ``native`` capability.

    Attributes:
        format: names the form, e.g. ``"openai-agents.item"``: the framework's name, then what
            ``data`` holds (1 to 255 characters, no NUL).
        data: the form itself, as text (usually JSON); any text that can be encoded as UTF-8.
    """

    format: str
    data: str

    def to_dict(self) -> dict[str, str]:
        """Return ``{"format": ..., "data": ...}``."""
        return {"format": self.format, "data": self.data}


@dataclass(frozen=True, slots=True)
class Span:
    """A consecutive range of a chronicum's history: from the actum ``first`` to ``last``, both included.

    Attributes:
        first: id of the range's first actum.
        last: id of its last actum (``first`` itself for a range of one).
    """

    first: str
    last: str

    def to_dict(self) -> dict[str, str]:
        """Return ``{"first": ..., "last": ...}``."""
        return {"first": self.first, "last": self.last}


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """Where a fork branched off: the source chronicum and the last actum the fork shares with it.

    Attributes:
        chronicum_id: id of the chronicum the fork was made from.
        actum_id: id of the last actum of the source's history that the fork shares.
            ``""`` when the source had no acta when it was forked.
    """

    chronicum_id: str
    actum_id: str

    def to_dict(self) -> dict[str, str]:
        """Return ``{"chronicum_id": ..., "actum_id": ...}``."""
        return {"chronicum_id": self.chronicum_id, "actum_id": self.actum_id}


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
        native: the framework's own form of the actum, beside ``content`` (see :class:`Native`);
            ``None`` for an actum without one.
        answers: for a ``tool_response``, the id of the ``tool_request`` it answers (an actum of
            the same chronicum's history, checked when it is recorded); ``""`` when it names none.
        summarizes: for a summary, the range of the history it stands for (see :class:`Span`);
            ``None`` for any other actum. A summary is a ``message``.
    """

    chronicum_id: str
    kind: ActumKind
    actor_kind: ActorKind
    actor: str
    content: str = ""
    id: str = ""
    at: datetime | None = None
    native: Native | None = None
    answers: str = ""
    summarizes: Span | None = None

    def __init__(
        self,
        chronicum_id: str,
        kind: ActumKind,
        actor_kind: ActorKind,
        actor: str,
        content: str = "",
        id: str = "",
        at: datetime | None = None,
        native: Native | None = None,
        answers: str = "",
        summarizes: Span | None = None,
    ) -> None:
        # The generated __init__ of a frozen dataclass sets each field through
        # object.__setattr__; context windows build acta by the thousand, so set the slots
        # directly. The instance is as frozen as ever. build_actum builds the
        # same instance another way: keep the two doing the same (setting the slots, no more).
        _set_chronicum_id(self, chronicum_id)
        _set_kind(self, kind)
        _set_actor_kind(self, actor_kind)
        _set_actor(self, actor)
        _set_content(self, content)
        _set_id(self, id)
        _set_at(self, at)
        _set_native(self, native)
        _set_answers(self, answers)
        _set_summarizes(self, summarizes)

    def to_dict(self) -> dict[str, Any]:
        """Return the actum's public JSON form, ready for ``json.dumps``.

        Keys: ``id``, ``chronicum_id``, ``kind`` and ``actor_kind`` (their string values),
        ``actor``, ``content`` and ``at`` (ISO 8601 in UTC ending in ``Z``, e.g.
        ``"2026-11-30T20:45:43.123456Z"``, or ``None`` before it is recorded); then ``native``
        (``{"format", "data"}``), ``answers`` and ``summarizes`` (``{"first", "last"}``), each
        only when the actum has one. These names are stable; new keys may be added, never renamed.
        """
        form: dict[str, Any] = {
            "id": self.id,
            "chronicum_id": self.chronicum_id,
            "kind": str(self.kind),
            "actor_kind": str(self.actor_kind),
            "actor": self.actor,
            "content": self.content,
            "at": _time_text(self.at),
        }
        if self.native is not None:
            form["native"] = self.native.to_dict()
        if self.answers:
            form["answers"] = self.answers
        if self.summarizes is not None:
            form["summarizes"] = self.summarizes.to_dict()
        return form

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Actum:
        """Build an actum from its JSON form (:meth:`to_dict`); ``Actum.from_dict(a.to_dict()) == a``.

        ``id``, ``content``, ``at``, ``native``, ``answers`` and ``summarizes`` may be left out or
        null; keys it does not know are ignored, so a newer writer's form still reads. ``at``
        becomes a UTC datetime.

        Raises:
            InvalidActum: ``data`` is not a mapping, or a field is missing or of the wrong type, an
                unknown kind, or an ``at`` that is not an ISO 8601 time with a UTC offset
                (``.field`` names it, e.g. ``"native.format"``).
        """
        if not isinstance(data, Mapping):
            raise InvalidActum("actum", f"must be a mapping, not {type(data).__name__}")
        fields = _Fields(data, InvalidActum)
        native = fields.pair("native", ("format", "data"))
        summarizes = fields.pair("summarizes", ("first", "last"))
        return cls(
            fields.text("chronicum_id"),
            fields.kind(ActumKind, "kind"),
            fields.kind(ActorKind, "actor_kind"),
            fields.text("actor"),
            fields.text("content", ""),
            fields.text("id", ""),
            fields.time("at", required=False),
            None if native is None else Native(*native),
            fields.text("answers", ""),
            None if summarizes is None else Span(*summarizes),
        )


_set_chronicum_id = vars(Actum)["chronicum_id"].__set__
_set_kind = vars(Actum)["kind"].__set__
_set_actor_kind = vars(Actum)["actor_kind"].__set__
_set_actor = vars(Actum)["actor"].__set__
_set_content = vars(Actum)["content"].__set__
_set_id = vars(Actum)["id"].__set__
_set_at = vars(Actum)["at"].__set__
_set_native = vars(Actum)["native"].__set__
_set_answers = vars(Actum)["answers"].__set__
_set_summarizes = vars(Actum)["summarizes"].__set__


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
        native: Native | None = None,
        answers: str = "",
        summarizes: Span | None = None,
    ) -> None:
        self.chronicum_id = chronicum_id
        self.kind = kind
        self.actor_kind = actor_kind
        self.actor = actor
        self.content = content
        self.id = id
        self.at = at
        self.native = native
        self.answers = answers
        self.summarizes = summarizes
        self.__class__ = Actum  # type: ignore[assignment]


class _BuildActum(Protocol):
    def __call__(
        self,
        chronicum_id: str,
        kind: ActumKind,
        actor_kind: ActorKind,
        actor: str,
        content: str,
        id: str,
        at: datetime | None,
        native: Native | None = None,
        answers: str = "",
        summarizes: Span | None = None,
    ) -> Actum: ...


build_actum = cast("_BuildActum", _ActumInTheMaking)
"""``build_actum(chronicum_id, kind, actor_kind, actor, content, id, at[, native, answers, summarizes])``:
the same ``Actum`` as the constructor given the same arguments (the first seven by position,
always), built without the frozen dataclass's ``__setattr__``, for stores that turn rows into acta
by the thousand. Checks nothing, as ``Actum`` does not; a missing argument raises ``TypeError``
(naming ``_ActumInTheMaking.__init__``). It sets the slots and nothing else, as ``Actum.__init__``
does: whatever ``Actum.__init__`` is ever given to do must be done here too."""


def recorded_at(actum: Actum, at: datetime) -> Actum:
    """``actum`` as a store recorded it at ``at`` (a timezone-aware UTC datetime), every other field kept.

    The same ``Actum`` as ``dataclasses.replace(actum, at=at)``, built by :data:`build_actum`, which
    skips the frozen dataclass's checks: a store answers every append with one. Checks nothing.
    """
    return build_actum(
        actum.chronicum_id,
        actum.kind,
        actum.actor_kind,
        actum.actor,
        actum.content,
        actum.id,
        at,
        actum.native,
        actum.answers,
        actum.summarizes,
    )


@dataclass(frozen=True, slots=True)
class Chronicum:
    """One session, shared by one owner and any number of agents.

    Attributes:
        id: the chronicum id chosen by the app (non-empty ``str``).
        owner_id: the person it belongs to; never changes.
        started_at: timezone-aware UTC moment it was created.
        last_actum_at: timezone-aware UTC ``at`` of the newest actum of its history, ``None``
            while it has none (for a fork, the newest it shares with its source until it has its own).
        forked_from: for a fork, where it branched off (see :class:`ForkPoint`); ``None`` otherwise.
    """

    id: str
    owner_id: str
    started_at: datetime
    last_actum_at: datetime | None = None
    forked_from: ForkPoint | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the chronicum's public JSON form, ready for ``json.dumps``.

        Keys: ``id``, ``owner_id``, ``started_at`` and ``last_actum_at`` (ISO 8601 in UTC ending
        in ``Z``; ``last_actum_at`` is ``None`` while it has no acta), and ``forked_from``
        (``{"chronicum_id", "actum_id"}``) for a fork only. Stable, as for :meth:`Actum.to_dict`.
        """
        form: dict[str, Any] = {
            "id": self.id,
            "owner_id": self.owner_id,
            "started_at": _time_text(self.started_at),
            "last_actum_at": _time_text(self.last_actum_at),
        }
        if self.forked_from is not None:
            form["forked_from"] = self.forked_from.to_dict()
        return form

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chronicum:
        """Build a chronicum from its JSON form (:meth:`to_dict`); the inverse of it.

        ``last_actum_at`` and ``forked_from`` may be left out (``None``); unknown keys are ignored.

        Raises:
            InvalidChronicum: ``data`` is not a mapping, or a field is missing, of the wrong type,
                or a time that is not ISO 8601 with a UTC offset (``.field`` names it).
        """
        if not isinstance(data, Mapping):
            raise InvalidChronicum("chronicum", f"must be a mapping, not {type(data).__name__}")
        fields = _Fields(data, InvalidChronicum)
        started_at = fields.time("started_at", required=True)
        assert started_at is not None  # required=True never returns None
        forked_from = fields.pair("forked_from", ("chronicum_id", "actum_id"))
        return cls(
            fields.text("id"),
            fields.text("owner_id"),
            started_at,
            fields.time("last_actum_at", required=False),
            None if forked_from is None else ForkPoint(*forked_from),
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

    def pair(self, field: str, keys: tuple[str, str]) -> tuple[str, str] | None:
        """Read an object of two text keys (``None`` when left out or null); errors name ``field.key``."""
        value = self._data.get(field)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._error(
                field, f"must be an object with {keys[0]!r} and {keys[1]!r}, not {type(value).__name__}"
            )
        inner = _Fields(value, self._error)
        try:
            return inner.text(keys[0]), inner.text(keys[1])
        except (InvalidActum, InvalidChronicum) as error:
            raise self._error(f"{field}.{error.field}", error.reason) from None

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
