"""Serialization failures, deadlocks and lock wait timeouts are conflicts, tried again by Chronicarius."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from typing import Any

import psycopg
import pymysql
import pytest
from chronica_sqlalchemy import SQLAlchemyStore, open_async_sqlalchemy_store
from chronica_sqlalchemy.conflicts import conflicted
from sqlalchemy import Engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    StoreConflict,
    StoreError,
    conflicts,
)
from chronica_core.conflicts import CONFLICT_TRIES


def _wrapped(driver_error: Exception) -> OperationalError:
    return OperationalError("INSERT INTO acta ...", {}, driver_error)


@pytest.mark.parametrize(
    "driver_error",
    [
        psycopg.errors.SerializationFailure("could not serialize access due to concurrent update"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
        pymysql.err.OperationalError(
            1213, "Deadlock found when trying to get lock; try restarting transaction"
        ),
        pymysql.err.OperationalError(1205, "Lock wait timeout exceeded; try restarting transaction"),
    ],
)
def test_what_the_database_rolled_back_for_a_conflict_is_a_conflict(driver_error: Exception) -> None:
    assert conflicted(_wrapped(driver_error))


@pytest.mark.parametrize(
    "driver_error",
    [
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query"),
        pymysql.err.OperationalError(1969, "Query execution was interrupted (max_statement_time exceeded)"),
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError(1213),
    ],
)
def test_other_failures_are_no_conflicts(driver_error: Exception) -> None:
    assert not conflicted(_wrapped(driver_error))


def _conflict_of(engine: Engine) -> Exception:
    """The database's own conflict, as the engine's driver raises it (SQLite has none: a locked file)."""
    dbapi = engine.dialect.loaded_dbapi
    if engine.dialect.name == "postgresql":
        return psycopg.errors.SerializationFailure("could not serialize access due to concurrent update")
    if engine.dialect.name in ("mysql", "mariadb"):  # PyMySQL's or asyncmy's exception
        error: Exception = dbapi.OperationalError(
            1213, "Deadlock found when trying to get lock; try restarting transaction"
        )
        return error
    return sqlite3.OperationalError("database is locked")


class AlwaysConflicting:
    """Every statement of the store's engine fails with its database's conflict while ``active``."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.statements, self.active = engine, 0, False
        self.error = _conflict_of(engine)

    def __enter__(self) -> AlwaysConflicting:
        for name in ("do_execute", "do_executemany"):
            event.listen(self.engine, name, self.execute)
        event.listen(self.engine, "do_execute_no_params", self.execute_no_params)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for name in ("do_execute", "do_executemany"):
            event.remove(self.engine, name, self.execute)
        event.remove(self.engine, "do_execute_no_params", self.execute_no_params)

    def execute(self, cursor: Any, statement: Any, parameters: Any, context: Any) -> bool:
        if self.active:
            self.statements += 1
            raise self.error
        return False

    def execute_no_params(self, cursor: Any, statement: Any, context: Any) -> bool:
        return self.execute(cursor, statement, None, context)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conflicts, "FIRST_PAUSE", 0.0)  # the tries are under test, not the pauses


def _actum(chronicum_id: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ana", "hello")


def test_a_driver_that_always_conflicts_gives_store_conflict_after_the_bound(store: SQLAlchemyStore) -> None:
    keeper = Chronicarius(store)
    chronicum_id = f"conflicts-{uuid.uuid4().hex}"
    keeper.record_actum("ana", _actum(chronicum_id))
    with AlwaysConflicting(store.engine) as driver:
        driver.active = True
        with pytest.raises(StoreError) as raised:
            keeper.record_actum("ana", _actum(chronicum_id))
        driver.active = False
    if store.engine.dialect.name == "sqlite":  # a locked database is no conflict: not tried again
        assert (type(raised.value), driver.statements) == (StoreError, 1)
    else:
        assert type(raised.value) is StoreConflict
        assert driver.statements == CONFLICT_TRIES
        assert raised.value.where == "sqlalchemy: record actum"
        assert raised.value.detail.endswith(f"(conflicted {CONFLICT_TRIES} times in a row)")
        assert raised.value.__cause__ is not None and raised.value.__cause__.__cause__ is driver.error
    assert len(keeper.get_acta("ana", chronicum_id)) == 1
    keeper.record_actum("ana", _actum(chronicum_id))  # the store goes on working
    assert len(keeper.get_acta("ana", chronicum_id)) == 2


def test_asyncio_a_driver_that_always_conflicts_gives_store_conflict_after_the_bound(
    store: SQLAlchemyStore, database_url: str
) -> None:
    async def scenario() -> tuple[StoreError, int, int]:
        async_store = open_async_sqlalchemy_store(database_url, auto_migrate=False)
        try:
            keeper = AsyncChronicarius(async_store)
            chronicum_id = f"conflicts-{uuid.uuid4().hex}"
            await keeper.record_actum("ana", _actum(chronicum_id))
            engine = async_store.engine
            with AlwaysConflicting(
                engine.sync_engine if isinstance(engine, AsyncEngine) else engine
            ) as driver:
                driver.active = True
                try:
                    await keeper.record_actum("ana", _actum(chronicum_id))
                except StoreError as error:
                    driver.active = False
                    return error, driver.statements, len(await keeper.get_acta("ana", chronicum_id))
            raise AssertionError("no StoreError")
        finally:
            await async_store.close()

    error, statements, stored = asyncio.run(scenario())
    if store.engine.dialect.name == "sqlite":
        assert (type(error), statements) == (StoreError, 1)
    else:
        assert (type(error), statements) == (StoreConflict, CONFLICT_TRIES)
    assert stored == 1
