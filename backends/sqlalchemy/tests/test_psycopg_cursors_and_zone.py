"""On PostgreSQL through psycopg: kept cursors, and moments read in UTC.

The hot statements psycopg runs itself (a context window, a ``get``, a single append) run on a
cursor the pooled connection keeps for each statement, with nothing of a result or of bulky
content left in it after a call; the engines the store creates set each connection's session time
zone to UTC, so psycopg reads moments in ``datetime.UTC``; an engine you give, and a URL that names
a time zone, keep their own, and the store still reads every moment in UTC. What this saves in
client CPU is measured by ``python -m benchmarks.run`` and callgrind, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from chronica_sqlalchemy import AsyncSQLAlchemyStore, SQLAlchemyStore
from chronica_sqlalchemy.driver_statements import BULKY_BYTES, KEPT_CURSORS
from chronica_sqlalchemy.engines import _session_in_utc
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum

pytestmark = pytest.mark.dialects("postgresql")

WINDOW = ActaQuery(last_n=20)


def said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=uuid.uuid4().hex)


def new_chronicum(store: SQLAlchemyStore) -> str:
    chronicum_id = f"kept-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
    return chronicum_id


class Cursors:
    """Every psycopg cursor made while counting (blocking and asyncio), held weakly."""

    def __init__(self) -> None:
        self.made: list[weakref.ref[Any]] = []


@pytest.fixture
def cursors(monkeypatch: pytest.MonkeyPatch) -> Cursors:
    made = Cursors()
    for connection_class in (psycopg.Connection, psycopg.AsyncConnection):
        real_cursor = connection_class.cursor

        def cursor(connection: Any, *arguments: Any, __real: Any = real_cursor, **keywords: Any) -> Any:
            new = __real(connection, *arguments, **keywords)
            made.made.append(weakref.ref(new))
            return new

        monkeypatch.setattr(connection_class, "cursor", cursor)
    return made


def kept_cursors(engine: Engine) -> dict[str, Any]:
    """The kept cursors of ``engine``'s one pooled connection (borrowed while the caller looks)."""
    with engine.connect() as connection:
        return dict(connection.connection.info.get(KEPT_CURSORS, {}))


@contextlib.asynccontextmanager
async def one_async_connection(database_url: str) -> AsyncIterator[AsyncSQLAlchemyStore]:
    """An asyncio store of its own on a pool of exactly one connection, closed afterwards."""
    store = AsyncSQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    try:
        yield store
    finally:
        await store.close()


async def async_kept_cursors(store: AsyncSQLAlchemyStore) -> dict[str, Any]:
    """The kept cursors of ``store``'s one pooled connection (borrowed while the caller looks)."""
    async with store.engine.connect() as connection:
        raw = await connection.get_raw_connection()
        return dict(raw.info.get(KEPT_CURSORS, {}))


def test_repeated_reads_and_writes_make_no_new_cursor(
    one_connection: SQLAlchemyStore, cursors: Cursors
) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store)
    store.record(said(chronicum_id, "warm-up"))
    store.acta(chronicum_id, WINDOW)
    store.get(chronicum_id)
    made_before = len(cursors.made)
    for number in range(20):
        store.record(said(chronicum_id, f"message {number}"))
        window = store.acta(chronicum_id, WINDOW)
        assert window[-1].content == f"message {number}"
        assert store.get(chronicum_id).last_actum_at == window[-1].at
    assert len(cursors.made) == made_before
    assert [actum.content for actum in window] == [f"message {number}" for number in range(20)]
    kept = kept_cursors(store.engine)
    assert len(kept) == 3  # the append, the window and the get, each on its own cursor
    assert all(cursor.format == psycopg.pq.Format.BINARY for cursor in kept.values())


@pytest.mark.parametrize("client_encoding", ["utf8", "latin1"])
def test_content_reads_back_exactly_whatever_the_connection_s_encoding(
    shared_store: SQLAlchemyStore, database_url: str, client_encoding: str
) -> None:
    """On UTF-8 the window's kept cursor reads ``bytea`` as text, psycopg decoding it; elsewhere
    (LATIN1 here) psycopg would decode in that encoding, so it reads bytes the store decodes."""
    url = make_url(database_url).update_query_dict({"client_encoding": client_encoding})
    store = SQLAlchemyStore.open(url, auto_migrate=False, pool_size=1, max_overflow=0)
    try:
        chronicum_id = new_chronicum(store)
        contents = ["Grüße aus Berlin", "ラーメン 🍜", "nul \x00 inside", ""]
        for content in contents:
            store.record(said(chronicum_id, content))
        window = store.acta(chronicum_id, WINDOW)
        (cursor,) = [
            cursor for statement, cursor in kept_cursors(store.engine).items() if "ORDER BY" in statement
        ]
        content_type = type(cursor.execute("SELECT '\\x41'::bytea").fetchone()[0])
    finally:
        store.close()
    assert [actum.content for actum in window] == contents
    assert content_type is (str if client_encoding == "utf8" else bytes)


def test_a_kept_cursor_holds_no_result_after_a_read(one_connection: SQLAlchemyStore) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store)
    store.record(said(chronicum_id, "x" * BULKY_BYTES))
    store.record(said(chronicum_id, "y"))
    assert [actum.content for actum in store.acta(chronicum_id, WINDOW)] == ["x" * BULKY_BYTES, "y"]
    results = [cursor.pgresult for cursor in kept_cursors(store.engine).values()]
    assert results
    assert all(result is not None and result.ntuples == 0 for result in results)  # freed once read


def test_a_bulky_write_runs_on_a_cursor_of_its_own_that_goes_after_it(
    one_connection: SQLAlchemyStore, cursors: Cursors
) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store)
    store.record(said(chronicum_id, "x" * BULKY_BYTES))  # the largest content a kept cursor takes
    kept_before = kept_cursors(store.engine)
    made_before = len(cursors.made)
    bulky = "é" * (BULKY_BYTES // 2 + 1)  # BULKY_BYTES / 2 + 1 characters, BULKY_BYTES + 2 bytes
    stored = store.record(said(chronicum_id, bulky))
    assert len(cursors.made) == made_before + 1
    gc.collect()
    assert cursors.made[-1]() is None  # nothing of the bulky write stays behind
    kept_after = kept_cursors(store.engine)
    assert kept_after.keys() == kept_before.keys()
    assert all(kept_after[statement] is cursor for statement, cursor in kept_before.items())
    assert [(actum.id, actum.content) for actum in store.acta(chronicum_id, ActaQuery(last_n=1))] == [
        (stored.id, bulky)
    ]


def test_a_replaced_connection_starts_with_no_kept_cursors(one_connection: SQLAlchemyStore) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store)
    store.record(said(chronicum_id, "before"))
    with store.engine.connect() as connection:
        assert connection.connection.info[KEPT_CURSORS]
        connection.invalidate()  # the server connection goes; the pool opens another
    assert kept_cursors(store.engine) == {}
    store.record(said(chronicum_id, "after"))
    assert [actum.content for actum in store.acta(chronicum_id, WINDOW)] == ["before", "after"]
    assert len(kept_cursors(store.engine)) == 2


def test_a_refused_statement_leaves_its_kept_cursor_usable(one_connection: SQLAlchemyStore) -> None:
    """A used idempotency key fails the insert on the kept cursor; the connection and cursor go on."""
    store = one_connection
    chronicum_id = new_chronicum(store)
    first = store.record_idempotent(said(chronicum_id, "first"), "order-42")
    with store.engine.connect() as connection:
        first_driver: Any = connection.connection.driver_connection
        backend = first_driver.info.backend_pid
    again = store.record_idempotent(said(chronicum_id, "again"), "order-42")
    after = store.record(said(chronicum_id, "after"))
    window = store.acta(chronicum_id, WINDOW)
    with store.engine.connect() as connection:
        driver: Any = connection.connection.driver_connection
        assert (driver.info.backend_pid, driver.info.transaction_status.name) == (backend, "IDLE")
    assert again == first
    assert [actum.id for actum in window] == [first.id, after.id]
    assert store.get(chronicum_id).last_actum_at == after.at


def test_the_asyncio_store_s_replaced_connection_starts_with_no_kept_cursors(
    shared_store: SQLAlchemyStore, database_url: str
) -> None:
    chronicum_id = new_chronicum(shared_store)

    async def scenario() -> tuple[int, int, list[str]]:
        async with one_async_connection(database_url) as store:
            await store.record(said(chronicum_id, "before"))
            kept_before = len(await async_kept_cursors(store))
            async with store.engine.connect() as connection:
                await connection.invalidate()  # the server connection goes; the pool opens another
            kept_after = len(await async_kept_cursors(store))
            await store.record(said(chronicum_id, "after"))
            window = await store.acta(chronicum_id, WINDOW)
            return kept_before, kept_after, [actum.content for actum in window]

    assert asyncio.run(scenario()) == (1, 0, ["before", "after"])


def test_the_asyncio_store_keeps_its_cursors_too(
    shared_store: SQLAlchemyStore, database_url: str, cursors: Cursors
) -> None:
    chronicum_id = new_chronicum(shared_store)

    async def scenario() -> tuple[int, list[str], int]:
        async with one_async_connection(database_url) as store:
            await store.record(said(chronicum_id, "warm-up"))
            await store.acta(chronicum_id, WINDOW)
            made_before = len(cursors.made)
            for number in range(10):
                await store.record(said(chronicum_id, f"message {number}"))
                window = await store.acta(chronicum_id, WINDOW)
            kept = len(await async_kept_cursors(store))
            return len(cursors.made) - made_before, [actum.content for actum in window], kept

    made, contents, kept = asyncio.run(scenario())
    assert (made, kept) == (0, 2)
    assert contents == ["warm-up", *(f"message {number}" for number in range(10))]


def session_time_zone(engine: Engine) -> str:
    with engine.connect() as connection:
        return str(connection.execute(text("SHOW TimeZone")).scalar_one())


def test_the_store_s_own_engine_reads_moments_in_utc(one_connection: SQLAlchemyStore) -> None:
    store = one_connection
    chronicum_id = new_chronicum(store)
    stored = store.record(said(chronicum_id, "hello"))
    assert session_time_zone(store.engine) == "UTC"
    window = store.acta(chronicum_id, WINDOW)
    assert [actum.at for actum in window] == [stored.at]
    assert window[0].at is not None and window[0].at.tzinfo is UTC
    assert store.get(chronicum_id).last_actum_at == stored.at


def test_the_asyncio_store_s_own_engine_reads_moments_in_utc(
    shared_store: SQLAlchemyStore, database_url: str
) -> None:
    chronicum_id = new_chronicum(shared_store)

    async def scenario() -> tuple[str, Actum, list[Actum]]:
        async with one_async_connection(database_url) as store:
            stored = await store.record(said(chronicum_id, "hello"))
            async with store.engine.connect() as connection:
                zone = (await connection.execute(text("SHOW TimeZone"))).scalar_one()
            return str(zone), stored, await store.acta(chronicum_id, WINDOW)

    zone, stored, window = asyncio.run(scenario())
    assert zone == "UTC"
    assert [actum.at for actum in window] == [stored.at]
    assert window[0].at is not None and window[0].at.tzinfo is UTC


def test_an_engine_you_give_keeps_its_time_zone_and_moments_still_read_in_utc(
    shared_store: SQLAlchemyStore, database_url: str
) -> None:
    engine = create_engine(
        database_url.replace("postgresql://", "postgresql+psycopg://", 1),
        connect_args={"options": "-c TimeZone=Asia/Tokyo"},
        pool_size=1,
        max_overflow=0,
    )
    try:
        store = SQLAlchemyStore(engine, auto_migrate=False)
        chronicum_id = new_chronicum(store)
        stored = store.record(said(chronicum_id, "hello"))
        window = store.acta(chronicum_id, WINDOW)
        chronicum = store.get(chronicum_id)
        assert session_time_zone(engine) == "Asia/Tokyo"
        assert [actum.at for actum in window] == [stored.at]
        assert window[0].at is not None and window[0].at.tzinfo is UTC
        assert chronicum.last_actum_at == stored.at
        assert chronicum.last_actum_at is not None and chronicum.last_actum_at.tzinfo is UTC
    finally:
        engine.dispose()


def test_a_time_zone_the_url_asks_for_is_left_as_asked(
    shared_store: SQLAlchemyStore, database_url: str
) -> None:
    asked = make_url(database_url).update_query_dict({"options": "-c TimeZone=Asia/Tokyo"})
    store = SQLAlchemyStore.open(
        asked.render_as_string(hide_password=False), auto_migrate=False, pool_size=1, max_overflow=0
    )
    try:
        chronicum_id = new_chronicum(store)
        stored = store.record(said(chronicum_id, "hello"))
        window = store.acta(chronicum_id, WINDOW)
        assert session_time_zone(store.engine) == "Asia/Tokyo"
        assert [actum.at for actum in window] == [stored.at]
        assert window[0].at is not None and window[0].at.tzinfo is UTC
    finally:
        store.close()


def test_a_connection_not_yet_in_autocommit_keeps_utc_past_its_transaction(database_url: str) -> None:
    """The connect event commits its SET where a transaction began, so a rollback does not undo it."""
    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, options="-c TimeZone=Asia/Tokyo") as connection:
        assert not connection.autocommit
        _session_in_utc(connection, None)
        connection.rollback()
        assert connection.execute("SHOW TimeZone").fetchone() == ("UTC",)


# --- one plan per prepared statement ------------------------------------------------------------


def test_a_context_window_is_planned_once_per_connection_on_analyzed_tables(
    one_connection: SQLAlchemyStore,
) -> None:
    """With statistics, PostgreSQL's own choice would plan every read of a window again (its
    LIMIT parameter makes the generic plan look costlier than a custom one for LIMIT 20)."""
    store = one_connection
    chronicum_id = new_chronicum(store)
    with store.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, at)"
                " SELECT :chronicum_id, n, md5(n::text), CASE WHEN n % 2 = 1 THEN 'message'"
                " ELSE 'thought' END, 'agent', 'search', convert_to('actum ' || n, 'UTF8'), now()"
                " FROM generate_series(1, 20000) AS n"
            ),
            {"chronicum_id": chronicum_id},
        )
        connection.execute(text("UPDATE chronica SET last_seq = 20000 WHERE id = :id"), {"id": chronicum_id})
        connection.execute(text("ANALYZE acta"))
    query = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=20)
    for _ in range(20):
        window = store.acta(chronicum_id, query)
    assert [actum.content for actum in window] == [f"actum {number}" for number in range(19_961, 20_001, 2)]
    with store.engine.connect() as connection:  # the one pooled connection, which read
        plans = connection.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%ORDER BY acta.seq DESC%'"
            )
        ).all()
        setting = connection.execute(text("SHOW plan_cache_mode")).scalar_one()
    assert len(plans) == 1, plans
    generic, custom = plans[0]
    assert custom == 0 and generic >= 10, plans
    assert setting == "force_generic_plan"


def test_an_async_store_s_own_engine_keeps_generic_plans(database_url: str) -> None:
    async def scenario() -> str:
        async with one_async_connection(database_url) as store, store.engine.connect() as connection:
            return str((await connection.execute(text("SHOW plan_cache_mode"))).scalar_one())

    assert asyncio.run(scenario()) == "force_generic_plan"


def test_a_plan_cache_mode_the_url_asks_for_is_kept(database_url: str) -> None:
    asked = make_url(database_url).update_query_dict({"options": "-c plan_cache_mode=force_custom_plan"})
    store = SQLAlchemyStore.open(
        asked.render_as_string(hide_password=False), auto_migrate=False, pool_size=1, max_overflow=0
    )
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("SHOW plan_cache_mode")).scalar_one() == "force_custom_plan"
        assert session_time_zone(store.engine) == "UTC"
    finally:
        store.close()
