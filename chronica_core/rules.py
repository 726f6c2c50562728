"""The Chronicarius rules R1–R10, written once as plans that do no I/O.

The rules are written out in the repository's ``docs/contract.md``: R1 owner first, R2 validate
before writing, R3 fresh ids, R4 the first write creates, R5 not yours is not found, R6 filters,
then the limit, R7 order is write order, R8 keys land once, R9 no silent downgrade, R10 ownership
never changes. Each plan below names the rules it keeps.

:class:`chronica_core.Chronicarius` and :class:`chronica_core.AsyncChronicarius` run these plans
against a sync or an async store; neither holds a rule of its own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Final

from chronica_core import clock
from chronica_core.capabilities import BATCH, ERASURE, HISTORY, IDEMPOTENCY, LISTING, NATIVE, RETENTION
from chronica_core.checks import (
    MAX_FOLLOW_TIMEOUT,
    Shape,
    acta_query,
    check_owner,
    checked_position,
    checked_shape,
    encoding_problem,
    enum_value,
    follow_timeout,
    refused,
    text_problem,
)
from chronica_core.erasure import owner_digest
from chronica_core.errors import (
    CapabilityUnsupported,
    ChronicumExists,
    ChronicumNotFound,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidQuery,
    StoreError,
)
from chronica_core.follow import Following
from chronica_core.history import StaleLayout, ToolExchanges, View
from chronica_core.history_rules import HistoryRules, newest
from chronica_core.ids import new_chronicum_id
from chronica_core.limits import check_actum_size
from chronica_core.listing import check_limit, decode_cursor, encode_cursor
from chronica_core.model import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ChronicaPage,
    Chronicum,
    Native,
    Span,
    build_actum,
)
from chronica_core.plans import Plan
from chronica_core.retention import erase_idle, idle_before

__all__ = ["DEFAULT_OWNER_CACHE_SIZE", "MAX_BATCH_SIZE", "MAX_FOLLOW_TIMEOUT", "Rules", "StoreCall"]

DEFAULT_OWNER_CACHE_SIZE = 10_000
"""How many ``chronicum id -> owner`` pairs a Chronicarius remembers (rule R10)."""

MAX_BATCH_SIZE = 1000
"""The most acta one ``record_acta`` call may record."""

_NEWEST = ActaQuery(last_n=1)

_log = logging.getLogger("chronica.chronicarius")

_DEFAULT_SHAPE: Final = (None, False, View.SUMMARIZED, ToolExchanges.WHOLE)

_KINDS_NEEDING_CONTENT = frozenset({ActumKind.MESSAGE, ActumKind.THOUGHT})

StoreCall = tuple[str, tuple[Any, ...]]
"""An operation of a rules plan: ``(method, arguments)``, to call ``store.method(*arguments)``.

A plain tuple rather than a named one, since one is built for every store call."""


def _answering(actum: Actum, request_id: str) -> Actum:
    """``actum`` answering the request whose (new) id is ``request_id``."""
    return build_actum(
        actum.chronicum_id,
        actum.kind,
        actum.actor_kind,
        actum.actor,
        actum.content,
        actum.id,
        actum.at,
        actum.native,
        request_id,
        actum.summarizes,
    )


def _answered_in_batch(checked: list[Actum], given: dict[str, int]) -> dict[str, list[int | None]]:
    """Link a batch's responses to the batch's requests they name, in place; return the others.

    A response's ``answers`` naming an id the caller gave an actum of the batch names that actum:
    it must be an earlier ``tool_request`` (``InvalidActum(field="answers")`` with the response's
    index otherwise), and the response then answers that request's new id. The ids named that
    are no given id are returned, each with the indexes of the responses naming it, to be looked
    up in the chronicum's history.
    """
    outside: dict[str, list[int | None]] = {}
    for index, actum in enumerate(checked):
        if not actum.answers:
            continue
        named = given.get(actum.answers)
        if named is None:
            outside.setdefault(actum.answers, []).append(index)
            continue
        request = checked[named]
        if named >= index:
            problem = f"names the actum at index {named} of the batch, not one before it"
        elif request.kind is not ActumKind.TOOL_REQUEST:
            problem = (
                f"names the actum at index {named} of the batch, a {request.kind.value}, not a tool_request"
            )
        else:
            checked[index] = _answering(actum, request.id)
            continue
        raise InvalidActum("answers", f"{actum.answers!r} {problem}", index=index)
    return outside


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
        withdraws: whether the store can withdraw an empty chronicum (``withdraw``, see
            :class:`chronica_core.ErasableStore`); a first write that created its chronicum and
            then failed with ``StoreError`` then withdraws it.
    """

    def __init__(
        self,
        *,
        store_name: str,
        capabilities: frozenset[str],
        id_factory: Callable[[], str],
        owner_cache_size: int = DEFAULT_OWNER_CACHE_SIZE,
        limited: bool = False,
        withdraws: bool = False,
    ) -> None:
        self._store_name = store_name
        self._limited = limited
        self._withdraws = withdraws and ERASURE in capabilities
        self._capabilities = capabilities
        self._id_factory = id_factory
        self._owner_cache_size = owner_cache_size
        self._owners: dict[str, str] = {}  # read without the lock: a dict lookup is atomic
        self._owners_lock = threading.Lock()
        self._history = HistoryRules(
            store_name=store_name, remember=self._remember, cache_size=owner_cache_size
        )

    def record_actum(
        self, owner_id: str, actum: Actum, idempotency_key: str | None, create: bool = True
    ) -> Plan[StoreCall, Actum]:
        """Rules R1–R4 and R8–R9 for one write; returns the stored actum.

        With ``create=False`` rule R4 does not apply: the chronicum must exist (see :meth:`_write`).
        """
        check_owner(owner_id)
        _check_create(create)
        actum = self.validated(actum)
        self._check_key(idempotency_key)
        if actum.summarizes is not None:
            summary: Actum = yield from self._history.record_summary(owner_id, actum, idempotency_key)
            return summary
        if actum.answers:
            yield from self._history.check_answers(owner_id, actum.chronicum_id, {actum.answers: [None]})
        if idempotency_key is None:
            call: StoreCall = ("record", (actum,))
        else:
            call = ("record_idempotent", (actum, idempotency_key))
        stored: Actum = yield from self._write(owner_id, actum.chronicum_id, (actum,), call, create)
        return stored

    def record_acta(
        self, owner_id: str, acta: Sequence[Actum], idempotency_key: str | None, create: bool = True
    ) -> Plan[StoreCall, list[Actum]]:
        """Rules R1–R4 and R8–R9 for a batch: every actum checked first, then one atomic write.

        With ``create=False`` rule R4 does not apply: the chronicum must exist (see :meth:`_write`).
        """
        check_owner(owner_id)
        _check_create(create)
        if isinstance(acta, (str, bytes, Actum)) or not isinstance(acta, Sequence):
            raise InvalidActum("acta", f"must be a list of Actum, not {type(acta).__name__}")
        if len(acta) > MAX_BATCH_SIZE:
            raise InvalidActum("acta", f"a batch holds at most {MAX_BATCH_SIZE} acta, not {len(acta)}")
        checked: list[Actum] = []
        given: dict[str, int] = {}  # the ids the caller gave -> their index
        for index, actum in enumerate(acta):
            try:
                valid = self.validated(actum)
                if valid.summarizes is not None:
                    raise InvalidActum("summarizes", "a summary is recorded on its own, not in a batch")
            except InvalidActum as error:
                raise InvalidActum(error.field, error.reason, index=index) from None
            if valid.chronicum_id != (checked[0] if checked else valid).chronicum_id:
                raise InvalidActum(
                    "chronicum_id",
                    f"every actum of a batch names one chronicum: {checked[0].chronicum_id!r} at index 0, "
                    f"{valid.chronicum_id!r} here",
                    index=index,
                )
            if isinstance(actum.id, str) and actum.id:
                if actum.id in given:
                    raise InvalidActum(
                        "id",
                        f"{actum.id!r} is given to the actum at index {given[actum.id]} too: "
                        "the ids given in a batch must differ",
                        index=index,
                    )
                given[actum.id] = index
            checked.append(valid)
        outside = _answered_in_batch(checked, given)
        self._check_key(idempotency_key)
        if not checked:
            return []
        if BATCH not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, BATCH)
        if outside:
            yield from self._history.check_answers(owner_id, checked[0].chronicum_id, outside)
        call: StoreCall = ("record_many", (checked, idempotency_key))
        stored: list[Actum] = yield from self._write(
            owner_id, checked[0].chronicum_id, tuple(checked), call, create
        )
        return stored

    def list_chronica(self, owner_id: str, limit: int, cursor: str | None) -> Plan[StoreCall, ChronicaPage]:
        """Rules R1 and R5 for a listing: one page of the owner's own chronica, newest first."""
        check_owner(owner_id)
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
        check_owner(owner_id)
        if ERASURE not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, ERASURE)
        owner = self._owners.get(chronicum_id) if isinstance(chronicum_id, str) else None
        if owner is None:
            owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:
            raise refused("an erasure", owner_id, chronicum_id)
        erased: int = yield ("erase", (chronicum_id, owner_digest(owner_id)))
        self._history.forget(chronicum_id)
        return erased

    def erase_owner(self, owner_id: str) -> Plan[StoreCall, int]:
        """Rule R1 for an erasure of everything an owner has; returns the chronica erased."""
        check_owner(owner_id)
        if ERASURE not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, ERASURE)
        erased: int = yield ("erase_owner", (owner_id, owner_digest(owner_id)))
        return erased

    def erase_idle(self, before: datetime, owner_id: str | None, dry_run: bool) -> Plan[StoreCall, int]:
        """Retention: erase the chronica idle since before ``before`` (every owner's, or ``owner_id``'s)."""
        if owner_id is not None:
            check_owner(owner_id)
        before = idle_before(before)
        if not isinstance(dry_run, bool):  # "no" or None must not decide whether chronica are erased
            raise InvalidQuery("dry_run", f"must be a bool, not {type(dry_run).__name__}")
        if RETENTION not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, RETENTION)
        erased: int = yield from erase_idle(before, owner_id, dry_run, self._history.forget)
        return erased

    def _check_key(self, idempotency_key: str | None) -> None:
        """Rules R8–R9: a usable key, and a store that can honour it."""
        if idempotency_key is None:
            return
        problem = text_problem(idempotency_key)
        if problem is not None:
            raise InvalidActum("idempotency_key", problem)
        if IDEMPOTENCY not in self._capabilities:
            raise IdempotencyUnsupported(self._store_name)

    def _write(
        self, owner_id: str, chronicum_id: str, acta: tuple[Actum, ...], call: StoreCall, create: bool
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
        created = False
        if owner is None:
            if create:
                owner, created = yield from self._claim(owner_id, chronicum_id, acta)
            else:
                owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:
            raise refused("a write", owner_id, chronicum_id)
        try:
            return (yield from self._first_write(owner_id, chronicum_id, call, created))
        except ChronicumNotFound:
            if not create or not remembered or ERASURE not in self._capabilities:
                raise
        owner, created = yield from self._claim(owner_id, chronicum_id, acta)
        if owner != owner_id:
            raise refused("a write", owner_id, chronicum_id)
        return (yield from self._first_write(owner_id, chronicum_id, call, created))

    def _first_write(
        self, owner_id: str, chronicum_id: str, call: StoreCall, created: bool
    ) -> Plan[StoreCall, Any]:
        """The write ``call``; if it fails (``StoreError``) into a chronicum it ``created``, withdraw it.

        A first write that fails for good (``StoreConflict`` after every try, a lost connection)
        leaves no empty chronicum behind: the chronicum becomes the marker of its owner, as an
        erasure leaves, unless another writer's actum landed in it meanwhile (then it stays). The
        write's own error is raised either way; a withdrawal that fails is logged. An asyncio
        task cancelled during the write (``asyncio.CancelledError``) withdraws the same way.
        """
        try:
            return (yield call)
        except (StoreError, asyncio.CancelledError):
            if created:
                yield from self._withdraw(owner_id, chronicum_id)
            raise

    def _withdraw(self, owner_id: str, chronicum_id: str) -> Plan[StoreCall, None]:
        """Withdraw the empty chronicum a failed first write created; log what keeps it (never raises)."""
        if not self._withdraws:
            _log.warning(
                "%s cannot withdraw a chronicum: a failed first write left it empty", self._store_name
            )
            return
        try:
            withdrawn: bool = yield ("withdraw", (chronicum_id, owner_digest(owner_id)))
        except StoreError as error:
            _log.warning(
                "a failed first write left its chronicum empty: withdrawing it failed (%s)", error.where
            )
            _log.debug("withdrawing chronicum %r failed: %s", chronicum_id, error)
            return
        self._history.forget(chronicum_id)
        _log.debug(
            "chronicum %r %s after its first write failed",
            chronicum_id,
            "withdrawn" if withdrawn else "kept, written meanwhile",
        )

    def get_acta(
        self,
        owner_id: str,
        chronicum_id: str,
        actum_kinds: Iterable[ActumKind | str] | None,
        actor_kinds: Iterable[ActorKind | str] | None,
        last_n: int,
        shape: Shape = None,
    ) -> Plan[StoreCall, list[Actum]]:
        """Rules R1, R5 and R6: the owner's context window, oldest first.

        ``shape`` is ``(before, newest_first, view, tool_exchanges)`` as ``Chronicarius.get_acta``
        takes them, or ``None`` for the defaults; on a store with the ``history`` capability the
        window is computed by :mod:`chronica_core.history`.
        """
        check_owner(owner_id)
        query = acta_query(actum_kinds, actor_kinds, last_n)
        before, newest_first, view, exchanges = _DEFAULT_SHAPE if shape is None else checked_shape(shape)
        if HISTORY in self._capabilities:
            if before is None and self._history.plain(owner_id, chronicum_id):
                try:  # the usual read: a plain chronicum's window is the store's own
                    acta: list[Actum] = yield ("acta", (chronicum_id, query))
                    return acta[::-1] if newest_first else acta
                except StaleLayout:  # it has a summary or a tool exchange now
                    self._history.shaped(chronicum_id)
            window = (newest_first, view, exchanges)
            shaped: list[Actum] = yield from self._history.window(
                owner_id, chronicum_id, query, window, before
            )
            return shaped
        if before is not None:
            raise CapabilityUnsupported(self._store_name, HISTORY)
        owner = self._owners.get(chronicum_id) if isinstance(chronicum_id, str) else None
        if owner is None:
            owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:  # rule R5: not the owner's answers exactly like missing
            raise refused("a read", owner_id, chronicum_id)
        window_acta: list[Actum] = yield ("acta", (chronicum_id, query))
        return window_acta[::-1] if newest_first else window_acta

    def get_actum(self, owner_id: str, chronicum_id: str, actum_id: str) -> Plan[StoreCall, Actum]:
        """Rules R1 and R5, then one actum of the chronicum's history by its id."""
        check_owner(owner_id)
        if HISTORY not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, HISTORY)
        if text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        actum: Actum = yield from self._history.actum(owner_id, chronicum_id, actum_id)
        return actum

    def fork_chronicum(
        self, owner_id: str, chronicum_id: str, at: str | None, fork_id: str | None
    ) -> Plan[StoreCall, Chronicum]:
        """Rules R1 and R5 on the source, then a fork of it (a new id when ``fork_id`` is ``None``)."""
        check_owner(owner_id)
        if HISTORY not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, HISTORY)
        if fork_id is None:
            fork_id = new_chronicum_id()
        problem = text_problem(fork_id)
        if problem is not None:
            raise InvalidQuery("fork_id", problem)
        at = checked_position("at", at)
        if text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        fork: Chronicum = yield from self._history.fork(owner_id, chronicum_id, at, fork_id)
        return fork

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
        ``timeout`` (seconds each step waits for news) is checked by :func:`follow_timeout` and
        kept, normalised, in the returned ``Following``; every argument is checked before the
        store is asked anything.
        """
        check_owner(owner_id)
        query = acta_query(actum_kinds, actor_kinds, 0)
        after = checked_position("after", after)
        if (
            isinstance(poll_interval, bool)
            or not isinstance(poll_interval, (int, float))
            or not (0 < poll_interval <= 3600)
        ):
            raise InvalidQuery(
                "poll_interval", f"seconds, more than 0 and at most 3600, not {poll_interval!r}"
            )
        step_timeout = follow_timeout(timeout)
        if HISTORY in self._capabilities and (yield from self._is_fork(owner_id, chronicum_id)):
            # a fork's history runs through its ancestors: follow it by position
            layout = yield from self._history.layout(owner_id, chronicum_id)
            place: int | None = None
            if after is None:
                place, last = yield from newest(layout)
                after = None if last is None else last.id
            following = Following(
                chronicum_id, query, after, place is not None, self._capabilities, float(poll_interval)
            )
            following.timeout, following.layout, following.place = step_timeout, layout, place
            return following
        owner = self._owners.get(chronicum_id) if isinstance(chronicum_id, str) else None
        if owner is None:
            owner = yield from self._read_owner(chronicum_id)
        if owner != owner_id:  # rule R5: not the owner's answers exactly like missing
            raise ChronicumNotFound(chronicum_id)
        position, checked = after, False
        if after is None:
            latest: list[Actum] = yield ("acta", (chronicum_id, _NEWEST))
            position, checked = (latest[-1].id if latest else None), True
        return Following(
            chronicum_id, query, position, checked, self._capabilities, float(poll_interval), step_timeout
        )

    def _is_fork(self, owner_id: str, chronicum_id: str) -> Plan[StoreCall, bool]:
        """Rule R5, then whether the chronicum is a fork, from its layout read now.

        A follower keeps the layout for good; one remembered from before may be that of a
        chronicum erased since and written afresh (no fork any more).
        """
        if text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        layout = yield from self._history.layout(owner_id, chronicum_id, fresh=True)
        return len(layout.lineage) > 1

    def get_chronicum(self, owner_id: str, chronicum_id: str) -> Plan[StoreCall, Chronicum]:
        """Rules R1 and R5: the owner's chronicum, read fresh from the store."""
        check_owner(owner_id)
        if text_problem(chronicum_id) is not None:
            raise ChronicumNotFound(chronicum_id)
        chronicum: Chronicum = yield ("get", (chronicum_id,))
        self._remember(chronicum.id, chronicum.owner_id)
        if chronicum.owner_id != owner_id:
            raise refused("a read", owner_id, chronicum_id)
        return chronicum

    def validated(self, actum: Actum) -> Actum:
        """Rules R2 and R3: return ``actum`` with enum kinds, a fresh id and no ``at``.

        Raises ``InvalidActum`` naming the first offending field.
        """
        if not isinstance(actum, Actum):
            raise InvalidActum("actum", f"must be an Actum, not {type(actum).__name__}")
        for field, value in (("chronicum_id", actum.chronicum_id), ("actor", actum.actor)):
            problem = text_problem(value)
            if problem is not None:
                raise InvalidActum(field, problem)
        kind = enum_value(ActumKind, actum.kind, "kind")
        actor_kind = enum_value(ActorKind, actum.actor_kind, "actor_kind")
        content: object = actum.content
        if not isinstance(content, str):
            raise InvalidActum("content", f"must be a str, not {type(content).__name__}")
        if not content and kind in _KINDS_NEEDING_CONTENT:
            raise InvalidActum("content", f"a {kind.value} needs non-empty content")
        problem = encoding_problem(content)
        if problem is not None:
            raise InvalidActum("content", problem)
        native, answers, summarizes = actum.native, actum.answers, actum.summarizes
        if native is not None or answers != "" or summarizes is not None:
            self._check_links(kind, native, answers, summarizes)
        return build_actum(
            actum.chronicum_id,
            kind,
            actor_kind,
            actum.actor,
            content,
            self._id_factory(),
            None,
            native,
            answers,
            summarizes,
        )

    def _check_links(self, kind: ActumKind, native: object, answers: object, summarizes: object) -> None:
        """Rule R2 for the optional parts of an actum, and the capabilities they need (rule R9)."""
        if native is not None:
            if not isinstance(native, Native):
                raise InvalidActum("native", f"must be a Native or None, not {type(native).__name__}")
            problem = text_problem(native.format)
            if problem is not None:
                raise InvalidActum("native.format", problem)
            if not isinstance(native.data, str):
                raise InvalidActum("native.data", f"must be a str, not {type(native.data).__name__}")
            problem = encoding_problem(native.data)
            if problem is not None:
                raise InvalidActum("native.data", problem)
            if NATIVE not in self._capabilities:
                raise CapabilityUnsupported(self._store_name, NATIVE)
        if answers:
            problem = text_problem(answers)
            if problem is not None:
                raise InvalidActum("answers", problem)
            if kind is not ActumKind.TOOL_RESPONSE:
                raise InvalidActum("answers", f"only a tool_response answers a request, not a {kind.value}")
        elif not isinstance(answers, str):
            raise InvalidActum("answers", f"must be a str, not {type(answers).__name__}")
        if summarizes is not None:
            if not isinstance(summarizes, Span):
                raise InvalidActum("summarizes", f"must be a Span or None, not {type(summarizes).__name__}")
            for name in ("first", "last"):
                problem = text_problem(getattr(summarizes, name))
                if problem is not None:
                    raise InvalidActum(f"summarizes.{name}", problem)
            if kind is not ActumKind.MESSAGE:
                raise InvalidActum("summarizes", f"a summary is a message, not a {kind.value}")
        if (answers or summarizes is not None) and HISTORY not in self._capabilities:
            raise CapabilityUnsupported(self._store_name, HISTORY)

    def _claim(
        self, owner_id: str, chronicum_id: str, acta: tuple[Actum, ...]
    ) -> Plan[StoreCall, tuple[str, bool]]:
        """Rule R4: return the chronicum's owner, creating it for ``owner_id`` on the first write.

        Returns ``(owner, created)``: ``created`` when this call created (or reopened) the
        chronicum, empty. Content the store cannot take is refused (``ActumTooLarge``) before the
        chronicum is created, so a refused first write leaves nothing behind. An id whose chronicum
        was erased (or withdrawn) is reopened, fresh, for the owner it belonged to, and for no one else.
        """
        try:
            chronicum: Chronicum = yield ("get", (chronicum_id,))
        except ChronicumNotFound:
            pass
        else:
            self._remember(chronicum_id, chronicum.owner_id)
            return chronicum.owner_id, False
        if self._limited:
            limit: int | None = yield ("max_content_bytes", ())
            for actum in acta:
                check_actum_size(actum, limit)
        started = Chronicum(chronicum_id, owner_id, started_at=clock.now())
        try:
            yield ("create", (started,))
            owner, created = owner_id, True
        except ChronicumExists:  # lost a race with another first write, or the id was erased
            owner, created = yield from self._owner_after_lost_create(started)
        except asyncio.CancelledError:  # the create may have landed: then withdraw it
            yield from self._withdraw_if_created(started)
            raise
        self._remember(chronicum_id, owner)
        return owner, created

    def _withdraw_if_created(self, started: Chronicum) -> Plan[StoreCall, None]:
        """After a cancelled ``create``: withdraw the chronicum if that create landed (never raises).

        The chronicum is this create's when it has its owner and its ``started_at``, to the
        microsecond: another first write of the same owner started at another moment.
        """
        try:
            chronicum: Chronicum = yield ("get", (started.id,))
        except (ChronicumNotFound, StoreError):
            return
        if (chronicum.owner_id, chronicum.started_at) == (started.owner_id, started.started_at):
            yield from self._withdraw(started.owner_id, started.id)

    def _owner_after_lost_create(self, started: Chronicum) -> Plan[StoreCall, tuple[str, bool]]:
        """The owner of an id ``create`` found taken: a racing first write's, or an erased chronicum's.

        Returns ``(owner, reopened)``: ``reopened`` when this call reopened the erased id.
        """
        try:
            chronicum: Chronicum = yield ("get", (started.id,))
            return chronicum.owner_id, False
        except ChronicumNotFound:
            if ERASURE not in self._capabilities:
                raise
        reopened: bool = yield ("reopen", (started, owner_digest(started.owner_id)))
        if reopened:
            return started.owner_id, True
        chronicum = yield ("get", (started.id,))  # reopened meanwhile by the owner, or not theirs
        return chronicum.owner_id, False

    def _read_owner(self, chronicum_id: str) -> Plan[StoreCall, str]:
        """Return the owner of an existing chronicum; an id that cannot exist is not found."""
        if text_problem(chronicum_id) is not None:
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


def _check_create(create: object) -> None:
    """``create`` of a write is a bool: a text such as ``"false"`` would create the chronicum."""
    if not isinstance(create, bool):
        raise InvalidActum("create", f"must be a bool, not {type(create).__name__}")
