"""The Chronicarius rules R1–R10 (listed below), written once as plans that do no I/O.

:class:`chronica_core.Chronicarius` and :class:`chronica_core.AsyncChronicarius` run these plans
against a sync or an async store; neither holds a rule of its own.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar

from chronica_core.errors import (
    ChronicumExists,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidOwnerID,
    InvalidQuery,
)
from chronica_core.limits import check_content_size
from chronica_core.model import MAX_ID_LENGTH, MAX_LAST_N, ActaQuery, ActorKind, Actum, ActumKind, Chronicum
from chronica_core.plans import Plan

__all__ = ["DEFAULT_OWNER_CACHE_SIZE", "Rules", "StoreCall"]

DEFAULT_OWNER_CACHE_SIZE = 10_000
"""How many ``chronicum id -> owner`` pairs a Chronicarius remembers (rule R10)."""

_KINDS_NEEDING_CONTENT = frozenset({ActumKind.MESSAGE, ActumKind.THOUGHT})

Kind = TypeVar("Kind", ActumKind, ActorKind)


StoreCall = tuple[str, tuple[Any, ...]]
"""An operation of a rules plan: ``(method, arguments)``, to call ``store.method(*arguments)``.

A plain tuple: one is built for every store call, and a named tuple costs ten times as much."""


def _text_problem(value: object) -> str | None:
    """Say why ``value`` cannot serve as an id or actor, or return ``None`` when it can."""
    if not isinstance(value, str):
        return f"must be a str, not {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters, not {len(value)}"
    if "\x00" in value:
        return "must not contain NUL"
    return _encoding_problem(value)


def _encoding_problem(value: str) -> str | None:
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"cannot be encoded as UTF-8 ({error.reason} at index {error.start})"
    return None


def _check_owner(owner_id: object) -> str:
    """Rule R1: a non-empty owner, checked before anything else."""
    if owner_id is None or owner_id == "":
        raise EmptyOwnerID()
    problem = _text_problem(owner_id)
    if problem is not None:
        raise InvalidOwnerID(problem)
    return owner_id  # type: ignore[return-value]


def _enum_value(enum: type[Kind], value: object, field: str) -> Kind:
    if type(value) is enum:
        return value
    try:
        return enum(value)  # type: ignore[arg-type]  # anything not a member is refused below
    except ValueError:
        known = ", ".join(member.value for member in enum)
        raise InvalidActum(field, f"unknown {field} {value!r}; expected one of {known}") from None


def _query_kinds(
    enum: type[Kind], values: tuple[Kind | str, ...] | None, field: str
) -> tuple[Kind, ...] | None:
    if values is None:
        return None
    try:
        kinds = {enum(value) for value in values}
    except (ValueError, TypeError):
        known = ", ".join(member.value for member in enum)
        raise InvalidQuery(field, f"expected values among {known}, got {list(values)!r}") from None
    return tuple(sorted(kinds)) or None


@functools.lru_cache(maxsize=256)
def _cached_query(
    actum_kinds: tuple[ActumKind | str, ...] | None,
    actor_kinds: tuple[ActorKind | str, ...] | None,
    last_n: int,
) -> ActaQuery:
    """Agents ask for the same few windows over and over; build each query once."""
    return ActaQuery(
        actum_kinds=_query_kinds(ActumKind, actum_kinds, "actum_kinds"),
        actor_kinds=_query_kinds(ActorKind, actor_kinds, "actor_kinds"),
        last_n=0 if last_n > MAX_LAST_N else max(last_n, 0),
    )


def _as_tuple(values: Iterable[Kind | str] | None, field: str) -> tuple[Kind | str, ...] | None:
    if values is None or isinstance(values, str):
        return None if values is None else (values,)
    try:
        return tuple(values)
    except TypeError:
        raise InvalidQuery(field, f"must be an iterable of kinds, not {type(values).__name__}") from None


def _query(
    actum_kinds: Iterable[ActumKind | str] | None,
    actor_kinds: Iterable[ActorKind | str] | None,
    last_n: int,
) -> ActaQuery:
    """Rule R6's query: filters as sorted tuples of enums (``None`` for every kind), then the limit."""
    if isinstance(last_n, bool) or not isinstance(last_n, int):
        raise InvalidQuery("last_n", f"must be an int, not {type(last_n).__name__}")
    kinds, actors = _as_tuple(actum_kinds, "actum_kinds"), _as_tuple(actor_kinds, "actor_kinds")
    try:
        return _cached_query(kinds, actors, last_n)
    except TypeError:  # an unhashable value cannot be a kind
        field = "actum_kinds" if _unhashable(kinds) else "actor_kinds"
        raise InvalidQuery(field, "expected kinds (enums or their string values)") from None


def _unhashable(values: tuple[object, ...] | None) -> bool:
    try:
        hash(values)
    except TypeError:
        return True
    return False


class Rules:
    """Ownership, validation, ids, idempotency and the owner cache, as plans of :class:`StoreCall`.

    Args:
        store_name: how errors name the store, e.g. its class name.
        idempotent: whether the store offers ``record_idempotent``.
        id_factory: returns a fresh actum id for every recorded actum.
        owner_cache_size: how many ``chronicum id -> owner`` pairs to remember (0 disables it).
        limited: whether the store tells its content limit (``max_content_bytes()``, see
            :class:`chronica_core.PlannedStore`); the first write into a new chronicum then checks
            the content against it before the chronicum is created.
    """

    def __init__(
        self,
        *,
        store_name: str,
        idempotent: bool,
        id_factory: Callable[[], str],
        owner_cache_size: int = DEFAULT_OWNER_CACHE_SIZE,
        limited: bool = False,
    ) -> None:
        self._store_name = store_name
        self._limited = limited
        self._idempotent = idempotent
        self._id_factory = id_factory
        self._owner_cache_size = owner_cache_size
        self._owners: dict[str, str] = {}  # read without the lock: a dict lookup is atomic
        self._owners_lock = threading.Lock()

    def record_actum(
        self, owner_id: str, actum: Actum, idempotency_key: str | None
    ) -> Plan[StoreCall, Actum]:
        """Rules R1–R4 and R8–R9 for one write; returns the stored actum."""
        _check_owner(owner_id)
        actum = self.validated(actum)
        if idempotency_key is not None:
            problem = _text_problem(idempotency_key)
            if problem is not None:
                raise InvalidActum("idempotency_key", problem)
            if not self._idempotent:
                raise IdempotencyUnsupported(self._store_name)
        owner = self._owners.get(actum.chronicum_id)
        if owner is None:
            owner = yield from self._claim(owner_id, actum)
        if owner != owner_id:
            raise ChronicumNotFound(actum.chronicum_id)
        if idempotency_key is None:
            stored: Actum = yield ("record", (actum,))
        else:
            stored = yield ("record_idempotent", (actum, idempotency_key))
        return stored

    def get_acta(
        self,
        owner_id: str,
        chronicum_id: str,
        actum_kinds: Iterable[ActumKind | str] | None,
        actor_kinds: Iterable[ActorKind | str] | None,
        last_n: int,
    ) -> Plan[StoreCall, list[Actum]]:
        """Rules R1, R5 and R6: the owner's context window, oldest first."""
        _check_owner(owner_id)
        query = _query(actum_kinds, actor_kinds, last_n)
        owner = self._owners.get(chronicum_id) if isinstance(chronicum_id, str) else None
        if owner is None:
            owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:  # rule R5: not the owner's answers exactly like missing
            raise ChronicumNotFound(chronicum_id)
        acta: list[Actum] = yield ("acta", (chronicum_id, query))
        return acta

    def get_chronicum(self, owner_id: str, chronicum_id: str) -> Plan[StoreCall, Chronicum]:
        """Rules R1 and R5: the owner's chronicum, read fresh from the store."""
        _check_owner(owner_id)
        if _text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        chronicum: Chronicum = yield ("get", (chronicum_id,))
        self._remember(chronicum.id, chronicum.owner_id)
        if chronicum.owner_id != owner_id:
            raise ChronicumNotFound(chronicum_id)
        return chronicum

    def validated(self, actum: Actum) -> Actum:
        """Rules R2 and R3: return ``actum`` with enum kinds, a fresh id and no ``at``.

        Raises ``InvalidActum`` naming the first offending field.
        """
        if not isinstance(actum, Actum):
            raise InvalidActum("actum", f"must be an Actum, not {type(actum).__name__}")
        for field, value in (("chronicum_id", actum.chronicum_id), ("actor", actum.actor)):
            problem = _text_problem(value)
            if problem is not None:
                raise InvalidActum(field, problem)
        kind = _enum_value(ActumKind, actum.kind, "kind")
        actor_kind = _enum_value(ActorKind, actum.actor_kind, "actor_kind")
        content: object = actum.content
        if not isinstance(content, str):
            raise InvalidActum("content", f"must be a str, not {type(content).__name__}")
        if not content and kind in _KINDS_NEEDING_CONTENT:
            raise InvalidActum("content", f"a {kind.value} needs non-empty content")
        problem = _encoding_problem(content)
        if problem is not None:
            raise InvalidActum("content", problem)
        return Actum(actum.chronicum_id, kind, actor_kind, actum.actor, content, self._id_factory())

    def _claim(self, owner_id: str, actum: Actum) -> Plan[StoreCall, str]:
        """Rule R4: return the chronicum's owner, creating it for ``owner_id`` on the first write.

        Content the store cannot take is refused (``ActumTooLarge``) before the chronicum is
        created, so a refused first write leaves nothing behind.
        """
        chronicum_id = actum.chronicum_id
        try:
            chronicum: Chronicum = yield ("get", (chronicum_id,))
        except ChronicumNotFound:
            pass
        else:
            self._remember(chronicum_id, chronicum.owner_id)
            return chronicum.owner_id
        if self._limited:
            limit: int | None = yield ("max_content_bytes", ())
            check_content_size(actum.content, limit)
        started = Chronicum(chronicum_id, owner_id, started_at=datetime.now(UTC))
        try:
            yield ("create", (started,))
            owner = owner_id
        except ChronicumExists:  # lost a race with another first write: read the winner
            chronicum = yield ("get", (chronicum_id,))
            owner = chronicum.owner_id
        self._remember(chronicum_id, owner)
        return owner

    def _read_owner(self, chronicum_id: str) -> Plan[StoreCall, str]:
        """Return the owner of an existing chronicum; an id that cannot exist is not found."""
        if _text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        chronicum: Chronicum = yield ("get", (chronicum_id,))
        self._remember(chronicum_id, chronicum.owner_id)
        return chronicum.owner_id

    def _remember(self, chronicum_id: str, owner_id: str) -> None:
        """Rule R10: ownership never changes, so a bounded cache may save a round trip."""
        if self._owner_cache_size <= 0:
            return
        with self._owners_lock:
            self._owners[chronicum_id] = owner_id
            while len(self._owners) > self._owner_cache_size:  # forget the oldest
                del self._owners[next(iter(self._owners))]
