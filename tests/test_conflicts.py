"""A store call that conflicted is tried again, a bounded number of times (chronica_core.conflicts)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conflicting import DriverConflict, driver_conflict

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    Chronicarius,
    ChronicumNotFound,
    MemoryStore,
    StoreConflict,
    StoreError,
    conflicts,
)
from chronica_core.conflicts import CONFLICT_TRIES, FIRST_PAUSE, LONGEST_PAUSE, conflict_pauses


class ConflictingStore(MemoryStore):
    """A memory store whose ``record`` conflicts its first ``conflicts`` times (``None``: always)."""

    def __init__(self, conflicts: int | None, failure: type[StoreError] = StoreConflict) -> None:
        super().__init__()
        self.conflicts, self.failure, self.tries = conflicts, failure, 0

    def record(self, actum: Actum) -> Actum:
        self.tries += 1
        if self.conflicts is None or self.tries <= self.conflicts:
            if self.failure is StoreConflict:
                raise driver_conflict()
            raise self.failure("test: record actum", "connection lost")
        return super().record(actum)


class AsyncConflictingStore(AsyncMemoryStore):
    """The asyncio twin of :class:`ConflictingStore`."""

    def __init__(self, conflicts: int | None) -> None:
        super().__init__()
        self.conflicts, self.tries = conflicts, 0

    async def record(self, actum: Actum) -> Actum:
        self.tries += 1
        if self.conflicts is None or self.tries <= self.conflicts:
            raise driver_conflict()
        return await super().record(actum)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pauses of 0 s: the tries, not the waiting, are under test."""
    monkeypatch.setattr(conflicts, "FIRST_PAUSE", 0.0)


def _actum() -> Actum:
    return Actum("c1", ActumKind.MESSAGE, ActorKind.HUMAN, "ana", "hello")


def test_a_call_that_always_conflicts_raises_store_conflict_after_the_bound() -> None:
    store = ConflictingStore(conflicts=None)
    with pytest.raises(StoreConflict) as raised:
        Chronicarius(store).record_actum("ana", _actum())
    assert store.tries == CONFLICT_TRIES == 20
    assert isinstance(raised.value, StoreError)
    assert raised.value.where == "test: record actum"
    assert (
        raised.value.detail
        == "could not serialize access due to concurrent update (conflicted 20 times in a row)"
    )
    assert isinstance(raised.value.__cause__, DriverConflict)


def test_a_call_that_conflicts_less_than_the_bound_lands_once() -> None:
    store = ConflictingStore(conflicts=CONFLICT_TRIES - 1)
    keeper = Chronicarius(store)
    stored = keeper.record_actum("ana", _actum())
    assert store.tries == CONFLICT_TRIES
    assert [actum.id for actum in keeper.get_acta("ana", "c1")] == [stored.id]


def test_another_store_error_is_not_tried_again() -> None:
    store = ConflictingStore(conflicts=1, failure=StoreError)
    with pytest.raises(StoreError) as raised:
        Chronicarius(store).record_actum("ana", _actum())
    assert type(raised.value) is StoreError
    assert store.tries == 1


def test_asyncio_a_call_that_always_conflicts_raises_store_conflict_after_the_bound() -> None:
    async def scenario() -> tuple[int, str, Any]:
        store = AsyncConflictingStore(conflicts=None)
        try:
            await AsyncChronicarius(store).record_actum("ana", _actum())
        except StoreConflict as conflict:
            return store.tries, conflict.detail, conflict.__cause__
        raise AssertionError("no StoreConflict")

    tries, detail, cause = asyncio.run(scenario())
    assert tries == CONFLICT_TRIES
    assert detail.endswith("(conflicted 20 times in a row)")
    assert isinstance(cause, DriverConflict)


def test_asyncio_a_call_that_conflicts_twice_lands_once() -> None:
    async def scenario() -> tuple[int, list[str], str]:
        store = AsyncConflictingStore(conflicts=2)
        keeper = AsyncChronicarius(store)
        stored = await keeper.record_actum("ana", _actum())
        return store.tries, [actum.id for actum in await keeper.get_acta("ana", "c1")], stored.id

    tries, ids, stored_id = asyncio.run(scenario())
    assert (tries, ids) == (3, [stored_id])


def test_a_conflicting_read_is_tried_again() -> None:
    class ConflictingReads(MemoryStore):
        tries = 0

        def get(self, chronicum_id: str) -> Any:
            self.tries += 1
            if self.tries <= 2:
                raise driver_conflict()
            return super().get(chronicum_id)

    store = ConflictingReads()
    with pytest.raises(ChronicumNotFound):
        Chronicarius(store).get_chronicum("ana", "missing")
    assert store.tries == 3


def test_the_pauses_grow_to_a_bound_and_are_random_below_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real bounds
    bounds = [min(LONGEST_PAUSE, FIRST_PAUSE * 2**retry) for retry in range(CONFLICT_TRIES - 1)]
    runs = [list(conflict_pauses()) for _ in range(50)]
    assert all(len(pauses) == CONFLICT_TRIES - 1 for pauses in runs)
    assert all(0 <= pause <= bound for pauses in runs for pause, bound in zip(pauses, bounds, strict=True))
    assert len({pauses[-1] for pauses in runs}) > 40  # jittered, not in step
    assert sum(bounds) == pytest.approx(12.275)
