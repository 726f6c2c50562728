"""The stores' own connections keep one cursor per statement, and nothing bulky in it.

A kept cursor saves psycopg a new cursor and transformer per call (their CPU is measured by
``backends/postgres/benchmarks/cpu_per_call.py``, not here). These tests count the cursors made
and check what a kept cursor holds after a call: no result, and no bulky content.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_postgres.kept_cursors import KEPT_CURSORS_MOST, PooledConnection
from chronica_postgres.plans import BULKY_CONTENT_CHARS

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, new_actum_id
from chronica_core.history import RangeRead, Segment, WindowReads

WINDOW = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=20)


class Cursors:
    """Every cursor made on a psycopg connection while counting, held weakly."""

    def __init__(self) -> None:
        self.made: list[weakref.ref[psycopg.Cursor[Any]]] = []


@pytest.fixture
def cursors(monkeypatch: pytest.MonkeyPatch) -> Cursors:
    made = Cursors()
    real_cursor = psycopg.Connection.cursor

    def cursor(connection: Any, *arguments: Any, **keywords: Any) -> Any:
        new = real_cursor(connection, *arguments, **keywords)
        made.made.append(weakref.ref(new))
        return new

    monkeypatch.setattr(psycopg.Connection, "cursor", cursor)
    return made


@pytest.fixture
def one_connection(make_store: Callable[..., PostgresStore], schema: str) -> PostgresStore:
    """A store on a pool of exactly one connection, so every call finds the same kept cursors."""
    return make_store(schema=schema, min_size=1, max_size=1)


@pytest.fixture
def chronicum_id(one_connection: PostgresStore) -> str:
    chronicum_id = f"kept-{uuid.uuid4().hex}"
    one_connection.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    return chronicum_id


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


def _kept(store: PostgresStore) -> Iterator[dict[bytes, psycopg.Cursor[Any]]]:
    """The kept cursors of the store's one pooled connection (borrowed while the caller looks)."""
    connection = store._pool.getconn()
    try:
        assert isinstance(connection, PooledConnection)
        yield connection.kept_cursors
    finally:
        store._pool.putconn(connection)


def test_repeated_reads_and_writes_make_no_new_cursor(
    one_connection: PostgresStore, chronicum_id: str, cursors: Cursors
) -> None:
    store = one_connection
    store.record(_message(chronicum_id, "warm-up"))
    store.acta(chronicum_id, WINDOW)
    made_before = len(cursors.made)
    for number in range(20):
        store.record(_message(chronicum_id, f"message {number}"))
        window = store.acta(chronicum_id, WINDOW)
        assert window[-1].content == f"message {number}"
    assert len(cursors.made) == made_before
    assert [actum.content for actum in window] == [f"message {number}" for number in range(20)]
    for kept in _kept(store):
        assert store.plans.statements.record in kept
        assert store.plans.statements.window(kinds=True, actor_kinds=False, limited=True) in kept


def test_a_kept_cursor_holds_no_result_after_a_read(one_connection: PostgresStore, chronicum_id: str) -> None:
    store = one_connection
    for number in range(5):
        store.record(_message(chronicum_id, f"{number}" * BULKY_CONTENT_CHARS))
    window = store.acta(chronicum_id, WINDOW)
    assert [actum.content for actum in window] == [f"{number}" * BULKY_CONTENT_CHARS for number in range(5)]
    for kept in _kept(store):
        result = kept[store.plans.statements.window(kinds=True, actor_kinds=False, limited=True)].pgresult
        assert result is not None
        assert result.ntuples == 0  # freed: the rows were 5 acta


def test_a_bulky_write_runs_on_a_cursor_of_its_own_that_goes_after_it(
    one_connection: PostgresStore, chronicum_id: str, cursors: Cursors
) -> None:
    store = one_connection
    store.record(_message(chronicum_id, "x" * BULKY_CONTENT_CHARS))  # the largest content kept
    for kept in _kept(store):
        kept_record = kept[store.plans.statements.record]
    made_before = len(cursors.made)
    bulky = "y" * (BULKY_CONTENT_CHARS + 1)
    stored = store.record(_message(chronicum_id, bulky))
    assert len(cursors.made) == made_before + 1
    gc.collect()
    assert cursors.made[-1]() is None  # nothing of the bulky write stays behind
    for kept in _kept(store):
        assert kept[store.plans.statements.record] is kept_record
    assert [actum.id for actum in store.acta(chronicum_id, ActaQuery(last_n=1))] == [stored.id]
    assert store.acta(chronicum_id, ActaQuery(last_n=1))[0].content == bulky


def test_a_bulky_batch_runs_on_a_cursor_of_its_own(
    one_connection: PostgresStore, chronicum_id: str, cursors: Cursors
) -> None:
    store = one_connection
    half = "z" * (BULKY_CONTENT_CHARS // 2 + 1)  # each actum small, the batch's content bulky
    made_before = len(cursors.made)
    stored = store.record_many([_message(chronicum_id, half), _message(chronicum_id, half)], None)
    assert len(cursors.made) == made_before + 1
    gc.collect()
    assert cursors.made[-1]() is None
    for kept in _kept(store):
        assert store.plans.statements.record_many not in kept
    assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [actum.id for actum in stored]


def test_windows_of_many_shapes_keep_a_bounded_number_of_cursors(
    one_connection: PostgresStore, chronicum_id: str
) -> None:
    store = one_connection
    store.record(_message(chronicum_id, "only"))
    segment = Segment(chronicum_id, 0, None)
    shapes = KEPT_CURSORS_MOST + 10
    for reads in range(1, shapes + 1):  # a window of `reads` ranges: a statement of its own each
        rows = store.window(
            chronicum_id, WindowReads((RangeRead(segment, None, None, 1, True, True),) * reads)
        )
        assert [actum.content for actum in rows.acta] == ["only"] * reads
    for kept in _kept(store):
        assert 0 < len(kept) <= KEPT_CURSORS_MOST
        assert all(not cursor.closed for cursor in kept.values())


def test_the_asyncio_store_keeps_its_cursors_too(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[weakref.ref[psycopg.AsyncCursor[Any]]] = []
    real_cursor = psycopg.AsyncConnection.cursor

    def cursor(connection: Any, *arguments: Any, **keywords: Any) -> Any:
        new = real_cursor(connection, *arguments, **keywords)
        made.append(weakref.ref(new))
        return new

    monkeypatch.setattr(psycopg.AsyncConnection, "cursor", cursor)

    async def run() -> tuple[int, int, int, list[str], list[str]]:
        store = AsyncPostgresStore(postgres_url, schema=schema, min_size=1, max_size=1)
        try:
            chronicum_id = f"kept-{uuid.uuid4().hex}"
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            await store.record(_message(chronicum_id, "warm-up"))
            await store.acta(chronicum_id, WINDOW)
            made_before = len(made)
            window: list[Actum] = []
            for number in range(20):
                await store.record(_message(chronicum_id, f"message {number}"))
                window = await store.acta(chronicum_id, WINDOW)
            made_after = len(made)
            bulky = "y" * (BULKY_CONTENT_CHARS + 1)
            await store.record(_message(chronicum_id, bulky))  # on a cursor of its own
            made_bulky = len(made)
            last = await store.acta(chronicum_id, ActaQuery(last_n=1))
            return (
                made_before,
                made_after,
                made_bulky,
                [actum.content for actum in window],
                [actum.content for actum in last],
            )
        finally:
            await store.close()

    made_before, made_after, made_bulky, window, last = asyncio.run(run())
    assert made_after == made_before
    assert window == [f"message {number}" for number in range(20)]
    assert last == ["y" * (BULKY_CONTENT_CHARS + 1)]
    assert made_bulky == made_after + 1  # the bulky write's
