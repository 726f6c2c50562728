"""On PostgreSQL through psycopg: the statements psycopg runs itself borrow the pool's connection.

A context window, a ``get`` and a single append are one statement each, run by psycopg on a
connection taken with ``engine.raw_connection()`` when the engine's pool lends its connections in
autocommit (the engines the store creates): no SQLAlchemy ``Connection`` is made around it,
unless the plan goes on with a step SQLAlchemy runs (reading back a keyed actum) or a failure
must be handled. These tests check what that must not change: what is committed, what a failure
ends, the retry after a lost connection, and the error of a connection that cannot be made.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from chronica_sqlalchemy import SQLAlchemyStore, driver_statements
from chronica_sqlalchemy.plans import Step, execute_plan
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import QueuePool

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, StoreError
from chronica_core.plans import Plan

pytestmark = pytest.mark.dialects("postgresql")

WINDOW = ActaQuery(last_n=20)


def said(chronicum_id: str, content: str, key_id: str | None = None) -> Actum:
    return Actum(
        chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=key_id or uuid.uuid4().hex
    )


def new_chronicum(store: SQLAlchemyStore, *contents: str) -> str:
    """A new chronicum holding a message of each of ``contents``."""
    chronicum_id = f"lent-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
    for content in contents:
        store.record(said(chronicum_id, content))
    return chronicum_id


class Made:
    """How many SQLAlchemy ``Connection`` objects and pool checkouts an engine saw while counting."""

    def __init__(self) -> None:
        self.connections = 0
        self.checkouts = 0


@contextlib.contextmanager
def counting(engine: Engine) -> Iterator[Made]:
    made = Made()

    def connected(connection: Any) -> None:
        made.connections += 1

    def checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        made.checkouts += 1

    event.listen(engine, "engine_connect", connected)
    event.listen(engine, "checkout", checked_out)
    try:
        yield made
    finally:
        event.remove(engine, "engine_connect", connected)
        event.remove(engine, "checkout", checked_out)


def lent_out(engine: Engine) -> int:
    """How many of ``engine``'s pooled connections are lent out now."""
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedout()


def gone(pooled: Any) -> None:
    """Close ``pooled``'s driver connection, as a server gone away leaves it."""
    pooled.driver_connection.close()


def failing_first_call(monkeypatch: pytest.MonkeyPatch, fail: Callable[[Any], None]) -> list[Any]:
    """Have psycopg's own call run ``fail(pooled)`` before its first statement (it may raise).

    Returns the list of the driver connections each call ran on, filled as they run.
    """
    used: list[Any] = []
    real_psycopg_call = driver_statements.psycopg_call

    def psycopg_call(pooled: Any, statement: Any, values: Any) -> list[Any]:
        used.append(pooled.driver_connection)
        if len(used) == 1:
            fail(pooled)
        return real_psycopg_call(pooled, statement, values)

    monkeypatch.setattr(driver_statements, "psycopg_call", psycopg_call)
    return used


def test_a_window_a_get_and_an_append_make_no_sqlalchemy_connection(one_connection: SQLAlchemyStore) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store, "warm")  # the content limit is read once, before counting
    with counting(store.engine) as made:
        stored = store.record(said(chronicum_id, "counted"))
        window = store.acta(chronicum_id, WINDOW)
        chronicum = store.get(chronicum_id)
    assert [actum.content for actum in window] == ["warm", "counted"]
    assert (stored.at, chronicum.last_actum_at) == (window[-1].at, window[-1].at)
    assert (made.checkouts, made.connections) == (3, 0)


def test_reading_back_a_keyed_actum_goes_on_in_a_sqlalchemy_connection(
    one_connection: SQLAlchemyStore,
) -> None:
    """The append's key is taken: the plan reads the stored actum back with SQLAlchemy's execution,
    in a ``Connection`` around the same pooled connection (one made to handle the refused
    statement, one for the read)."""
    store = one_connection
    chronicum_id = new_chronicum(store)
    first = store.record_idempotent(said(chronicum_id, "once"), "reply-1")
    with counting(store.engine) as made:
        again = store.record_idempotent(said(chronicum_id, "twice"), "reply-1")
    assert (again.id, again.content, again.at) == (first.id, "once", first.at)
    assert [actum.content for actum in store.acta(chronicum_id, WINDOW)] == ["once"]
    assert (made.checkouts, made.connections) == (1, 2)


def test_an_engine_in_autocommit_only_by_its_options_commits_every_append(
    shared_store: SQLAlchemyStore, database_url: str
) -> None:
    """Its pool lends connections outside autocommit: each plan runs in a ``Connection`` that switches."""
    engine = create_engine(database_url, pool_size=1, max_overflow=0)
    given = engine.execution_options(isolation_level="AUTOCOMMIT")
    try:
        store = SQLAlchemyStore(given, auto_migrate=False)
        chronicum_id = new_chronicum(store)
        with counting(given) as made:
            store.record(said(chronicum_id, "kept"))
            window = store.acta(chronicum_id, WINDOW)
        acta = shared_store.plans.tables.acta
        with shared_store.engine.connect() as other:  # another connection sees it: committed
            seen = other.execute(
                text(f"SELECT count(*) FROM {acta.fullname} WHERE chronicum_id = :id"), {"id": chronicum_id}
            ).scalar_one()
        assert ([actum.content for actum in window], seen) == (["kept"], 1)
        assert (made.checkouts, made.connections) == (2, 2)
    finally:
        engine.dispose()


def test_a_failed_statement_ends_its_lent_connection_and_the_next_read_takes_a_new_one(
    one_connection: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store, "hello")

    def cancelled(pooled: Any) -> None:
        raise psycopg.errors.QueryCanceled("canceling statement due to user request")

    used = failing_first_call(monkeypatch, cancelled)
    with pytest.raises(StoreError, match=r"^sqlalchemy: get acta: QueryCanceled: canceling") as caught:
        store.acta(chronicum_id, WINDOW)
    assert isinstance(caught.value.__cause__, DBAPIError)
    window = store.acta(chronicum_id, WINDOW)
    assert [actum.content for actum in window] == ["hello"]
    assert len(used) == 2
    assert (used[0].closed, used[1].closed, used[0] is used[1]) == (True, False, False)
    assert lent_out(store.engine) == 0


def test_a_lost_lent_connection_is_read_again_on_a_new_one(
    one_connection: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store, "hello")

    used = failing_first_call(monkeypatch, gone)
    window = store.acta(chronicum_id, WINDOW)
    assert [actum.content for actum in window] == ["hello"]
    assert (len(used), used[0] is used[1], used[1].closed) == (2, False, False)
    assert lent_out(store.engine) == 0


def test_a_lent_connection_that_cannot_be_made_is_a_connect_error(
    one_connection: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wrapped as ``engine.connect()`` wraps it, after the engine's ``handle_error`` events."""
    store = one_connection
    chronicum_id = new_chronicum(store)
    store.engine.dispose()  # the next read opens a new connection
    handled: list[BaseException] = []

    def handle_error(context: Any) -> None:
        handled.append(context.original_exception)

    def refused(*arguments: Any, **keywords: Any) -> Any:
        raise psycopg.OperationalError("connection refused (by the test)")

    event.listen(store.engine, "handle_error", handle_error)
    monkeypatch.setattr(store.engine.dialect.loaded_dbapi, "connect", refused)  # psycopg.connect
    try:
        with pytest.raises(StoreError, match=r"^sqlalchemy: connect: OperationalError: connection refused"):
            store.acta(chronicum_id, WINDOW)
    finally:
        event.remove(store.engine, "handle_error", handle_error)
    assert [type(error).__name__ for error in handled] == ["OperationalError"]
    monkeypatch.undo()
    assert store.acta(chronicum_id, WINDOW) == []


def test_a_plan_that_goes_on_after_losing_its_lent_connection_takes_a_new_one(
    one_connection: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a ``RECONNECT`` step in between, as a ``Connection`` would reconnect by itself."""
    store = one_connection
    chronicum_id = new_chronicum(store, "hello")

    used = failing_first_call(monkeypatch, gone)
    window = store.plans.window_for(chronicum_id, WINDOW)
    first_step = store.plans._on_psycopg(*window)
    assert first_step is not None

    def plan() -> Plan[Step, tuple[str, int]]:
        try:
            yield first_step
        except DBAPIError as error:
            lost = type(error.orig).__name__
        rows = yield Step("execute", (text("SELECT 1"), {}))
        return lost, rows.scalar_one()

    assert execute_plan(store.engine, plan()) == ("OperationalError", 1)
    assert (len(used), used[0].closed, lent_out(store.engine)) == (1, True, 0)
    assert [actum.content for actum in store.acta(chronicum_id, WINDOW)] == ["hello"]
