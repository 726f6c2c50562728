"""The in-memory store: one process, for tests and development. Thread-safe, with every capability."""

from __future__ import annotations

import bisect
import itertools
import operator
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

from chronica_core import clock
from chronica_core.closable import Closable
from chronica_core.errors import ChronicumExists, ChronicumNotFound, InvalidOption
from chronica_core.history import (
    Layout,
    Located,
    PositionsRead,
    RangeRead,
    Segment,
    StaleLayout,
    SummaryMark,
    WindowReads,
    WindowRows,
)
from chronica_core.limits import MAX_CONTENT_OPTION, check_actum_size, content_limit_option
from chronica_core.model import ActaQuery, Actum, ActumKind, Chronicum, recorded_at
from chronica_core.retention import last_activity
from chronica_core.store import (
    BatchStore,
    FollowStore,
    HistoryStore,
    IdempotentStore,
    ListingPosition,
    ListingStore,
    NativeStore,
    RetentionStore,
)
from chronica_core.urls import split_query_options

__all__ = ["MemoryStore"]


_ANSWERS: Callable[[Actum], str] = operator.attrgetter("answers")

_SERIALS = itertools.count(1)
"""Numbers each entry: part of its layout version, so an id erased and written to afresh differs."""


@dataclass(slots=True)
class _Entry:
    """One chronicum's state, guarded by its own lock.

    Its acta have positions ``base + 1``, ``base + 2``, ...: ``base`` is ``0``, or for a fork the
    position it branched at.
    """

    chronicum: Chronicum
    lineage: tuple[Segment, ...] = ()
    """Its history's segments (the last one its own acta); set by ``__post_init__`` for a plain one."""
    acta: list[Actum] = field(default_factory=list)
    keyed: dict[str, list[Actum]] = field(default_factory=dict)
    """What each idempotency key's write stored: one actum, or a whole batch."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    erased: bool = False
    """Set, under ``lock``, when the chronicum is erased: a writer that found the entry before
    then answers ``ChronicumNotFound`` instead of writing into it."""
    positions: dict[str, int] = field(default_factory=dict)
    """Each actum's index in ``acta``, by id (for followers)."""
    of_kind: dict[ActumKind, list[Actum]] = field(default_factory=dict)
    """The acta of each actum kind, in order: a window of one kind is the tail of its list."""
    kind_indexes: dict[ActumKind, list[int]] = field(default_factory=dict)
    """The index in ``acta`` of each of ``of_kind``'s acta (to read a range of one kind)."""
    changed: threading.Condition = field(init=False)
    """Notified, under ``lock``, by every append and by the erasure: wakes blocking followers."""
    wakers: set[Callable[[], None]] = field(default_factory=set)
    """Called, under ``lock``, by every append and by the erasure: wake asyncio followers."""
    marks: list[SummaryMark] = field(default_factory=list)
    """A mark for each of its own summaries, in position order."""
    shaped: bool = False
    """Set, under ``lock``, by its first summary or tool response naming its request."""
    serial: int = field(default_factory=lambda: next(_SERIALS))

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)
        if not self.lineage:
            self.lineage = (Segment(self.chronicum.id, 0, None),)

    @property
    def base(self) -> int:
        """The position before its first own actum."""
        return self.lineage[-1].after

    @property
    def version(self) -> Hashable:
        """Under ``lock``: its layout version (see :class:`chronica_core.history.Layout`)."""
        return (self.serial, len(self.marks))

    def wake(self) -> None:
        """Under ``lock``: wake every follower of the chronicum."""
        self.changed.notify_all()
        for waker in self.wakers:
            waker()

    def has_news(self, after: str | None) -> bool:
        """Under ``lock``: whether a follower at ``after`` has something to read (or to learn)."""
        return self.erased or (self.acta[-1].id if self.acta else None) != after


_WHERE = "memory: store"

_MEMORY_CEILING = sys.maxsize
"""The largest ``max_content_bytes`` the memory store takes (it has no limit of its own)."""


def _url_options(url: str) -> dict[str, str]:
    """The options in ``url``'s query (``memory://?max_content_bytes=100``); refuse any other parameter."""
    rest, in_url = split_query_options(url, (MAX_CONTENT_OPTION,))
    unknown = parse_qsl(rest.partition("?")[2].partition("#")[0], keep_blank_values=True)
    if unknown:
        raise InvalidOption(
            "memory",
            unknown[0][0],
            f"unknown URL query parameter (the memory store takes only {MAX_CONTENT_OPTION})",
        )
    return in_url


def _content_limit(options: dict[str, Any]) -> int | None:
    """Return the ``max_content_bytes`` option (``None``: no limit); refuse any other option."""
    unknown = sorted(set(options) - {MAX_CONTENT_OPTION})
    if unknown:
        raise InvalidOption(
            "memory", unknown[0], f"unknown option (the memory store takes only {MAX_CONTENT_OPTION})"
        )
    value = options.get(MAX_CONTENT_OPTION)
    return None if value is None else content_limit_option("memory", value, _MEMORY_CEILING)


def _matches(actum: Actum, query: ActaQuery) -> bool:
    return (query.actum_kinds is None or actum.kind in query.actum_kinds) and (
        query.actor_kinds is None or actum.actor_kind in query.actor_kinds
    )


def _listing_key(chronicum: Chronicum) -> ListingPosition:
    return chronicum.started_at, chronicum.id


class MemoryStore(
    IdempotentStore,
    BatchStore,
    ListingStore,
    RetentionStore,
    FollowStore,
    NativeStore,
    HistoryStore,
    Closable,
):
    """Keeps everything in this process's memory; gone when the process ends.

    Each chronicum has its own lock, so writers to different chronica never wait for each other.
    Each owner's chronica are indexed by owner, so listing them never looks at other owners'.
    Followers wait on the chronicum's condition, woken by each write (no polling); asyncio
    followers are woken through their event loop's ``call_soon_threadsafe``.
    An erased chronicum's acta and fields are dropped; only its id and owner digest stay, and its
    forks are erased with it. A fork keeps its lineage and reads its ancestors' entries; it
    copies nothing.
    Each chronicum's acta are also kept per actum kind, so a window of the newest ``last_n`` of one
    kind (or of every kind), the usual agent read, is a slice whatever the history; any other
    filter scans backwards from the newest actum and stops once it has ``last_n``.
    An actum's ``at`` is taken under that lock, the moment it gets its place, and is never earlier
    than the chronicum's ``last_actum_at`` (should the clock step back). After :meth:`close` every
    operation raises ``StoreError("memory: store", "the store is closed")``.

    Content has no size limit but the process's memory, unless ``max_content_bytes`` sets one:
    then larger content raises ``ActumTooLarge`` as a database store would at its own limit,
    which lets an app's tests cover that case without a server.

    Args:
        url: ``memory://``; its query may carry ``max_content_bytes`` (an option given wins);
            anything else after the scheme but a query is ignored.
        options: ``max_content_bytes`` only: the largest content accepted, in bytes of UTF-8
            (a whole number, or its digits as text; default no limit).

    Raises:
        InvalidOption: another option or query parameter (named), or a ``max_content_bytes``
            that is not a whole number from 0 to ``sys.maxsize``.
    """

    backend_name = "memory"

    def __init__(self, url: str = "memory://", **options: Any) -> None:
        self._content_limit = _content_limit({**_url_options(url), **options})
        self._entries: dict[str, _Entry] = {}
        self._erased: dict[str, str] = {}  # chronicum id -> owner digest, for erased chronica
        self._owned: dict[str, dict[str, None]] = {}  # owner id -> its chronicum ids
        self._create_lock = threading.Lock()  # guards the three dicts' keys

    def create(self, chronicum: Chronicum) -> None:
        """Save ``chronicum``. Raises ``ChronicumExists`` if its id is taken (or erased)."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            if chronicum.id in self._entries or chronicum.id in self._erased:
                raise ChronicumExists(chronicum.id)
            self._add(chronicum)

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        """Return up to ``limit`` of the owner's chronica, newest first (see ``ListingStore``)."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            chronica = [
                self._entries[chronicum_id].chronicum for chronicum_id in self._owned.get(owner_id, ())
            ]
        chronica.sort(key=_listing_key, reverse=True)
        if after is not None:
            chronica = [chronicum for chronicum in chronica if _listing_key(chronicum) < after]
        return chronica[:limit]

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """Erase the chronicum and its forks, keeping their markers; return the acta erased.

        Raises ``ChronicumNotFound``.
        """
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            if chronicum_id not in self._entries:
                raise ChronicumNotFound(chronicum_id)
            forks = self._forks(chronicum_id)
            # forks first: a read of a fork, which holds the fork's lock, never finds its source gone
            return sum(self._erase(erased, owner_digest) for erased in (*forks, chronicum_id))

    def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """Erase every chronicum of ``owner_id``; return how many."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            owned = list(self._owned.get(owner_id, ()))
            for chronicum_id in owned:
                self._erase(chronicum_id, owner_digest)
        return len(owned)

    def keeps_native(self) -> bool:
        """Return ``True``: acta keep their native form (see ``NativeStore``)."""
        return True

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """Return up to ``limit`` chronica idle since before ``idle_before`` (see ``RetentionStore``).

        The memory store has no index: it looks at every chronicum (of the owner, when given).
        """
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            if owner_id is None:
                chronica = [entry.chronicum for entry in self._entries.values()]
            else:
                chronica = [self._entries[id_].chronicum for id_ in self._owned.get(owner_id, ())]
        idle = sorted(
            (key, chronicum)
            for chronicum in chronica
            if (key := (last_activity(chronicum), chronicum.id))[0] < idle_before
            and (after is None or key > after)
        )
        return [chronicum for _, chronicum in idle[:limit]]

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """Erase the chronicum and its forks if they are all still idle (see ``RetentionStore``)."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            entry = self._entries.get(chronicum_id)
            if entry is None:
                return 0
            forks = self._forks(chronicum_id)
            if any(
                last_activity(self._entries[id_].chronicum) >= idle_before for id_ in (chronicum_id, *forks)
            ):
                return 0
            for erased in (*forks, chronicum_id):
                self._erase(erased, owner_digest)
            return len(forks) + 1

    def _forks(self, chronicum_id: str) -> list[str]:
        """Under ``_create_lock``: every live fork of the chronicum, forks of forks included."""
        return [
            fork_id
            for fork_id, entry in self._entries.items()
            if fork_id != chronicum_id and any(s.chronicum_id == chronicum_id for s in entry.lineage)
        ]

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """Replace the marker of ``chronicum.id`` with ``chronicum`` if its digest is ``owner_digest``."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            if self._erased.get(chronicum.id) != owner_digest:
                return False
            del self._erased[chronicum.id]
            self._add(chronicum)
            return True

    def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        """Leave the chronicum's marker if it holds no acta; return whether it did (see ``ErasableStore``)."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            entry = self._entries.get(chronicum_id)
            if entry is None:
                return False
            if len(entry.lineage) > 1:  # a fork (its ancestors' segments, then its own) is never withdrawn
                return False
            with entry.lock:  # writers append under it: none is halfway
                if entry.acta:
                    return False
                entry.erased = True
                entry.wake()
            del self._entries[chronicum_id]
            self._mark(entry.chronicum, owner_digest)
            return True

    def _add(self, chronicum: Chronicum, lineage: tuple[Segment, ...] = ()) -> None:
        """Under ``_create_lock``: save a fresh chronicum and index it under its owner."""
        self._entries[chronicum.id] = _Entry(chronicum, lineage)
        self._owned.setdefault(chronicum.owner_id, {})[chronicum.id] = None

    def _erase(self, chronicum_id: str, owner_digest: str) -> int:
        """Under ``_create_lock``: drop the chronicum and its acta, leaving the marker."""
        entry = self._entries.pop(chronicum_id, None)
        if entry is None:
            raise ChronicumNotFound(chronicum_id)
        with entry.lock:
            erased = len(entry.acta)
            entry.erased = True
            entry.acta = []
            entry.keyed = {}
            entry.positions = {}
            entry.of_kind = {}
            entry.kind_indexes = {}
            entry.wake()
        self._mark(entry.chronicum, owner_digest)
        return erased

    def _mark(self, chronicum: Chronicum, owner_digest: str) -> None:
        """Under ``_create_lock``: unlist a chronicum dropped from the entries and keep its marker."""
        owned = self._owned[chronicum.owner_id]
        del owned[chronicum.id]
        if not owned:
            del self._owned[chronicum.owner_id]
        self._erased[chronicum.id] = owner_digest

    def get(self, chronicum_id: str) -> Chronicum:
        """Return the chronicum. Raises ``ChronicumNotFound``."""
        return self._entry(chronicum_id).chronicum

    def max_content_bytes(self) -> int | None:
        """Return the ``max_content_bytes`` option (``None``: no limit); see :class:`MemoryStore`."""
        return self._content_limit

    def record(self, actum: Actum) -> Actum:
        """Append ``actum`` with ``at`` set to now (UTC).

        Raises ``ChronicumNotFound``, or ``ActumTooLarge`` above ``max_content_bytes``.
        """
        check_actum_size(actum, self._content_limit)
        entry = self._entry(actum.chronicum_id)
        with entry.lock:
            self._check_live(entry)
            return self._append(entry, actum)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """Append ``actum`` unless ``key`` was used in its chronicum; then return the first one.

        Raises ``ChronicumNotFound``, or ``ActumTooLarge`` above ``max_content_bytes``.
        """
        check_actum_size(actum, self._content_limit)
        entry = self._entry(actum.chronicum_id)
        with entry.lock:
            self._check_live(entry)
            stored = entry.keyed.get(key)
            if stored is None:
                stored = entry.keyed[key] = [self._append(entry, actum)]
            return stored[0]

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """Append ``acta`` (one chronicum's) together; see :class:`chronica_core.BatchStore`.

        Raises ``ChronicumNotFound``, or ``ActumTooLarge`` above ``max_content_bytes`` (nothing written).
        """
        for actum in acta:
            check_actum_size(actum, self._content_limit)
        entry = self._entry(acta[0].chronicum_id)
        with entry.lock:
            self._check_live(entry)
            if key is not None and key in entry.keyed:
                return list(entry.keyed[key])
            stored = [self._append(entry, actum) for actum in acta]
            if key is not None:
                entry.keyed[key] = stored
            return list(stored)

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """Return the context window of the chronicum's own acta, oldest first.

        Raises ``ChronicumNotFound``, or ``StaleLayout`` once the chronicum has a summary (see
        ``HistoryStore``).
        """
        entry = self._entry(chronicum_id)
        kinds, actor_kinds, wanted = query.actum_kinds, query.actor_kinds, query.last_n
        with entry.lock:
            self._check_live(entry)
            if entry.shaped:
                raise StaleLayout(chronicum_id)
            if wanted <= 0:
                return [actum for actum in entry.acta if _matches(actum, query)]
            if actor_kinds is None:  # the usual windows: a slice, whatever the history
                if kinds is None:
                    return entry.acta[-wanted:]
                if len(kinds) == 1:
                    return entry.of_kind.get(kinds[0], [])[-wanted:]
            window: list[Actum] = []
            for actum in reversed(entry.acta):  # newest first, stopping once it has `wanted`
                if (kinds is None or actum.kind in kinds) and (
                    actor_kinds is None or actum.actor_kind in actor_kinds
                ):
                    window.append(actum)
                    if len(window) == wanted:
                        break
        window.reverse()
        return window

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """Return up to ``limit`` acta recorded after ``after``; see ``FollowStore.acta_after``."""
        entry = self._entry(chronicum_id)
        with entry.lock:
            self._check_live(entry)
            if after is None:
                start = 0
            else:
                index = entry.positions.get(after)
                if index is None:
                    return None
                start = index + 1
            return entry.acta[start : start + max(limit, 1)]

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Block on the chronicum's condition until a write or an erasure; see ``FollowStore``."""
        try:
            entry = self._entry(chronicum_id)
        except ChronicumNotFound:
            return
        with entry.lock:
            entry.changed.wait_for(lambda: self._closed or entry.has_news(after), timeout)

    def _watch(self, chronicum_id: str, after: str | None, waker: Callable[[], None]) -> _Entry | None:
        """Register ``waker`` for the chronicum; ``None`` (nothing registered) when there is news already."""
        try:
            entry = self._entry(chronicum_id)
        except ChronicumNotFound:
            return None
        with entry.lock:
            if self._closed or entry.has_news(after):
                return None
            entry.wakers.add(waker)
            return entry

    @staticmethod
    def _unwatch(entry: _Entry, waker: Callable[[], None]) -> None:
        with entry.lock:
            entry.wakers.discard(waker)

    def close(self) -> None:
        """Refuse every later operation with ``StoreError`` (closing again is harmless).

        Every follower waiting in :meth:`wait_for_acta` (or an asyncio face's) is woken, and its
        next read raises ``StoreError("memory: store", "the store is closed")``.
        """
        self._mark_closed()
        with self._create_lock:
            entries = list(self._entries.values())
        for entry in entries:
            with entry.lock:
                entry.wake()

    def _entry(self, chronicum_id: str) -> _Entry:
        self._refuse_if_closed(None, _WHERE)
        try:
            return self._entries[chronicum_id]
        except KeyError:
            raise ChronicumNotFound(chronicum_id) from None

    @staticmethod
    def _check_live(entry: _Entry) -> None:
        """Under ``entry.lock``: refuse an entry erased since it was looked up."""
        if entry.erased:
            raise ChronicumNotFound(entry.chronicum.id)

    @staticmethod
    def _append(entry: _Entry, actum: Actum) -> Actum:
        """Append under ``entry.lock``: ``at`` is now, or the chronicum's last ``at`` if that is later."""
        at = clock.now()
        last = entry.chronicum.last_actum_at
        if last is not None and last > at:
            at = last
        stored = recorded_at(actum, at)
        if stored.answers or stored.summarizes is not None:
            entry.shaped = True
        entry.positions[actum.id] = len(entry.acta)
        entry.acta.append(stored)
        of_kind = entry.of_kind.get(stored.kind)
        if of_kind is None:
            entry.of_kind[stored.kind] = [stored]
            entry.kind_indexes[stored.kind] = [len(entry.acta) - 1]
        else:
            of_kind.append(stored)
            entry.kind_indexes[stored.kind].append(len(entry.acta) - 1)
        chronicum = entry.chronicum
        entry.chronicum = Chronicum(
            chronicum.id, chronicum.owner_id, chronicum.started_at, at, chronicum.forked_from
        )
        entry.wake()
        return stored

    # -- the history capability ----------------------------------------------------------------

    def layout(self, chronicum_id: str) -> Layout:
        """Return the chronicum's layout (see ``HistoryStore.layout``). Raises ``ChronicumNotFound``."""
        entry = self._entry(chronicum_id)
        with entry.lock:
            self._check_live(entry)
            chronicum, lineage, version = entry.chronicum, entry.lineage, entry.version
        marks: list[SummaryMark] = []
        for segment in lineage:
            source = entry if segment.chronicum_id == chronicum_id else self._entry(segment.chronicum_id)
            with source.lock:
                marks.extend(mark for mark in source.marks if segment.holds(mark.position))
        return Layout(chronicum, lineage, tuple(marks), version)

    def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """Perform ``reads`` (see ``HistoryStore.window``). Raises ``ChronicumNotFound``."""
        entry = self._entry(chronicum_id)
        with entry.lock:  # the chronicum's own acta and version, in one snapshot
            self._check_live(entry)
            if len(reads.reads) == 1:
                positions, acta = self._read(entry, reads.reads[0])
            else:
                positions, acta = [], []
                for read in reads.reads:
                    more_positions, more_acta = self._read(entry, read)
                    positions.extend(more_positions)
                    acta.extend(more_acta)
            version = entry.version
        answered: list[Located] = []
        if reads.answered_in is not None and any(map(_ANSWERS, acta)):
            wanted = tuple({actum.answers for actum in acta if actum.answers})
            answered = list(self.locate(reads.answered_in, wanted).values())
        return WindowRows(acta, positions, answered, version)

    def _read(self, own: _Entry, read: RangeRead | PositionsRead) -> tuple[Sequence[int], list[Actum]]:
        """The positions and acta of one read, in position order.

        ``own``'s lock is held: an ancestor's shared acta never change.
        """
        if isinstance(read, PositionsRead):
            entry = own if read.chronicum_id == own.chronicum.id else self._entry(read.chronicum_id)
            held = sorted(p for p in read.positions if 0 < p - entry.base <= len(entry.acta))
            return held, [entry.acta[position - entry.base - 1] for position in held]
        segment = read.segment
        entry = own if segment.chronicum_id == own.chronicum.id else self._entry(segment.chronicum_id)
        acta, base = entry.acta, entry.base
        start = max(segment.after - base, 0)
        stop = len(acta) if segment.upto is None else min(segment.upto - base, len(acta))
        kinds, actor_kinds, limit = read.actum_kinds, read.actor_kinds, read.limit
        if actor_kinds is None and (kinds is None or len(kinds) == 1) and (read.summaries or not entry.marks):
            # the usual windows: a slice, whatever the history
            if kinds is None:
                of_kind: Sequence[int] = range(len(acta))
                low, high = start, max(start, stop)
            else:
                of_kind = entry.kind_indexes.get(kinds[0], [])
                low, high = bisect.bisect_left(of_kind, start), bisect.bisect_left(of_kind, stop)
            if limit > 0:
                low, high = (max(low, high - limit), high) if read.newest else (low, min(high, low + limit))
            if kinds is None:  # two slices
                return range(base + low + 1, base + high + 1), acta[low:high]
            indexes = of_kind[low:high]
            return [base + 1 + index for index in indexes], [acta[index] for index in indexes]
        rows: list[tuple[int, Actum]] = []
        for index in range(stop - 1, start - 1, -1) if read.newest else range(start, stop):
            actum = acta[index]
            if (
                (kinds is None or actum.kind in kinds)
                and (actor_kinds is None or actum.actor_kind in actor_kinds)
                and (read.summaries or actum.summarizes is None)
            ):
                rows.append((base + index + 1, actum))
                if len(rows) == limit:
                    break
        if read.newest:
            rows.reverse()
        return [position for position, _ in rows], [actum for _, actum in rows]

    def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """Return the acta of ``lineage`` with these ids (see ``HistoryStore.locate``)."""
        self._refuse_if_closed(None, _WHERE)
        found: dict[str, Located] = {}
        for segment in lineage:
            entry = self._entries.get(segment.chronicum_id)
            if entry is None:
                continue
            with entry.lock:
                for actum_id in actum_ids:
                    index = entry.positions.get(actum_id)
                    if index is not None and segment.holds(entry.base + index + 1):
                        found[actum_id] = Located(entry.base + index + 1, entry.acta[index])
        return found

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """Save the fork ``chronicum`` with ``lineage`` (see ``HistoryStore.fork``)."""
        self._refuse_if_closed(None, _WHERE)
        assert chronicum.forked_from is not None
        with self._create_lock:
            if chronicum.id in self._entries or chronicum.id in self._erased:
                raise ChronicumExists(chronicum.id)
            if chronicum.forked_from.chronicum_id not in self._entries:
                raise ChronicumNotFound(chronicum.forked_from.chronicum_id)
            self._add(chronicum, lineage)

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """Append the summary ``actum`` (see ``HistoryStore.record_summary``)."""
        check_actum_size(actum, self._content_limit)
        entry = self._entry(actum.chronicum_id)
        with entry.lock:
            self._check_live(entry)
            if key is not None and key in entry.keyed:
                return entry.keyed[key][0]
            if entry.version != version:
                raise StaleLayout(actum.chronicum_id)
            stored = self._append(entry, actum)
            entry.marks.append(SummaryMark(entry.base + len(entry.acta), first, last, stored.actor_kind))
            if key is not None:
                entry.keyed[key] = [stored]
            return stored
