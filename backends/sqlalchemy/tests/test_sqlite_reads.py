"""SQLite's context window, run by the standard library's driver itself (``driver_statements``),
and the asyncio store's reads on the connections its worker threads keep (``held_reads``)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import AsyncThreadedSQLAlchemyStore, SQLAlchemyStore, driver_statements
from chronica_sqlalchemy.driver_statements import DriverStatement
from chronica_sqlalchemy.schema import UTCDateTime
from sqlalchemy import create_engine, event
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import QueuePool

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, ChronicumNotFound, StoreError


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def test_windows_of_every_shape_run_on_the_driver_and_answer_as_sqlalchemy_would(tmp_path: Path) -> None:
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'reads.db'}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        for index in range(6):
            kind = ActumKind.MESSAGE if index % 2 else ActumKind.TOOL_REQUEST
            store.record(Actum(chronicum_id, kind, ActorKind.AGENT, "scribe", f"n{index}", id=new_id("a")))
        queries = [
            ActaQuery(),
            ActaQuery(last_n=2),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,)),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,), actor_kinds=(ActorKind.AGENT,), last_n=2),
        ]
        answers = [
            [(actum.content, actum.kind) for actum in store.acta(chronicum_id, query)] for query in queries
        ]
        assert answers == [
            [(f"n{index}", ActumKind.MESSAGE if index % 2 else ActumKind.TOOL_REQUEST) for index in range(6)],
            [("n4", ActumKind.TOOL_REQUEST), ("n5", ActumKind.MESSAGE)],
            [("n1", ActumKind.MESSAGE), ("n3", ActumKind.MESSAGE), ("n5", ActumKind.MESSAGE)],
            [("n3", ActumKind.MESSAGE), ("n5", ActumKind.MESSAGE)],
        ]
        assert all(isinstance(window, DriverStatement) for window in store.plans._driver_statements.values())
        assert len(store.plans._driver_statements) == 4  # one per shape read
        [newest] = store.acta(chronicum_id, ActaQuery(last_n=1))
        assert newest.at is not None and newest.at.tzinfo is UTC
        with pytest.raises(ChronicumNotFound) as missing:
            store.acta(new_id("missing"), ActaQuery(last_n=2))
        assert missing.value.chronicum_id.startswith("missing-")


def test_a_read_on_a_connection_closed_underneath_is_made_again_on_a_new_one(tmp_path: Path) -> None:
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'closed.db'}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        store.record(
            Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "kept", id=new_id("a"))
        )
        with store.engine.connect() as connection:  # the pool's one idle connection
            driver_connection = connection.connection.driver_connection
        assert driver_connection is not None
        driver_connection.close()
        assert [actum.content for actum in store.acta(chronicum_id, ActaQuery(last_n=20))] == ["kept"]


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ("2026-12-01 23:17:50.123456", datetime(2026, 12, 1, 23, 17, 50, 123456, tzinfo=UTC)),
        ("2026-12-01 23:17:50", datetime(2026, 12, 1, 23, 17, 50, tzinfo=UTC)),
        ("2026-12-01T23:17:50+02:00", datetime(2026, 12, 1, 21, 17, 50, tzinfo=UTC)),
        ("2026-12-01T21:17:50Z", datetime(2026, 12, 1, 21, 17, 50, tzinfo=UTC)),
        (None, None),
    ],
)
def test_stored_times_read_as_utc_with_or_without_a_zone_of_their_own(
    stored: str | None, read: datetime | None
) -> None:
    parse = UTCDateTime().result_processor(sqlite.dialect(), None)
    assert parse is not None
    parsed = parse(stored)
    assert parsed == read
    assert parsed is None or parsed.tzinfo is UTC


# --- the asyncio store's reads, on the connection each worker thread keeps (held_reads) ----------


def _filled(store: SQLAlchemyStore) -> str:
    chronicum_id = new_id()
    store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
    for index in range(6):
        kind = ActumKind.MESSAGE if index % 2 else ActumKind.TOOL_REQUEST
        actor_kind = ActorKind.HUMAN if index % 3 == 0 else ActorKind.AGENT
        store.record(Actum(chronicum_id, kind, actor_kind, "scribe", f"n{index}", id=new_id("a")))
    return chronicum_id


_QUERIES = [
    ActaQuery(),
    ActaQuery(last_n=2),
    ActaQuery(last_n=-1),
    ActaQuery(last_n=60),
    ActaQuery(actum_kinds=(ActumKind.MESSAGE,)),
    ActaQuery(actum_kinds=(ActumKind.THOUGHT,), last_n=3),
    ActaQuery(actor_kinds=(ActorKind.HUMAN,), last_n=1),
    ActaQuery(actum_kinds=(ActumKind.MESSAGE,), actor_kinds=(ActorKind.AGENT,), last_n=2),
]


def test_the_asyncio_read_gives_the_blocking_reads_acta_on_a_kept_connection(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'held.db'}"
    with SQLAlchemyStore.open(url) as blocking:
        chronicum_id = _filled(blocking)
        expected = [blocking.acta(chronicum_id, query) for query in _QUERIES]
    assert [len(window) for window in expected] == [6, 2, 6, 6, 3, 0, 1, 2]
    assert [actum.content for actum in expected[1]] == ["n4", "n5"]

    async def scenario() -> list[list[Actum]]:
        store = AsyncThreadedSQLAlchemyStore.open(url, auto_migrate=False)
        checkouts: list[object] = []
        event.listen(store.engine, "checkout", lambda *_: checkouts.append(None))
        try:
            await store.acta(chronicum_id, ActaQuery())  # opens the store (checks the tables)
            before = len(checkouts)
            windows = [await store.acta(chronicum_id, query) for query in _QUERIES * 3]
            assert len(checkouts) - before <= 2  # one kept connection per worker thread, at most
            with pytest.raises(ChronicumNotFound):
                await store.acta(new_id("missing"), ActaQuery(last_n=20))
            return windows
        finally:
            await store.close()
            pool = store.engine.pool
            assert isinstance(pool, QueuePool) and pool.checkedout() == 0  # the kept ones went back

    windows = asyncio.run(scenario())
    assert windows == expected * 3


def test_a_failing_asyncio_read_is_the_blocking_reads_store_error_and_the_next_one_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'failing.db'}"
    real_call = driver_statements.sqlite_call
    failing = {"on": False}

    def sqlite_call(driver_connection: Any, statement: Any, values: list[Any]) -> list[Any]:
        if failing["on"]:
            raise sqlite3.OperationalError("disk I/O error")
        return real_call(driver_connection, statement, values)

    monkeypatch.setattr(driver_statements, "sqlite_call", sqlite_call)
    with SQLAlchemyStore.open(url) as blocking:
        chronicum_id = _filled(blocking)
        failing["on"] = True
        with pytest.raises(StoreError) as blocking_failure:
            blocking.acta(chronicum_id, ActaQuery(last_n=2))
        failing["on"] = False

    engine = create_engine(url)

    async def scenario() -> tuple[StoreError, list[Actum]]:
        async with AsyncThreadedSQLAlchemyStore(engine, auto_migrate=False, workers=1) as store:
            await store.acta(chronicum_id, ActaQuery(last_n=2))  # opens the store
            await store.acta(chronicum_id, ActaQuery(last_n=2))  # on a connection kept
            held = store._held_reads
            assert held is not None and len(held._held) == 1
            failing["on"] = True
            with pytest.raises(StoreError) as failure:
                await store.acta(chronicum_id, ActaQuery(last_n=2))
            failing["on"] = False
            assert len(held._held) == 0  # the connection it failed on was ended
            return failure.value, await store.acta(chronicum_id, ActaQuery(last_n=2))

    try:
        error, after = asyncio.run(scenario())
    finally:
        engine.dispose()
    assert str(error) == str(blocking_failure.value)
    assert error.where == blocking_failure.value.where == "sqlalchemy: get acta"
    assert "OperationalError: disk I/O error" in str(error)
    assert isinstance(error.__cause__, DBAPIError)
    assert isinstance(error.__cause__.orig, sqlite3.OperationalError)
    assert [actum.content for actum in after] == ["n4", "n5"]


def test_an_asyncio_read_on_a_kept_connection_closed_underneath_is_made_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'closed-held.db'}"
    with SQLAlchemyStore.open(url) as blocking:
        chronicum_id = _filled(blocking)

    engine = create_engine(url)

    async def scenario() -> list[str]:
        async with AsyncThreadedSQLAlchemyStore(engine, auto_migrate=False, workers=1) as store:
            await store.acta(chronicum_id, ActaQuery(last_n=1))
            await store.acta(chronicum_id, ActaQuery(last_n=1))
            held = store._held_reads
            assert held is not None
            [kept] = held._held
            driver_connection = kept.driver_connection
            assert driver_connection is not None
            driver_connection.close()
            return [actum.content for actum in await store.acta(chronicum_id, ActaQuery(last_n=2))]

    try:
        assert asyncio.run(scenario()) == ["n4", "n5"]
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("url", "options"),
    [("sqlite://", {}), ("sqlite:///{path}", {"pool_size": 2}), ("sqlite:///{path}", {"pool_size": 3})],
)
def test_no_connection_is_kept_for_memory_or_a_pool_without_room_for_it(
    tmp_path: Path, url: str, options: dict[str, Any]
) -> None:
    store = AsyncThreadedSQLAlchemyStore.open(url.format(path=tmp_path / "small.db"), **options)
    try:
        assert store._held_reads is None
    finally:
        asyncio.run(store.close())
    roomy = AsyncThreadedSQLAlchemyStore.open(f"sqlite:///{tmp_path / 'roomy.db'}", pool_size=4)
    try:
        assert roomy._held_reads is not None
    finally:
        asyncio.run(roomy.close())


@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("by_kind", [False, True])
def test_sqlite_reads_a_window_along_the_primary_key_without_sorting(
    tmp_path: Path, by_kind: bool, limited: bool
) -> None:
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'plan.db'}") as store:
        window = DriverStatement.compiled(store.plans.window(by_kind, False, limited), store.engine.dialect)
        assert window is not None
        values = [
            window.fixed.get(name, 20 if name == "last_n" else "message" if "kind" in name else "c")
            for name in window.names
        ]
        with store.engine.connect() as connection:
            driver_connection = connection.connection.driver_connection
            assert driver_connection is not None
            steps = [row[3] for row in driver_connection.execute(f"EXPLAIN QUERY PLAN {window.text}", values)]
    assert not [step for step in steps if "TEMP B-TREE" in step or "MATERIALIZE" in step], steps
    assert any("acta" in step and "INDEX sqlite_autoindex_acta_1" in step for step in steps), steps
