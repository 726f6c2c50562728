"""What the SQLAlchemy backend promises beyond the conformance suite, on each selected dialect."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import (
    DEFAULT_URL,
    SCHEMA_VERSION,
    AsyncSQLAlchemyStore,
    AsyncThreadedSQLAlchemyStore,
    SQLAlchemyStore,
    open_async_sqlalchemy_store,
)
from chronica_sqlalchemy.engines import async_url, runs_on_worker_threads, sync_url
from chronica_sqlalchemy.follow import WATCHER_NAME
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    BackendUnavailable,
    Chronicarius,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    InvalidOption,
    StoreError,
    clock,
    open_async_store,
    open_store,
)
from chronica_core.erasure import owner_digest
from chronica_core.registry import registry
from chronica_core.retention import last_activity

EVERY_PLANE = "".join(chr(plane * 0x10000 + 0x41) for plane in range(17))
ROUND_TRIPS = [
    "",
    "line one\nline two\r\nline three",
    "emoji 😀🧑‍🍳🇮🇩 and CJK 漢字",
    EVERY_PLANE,
    "\x00",
    "a\x00b\x00",
    "'; DROP TABLE acta; --",
    "\U0010ffff\ud7ff\ue000",
]


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def started(chronicum_id: str, owner_id: str = "ardian") -> Chronicum:
    return Chronicum(chronicum_id, owner_id, started_at=datetime.now(UTC))


def message(chronicum_id: str, content: str = "hello", *, actum_id: str | None = None) -> Actum:
    return Actum(
        chronicum_id,
        ActumKind.MESSAGE,
        ActorKind.HUMAN,
        "ardian",
        content,
        id=actum_id or uuid.uuid4().hex,
    )


def assert_aware_utc(moment: datetime | None) -> datetime:
    assert moment is not None
    assert moment.tzinfo is not None
    assert moment.utcoffset() == timedelta(0)
    return moment


# --- URLs and registration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "blocking", "asynchronous"),
    [
        ("sqlite://", "sqlite+pysqlite", "sqlite+aiosqlite"),
        ("sqlite:///chronica.db", "sqlite+pysqlite", "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///x.db", "sqlite+pysqlite", "sqlite+aiosqlite"),
        ("mysql://root@h/db", "mysql+pymysql", "mysql+asyncmy"),
        ("mariadb+pymysql://root@h/db", "mariadb+pymysql", "mariadb+asyncmy"),
        ("mysql+aiomysql://root@h/db", "mysql+pymysql", "mysql+aiomysql"),
        ("mysql+mysqldb://root@h/db", "mysql+mysqldb", "mysql+asyncmy"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg", "postgresql+psycopg"),
        ("postgresql+asyncpg://u@h/db", "postgresql+psycopg", "postgresql+asyncpg"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2", "postgresql+psycopg"),
    ],
)
def test_each_flavour_takes_the_driver_of_its_kind(url: str, blocking: str, asynchronous: str) -> None:
    assert sync_url(url).drivername == blocking
    assert async_url(url).drivername == asynchronous


def test_the_registry_routes_sqlalchemy_schemes_here_and_leaves_plain_postgresql() -> None:
    current = registry(reload=True)
    for url in (
        "sqlite://",
        "sqlite+pysqlite:///x.db",
        "mysql+pymysql://h/d",
        "mariadb+aiomysql://h/d",
        "postgresql+psycopg://h/d",
    ):
        assert current.backend_for(url).name == "sqlalchemy", url
    ours = [item.backend for item in current.installed() if item.backend.name == "sqlalchemy"]
    assert [backend.needs_server for backend in ours] == [False, True]
    assert ours[0].example_url == "sqlite://"
    assert all("postgresql" not in backend.schemes for backend in ours)
    assert DEFAULT_URL == "sqlite:///chronica.db"


@pytest.mark.parametrize(
    ("url", "threads"),
    [
        ("sqlite://", True),
        ("sqlite:///chronica.db", True),
        ("sqlite+pysqlite:///chronica.db", True),
        ("sqlite+aiosqlite:///chronica.db", False),
        ("mariadb+pymysql://root@h/db", False),
        ("postgresql+psycopg://u@h/db", False),
    ],
)
def test_only_sqlite_without_aiosqlite_runs_on_worker_threads(url: str, threads: bool) -> None:
    assert runs_on_worker_threads(url) is threads


def test_a_driver_no_extra_provides_is_named_not_an_extra() -> None:
    with pytest.raises(BackendUnavailable) as raised:
        open_async_store("mysql+aiomysql://root@127.0.0.1:3306/test")  # aiomysql is in no extra
    assert str(raised.value) == (
        "backend 'sqlalchemy' needs 'aiomysql', the driver the URL names, which is not installed; "
        "no extra of chronica-sqlalchemy provides it: install the package that does"
    )
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


@pytest.mark.parametrize(
    ("flavour", "url", "module", "extra"),
    [
        ("async", "sqlite+aiosqlite:///{tmp}/chronica.db", "aiosqlite", "[aiosqlite]"),
        ("sync", "mysql+pymysql://root@127.0.0.1:3306/test", "pymysql", "[mysql]"),
        ("async", "mariadb+asyncmy://root@127.0.0.1:3306/test", "asyncmy", "[mysql]"),
        ("sync", "postgresql+psycopg://postgres@127.0.0.1/test", "psycopg", "[postgresql]"),
    ],
)
def test_a_missing_driver_names_the_smallest_extra_in_this_clone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flavour: str, url: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # its import fails: not installed
    clone = Path(__file__).resolve().parents[3]
    opener = open_store if flavour == "sync" else open_async_store
    with pytest.raises(BackendUnavailable) as raised:
        opener(url.format(tmp=tmp_path))
    assert str(raised.value) == (
        f"backend 'sqlalchemy' needs {module!r}, which is not installed: "
        f"pip install '{clone}/backends/sqlalchemy{extra}'"
    )
    assert isinstance(raised.value.__cause__, ModuleNotFoundError)


@pytest.mark.parametrize(
    ("scheme", "asyncio_store"),
    [("sqlite", AsyncThreadedSQLAlchemyStore), ("sqlite+aiosqlite", AsyncSQLAlchemyStore)],
)
def test_open_store_by_url_gives_both_flavours_on_one_sqlite_file(
    tmp_path: Path, scheme: str, asyncio_store: type[Any]
) -> None:
    url = f"{scheme}:///{tmp_path / 'both.db'}"
    chronicum_id = new_id()
    with open_store(url) as store:
        assert isinstance(store, SQLAlchemyStore)
        assert store.engine.dialect.driver == "pysqlite"
        store.create(started(chronicum_id))
        store.record(message(chronicum_id, "from the blocking store"))

    async def read() -> list[Actum]:
        async with open_async_store(url) as async_store:
            assert type(async_store) is asyncio_store
            return await async_store.acta(chronicum_id, ActaQuery())

    assert [actum.content for actum in asyncio.run(read())] == ["from the blocking store"]


KNOWN_OPTIONS = (
    "auto_migrate, busy_timeout, check_idle_after, echo, listen, max_content_bytes, max_overflow, "
    "operation_timeout, pool_size, prepared_statements, schema, synchronous"
)


@pytest.mark.parametrize("flavour", ["blocking", "asyncio"])
def test_an_unknown_option_is_invalid_and_lists_the_known_ones(tmp_path: Path, flavour: str) -> None:
    path = tmp_path / "options.db"
    opener = open_store if flavour == "blocking" else open_async_store
    with pytest.raises(InvalidOption) as raised:
        opener(f"sqlite:///{path}", colour="blue")
    assert (raised.value.backend, raised.value.option) == ("sqlalchemy", "colour")
    assert raised.value.reason == f"unknown option; known options: {KNOWN_OPTIONS}"
    assert not isinstance(raised.value, StoreError)
    assert isinstance(raised.value, ValueError)
    assert not path.exists()


@pytest.mark.parametrize("flavour", ["blocking", "asyncio"])
@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("synchronous", "sometimes", "expected one of OFF, NORMAL, FULL, EXTRA, got 'sometimes'"),
        ("busy_timeout", "soon", "expected seconds from 0 to 3600, got 'soon'"),
        ("busy_timeout", "-1", "expected seconds from 0 to 3600, got '-1'"),
        ("pool_size", "five", "expected a whole number from 0 to 1000, got 'five'"),
        ("pool_size", "2.5", "expected a whole number from 0 to 1000, got '2.5'"),
        ("max_overflow", "-3", "expected a whole number from 0 to 1000, got '-3'"),
        ("busy_timeout", "nan", "expected seconds from 0 to 3600, got 'nan'"),
        ("pool_size", 10**30, f"expected a whole number from 0 to 1000, got {10**30}"),
        ("operation_timeout", "5", "not supported on SQLite (busy_timeout bounds the wait for the lock)"),
        ("auto_migrate", "maybe", "expected true or false, got 'maybe'"),
        ("echo", "loudly", "expected true or false, got 'loudly'"),
        ("schema", "elsewhere", "not supported on SQLite"),
        ("schema", "", "must be a non-empty name without NUL"),
        ("schema", "a\x00b", "must be a non-empty name without NUL"),
        ("prepared_statements", "sometimes", "expected auto, true or false, got 'sometimes'"),
        ("prepared_statements", "false", "only for PostgreSQL on psycopg (postgresql+psycopg://)"),
        ("listen", "", "expected a URL of the server to listen on"),
        ("listen", "postgresql://db/app", "only for PostgreSQL on psycopg (postgresql+psycopg://)"),
    ],
)
def test_a_malformed_option_is_invalid_and_names_it(
    tmp_path: Path, flavour: str, option: str, value: str, reason: str
) -> None:
    path = tmp_path / "options.db"
    opener = open_store if flavour == "blocking" else open_async_store
    with pytest.raises(InvalidOption) as raised:
        opener(f"sqlite:///{path}", **{option: value})
    assert (raised.value.backend, raised.value.option, raised.value.reason) == ("sqlalchemy", option, reason)
    assert str(raised.value) == f"sqlalchemy: option {option}: {reason}"
    assert not path.exists()


def test_schema_on_a_given_sqlite_engine_is_invalid(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'given.db'}")
    with pytest.raises(InvalidOption, match=r"^sqlalchemy: option schema: not supported on SQLite$"):
        SQLAlchemyStore(engine, schema="elsewhere")
    with pytest.raises(InvalidOption, match=r"^sqlalchemy: option schema: not supported on SQLite$"):
        AsyncSQLAlchemyStore(create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'given.db'}"), schema="x")
    with pytest.raises(
        InvalidOption, match=r"^sqlalchemy: option schema: must be a non-empty name without NUL$"
    ):
        SQLAlchemyStore(engine, schema="")
    engine.dispose()


def test_well_formed_options_given_as_text_are_accepted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'text.db'}"
    with open_store(url, auto_migrate="yes", echo="off", pool_size="2", max_overflow="0") as store:
        assert isinstance(store, SQLAlchemyStore)
        assert store.engine.pool.size() == 2  # type: ignore[attr-defined]
        assert store.engine.echo is False


# --- SQLite specifics --------------------------------------------------------------------------


def test_sqlite_file_is_in_wal_mode_with_full_sync_by_default(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store, store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    with (
        SQLAlchemyStore.open(f"sqlite:///{path}", synchronous="normal", busy_timeout="2.5") as store,
        store.engine.connect() as connection,
    ):
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 2_500


def test_opening_a_new_sqlite_file_while_another_connection_writes_waits_for_it(tmp_path: Path) -> None:
    """SQLite refuses the switch to WAL mode at once ("database is locked", without waiting under
    the busy timeout) while another connection holds a write transaction: what several processes
    or threads opening a new file at the same moment meet. The store waits for the writer."""
    path = tmp_path / "new.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE other (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO other VALUES (1)")
    switches_while_writing: list[bool] = []

    def watch(dbapi_connection: Any, connection_record: Any) -> None:
        def traced(statement: str) -> None:
            if statement == "PRAGMA journal_mode = WAL":
                switches_while_writing.append(writer.in_transaction)
            elif switches_while_writing and writer.in_transaction:
                writer.commit()  # the store went on after a refused switch: let it have the file

        dbapi_connection.set_trace_callback(traced)

    engine = create_engine(f"sqlite:///{path}")
    event.listen(engine, "connect", watch)  # before the store's own set-up
    try:
        with SQLAlchemyStore(engine) as store:
            chronicum_id = new_id()
            store.create(started(chronicum_id))
            assert store.record(message(chronicum_id, "opened")).content == "opened"
            with engine.connect() as connection:
                assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert connection.exec_driver_sql("SELECT x FROM other").scalars().all() == [1]
        assert switches_while_writing[:2] == [True, False]
    finally:
        engine.dispose()
        writer.close()


def test_forty_threads_with_their_own_stores_write_one_sqlite_chronicum(tmp_path: Path) -> None:
    """Forty writers, each with its own engine and connection (as forty processes would have), all
    land, each once, with no "database is locked" reaching any of them."""
    url = f"sqlite:///{tmp_path / 'forty.db'}"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(url) as first:
        first.create(started(chronicum_id))
    stores = [SQLAlchemyStore.open(url, auto_migrate=False) for _ in range(40)]
    barrier = threading.Barrier(40)
    failures: list[BaseException] = []

    def write(index: int) -> None:
        barrier.wait()
        try:
            for round_ in range(5):
                stores[index].record(message(chronicum_id, f"{index}:{round_}"))
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            failures.append(error)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert failures == []
    with SQLAlchemyStore.open(url) as store:
        contents = [actum.content for actum in store.acta(chronicum_id, ActaQuery())]
    assert sorted(contents) == sorted(f"{index}:{round_}" for index in range(40) for round_ in range(5))
    for index in range(40):  # each writer's own acta keep its order
        mine = [content for content in contents if content.startswith(f"{index}:")]
        assert mine == [f"{index}:{round_}" for round_ in range(5)]


def test_forty_threads_through_one_chronicarius_on_a_sqlite_file(tmp_path: Path) -> None:
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'shared.db'}") as store:
        chronicarius = Chronicarius(store)
        chronicum_id = new_id()
        barrier = threading.Barrier(40)
        results: list[Actum] = []

        def write(index: int) -> None:
            barrier.wait()
            results.append(chronicarius.record_actum("ardian", message(chronicum_id, str(index))))

        threads = [threading.Thread(target=write, args=(index,)) for index in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stored = chronicarius.get_acta("ardian", chronicum_id)
    assert len(results) == 40
    assert sorted(actum.id for actum in stored) == sorted(actum.id for actum in results)


def test_in_memory_sqlite_is_one_database_for_every_thread() -> None:
    with open_store("sqlite://") as store:
        chronicum_id = new_id()
        store.create(started(chronicum_id))
        threads = [
            threading.Thread(target=store.record, args=(message(chronicum_id, str(index)),))
            for index in range(10)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(store.acta(chronicum_id, ActaQuery())) == 10


def test_a_given_sqlite_engine_is_set_up_and_not_disposed(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'given.db'}")
    chronicum_id = new_id()
    with SQLAlchemyStore(engine) as store:
        store.create(started(chronicum_id))
        store.record(message(chronicum_id))
    with engine.connect() as connection:  # still usable: the store did not dispose it
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.execute(text("SELECT count(*) FROM acta")).scalar() == 1
    engine.dispose()


def test_a_given_async_engine(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'given-async.db'}")
        chronicarius = AsyncChronicarius(AsyncSQLAlchemyStore(engine))
        chronicum_id = new_id()
        await chronicarius.record_actum("ardian", message(chronicum_id, "one"))
        await chronicarius.record_actum("ardian", message(chronicum_id, "two"))
        window = await chronicarius.get_acta("ardian", chronicum_id, last_n=1)
        await engine.dispose()
        return [actum.content for actum in window]

    assert asyncio.run(scenario()) == ["two"]


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
def test_an_async_sqlite_write_waiting_for_the_lock_leaves_the_loop_free(tmp_path: Path, scheme: str) -> None:
    path = tmp_path / "locked.db"
    chronicum_id = new_id()
    with open_store(f"sqlite:///{path}") as store:
        store.create(started(chronicum_id))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # holds the write lock until it rolls back

    async def scenario() -> tuple[int, bool, str]:
        async with open_async_store(f"{scheme}:///{path}") as async_store:
            writing = asyncio.create_task(async_store.record(message(chronicum_id, "after the lock")))
            turns = 0
            while turns < 20 and not writing.done():
                await asyncio.sleep(0.01)  # the loop keeps running other tasks meanwhile
                turns += 1
            still_waiting = not writing.done()
            blocker.rollback()
            return turns, still_waiting, (await writing).content

    try:
        assert asyncio.run(scenario()) == (20, True, "after the lock")
    finally:
        blocker.close()


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
def test_cancelled_sqlite_writes_never_leave_the_write_lock_held(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///{tmp_path / 'cancelled.db'}"
    chronicum_id = new_id()
    random_points = random.Random(2)

    async def scenario() -> list[str]:
        async with open_async_store(url, busy_timeout="5") as async_store:
            chronicarius = AsyncChronicarius(async_store)
            await chronicarius.record_actum("ardian", message(chronicum_id, "first"))
            landed: list[str] = []
            for round_number in range(100):
                cancelled = [
                    asyncio.create_task(
                        chronicarius.record_actum("ardian", message(chronicum_id, "cancelled"))
                    )
                    for _ in range(3)
                ]
                await asyncio.sleep(random_points.uniform(0, 0.004))  # cancel at a random point
                for task in cancelled:
                    task.cancel()
                await asyncio.gather(*cancelled, return_exceptions=True)
                after = await chronicarius.record_actum(
                    "ardian", message(chronicum_id, f"after {round_number}")
                )
                landed.append(after.content)
            return landed

    assert asyncio.run(scenario()) == [f"after {round_number}" for round_number in range(100)]
    blocker = sqlite3.connect(tmp_path / "cancelled.db", timeout=1, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the lock is free once the store is closed
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()


def test_a_threaded_operation_cancelled_before_it_started_never_runs(tmp_path: Path) -> None:
    path = tmp_path / "queued.db"
    chronicum_id = new_id()
    with open_store(f"sqlite:///{path}") as store:
        store.create(started(chronicum_id))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the first write waits for it on the only worker thread
    engine = create_engine(f"sqlite:///{path}")

    async def scenario() -> tuple[str, bool, list[str]]:
        async with AsyncThreadedSQLAlchemyStore(engine, auto_migrate=False, workers=1) as store:
            await store.get(chronicum_id)  # opened
            first = asyncio.create_task(store.record(message(chronicum_id, "first")))
            queued = asyncio.create_task(store.record(message(chronicum_id, "queued")))
            await asyncio.sleep(0)  # both submitted: the first running, the second queued behind it
            queued.cancel()
            blocker.rollback()
            landed = (await first).content
            outcome = await asyncio.gather(queued, return_exceptions=True)
            contents = [actum.content for actum in await store.acta(chronicum_id, ActaQuery())]
            return landed, isinstance(outcome[0], asyncio.CancelledError), contents

    try:
        assert asyncio.run(scenario()) == ("first", True, ["first"])
    finally:
        blocker.close()
        engine.dispose()


def test_cancelling_close_on_aiosqlite_leaves_the_running_writes_to_land(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'closing.db'}"
    chronicum_id = new_id()

    async def scenario() -> list[str]:
        async_store = open_async_store(url, busy_timeout="5")
        chronicarius = AsyncChronicarius(async_store)
        await chronicarius.record_actum("ardian", message(chronicum_id, "first"))
        writes = [
            asyncio.create_task(chronicarius.record_actum("ardian", message(chronicum_id, f"write {n}")))
            for n in range(5)
        ]
        await asyncio.sleep(0)  # each write is now running in the store
        closing = asyncio.create_task(async_store.close())
        await asyncio.sleep(0)
        closing.cancel()
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        await asyncio.gather(closing, return_exceptions=True)
        return [outcome.content if isinstance(outcome, Actum) else repr(outcome) for outcome in outcomes]

    assert asyncio.run(scenario()) == [f"write {n}" for n in range(5)]
    blocker = sqlite3.connect(tmp_path / "closing.db", timeout=1, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # no write lock left behind
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()


def test_aiosqlite_close_returns_when_nothing_runs_and_later_starts_are_refused(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, list[str]]:
        async_store = AsyncSQLAlchemyStore.open(f"sqlite+aiosqlite:///{tmp_path / 'race.db'}")
        creating = [asyncio.create_task(async_store.create(started(new_id()))) for _ in range(5)]
        await asyncio.sleep(0)  # all five admitted; each waits for the first-use migration
        await async_store.close()
        still_running = len(async_store._running)
        outcomes = await asyncio.gather(*creating, return_exceptions=True)
        return still_running, ["landed" if outcome is None else str(outcome) for outcome in outcomes]

    still_running, outcomes = asyncio.run(scenario())
    assert still_running == 0
    assert set(outcomes) <= {"landed", "sqlalchemy: async store: the store is closed"}, outcomes


def test_the_threaded_store_on_sqlite_runs_two_operations_at_once_at_most(tmp_path: Path) -> None:
    file_store = AsyncThreadedSQLAlchemyStore.open(f"sqlite:///{tmp_path / 'workers.db'}")
    sized_store = AsyncThreadedSQLAlchemyStore.open(f"sqlite:///{tmp_path / 'workers.db'}", pool_size="1")
    memory_store = AsyncThreadedSQLAlchemyStore.open("sqlite://")
    try:
        assert file_store.workers == 2  # SQLite takes one writer at a time
        assert sized_store.workers == 1  # no more than the pool's connections
        assert memory_store.workers == 1  # one shared connection
    finally:
        for opened in (file_store, sized_store, memory_store):
            asyncio.run(opened.close())
    with pytest.raises(ValueError, match=r"^workers must be at least 1, got 0$"):
        AsyncThreadedSQLAlchemyStore(create_engine("sqlite://"), workers=0)
    per_thread = create_engine("sqlite://")  # SingletonThreadPool: a database per thread
    with pytest.raises(ValueError, match=r"^workers must be 1 on an engine whose pool gives each thread"):
        AsyncThreadedSQLAlchemyStore(per_thread, workers=4)
    assert AsyncThreadedSQLAlchemyStore(per_thread).workers == 1
    per_thread.dispose()


def test_a_pool_of_no_limit_gives_the_threaded_store_its_default_workers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'unlimited.db'}"
    chronicum_id = new_id()

    async def scenario() -> tuple[int, str]:
        async with open_async_store(url, pool_size="0") as async_store:
            assert isinstance(async_store, AsyncThreadedSQLAlchemyStore)
            await async_store.create(started(chronicum_id))
            recorded = await async_store.record(message(chronicum_id, "no limit"))
            return async_store.workers, recorded.content

    assert asyncio.run(scenario()) == (2, "no limit")


def test_the_threaded_store_serves_any_event_loop(tmp_path: Path) -> None:
    store = AsyncThreadedSQLAlchemyStore.open(f"sqlite:///{tmp_path / 'loops.db'}")
    chronicum_id = new_id()
    asyncio.run(store.create(started(chronicum_id)))
    asyncio.run(store.record(message(chronicum_id, "from a second loop")))
    window = asyncio.run(store.acta(chronicum_id, ActaQuery()))
    assert [actum.content for actum in window] == ["from a second loop"]
    asyncio.run(store.close())


# --- every dialect -----------------------------------------------------------------------------


def test_stores_refuse_work_once_closed_and_async_ones_serve_a_second_loop_meanwhile(
    async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore, database_url: str
) -> None:
    blocking = SQLAlchemyStore.open(database_url, auto_migrate=False)
    blocking.close()
    with pytest.raises(StoreError, match=r"^sqlalchemy: store: the store is closed$"):
        blocking.get("any")  # not reconnected behind the caller's back
    with pytest.raises(StoreError, match=r"^sqlalchemy: store: the store is closed$"):
        blocking.migrate()
    chronicum_id = new_id()
    closed = r"^sqlalchemy: async store: the store is closed$"
    with asyncio.Runner() as first_loop:
        first_loop.run(async_store.create(started(chronicum_id)))
        assert asyncio.run(async_store.get(chronicum_id)).id == chronicum_id  # an engine of its own
        assert first_loop.run(async_store.get(chronicum_id)).id == chronicum_id
        first_loop.run(async_store.close())
        with pytest.raises(StoreError, match=closed):
            first_loop.run(async_store.get(chronicum_id))
        with pytest.raises(StoreError, match=closed):
            first_loop.run(async_store.migrate())
        with pytest.raises(StoreError, match=closed):
            asyncio.run(async_store.get(chronicum_id))


def test_timestamps_are_aware_utc_on_write_and_read(store: SQLAlchemyStore) -> None:
    chronicum_id = new_id()
    jakarta = timezone(timedelta(hours=7))
    started_at = datetime(2026, 11, 30, 15, 4, 5, 123456, tzinfo=jakarta)
    store.create(Chronicum(chronicum_id, "ardian", started_at=started_at))
    fetched = store.get(chronicum_id)
    assert assert_aware_utc(fetched.started_at) == started_at
    assert fetched.started_at.hour == 8  # the same instant, told in UTC
    assert fetched.last_actum_at is None
    before = datetime.now(UTC)
    recorded = store.record(message(chronicum_id))
    after = datetime.now(UTC)
    assert before <= assert_aware_utc(recorded.at) <= after
    (read,) = store.acta(chronicum_id, ActaQuery())
    assert assert_aware_utc(read.at) == recorded.at
    assert assert_aware_utc(store.get(chronicum_id).last_actum_at) == recorded.at


def test_timestamps_are_aware_utc_in_the_async_flavour(
    async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore,
) -> None:
    async def scenario() -> tuple[Actum, list[Actum], Chronicum]:
        chronicum_id = new_id()
        await async_store.create(started(chronicum_id))
        recorded = await async_store.record(message(chronicum_id))
        window = await async_store.acta(chronicum_id, ActaQuery())
        chronicum = await async_store.get(chronicum_id)
        await async_store.close()
        return recorded, window, chronicum

    recorded, window, chronicum = asyncio.run(scenario())
    assert assert_aware_utc(window[0].at) == assert_aware_utc(recorded.at)
    assert assert_aware_utc(chronicum.last_actum_at) == recorded.at
    assert_aware_utc(chronicum.started_at)


def test_a_write_ends_with_its_commit_and_no_rollback_after_it(
    store: SQLAlchemyStore,
    async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endings: list[str] = []
    async_engine = async_store.engine
    blocking_engine = async_engine.sync_engine if isinstance(async_engine, AsyncEngine) else async_engine
    for engine in (store.engine, blocking_engine):
        dialect = engine.dialect
        for name in ("do_commit", "do_rollback"):
            original = getattr(dialect, name)

            def counted(connection: Any, original: Any = original, name: str = name) -> None:
                # The store is shared with earlier tests: a follow watcher they started rolls its
                # own probe connection back every few milliseconds; only the writes count here.
                if threading.current_thread().name != WATCHER_NAME:
                    endings.append(name)
                original(connection)

            monkeypatch.setattr(dialect, name, counted)

    chronicum_id = new_id()
    store.create(started(chronicum_id))
    endings.clear()
    store.record(message(chronicum_id))
    store.record_idempotent(message(chronicum_id), "key-1")

    blocking_endings = list(endings)

    async def writes() -> None:
        await async_store.get(chronicum_id)  # connects first (a new engine's set-up rolls back)
        endings.clear()
        await async_store.record(message(chronicum_id))
        await async_store.record_idempotent(message(chronicum_id), "key-2")
        await async_store.close()

    asyncio.run(writes())
    # PostgreSQL: each write is one statement in autocommit; its commit sends nothing there
    # (test_round_trips counts its one round trip on the wire)
    assert (blocking_endings, endings) == (["do_commit"] * 2, ["do_commit"] * 2)


@pytest.mark.parametrize("content", ROUND_TRIPS, ids=range(len(ROUND_TRIPS)))
def test_content_round_trips_exactly(store: SQLAlchemyStore, content: str) -> None:
    chronicum_id = new_id()
    store.create(started(chronicum_id))
    store.record(Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", content, id="x"))
    (read,) = store.acta(chronicum_id, ActaQuery())
    assert read.content == content
    assert len(read.content) == len(content)


def test_a_mebibyte_of_four_byte_characters_round_trips(store: SQLAlchemyStore) -> None:
    chronicum_id = new_id()
    content = "😀\x00漢" * (1 << 18)  # 786,432 characters, 2 MiB of UTF-8
    store.create(started(chronicum_id))
    store.record(message(chronicum_id, content))
    (read,) = store.acta(chronicum_id, ActaQuery())
    assert read.content == content


@pytest.mark.parametrize(
    "pair",
    [
        ("a", "A"),
        ("a", "a "),
        ("straße", "strasse"),
        ("é", "e\u0301"),
        ("x%", "x_"),
        ("😀", "😁"),
        ("ı", "i"),
    ],
    ids=["case", "trailing-space", "sharp-s", "normalisation", "like-wildcards", "emoji", "dotless-i"],
)
def test_ids_that_a_collation_might_confuse_stay_apart(store: SQLAlchemyStore, pair: tuple[str, str]) -> None:
    suffix = uuid.uuid4().hex[:8]
    first, second = (f"{suffix}{name}" for name in pair)
    store.create(started(first, "first-owner"))
    store.create(started(second, "second-owner"))  # not ChronicumExists: a different id
    store.record(message(first, "for the first"))
    store.record_idempotent(message(second, "keyed a"), pair[0])
    store.record_idempotent(message(second, "keyed b"), pair[1])  # another key: a second actum
    assert store.get(first).owner_id == "first-owner"
    assert store.get(second).owner_id == "second-owner"
    assert [actum.content for actum in store.acta(first, ActaQuery())] == ["for the first"]
    assert [actum.content for actum in store.acta(second, ActaQuery())] == ["keyed a", "keyed b"]
    with pytest.raises(ChronicumExists):
        store.create(started(first))


def test_a_context_window_is_one_statement(store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    chronicum_id = new_id()
    store.create(started(chronicum_id))
    for index in range(30):
        kind = ActumKind.MESSAGE if index % 3 == 0 else ActumKind.THOUGHT
        store.record(Actum(chronicum_id, kind, ActorKind.AGENT, "concierge", str(index), id=str(index)))
    statements: list[str] = []

    def seen(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not statement.startswith("BEGIN"):  # SQLite's, sent by the store's begin event
            statements.append(statement)

    engines = [engine for engine in (store.engine, store.read_engine) if engine is not None]
    for engine in engines:
        event.listen(engine, "before_cursor_execute", seen)
    try:
        window = store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=4))
        with pytest.raises(ChronicumNotFound):
            store.acta(new_id("missing"), ActaQuery(last_n=4))
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", seen)
    assert [actum.content for actum in window] == ["18", "21", "24", "27"]
    assert len(statements) == 2, statements  # one query per window, nothing else sent


def test_an_existing_chronicum_without_acta_is_empty_not_missing(store: SQLAlchemyStore) -> None:
    chronicum_id = new_id()
    store.create(started(chronicum_id))
    store.record(Actum(chronicum_id, ActumKind.THOUGHT, ActorKind.AGENT, "concierge", "hmm", id="t"))
    assert store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3)) == []
    with pytest.raises(ChronicumNotFound):
        store.acta(new_id("missing"), ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3))


@pytest.mark.dialects("mariadb", "postgresql")  # SQLite does not enforce VARCHAR lengths
def test_an_id_too_long_for_the_column_is_a_store_error(store: SQLAlchemyStore) -> None:
    with pytest.raises(StoreError, match=r"^sqlalchemy: create chronicum: ") as caught:
        store.create(started("x" * 300))
    assert isinstance(caught.value.__cause__, SQLAlchemyError)


def test_an_unreachable_server_is_a_connect_error_whatever_the_operation() -> None:
    """Opening migrates, and the asyncio store's first read first looks at the tables: neither
    failed to migrate or to read, they could not connect, and say so."""
    with pytest.raises(StoreError, match=r"^sqlalchemy: connect: OperationalError: ") as caught:
        SQLAlchemyStore.open("mariadb+pymysql://root@127.0.0.1:1/nowhere")
    assert caught.value.where == "sqlalchemy: connect"
    assert isinstance(caught.value.__cause__, SQLAlchemyError)

    async def scenario(auto_migrate: bool) -> None:
        store = AsyncSQLAlchemyStore.open(
            "postgresql+psycopg://postgres@127.0.0.1:1/nowhere", auto_migrate=auto_migrate
        )
        try:
            await store.get("anything")
        finally:
            await store.close()

    for auto_migrate in (True, False):
        with pytest.raises(StoreError, match=r"^sqlalchemy: connect: OperationalError: ") as caught:
            asyncio.run(scenario(auto_migrate))
        assert isinstance(caught.value.__cause__, SQLAlchemyError)


def test_a_newer_schema_version_is_refused(database_url: str, shared_store: SQLAlchemyStore) -> None:
    tables = shared_store.plans.tables
    with shared_store.engine.begin() as connection:
        connection.execute(tables.versions.update().values(version=SCHEMA_VERSION + 1))
    try:
        with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer than"):
            SQLAlchemyStore.open(database_url)
    finally:
        with shared_store.engine.begin() as connection:
            connection.execute(tables.versions.update().values(version=SCHEMA_VERSION))


# --- concurrent auto-migrations ----------------------------------------------------------------

MIGRATING_PROCESS = """
import sys, time
from chronica_sqlalchemy import SQLAlchemyStore
url, schema, start_at = sys.argv[1], sys.argv[2] or None, float(sys.argv[3])
time.sleep(max(0.0, start_at - time.time()))
with SQLAlchemyStore.open(url, schema=schema) as store:
    pass
"""


@pytest.fixture
def fresh_target(
    dialect: str, servers: Any, database_url: str, tmp_path: Path
) -> Iterator[tuple[str, str | None]]:
    """A URL and schema nobody has migrated yet: a new SQLite file, MariaDB database or PG schema."""
    if servers is None:
        scheme = "sqlite+aiosqlite" if dialect == "aiosqlite" else "sqlite"
        yield f"{scheme}:///{tmp_path / 'fresh.db'}", None
        return
    schema = f"chronica_test_{uuid.uuid4().hex[:12]}"
    if dialect == "postgresql":
        yield database_url, schema
        engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        engine.dispose()
    else:
        yield database_url, schema
        servers.drop_schema(schema)


def test_processes_starting_at_once_migrate_safely(fresh_target: tuple[str, str | None]) -> None:
    url, schema = fresh_target
    start_at = time.time() + 3.0  # long enough for every interpreter to import and wait
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATING_PROCESS, url, schema or "", str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        for _ in range(6)
    ]
    outcomes = [
        (process.wait(timeout=120), process.stderr.read() if process.stderr else "") for process in processes
    ]
    assert [code for code, _ in outcomes] == [0] * 6, [error for _, error in outcomes]
    with SQLAlchemyStore.open(url, schema=schema) as store:
        with store.engine.connect() as connection:
            versions = connection.execute(store.plans.tables.versions.select()).all()
        assert [tuple(row) for row in versions] == [("chronica", SCHEMA_VERSION)]
        chronicum_id = new_id()
        store.create(started(chronicum_id))
        assert store.record(message(chronicum_id)).chronicum_id == chronicum_id


@pytest.mark.dialects("mariadb", "postgresql")
def test_the_cli_migrates_a_schema_and_names_it_but_no_other_option(
    fresh_target: tuple[str, str | None],
) -> None:
    url, schema = fresh_target
    assert schema is not None
    command = [str(Path(sys.executable).with_name("chronica")), "migrate", "--store", url]
    command += ["--option", f"schema={schema}", "--option", "pool_size=2"]
    migrated = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.strip() == f"schema of {url} (schema={schema}) is current"
    with (
        SQLAlchemyStore.open(url, schema=schema, auto_migrate=False) as store,
        store.engine.connect() as connection,
    ):
        versions = connection.execute(store.plans.tables.versions.select()).all()
    assert [tuple(row) for row in versions] == [("chronica", SCHEMA_VERSION)]


def test_threads_starting_at_once_migrate_safely(fresh_target: tuple[str, str | None]) -> None:
    url, schema = fresh_target
    barrier = threading.Barrier(8)
    failures: list[BaseException] = []

    def open_and_write() -> None:
        barrier.wait()
        try:
            with SQLAlchemyStore.open(url, schema=schema) as store:
                chronicum_id = new_id()
                store.create(started(chronicum_id))
                store.record(message(chronicum_id))
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            failures.append(error)

    threads = [threading.Thread(target=open_and_write) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_async_stores_starting_at_once_migrate_safely(fresh_target: tuple[str, str | None]) -> None:
    url, schema = fresh_target

    async def one() -> str:
        store = open_async_sqlalchemy_store(url, schema=schema)
        try:
            chronicum_id = new_id()
            await store.create(started(chronicum_id))
            return (await store.record(message(chronicum_id, "async"))).content
        finally:
            await store.close()

    async def all_at_once() -> list[str]:
        return list(await asyncio.gather(*(one() for _ in range(6))))

    assert asyncio.run(all_at_once()) == ["async"] * 6


# --- MariaDB specifics -------------------------------------------------------------------------


@pytest.mark.dialects("mariadb")
def test_mariadb_columns_are_utf8mb4_with_binary_no_pad_ids(store: SQLAlchemyStore) -> None:
    with store.engine.connect() as connection:
        columns = {
            (row.TABLE_NAME, row.COLUMN_NAME): (row.CHARACTER_SET_NAME, row.COLLATION_NAME, row.COLUMN_TYPE)
            for row in connection.execute(
                text(
                    "SELECT TABLE_NAME, COLUMN_NAME, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_TYPE "
                    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                    "AND TABLE_NAME IN ('chronica', 'acta')"
                )
            )
        }
    for key in [("chronica", "id"), ("acta", "chronicum_id"), ("acta", "idempotency_key")]:
        assert columns[key] == ("utf8mb4", "utf8mb4_nopad_bin", "varchar(255)"), key
    assert columns[("acta", "content")][0] == "utf8mb4"
    assert columns[("acta", "content")][2] == "longtext"
    assert columns[("acta", "at")][2] == "datetime(6)"


@pytest.mark.dialects("mariadb")
def test_mariadb_utf8mb4_round_trips_through_chronicarius(store: SQLAlchemyStore) -> None:
    chronicarius = Chronicarius(store, owner_cache_size=0)
    chronicum_id = f"🍽️ dinner-friday 漢字 {uuid.uuid4().hex[:8]}"
    for content in [*ROUND_TRIPS[1:], "🧑‍🍳" * 1000]:
        chronicarius.record_actum("árdian 😀", message(chronicum_id, content))
    window = chronicarius.get_acta("árdian 😀", chronicum_id)
    assert [actum.content for actum in window] == [*ROUND_TRIPS[1:], "🧑‍🍳" * 1000]
    assert chronicarius.get_chronicum("árdian 😀", chronicum_id).id == chronicum_id


@pytest.mark.dialects("mariadb")
def test_mariadb_migrations_leave_the_async_driver_nothing_to_log(
    fresh_target: tuple[str, str | None], caplog: pytest.LogCaptureFixture
) -> None:
    url, schema = fresh_target

    async def migrate_twice() -> None:
        async with open_async_sqlalchemy_store(url, schema=schema) as async_store:
            await async_store.migrate()  # creates everything
            await async_store.migrate()  # finds everything in place

    with caplog.at_level("WARNING"):
        asyncio.run(migrate_twice())
    assert [(record.name, record.getMessage()) for record in caplog.records] == []


@pytest.mark.dialects("mariadb")
def test_a_mariadb_url_without_a_database_says_so(database_url: str) -> None:
    url = make_url(database_url).set(database="").render_as_string(hide_password=False)
    with pytest.raises(StoreError, match=r"^sqlalchemy: migrate: no database selected: name one in the URL"):
        open_store(url)


def _an_hour_behind() -> datetime:
    """The host's clock an hour behind (another app host's clock)."""
    return datetime.now(UTC) - timedelta(hours=1)


def test_a_writer_whose_clock_is_behind_never_moves_at_backwards(
    store: SQLAlchemyStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second host an hour behind writes after the first: its actum takes the newer ``at``."""
    chronicum_id = new_id()
    store.create(started(chronicum_id))
    first = store.record(message(chronicum_id, "from the host on time"))
    monkeypatch.setattr(clock, "now", _an_hour_behind)
    behind = SQLAlchemyStore.open(database_url, auto_migrate=False)
    try:
        second = behind.record(message(chronicum_id, "from the host behind"))
    finally:
        behind.close()
    assert second.at == first.at
    assert [actum.at for actum in store.acta(chronicum_id, ActaQuery())] == [first.at, first.at]
    assert store.get(chronicum_id).last_actum_at == first.at


def test_a_writer_whose_clock_is_behind_leaves_the_last_activity_at_the_start(
    store: SQLAlchemyStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first write from a host an hour behind: ``at`` is before the start, the last activity is not."""
    chronicum_id, owner = new_id(), f"owner-{uuid.uuid4().hex}"
    store.create(started(chronicum_id, owner))
    monkeypatch.setattr(clock, "now", _an_hour_behind)
    behind = SQLAlchemyStore.open(database_url, auto_migrate=False)
    try:
        written = behind.record(message(chronicum_id, "from the host behind"))
    finally:
        behind.close()
    kept = store.get(chronicum_id)
    assert written.at is not None and kept.last_actum_at == written.at < kept.started_at
    assert store.idle_chronica(kept.started_at, owner, None, 10) == []
    assert store.erase_idle(chronicum_id, kept.started_at, owner_digest(owner)) == 0
    later = kept.started_at + timedelta(microseconds=1)
    assert [(found.id, last_activity(found)) for found in store.idle_chronica(later, owner, None, 10)] == [
        (chronicum_id, kept.started_at)
    ]


def test_an_async_store_closed_from_another_loop_raises_and_logs_nothing(
    async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The loop that used it has closed, its pool with it; close() from a new loop logs nothing."""
    chronicum_id = new_id()
    asyncio.run(async_store.create(started(chronicum_id)))
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG):
        asyncio.run(async_store.close())
        gc.collect()
    assert [record for record in caplog.records if record.exc_info or record.levelno >= logging.WARNING] == []
    assert "Traceback" not in capfd.readouterr().err
    with pytest.raises(StoreError, match=r"^sqlalchemy: async store: the store is closed$"):
        asyncio.run(async_store.get(chronicum_id))


def test_an_aiosqlite_operation_whose_caller_was_cancelled_reports_nothing_to_the_loop(
    tmp_path: Path,
) -> None:
    reports: list[dict[str, Any]] = []

    async def scenario() -> bool:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reports.append(context))
        async_store = open_async_store(f"sqlite+aiosqlite:///{tmp_path / 'cancelled.db'}")
        await async_store.create(started(new_id()))  # migrated: the next operation starts at once
        reading = asyncio.create_task(async_store.get(new_id()))  # fails: ChronicumNotFound
        await asyncio.sleep(0)  # the operation now runs in the store's own task
        reading.cancel()
        outcome = await asyncio.gather(reading, return_exceptions=True)
        await async_store.close()  # waits for the operation to end
        gc.collect()  # an exception nobody retrieved is reported when its task is collected
        return isinstance(outcome[0], asyncio.CancelledError)

    assert asyncio.run(scenario()) is True
    assert [context.get("message") for context in reports] == []
