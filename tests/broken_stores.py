"""Deliberately broken stores: each makes one mistake a real backend once made.

``test_suite_catches_mistakes.py`` runs the conformance suite against each and checks that it
fails, naming the cases. Every mistake is deterministic (no timing): a lost or doubled write is
tied to the calling thread, standing in for "another connection", and the suite's concurrency
cases always write from many threads.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Hashable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import cast

from chronica_core import (
    ActaQuery,
    Actum,
    AsyncIdempotentStore,
    AsyncMemoryStore,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    Closable,
    IdempotentStore,
    ListingPosition,
    MemoryStore,
)
from chronica_core.history import Located, RangeRead, Segment, StaleLayout, WindowReads, WindowRows

_WHERE = "list: store"
_ASYNC_WHERE = "list: async store"


def filtered(acta: list[Actum], query: ActaQuery) -> list[Actum]:
    return [
        actum
        for actum in acta
        if (query.actum_kinds is None or actum.kind in query.actum_kinds)
        and (query.actor_kinds is None or actum.actor_kind in query.actor_kinds)
    ]


def newest(acta: list[Actum], last_n: int) -> list[Actum]:
    return acta[-last_n:] if last_n > 0 else acta


class ListStore(IdempotentStore, Closable):
    """A correct, simple store (one lock, a list per chronicum); the broken ones override one step."""

    backend_name = "list"

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.chronica: dict[str, Chronicum] = {}
        self.lists: dict[str, list[Actum]] = {}
        self.keyed: dict[tuple[str, str], Actum] = {}

    def now(self) -> datetime:
        return datetime.now(UTC)

    def stamp(self, chronicum: Chronicum) -> datetime:
        """The ``at`` of the next actum: now, never earlier than the chronicum's last ``at``."""
        now, last = self.now(), chronicum.last_actum_at
        return now if last is None else max(now, last)

    def create(self, chronicum: Chronicum) -> None:
        with self.lock:
            self._refuse_if_closed(None, _WHERE)
            if chronicum.id in self.chronica:
                raise ChronicumExists(chronicum.id)
            self.chronica[chronicum.id] = chronicum
            self.lists[chronicum.id] = []

    def get(self, chronicum_id: str) -> Chronicum:
        with self.lock:
            self._refuse_if_closed(None, _WHERE)
            if chronicum_id not in self.chronica:
                raise ChronicumNotFound(chronicum_id)
            return self.chronica[chronicum_id]

    def record(self, actum: Actum) -> Actum:
        with self.lock:
            chronicum = self.get(actum.chronicum_id)
            stored = replace(actum, at=self.stamp(chronicum))
            self.append(stored)
            self.chronica[chronicum.id] = replace(chronicum, last_actum_at=stored.at)
            return stored

    def append(self, actum: Actum) -> None:
        self.lists[actum.chronicum_id].append(actum)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        with self.lock:
            self.get(actum.chronicum_id)
            slot = self.key_slot(actum.chronicum_id, key)
            if slot not in self.keyed:
                self.keyed[slot] = self.record(actum)
            return self.keyed[slot]

    def key_slot(self, chronicum_id: str, key: str) -> tuple[str, str]:
        return (chronicum_id, key)

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        with self.lock:
            self.get(chronicum_id)
            return self.window(list(self.lists[chronicum_id]), query)

    def window(self, acta: list[Actum], query: ActaQuery) -> list[Actum]:
        return newest(filtered(acta, query), query.last_n)

    def max_content_bytes(self) -> int | None:
        """No limit: the size contract then checks that 4 MiB is kept."""
        return None

    def close(self) -> None:
        self._mark_closed()


class OrdersByTime(ListStore):
    """Orders by ``at`` with the id as tie-breaker, on a clock that ticks once a minute."""

    def now(self) -> datetime:
        return datetime.now(UTC).replace(second=0, microsecond=0)

    def window(self, acta: list[Actum], query: ActaQuery) -> list[Actum]:
        by_time = sorted(acta, key=lambda actum: (actum.at or datetime.min.replace(tzinfo=UTC), actum.id))
        return super().window(by_time, query)


class EmptyForMissing(ListStore):
    """Answers ``[]`` for the acta of a chronicum that does not exist (a SQL store seeing no rows)."""

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        with self.lock:
            self._refuse_if_closed(None, _WHERE)
            return self.window(list(self.lists.get(chronicum_id, [])), query)


class LimitsBeforeFiltering(ListStore):
    """Keeps the newest ``last_n`` first and filters them afterwards."""

    def window(self, acta: list[Actum], query: ActaQuery) -> list[Actum]:
        return filtered(newest(acta, query.last_n), query)


class DropsAConcurrentWrite(ListStore):
    """Loses one write when a chronicum is first written from a second thread (a lost update).

    Stands in for a read-modify-write of the list: the first time another thread (connection)
    writes a chronicum, its write replaces the previous thread's newest actum instead of
    following it. Writes from one thread are kept.
    """

    def __init__(self) -> None:
        super().__init__()
        self.last_writer: dict[str, int] = {}
        self.raced: set[str] = set()

    def append(self, actum: Actum) -> None:
        acta = self.lists[actum.chronicum_id]
        writer = threading.get_ident()
        previous = self.last_writer.setdefault(actum.chronicum_id, writer)
        self.last_writer[actum.chronicum_id] = writer
        if previous != writer and actum.chronicum_id not in self.raced and acta:
            self.raced.add(actum.chronicum_id)
            acta[-1] = actum
        else:
            acta.append(actum)


class WritesKeyTwiceUnderConcurrency(ListStore):
    """Checks an idempotency key only among the writes of the calling thread (its own connection).

    A retry from the same thread returns the first actum; the same key from concurrent
    threads writes once per thread.
    """

    def key_slot(self, chronicum_id: str, key: str) -> tuple[str, str]:
        return (chronicum_id, f"{key}\x00{threading.get_ident()}")


class TrustsEveryClock(ListStore):
    """Takes ``at`` from the writer's clock as it is, never raising it to the chronicum's last ``at``.

    Stands in for app hosts whose clocks disagree: every second write's clock is a second behind.
    """

    def __init__(self) -> None:
        super().__init__()
        self.writes = itertools.count()

    def stamp(self, chronicum: Chronicum) -> datetime:
        return self.now() - timedelta(seconds=next(self.writes) % 2)


class IgnoresClose(ListStore):
    """Keeps working after ``close()``."""

    def close(self) -> None:
        pass


# -- The capabilities (batch, listing, erasure): the memory store, each breaking one rule. -----------


class CapableStore(MemoryStore):
    """The memory store with a 2 MiB content limit: correct, with every capability."""

    def __init__(self) -> None:
        super().__init__(max_content_bytes=2 * 1024 * 1024)


class WritesABatchOneByOne(CapableStore):
    """Writes a batch actum by actum, checking each one's size only when it comes to it.

    A batch with content over the limit in its middle leaves its first acta behind.
    """

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        if key is not None:
            return super().record_many(acta, key)
        return [self.record(actum) for actum in acta]


class SplitsABatch(CapableStore):
    """Commits a batch's first actum at once and the rest with the next write (two transactions).

    Another write then falls between a batch's acta. Reads see the whole batch, once the rest
    is written: ``acta`` writes what is pending first.
    """

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Actum] = []
        self.pending_lock = threading.Lock()

    def write_pending(self) -> None:
        with self.pending_lock:
            pending, self.pending = self.pending, []
        for actum in pending:
            with contextlib.suppress(ChronicumNotFound):  # erased meanwhile
                super().record(actum)

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        if key is not None:
            return super().record_many(acta, key)
        head = super().record(acta[0])
        self.write_pending()
        with self.pending_lock:
            self.pending.extend(acta[1:])
        return [head, *(replace(actum, at=head.at) for actum in acta[1:])]

    def record(self, actum: Actum) -> Actum:
        stored = super().record(actum)
        self.write_pending()
        return stored

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        self.write_pending()
        return super().acta(chronicum_id, query)


class KeyedBatchReturnsOnlyTheFirst(CapableStore):
    """A retried keyed batch returns only the first actum of the batch the key stored."""

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        stored = super().record_many(acta, key)
        if key is not None and stored[0].id != acta[0].id:  # the key was used before
            return stored[:1]
        return stored


class ListsOldestFirst(CapableStore):
    """Lists an owner's chronica oldest first (``ORDER BY started_at, id`` without ``DESC``)."""

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        every = sorted(
            super().list_chronica(owner_id, sys.maxsize, None),
            key=lambda chronicum: (chronicum.started_at, chronicum.id),
        )
        if after is not None:
            every = [chronicum for chronicum in every if (chronicum.started_at, chronicum.id) > after]
        return every[:limit]


class ListsEveryOwner(CapableStore):
    """Lists every owner's chronica (the ``WHERE owner_id = ...`` forgotten)."""

    def __init__(self) -> None:
        super().__init__()
        self.owners: set[str] = set()

    def create(self, chronicum: Chronicum) -> None:
        super().create(chronicum)
        self.owners.add(chronicum.owner_id)

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        every: list[Chronicum] = []
        for owner in sorted(self.owners):
            every.extend(super().list_chronica(owner, limit, after))
        every.sort(key=lambda chronicum: (chronicum.started_at, chronicum.id), reverse=True)
        return every[:limit]


class IgnoresAfter(CapableStore):
    """Lists from the newest whatever ``after`` says (the keyset condition forgotten)."""

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        return super().list_chronica(owner_id, limit, None)


class HidesErasedActa(CapableStore):
    """Erases by hiding: the acta stay, and come back when the owner writes to the id again."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden: dict[str, list[Actum]] = {}

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        kept = self.acta(chronicum_id, ActaQuery())
        erased = super().erase(chronicum_id, owner_digest)
        self.hidden[chronicum_id] = kept
        return erased

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        reopened = super().reopen(chronicum, owner_digest)
        if reopened:
            for actum in self.hidden.pop(chronicum.id, []):
                super().record(actum)
        return reopened


class ReopensForAnyDigest(CapableStore):
    """Reopens an erased id for whoever asks (the marker's digest never compared)."""

    def __init__(self) -> None:
        super().__init__()
        self.digests: dict[str, str] = {}

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        erased = super().erase(chronicum_id, owner_digest)
        self.digests[chronicum_id] = owner_digest
        return erased

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        return super().reopen(chronicum, self.digests.get(chronicum.id, owner_digest))


class WithdrawsWrittenChronica(CapableStore):
    """Withdraws a chronicum whatever it holds: the acta another writer recorded go with it."""

    def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        try:
            self.erase(chronicum_id, owner_digest)
        except ChronicumNotFound:
            return False
        return True


class WithdrawsNothing(CapableStore):
    """Has ``withdraw`` but never withdraws: a failed first write leaves its chronicum, empty."""

    def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        return False


class RepeatsTheAfter(CapableStore):
    """Reads "after" an actum starting with that actum itself (``>=`` for ``>``): a duplicate each read."""

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        acta = self.acta(chronicum_id, ActaQuery())
        if after is None:
            return acta[:limit]
        positions = [actum.id for actum in acta]
        if after not in positions:
            return None
        start = positions.index(after)
        return acta[start : start + limit]


class SkipsOneAfter(CapableStore):
    """Reads "after" an actum starting one too far: the actum just after the position is lost."""

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        acta = self.acta(chronicum_id, ActaQuery())
        positions = [actum.id for actum in acta]
        if after is not None and after not in positions:
            return None
        start = 0 if after is None else positions.index(after) + 1
        return acta[start + 1 : start + 1 + limit]


# -- The native and history capabilities: the memory store, each breaking one rule. -------------------


class DropsNativeInABatch(CapableStore):
    """Writes a batch without the acta's native forms (a column left out of the batch's INSERT)."""

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        return super().record_many([replace(actum, native=None) for actum in acta], key)


class ReadsPastTheForkPoint(CapableStore):
    """Reads a shared segment to its source's newest actum (the ``seq <= upto`` bound forgotten).

    A fork then holds what its source wrote after the fork point.
    """

    def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        unbounded = tuple(
            replace(read, segment=replace(read.segment, upto=None)) if isinstance(read, RangeRead) else read
            for read in reads.reads
        )
        return super().window(chronicum_id, WindowReads(unbounded, reads.answered_in))


class LocatesAnywhere(CapableStore):
    """Finds an actum by its id in whatever chronicum holds it (the lineage's ranges forgotten).

    An actum of an unrelated chronicum, or of a source after the fork point, is then found.
    """

    def __init__(self) -> None:
        super().__init__()
        self.homes: dict[str, str] = {}  # actum id -> the chronicum it was written in

    def record(self, actum: Actum) -> Actum:
        self.homes[actum.id] = actum.chronicum_id
        return super().record(actum)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        self.homes[actum.id] = actum.chronicum_id
        return super().record_idempotent(actum, key)

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        self.homes.update((actum.id, actum.chronicum_id) for actum in acta)
        return super().record_many(acta, key)

    def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        found = super().locate(lineage, actum_ids)
        for actum_id in actum_ids:
            home = self.homes.get(actum_id)
            if actum_id not in found and home is not None:
                found.update(super().locate((Segment(home, 0, None),), (actum_id,)))
        return found


class ErasesOnlyTheSource(CapableStore):
    """Erases a chronicum but not its forks (``DELETE ... WHERE chronicum_id = ?`` only).

    Each fork stays, with its own acta, as a chronicum of its own.
    """

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        owner_id = self.get(chronicum_id).owner_id
        forks = []
        for chronicum in self.list_chronica(owner_id, 1001, None):
            lineage = self.layout(chronicum.id).lineage
            if chronicum.id != chronicum_id and any(s.chronicum_id == chronicum_id for s in lineage):
                own = self.window(
                    chronicum.id, WindowReads((RangeRead(lineage[-1], None, None, 0, False, True),))
                )
                forks.append((chronicum, list(own.acta)))
        erased = super().erase(chronicum_id, owner_digest)
        for chronicum, acta in forks:
            self.reopen(chronicum, owner_digest)
            for actum in acta:
                self.record(actum)
        return erased


class IgnoresTheLayoutVersion(CapableStore):
    """Appends a summary whatever layout version the rules checked it against (no ``StaleLayout``).

    Summaries checked at once then all land, their ranges crossing.
    """

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        current = self.layout(actum.chronicum_id).version
        return super().record_summary(actum, first, last, current, key)


class ActaIgnoresTheShape(CapableStore):
    """Answers ``acta`` for a chronicum with a summary or a paired response (no ``StaleLayout``).

    A Chronicarius that knew the chronicum plain then reads the summarized acta as they were written.
    """

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        try:
            return super().acta(chronicum_id, query)
        except StaleLayout:
            own = self.layout(chronicum_id).lineage[-1]
            read = RangeRead(own, query.actum_kinds, query.actor_kinds, query.last_n, True, True)
            return list(self.window(chronicum_id, WindowReads((read,))).acta)


class CopiesThePrefix(CapableStore):
    """Forks by copying the shared acta into a plain chronicum (the lineage given ignored).

    Reads come out right but for ``chronicum_id``; the fork's own acta hold the whole prefix.
    """

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        assert chronicum.forked_from is not None
        shared = tuple(RangeRead(segment, None, None, 0, False, True) for segment in lineage[:-1])
        copied = self.window(chronicum.forked_from.chronicum_id, WindowReads(shared)).acta
        self.create(chronicum)
        for actum in copied:
            self.record(replace(actum, chronicum_id=chronicum.id))


class AsyncFace(AsyncMemoryStore):
    """The asyncio face of a broken store, so the async flavour meets the same mistake."""

    def __init__(self, store: ListStore | MemoryStore) -> None:
        super().__init__(store=cast(MemoryStore, store))


class AsyncBaseFace(AsyncIdempotentStore, Closable):
    """The asyncio face of a :class:`ListStore`: idempotent, without the other capabilities."""

    def __init__(self, store: ListStore) -> None:
        self.sync_store = store

    async def create(self, chronicum: Chronicum) -> None:
        self._refuse_if_closed(None, _ASYNC_WHERE)
        self.sync_store.create(chronicum)

    async def get(self, chronicum_id: str) -> Chronicum:
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.get(chronicum_id)

    async def record(self, actum: Actum) -> Actum:
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.record(actum)

    async def record_idempotent(self, actum: Actum, key: str) -> Actum:
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.record_idempotent(actum, key)

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.acta(chronicum_id, query)

    async def max_content_bytes(self) -> int | None:
        return self.sync_store.max_content_bytes()

    async def close(self) -> None:
        self._mark_closed()


def async_face(store: ListStore | MemoryStore) -> AsyncFace | AsyncBaseFace:
    """The asyncio face of ``store`` offering the capabilities it has."""
    return AsyncFace(store) if isinstance(store, MemoryStore) else AsyncBaseFace(store)
