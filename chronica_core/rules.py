"""The Chronicarius rules R1–R10, written once as plans that do no I/O.

The rules are written out in the repository's ``docs/contract.md``: R1 owner first, R2 validate
before writing, R3 fresh ids, R4 the first write creates, R5 not yours is not found, R6 filters,
then the limit, R7 order is write order, R8 keys land once, R9 no silent downgrade, R10 ownership
never changes. Each plan below names the rules it keeps.

:class:`chronica_core.Chronicarius` and :class:`chronica_core.AsyncChronicarius` run these plans
against a sync or an async store; neither holds a rule of its own.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from chronica_core.capabilities import BATCH, ERASURE, IDEMPOTENCY, LISTING
from chronica_core.erasure import owner_digest
from chronica_core.errors import (
    CapabilityUnsupported,
    ChronicumExists,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidOwnerID,
    InvalidQuery,
    StoreError,
)
from chronica_core.follow import Following
from chronica_core.limits import check_content_size
from chronica_core.listing import check_limit, decode_cursor, encode_cursor
from chronica_core.model import (
    MAX_ID_LENGTH,
    MAX_LAST_N,
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ChronicaPage,
    Chronicum,
    build_actum,
)
from chronica_core.plans import Plan

__all__ = ["DEFAULT_OWNER_CACHE_SIZE", "MAX_BATCH_SIZE", "MAX_FOLLOW_TIMEOUT", "Rules", "StoreCall"]

DEFAULT_OWNER_CACHE_SIZE = 10_000
"""How many ``chronicum id -> owner`` pairs a Chronicarius remembers (rule R10)."""

MAX_BATCH_SIZE = 1000
"""The most acta one ``record_acta`` call may record."""

_NEWEST = ActaQuery(last_n=1)

MAX_FOLLOW_TIMEOUT = 86_400.0
"""The longest finite ``timeout`` a blocking follower takes, in seconds (a day); longer: ``None``."""

_KINDS_NEEDING_CONTENT = frozenset({ActumKind.MESSAGE, ActumKind.THOUGHT})

_log = logging.getLogger("chronica.chronicarius")


def _refused(operation: str, owner_id: str, chronicum_id: str) -> ChronicumNotFound:
    """Rule R5's refusal of another owner's chronicum, logged; returned for the caller to raise.

    ``operation`` is what was refused, with its article: ``"a read"``, ``"a write"``, ``"an erasure"``.

    At INFO without any id (an operator sees that refusals happen); at DEBUG with the owner and
    the chronicum id, for whoever turns DEBUG on to trace one.
    """
    _log.info("refused %s: the chronicum belongs to another owner", operation)
    _log.debug("refused owner %r %s of chronicum %r, another owner's", owner_id, operation, chronicum_id)
    return ChronicumNotFound(chronicum_id)


Kind = TypeVar("Kind", ActumKind, ActorKind)


StoreCall = tuple[str, tuple[Any, ...]]
"""An operation of a rules plan: ``(method, arguments)``, to call ``store.method(*arguments)``.

A plain tuple rather than a named one, since one is built for every store call."""


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


def _follow_timeout(timeout: object) -> float | None:
    """Check a follower's ``timeout``; return it in seconds, or ``None`` for no limit.

    ``None`` and ``math.inf`` mean no limit; otherwise a real number (not a bool) from 0 (read
    once, end at once if nothing is new) to :data:`MAX_FOLLOW_TIMEOUT`.

    Raises:
        InvalidQuery: (``field="timeout"``) anything else: a bool, a str, NaN, a negative number,
            or more than :data:`MAX_FOLLOW_TIMEOUT` but finite.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidQuery("timeout", f"seconds as a number, or None for no limit, not {timeout!r}")
    if timeout == math.inf:
        return None
    if not (0 <= timeout <= MAX_FOLLOW_TIMEOUT):  # NaN fails every comparison
        raise InvalidQuery(
            "timeout",
            f"seconds, from 0 to {MAX_FOLLOW_TIMEOUT:g}, or None (or inf) for no limit, not {timeout!r}",
        )
    return float(timeout)


def _check_owner(owner_id: object) -> str:
    """Rule R1: a non-empty owner, checked before anything else."""
    if (  # the usual owner, in one expression: every call checks one
        type(owner_id) is str
        and 0 < len(owner_id) <= MAX_ID_LENGTH
        and owner_id.isascii()
        and "\x00" not in owner_id
    ):
        return owner_id
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
        capabilities: the optional capabilities the store offers (names from
            :mod:`chronica_core.capabilities`); a call needing another raises ``CapabilityUnsupported``.
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
        capabilities: frozenset[str],
        id_factory: Callable[[], str],
        owner_cache_size: int = DEFAULT_OWNER_CACHE_SIZE,
        limited: bool = False,
    ) -> None:
        self._store_name = store_name
        self._limited = limited
        self._capabilities = capabilities
        self._id_factory = id_factory
        self._owner_cache_size = owner_cache_size
        self._owners: dict[str, str] = {}  # read without the lock: a dict lookup is atomic
        self._owners_lock = threading.Lock()

    def record_actum(
        self, owner_id: str, actum: Actum, idempotency_key: str | None, create: bool = True
    ) -> Plan[StoreCall, Actum]:
        """Rules R1–R4 and R8–R9 for one write; returns the stored actum.

        With ``create=False`` rule R4 does not apply: the chronicum must exist (see :meth:`_write`).
        """
        _check_owner(owner_id)
        actum = self.validated(actum)
        self._check_key(idempotency_key)
        if idempotency_key is None:
            call: StoreCall = ("record", (actum,))
        else:
            call = ("record_idempotent", (actum, idempotency_key))
        stored: Actum = yield from self._write(owner_id, actum.chronicum_id, (actum.content,), call, create)
        return stored

    def record_acta(
        self, owner_id: str, acta: Sequence[Actum], idempotency_key: str | None, create: bool = True
    ) -> Plan[StoreCall, list[Actum]]:
        """Rules R1–R4 and R8–R9 for a batch: every actum checked first, then one atomic write.

        With ``create=False`` rule R4 does not apply: the chronicum must exist (see :meth:`_write`).
        """
        _check_owner(owner_id)
        if isinstance(acta, (str, bytes, Actum)) or not isinstance(acta, Sequence):
            raise InvalidActum("acta", f"must be a list of Actum, not {type(acta).__name__}")
        if len(acta) > MAX_BATCH_SIZE:
            raise InvalidActum("acta", f"a batch holds at most {MAX_BATCH_SIZE} acta, not {len(acta)}")
        checked: list[Actum] = []
        for index, actum in enumerate(acta):
            try:
                checked.append(self.validated(actum))
            except InvalidActum as error:
                raise InvalidActum(error.field, error.reason, index=index) from None
            if checked[index].chronicum_id != checked[0].chronicum_id:
                raise InvalidActum(
                    "chronicum_id",
                    f"every actum of a batch names one chronicum: {checked[0].chronicum_id!r} at index 0, "
                    f"{checked[index].chronicum_id!r} here",
                    index=index,
                )
        self._check_key(idempotency_key)
        if not checked:
            return []
        if BATCH not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, BATCH)
        contents = tuple(actum.content for actum in checked)
        call: StoreCall = ("record_many", (checked, idempotency_key))
        stored: list[Actum] = yield from self._write(
            owner_id, checked[0].chronicum_id, contents, call, create
        )
        return stored

    def list_chronica(self, owner_id: str, limit: int, cursor: str | None) -> Plan[StoreCall, ChronicaPage]:
        """Rules R1 and R5 for a listing: one page of the owner's own chronica, newest first."""
        _check_owner(owner_id)
        limit = check_limit(limit)
        after = None if cursor is None else decode_cursor(owner_id, cursor)
        if LISTING not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, LISTING)
        chronica: list[Chronicum] = yield ("list_chronica", (owner_id, limit + 1, after))
        for chronicum in chronica:
            self._remember(chronicum.id, chronicum.owner_id)
        if any(chronicum.owner_id != owner_id for chronicum in chronica):  # rule R5, whatever the store
            raise StoreError(
                f"{self._store_name}: list chronica", "the store listed another owner's chronicum"
            )
        if len(chronica) <= limit:
            return ChronicaPage(chronica, None)
        page = chronica[:limit]
        return ChronicaPage(page, encode_cursor(owner_id, page[-1]))

    def erase_chronicum(self, owner_id: str, chronicum_id: str) -> Plan[StoreCall, int]:
        """Rules R1 and R5 for an erasure: only the owner's chronicum; returns the acta erased."""
        _check_owner(owner_id)
        if ERASURE not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, ERASURE)
        owner = self._owners.get(chronicum_id) if isinstance(chronicum_id, str) else None
        if owner is None:
            owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:
            raise _refused("an erasure", owner_id, chronicum_id)
        erased: int = yield ("erase", (chronicum_id, owner_digest(owner_id)))
        return erased

    def erase_owner(self, owner_id: str) -> Plan[StoreCall, int]:
        """Rule R1 for an erasure of everything an owner has; returns the chronica erased."""
        _check_owner(owner_id)
        if ERASURE not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, ERASURE)
        erased: int = yield ("erase_owner", (owner_id, owner_digest(owner_id)))
        return erased

    def _check_key(self, idempotency_key: str | None) -> None:
        """Rules R8–R9: a usable key, and a store that can honour it."""
        if idempotency_key is None:
            return
        problem = _text_problem(idempotency_key)
        if problem is not None:
            raise InvalidActum("idempotency_key", problem)
        if IDEMPOTENCY not in self._capabilities:
            raise IdempotencyUnsupported(self._store_name)

    def _write(
        self, owner_id: str, chronicum_id: str, contents: tuple[str, ...], call: StoreCall, create: bool
    ) -> Plan[StoreCall, Any]:
        """Rule R4 then the write ``call``: claim the chronicum (or check its owner), then write.

        An owner remembered from before may be stale in one way only: the chronicum was erased
        since (its owner unchanged). The store then answers ``ChronicumNotFound``; the owner is
        read again once, which reopens the chronicum for the same owner.

        With ``create=False`` the chronicum is never created nor reopened: an id nobody holds, or
        one erased (before the write, or between the owner check and the write: the store answers
        ``ChronicumNotFound`` for its marker), is ``ChronicumNotFound`` with nothing written.
        """
        owner = self._owners.get(chronicum_id)
        remembered = owner is not None
        if owner is None:
            if create:
                owner = yield from self._claim(owner_id, chronicum_id, contents)
            else:
                owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:
            raise _refused("a write", owner_id, chronicum_id)
        try:
            return (yield call)
        except ChronicumNotFound:
            if not create or not remembered or ERASURE not in self._capabilities:
                raise
        owner = yield from self._claim(owner_id, chronicum_id, contents)
        if owner != owner_id:
            raise _refused("a write", owner_id, chronicum_id)
        return (yield call)

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
            raise _refused("a read", owner_id, chronicum_id)
        acta: list[Actum] = yield ("acta", (chronicum_id, query))
        return acta

    def follow(
        self,
        owner_id: str,
        chronicum_id: str,
        after: str | None,
        actum_kinds: Iterable[ActumKind | str] | None,
        actor_kinds: Iterable[ActorKind | str] | None,
        poll_interval: float,
        timeout: float | None = None,
    ) -> Plan[StoreCall, Following]:
        """Rules R1, R5 and R6's filters for a follower: check the owner, then take the position.

        With ``after`` the position is that actum (checked by the first read,
        :func:`chronica_core.follow.follow_step`); without it, the chronicum's newest actum now.
        ``timeout`` (seconds each step waits for news) is checked by :func:`_follow_timeout` and
        kept, normalised, in the returned ``Following``; every argument is checked before the
        store is asked anything.
        """
        _check_owner(owner_id)
        query = _query(actum_kinds, actor_kinds, 0)
        if after is not None and _text_problem(after) is not None:
            raise InvalidQuery("after", f"an actum id or None; it {_text_problem(after)}")
        if (
            isinstance(poll_interval, bool)
            or not isinstance(poll_interval, (int, float))
            or not (0 < poll_interval <= 3600)
        ):
            raise InvalidQuery(
                "poll_interval", f"seconds, more than 0 and at most 3600, not {poll_interval!r}"
            )
        step_timeout = _follow_timeout(timeout)
        owner = self._owners.get(chronicum_id) if isinstance(chronicum_id, str) else None
        if owner is None:
            owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:  # rule R5: not the owner's answers exactly like missing
            raise ChronicumNotFound(chronicum_id)
        position, checked = after, False
        if after is None:
            newest: list[Actum] = yield ("acta", (chronicum_id, _NEWEST))
            position, checked = (newest[-1].id if newest else None), True
        return Following(
            chronicum_id, query, position, checked, self._capabilities, float(poll_interval), step_timeout
        )

    def get_chronicum(self, owner_id: str, chronicum_id: str) -> Plan[StoreCall, Chronicum]:
        """Rules R1 and R5: the owner's chronicum, read fresh from the store."""
        _check_owner(owner_id)
        if _text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        chronicum: Chronicum = yield ("get", (chronicum_id,))
        self._remember(chronicum.id, chronicum.owner_id)
        if chronicum.owner_id != owner_id:
            raise _refused("a read", owner_id, chronicum_id)
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
        return build_actum(
            actum.chronicum_id, kind, actor_kind, actum.actor, content, self._id_factory(), None
        )

    def _claim(self, owner_id: str, chronicum_id: str, contents: tuple[str, ...]) -> Plan[StoreCall, str]:
        """Rule R4: return the chronicum's owner, creating it for ``owner_id`` on the first write.

        Content the store cannot take is refused (``ActumTooLarge``) before the chronicum is
        created, so a refused first write leaves nothing behind. An id whose chronicum was erased
        is reopened, fresh, for the owner it belonged to, and for no one else.
        """
        try:
            chronicum: Chronicum = yield ("get", (chronicum_id,))
        except ChronicumNotFound:
            pass
        else:
            self._remember(chronicum_id, chronicum.owner_id)
            return chronicum.owner_id
        if self._limited:
            limit: int | None = yield ("max_content_bytes", ())
            for content in contents:
                check_content_size(content, limit)
        started = Chronicum(chronicum_id, owner_id, started_at=datetime.now(UTC))
        try:
            yield ("create", (started,))
            owner = owner_id
        except ChronicumExists:  # lost a race with another first write, or the id was erased
            owner = yield from self._owner_after_lost_create(started)
        self._remember(chronicum_id, owner)
        return owner

    def _owner_after_lost_create(self, started: Chronicum) -> Plan[StoreCall, str]:
        """The owner of an id ``create`` found taken: a racing first write's, or an erased chronicum's."""
        try:
            chronicum: Chronicum = yield ("get", (started.id,))
            return chronicum.owner_id
        except ChronicumNotFound:
            if ERASURE not in self._capabilities:
                raise
        reopened: bool = yield ("reopen", (started, owner_digest(started.owner_id)))
        if reopened:
            return started.owner_id
        chronicum = yield ("get", (started.id,))  # reopened meanwhile by the owner, or not theirs
        return chronicum.owner_id

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
