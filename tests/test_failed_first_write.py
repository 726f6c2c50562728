"""A first write that fails for good leaves no empty chronicum behind (the chronicum is withdrawn)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
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
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    MemoryStore,
    StoreConflict,
    StoreError,
    conflicts,
)
from chronica_core.conflicts import CONFLICT_TRIES


class ConflictingStore(MemoryStore):
    """A memory store whose writes always conflict; ``landing`` lets another writer's actum in first.

    ``withdraws`` counts the calls of ``withdraw``; ``withdraw_fails`` makes it raise ``StoreError``.
    """

    def __init__(self, *, landing: bool = False, withdraw_fails: bool = False) -> None:
        super().__init__()
        self.landing, self.withdraw_fails = landing, withdraw_fails
        self.tries = self.withdraws = 0
        self.failing = True

    def _fail(self, acta: Sequence[Actum]) -> None:
        self.tries += 1
        if self.landing and self.tries == 1:  # another writer's actum lands meanwhile
            super().record(acta[0])
        raise driver_conflict("could not serialize access")

    def record(self, actum: Actum) -> Actum:
        if self.failing:
            self._fail([actum])
        return super().record(actum)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        if self.failing:
            self._fail([actum])
        return super().record_idempotent(actum, key)

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        if self.failing:
            self._fail(acta)
        return super().record_many(acta, key)

    def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        self.withdraws += 1
        if self.withdraw_fails:
            raise StoreError("test: withdraw", "connection lost")
        return super().withdraw(chronicum_id, owner_digest)


class AsyncConflictingStore(AsyncMemoryStore):
    """The asyncio twin of :class:`ConflictingStore` (``record`` only)."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0

    async def record(self, actum: Actum) -> Actum:
        self.tries += 1
        raise driver_conflict("could not serialize access")


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pauses of 0 s: the tries, not the waiting, are under test."""
    monkeypatch.setattr(conflicts, "FIRST_PAUSE", 0.0)


def _actum(content: str = "hello") -> Actum:
    return Actum("c1", ActumKind.MESSAGE, ActorKind.HUMAN, "ana", content)


def _assert_withdrawn(store: MemoryStore, owner: str = "ana") -> None:
    """``c1`` is no chronicum (not listed) and its id stays ``owner``'s."""
    with pytest.raises(ChronicumNotFound):
        store.get("c1")
    assert store.list_chronica(owner, 10, None) == []
    with pytest.raises(ChronicumExists):
        store.create(Chronicum("c1", owner, datetime.now(UTC)))


def _first_write(keeper: Chronicarius, write: str) -> Any:
    if write == "record":
        return keeper.record_actum("ana", _actum())
    if write == "record_idempotent":
        return keeper.record_actum("ana", _actum(), idempotency_key="k1")
    return keeper.record_acta("ana", [_actum("one"), _actum("two")])


@pytest.mark.parametrize("write", ["record", "record_idempotent", "record_many"])
def test_a_first_write_that_always_conflicts_withdraws_its_chronicum(write: str) -> None:
    store = ConflictingStore()
    keeper = Chronicarius(store)
    with pytest.raises(StoreConflict) as raised:
        _first_write(keeper, write)
    assert store.tries == CONFLICT_TRIES
    assert raised.value.detail == "could not serialize access (conflicted 20 times in a row)"
    assert isinstance(raised.value.__cause__, DriverConflict)
    assert store.withdraws == 1
    _assert_withdrawn(store)
    store.failing = False  # the owner writes again: a fresh chronicum, holding only the new write
    stored = _first_write(keeper, write)
    stored_ids = [actum.id for actum in (stored if isinstance(stored, list) else [stored])]
    assert [actum.id for actum in keeper.get_acta("ana", "c1")] == stored_ids


def test_a_withdrawn_id_stays_its_owners() -> None:
    store = ConflictingStore()
    with pytest.raises(StoreConflict):
        Chronicarius(store).record_actum("ana", _actum())
    store.failing = False
    with pytest.raises(ChronicumNotFound):
        Chronicarius(store).record_actum("bo", _actum("mine now?"))
    with pytest.raises(ChronicumNotFound):
        store.get("c1")


def test_another_store_error_withdraws_too() -> None:
    class LostStore(ConflictingStore):
        def _fail(self, acta: Sequence[Actum]) -> None:
            self.tries += 1
            raise StoreError("test: record actum", "connection lost")

    store = LostStore()
    with pytest.raises(StoreError) as raised:
        Chronicarius(store).record_actum("ana", _actum())
    assert (type(raised.value), raised.value.detail, store.tries) == (StoreError, "connection lost", 1)
    assert store.withdraws == 1
    _assert_withdrawn(store)


def test_an_actum_another_writer_recorded_meanwhile_keeps_the_chronicum() -> None:
    store = ConflictingStore(landing=True)
    with pytest.raises(StoreConflict):
        Chronicarius(store).record_actum("ana", _actum("landed"))
    assert store.withdraws == 1
    assert store.get("c1").owner_id == "ana"
    assert [actum.content for actum in Chronicarius(store).get_acta("ana", "c1")] == ["landed"]


def test_a_write_into_a_chronicum_it_did_not_create_withdraws_nothing() -> None:
    store = ConflictingStore()
    store.create(Chronicum("c1", "ana", datetime.now(UTC)))
    with pytest.raises(StoreConflict):
        Chronicarius(store).record_actum("ana", _actum())
    assert store.withdraws == 0
    assert store.get("c1").owner_id == "ana"


def test_a_failed_withdraw_is_logged_and_the_write_error_raised(caplog: pytest.LogCaptureFixture) -> None:
    store = ConflictingStore(withdraw_fails=True)
    with caplog.at_level(logging.DEBUG, logger="chronica"), pytest.raises(StoreConflict) as raised:
        Chronicarius(store).record_actum("ana", _actum())
    assert raised.value.where == "test: record actum"
    assert isinstance(raised.value.__cause__, DriverConflict)
    assert store.withdraws == 1
    assert store.get("c1").owner_id == "ana"  # the empty chronicum stays
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert warnings == [
        "a failed first write left its chronicum empty: withdrawing it failed (test: withdraw)"
    ]
    assert not any("c1" in message for message in warnings), "a warning named the chronicum"


def test_a_store_without_withdraw_keeps_the_chronicum_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    class NoWithdraw(MemoryStore):
        """A store with erasure, written before ``withdraw`` existed."""

        def __getattribute__(self, name: str) -> Any:
            if name == "withdraw":
                raise AttributeError(name)
            return super().__getattribute__(name)

        def record(self, actum: Actum) -> Actum:
            raise StoreError("test: record actum", "connection lost")

    store = NoWithdraw()
    with caplog.at_level(logging.WARNING, logger="chronica"), pytest.raises(StoreError):
        Chronicarius(store).record_actum("ana", _actum())
    assert store.get("c1").owner_id == "ana"
    assert [record.getMessage() for record in caplog.records] == [
        "NoWithdraw cannot withdraw a chronicum: a failed first write left it empty"
    ]


def test_asyncio_a_first_write_that_always_conflicts_withdraws_its_chronicum() -> None:
    async def scenario() -> tuple[int, str, AsyncConflictingStore]:
        store = AsyncConflictingStore()
        try:
            await AsyncChronicarius(store).record_actum("ana", _actum())
        except StoreConflict as conflict:
            return store.tries, conflict.detail, store
        raise AssertionError("no StoreConflict")

    tries, detail, store = asyncio.run(scenario())
    assert (tries, detail) == (CONFLICT_TRIES, "could not serialize access (conflicted 20 times in a row)")
    _assert_withdrawn(store.sync_store)


class AsyncHangingStore(AsyncMemoryStore):
    """An asyncio memory store whose writes hang (``writing`` is set once one has started)."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()

    async def _hang(self) -> None:
        self.writing.set()
        await asyncio.Event().wait()  # until cancelled

    async def record(self, actum: Actum) -> Actum:
        await self._hang()
        return await super().record(actum)

    async def record_idempotent(self, actum: Actum, key: str) -> Actum:
        await self._hang()
        return await super().record_idempotent(actum, key)

    async def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        await self._hang()
        return await super().record_many(acta, key)


@pytest.mark.parametrize("write", ["record", "record_idempotent", "record_many"])
def test_asyncio_a_first_write_cancelled_after_creating_its_chronicum_withdraws_it(write: str) -> None:
    # asyncio.timeout around a request, or Ctrl-C under asyncio.run, cancels the write mid-call
    async def scenario() -> tuple[bool, AsyncHangingStore]:
        store = AsyncHangingStore()
        keeper = AsyncChronicarius(store)
        writing: asyncio.Task[Any]
        if write == "record":
            writing = asyncio.create_task(keeper.record_actum("ana", _actum()))
        elif write == "record_idempotent":
            writing = asyncio.create_task(keeper.record_actum("ana", _actum(), idempotency_key="k1"))
        else:
            writing = asyncio.create_task(keeper.record_acta("ana", [_actum("one"), _actum("two")]))
        await store.writing.wait()  # the chronicum is created; its first actum is being written
        writing.cancel()
        outcome = await asyncio.gather(writing, return_exceptions=True)
        return isinstance(outcome[0], asyncio.CancelledError), store

    cancelled, store = asyncio.run(scenario())
    assert cancelled is True
    _assert_withdrawn(store.sync_store)


class AsyncHangingCreateStore(AsyncMemoryStore):
    """An asyncio memory store whose ``create`` hangs: after creating (``landed``), else before.

    ``racer`` is a chronicum another first write creates meanwhile, before the hang.
    """

    def __init__(self, *, landed: bool, racer: Chronicum | None = None) -> None:
        super().__init__()
        self.landed, self.racer = landed, racer
        self.creating = asyncio.Event()

    async def create(self, chronicum: Chronicum) -> None:
        if self.landed:
            await super().create(chronicum)
        if self.racer is not None:
            await super().create(self.racer)
        self.creating.set()
        await asyncio.Event().wait()  # until cancelled


def _cancelled_first_write(store: AsyncHangingCreateStore) -> bool:
    async def scenario() -> bool:
        writing = asyncio.create_task(AsyncChronicarius(store).record_actum("ana", _actum()))
        await store.creating.wait()
        writing.cancel()
        outcome = await asyncio.gather(writing, return_exceptions=True)
        return isinstance(outcome[0], asyncio.CancelledError)

    return asyncio.run(scenario())


@pytest.mark.parametrize("landed", [True, False])
def test_asyncio_a_first_write_cancelled_while_creating_leaves_no_chronicum(landed: bool) -> None:
    store = AsyncHangingCreateStore(landed=landed)
    assert _cancelled_first_write(store) is True
    if landed:  # the create landed before the cancellation: withdrawn
        _assert_withdrawn(store.sync_store)
    else:
        with pytest.raises(ChronicumNotFound):
            store.sync_store.get("c1")
        assert store.sync_store.list_chronica("ana", 10, None) == []


def test_asyncio_a_cancelled_create_withdraws_no_chronicum_another_write_created() -> None:
    racer = Chronicum("c1", "ana", datetime(2026, 12, 1, tzinfo=UTC))  # the same owner's, another moment
    store = AsyncHangingCreateStore(landed=False, racer=racer)
    assert _cancelled_first_write(store) is True
    assert store.sync_store.get("c1") == racer
