"""Deliberately broken stores: each makes one mistake a real backend once made.

``test_suite_catches_mistakes.py`` runs the conformance suite against each and checks that it
fails, naming the cases. Every mistake is deterministic (no timing): a lost or doubled write is
tied to the calling thread, standing in for "another connection", and the suite's concurrency
cases always write from many threads.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import cast

from chronica_core import (
    ActaQuery,
    Actum,
    AsyncMemoryStore,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    Closable,
    IdempotentStore,
    MemoryStore,
)

_WHERE = "list: store"


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


class AsyncFace(AsyncMemoryStore):
    """The asyncio face of a broken store, so the async flavour meets the same mistake."""

    def __init__(self, store: ListStore) -> None:
        super().__init__(store=cast(MemoryStore, store))
