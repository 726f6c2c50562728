"""Serialization failures and deadlocks are conflicts: StoreConflict, tried again by Chronicarius."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_postgres.plans import translate
from psycopg import errors

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    ChronicumNotFound,
    StoreConflict,
    StoreError,
    conflicts,
)
from chronica_core.conflicts import CONFLICT_TRIES


@pytest.mark.parametrize(
    "error",
    [
        errors.SerializationFailure("could not serialize access due to concurrent update"),
        errors.DeadlockDetected("deadlock detected"),
    ],
)
def test_serialization_failures_and_deadlocks_are_conflicts(error: psycopg.Error) -> None:
    translated = translate(error, "record actum", "c1")
    assert type(translated) is StoreConflict
    assert (translated.where, translated.detail) == ("postgres: record actum", str(error))


@pytest.mark.parametrize(
    "error",
    [
        errors.LockNotAvailable("could not obtain lock"),
        errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
    ],
)
def test_other_failures_are_no_conflicts(error: psycopg.Error) -> None:
    assert type(translate(error, "record actum", "c1")) is StoreError


class AlwaysConflicting:
    """Every statement the driver runs while it is active fails with a serialization failure."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.statements = 0
        self.active = False

        def conflict() -> errors.SerializationFailure:
            self.statements += 1
            return errors.SerializationFailure("could not serialize access due to concurrent update")

        sync_execute, async_execute = psycopg.Cursor.execute, psycopg.AsyncCursor.execute

        def execute(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
            if self.active:
                raise conflict()
            return sync_execute(cursor, *arguments, **keywords)

        async def execute_async(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
            if self.active:
                raise conflict()
            return await async_execute(cursor, *arguments, **keywords)

        patch.setattr(psycopg.Cursor, "execute", execute)
        patch.setattr(psycopg.AsyncCursor, "execute", execute_async)  # kept cursors and new ones alike


@pytest.fixture
def always_conflicting(monkeypatch: pytest.MonkeyPatch) -> AlwaysConflicting:
    monkeypatch.setattr(conflicts, "FIRST_PAUSE", 0.0)  # the tries are under test, not the pauses
    return AlwaysConflicting(monkeypatch)


def _actum(chronicum_id: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ana", "hello")


def test_a_driver_that_always_conflicts_gives_store_conflict_after_the_bound(
    store: PostgresStore, always_conflicting: AlwaysConflicting
) -> None:
    keeper = Chronicarius(store)
    chronicum_id = f"conflicts-{uuid.uuid4().hex}"
    keeper.record_actum("ana", _actum(chronicum_id))  # the chronicum exists: the append is what conflicts
    always_conflicting.active = True
    with pytest.raises(StoreConflict) as raised:
        keeper.record_actum("ana", _actum(chronicum_id))
    always_conflicting.active = False
    assert always_conflicting.statements == CONFLICT_TRIES
    assert raised.value.where == "postgres: record actum"
    assert raised.value.detail.endswith(f"(conflicted {CONFLICT_TRIES} times in a row)")
    assert isinstance(raised.value.__cause__, errors.SerializationFailure)
    assert len(keeper.get_acta("ana", chronicum_id)) == 1
    keeper.record_actum("ana", _actum(chronicum_id))  # the store goes on working
    assert len(keeper.get_acta("ana", chronicum_id)) == 2


def test_asyncio_a_driver_that_always_conflicts_gives_store_conflict_after_the_bound(
    postgres_url: str, schema: str, always_conflicting: AlwaysConflicting
) -> None:
    async def scenario() -> tuple[StoreConflict, int]:
        store = AsyncPostgresStore(postgres_url, schema=schema, max_size=2)
        try:
            keeper = AsyncChronicarius(store)
            chronicum_id = f"conflicts-{uuid.uuid4().hex}"
            await keeper.record_actum("ana", _actum(chronicum_id))
            always_conflicting.active = True
            try:
                await keeper.record_actum("ana", _actum(chronicum_id))
            except StoreConflict as conflict:
                always_conflicting.active = False
                return conflict, len(await keeper.get_acta("ana", chronicum_id))
            raise AssertionError("no StoreConflict")
        finally:
            always_conflicting.active = False
            await store.close()

    conflict, stored = asyncio.run(scenario())
    assert always_conflicting.statements == CONFLICT_TRIES
    assert conflict.where == "postgres: record actum"
    assert isinstance(conflict.__cause__, errors.SerializationFailure)
    assert stored == 1


def test_a_first_write_whose_every_statement_conflicts_creates_nothing(
    store: PostgresStore, always_conflicting: AlwaysConflicting
) -> None:
    chronicum_id = f"conflicts-{uuid.uuid4().hex}"
    always_conflicting.active = True
    with pytest.raises(StoreConflict):
        Chronicarius(store).record_actum("ana", _actum(chronicum_id))
    always_conflicting.active = False
    assert always_conflicting.statements == CONFLICT_TRIES  # its first statement (the chronicum read)
    with pytest.raises(ChronicumNotFound):
        store.get(chronicum_id)
