"""On PostgreSQL through psycopg: the sessions the store sets up, and what they read.

The engines the store creates set each connection's session time zone to UTC and keep one
generic plan per prepared statement; an engine you give, and a URL that names a time zone or a
plan cache mode, keep their own, and the store still reads every moment in UTC and every content
exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import psycopg
import pytest
from chronica_sqlalchemy import AsyncSQLAlchemyStore, SQLAlchemyStore
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


@contextlib.asynccontextmanager
async def one_async_connection(database_url: str) -> AsyncIterator[AsyncSQLAlchemyStore]:
    """An asyncio store of its own on a pool of exactly one connection, closed afterwards."""
    store = AsyncSQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    try:
        yield store
    finally:
        await store.close()


@pytest.mark.parametrize("client_encoding", ["utf8", "latin1"])
def test_content_reads_back_exactly_whatever_the_connection_s_encoding(
    shared_store: SQLAlchemyStore, database_url: str, client_encoding: str
) -> None:
    """Content is stored as UTF-8 ``bytea`` and decoded by the store, whatever the session's encoding."""
    url = make_url(database_url).update_query_dict({"client_encoding": client_encoding})
    store = SQLAlchemyStore.open(url, auto_migrate=False, pool_size=1, max_overflow=0)
    try:
        chronicum_id = new_chronicum(store)
        contents = ["Grüße aus Berlin", "ラーメン 🍜", "nul \x00 inside", ""]
        for content in contents:
            store.record(said(chronicum_id, content))
        window = store.acta(chronicum_id, WINDOW)
    finally:
        store.close()
    assert [actum.content for actum in window] == contents


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


@pytest.mark.parametrize(("value", "threshold"), [("auto", 5), ("false", None), ("true", 5)])
def test_statements_are_prepared_unless_a_pooler_is_found_or_prepared_statements_is_false(
    shared_store: SQLAlchemyStore, database_url: str, value: str, threshold: int | None
) -> None:
    """No pooler before the server here: ``auto`` keeps psycopg's preparing; ``false`` turns it off.

    Given in the URL's query, as where only a URL can be given.
    """
    url = make_url(database_url).update_query_dict({"prepared_statements": value})
    store = SQLAlchemyStore.open(url, auto_migrate=False, pool_size=1, max_overflow=0)
    try:
        new_chronicum(store)
        with store.engine.connect() as connection:
            driver_connection = connection.connection.driver_connection
            assert isinstance(driver_connection, psycopg.Connection)
            assert driver_connection.prepare_threshold == threshold
    finally:
        store.close()
