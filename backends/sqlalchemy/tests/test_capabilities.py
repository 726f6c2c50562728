"""The batch, listing and erasure capabilities on each selected dialect, read in the raw tables."""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from chronica_sqlalchemy import (
    SCHEMA_VERSION,
    AsyncSQLAlchemyStore,
    AsyncThreadedSQLAlchemyStore,
    SQLAlchemyStore,
)
from chronica_sqlalchemy.dialects.postgresql import PostgreSQLStoreDialect
from chronica_sqlalchemy.engines import plan_connections
from chronica_sqlalchemy.executor import execute
from chronica_sqlalchemy.plans import Plans
from chronica_sqlalchemy.plugin import chronica_backends
from chronica_sqlalchemy.schema import LISTING_INDEX, Tables
from sqlalchemy import Engine, create_engine, event, insert, inspect, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    Chronicarius,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
)
from chronica_core.erasure import owner_digest

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def started(chronicum_id: str, owner_id: str, at: datetime | None = None) -> Chronicum:
    return Chronicum(chronicum_id, owner_id, started_at=at or datetime.now(UTC))


def said(chronicum_id: str, content: str, *, actor: str = "ardian", actum_id: str | None = None) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, actor, content, id=actum_id or new_id("a"))


def blocking_engine(store: Any) -> Engine:
    engine = store.engine
    return engine.sync_engine if isinstance(engine, AsyncEngine) else engine


def raw_rows(engine: Engine, tables: Tables, chronicum_id: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The chronicum's row(s) in ``chronica`` (as dicts) and every row of ``acta`` naming it."""
    with engine.connect() as connection:
        chronica = [
            dict(row._mapping)
            for row in connection.execute(select(tables.chronica).where(tables.chronica.c.id == chronicum_id))
        ]
        acta = list(
            connection.execute(select(tables.acta).where(tables.acta.c.chronicum_id == chronicum_id)).all()
        )
    return chronica, acta


def every_value(engine: Engine, tables: Tables) -> set[str]:
    """Every text value left in the tables, whatever row holds it."""
    values: set[str] = set()
    with engine.connect() as connection:
        for table in (tables.chronica, tables.acta, tables.lineages, tables.summaries):
            for row in connection.execute(select(table)):
                values.update(str(value) for value in row if value is not None)
    return values


def count_statements(engine: Engine) -> tuple[list[str], Any]:
    """Record the statements sent (not SQLite's ``BEGIN``, which a server's driver sends by itself)."""
    statements: list[str] = []

    def seen(connection: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not statement.startswith("BEGIN"):
            statements.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", seen)
    return statements, lambda: event.remove(engine, "before_cursor_execute", seen)


# --- declared ----------------------------------------------------------------------------------


def test_every_sqlalchemy_backend_declares_the_seven_capabilities() -> None:
    backends = chronica_backends()
    assert [backend.name for backend in backends] == ["sqlalchemy", "sqlalchemy"]
    declared = ("batch", "listing", "erasure", "follow", "native", "history", "retention")
    assert [backend.capabilities for backend in backends] == [declared] * 2


# --- erasure -----------------------------------------------------------------------------------


def assert_only_the_marker(
    engine: Engine, tables: Tables, chronicum_id: str, owner_id: str, secrets: set[str]
) -> None:
    chronica, acta = raw_rows(engine, tables, chronicum_id)
    assert acta == []
    assert chronica == [
        {
            "id": chronicum_id,
            "owner_id": "",
            "started_at": EPOCH,
            "last_actum_at": None,
            "last_seq": 0,
            "owner_digest": owner_digest(owner_id),
            "last_active": None,
            "base": 0,
            "forked_from_id": None,
            "forked_from_actum": None,
            "layout_version": 0,
            "shaped": 0,
            "forked": 0,
        }
    ]
    assert secrets & every_value(engine, tables) == set()


def test_erasure_deletes_the_acta_and_keys_and_leaves_only_the_marker(store: SQLAlchemyStore) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    store.create(started(chronicum_id, owner))
    single = store.record_idempotent(
        said(chronicum_id, new_id("content"), actor=new_id("actor")), new_id("key")
    )
    batch_key = new_id("key")
    batch = store.record_many(
        [said(chronicum_id, new_id("content"), actor=new_id("actor")) for _ in range(3)], batch_key
    )
    plain = store.record(said(chronicum_id, new_id("content")))
    secrets = {owner, batch_key} | {
        value for actum in [single, *batch, plain] for value in (actum.id, actum.content, actum.actor)
    }
    secrets.discard("ardian")
    assert secrets <= every_value(store.engine, store.plans.tables)

    assert store.erase(chronicum_id, owner_digest(owner)) == 5

    assert_only_the_marker(store.engine, store.plans.tables, chronicum_id, owner, secrets)
    operations: list[Callable[[], object]] = [
        lambda: store.get(chronicum_id),
        lambda: store.acta(chronicum_id, ActaQuery()),
        lambda: store.record(said(chronicum_id, "again")),
        lambda: store.record_idempotent(said(chronicum_id, "again"), batch_key),
        lambda: store.record_many([said(chronicum_id, "again")], batch_key),
        lambda: store.record_many([said(chronicum_id, "again")], None),
        lambda: store.erase(chronicum_id, owner_digest(owner)),
    ]
    for operation in operations:
        with pytest.raises(ChronicumNotFound):
            operation()
    with pytest.raises(ChronicumExists):
        store.create(started(chronicum_id, owner))
    assert store.list_chronica(owner, 10, None) == []
    assert_only_the_marker(store.engine, store.plans.tables, chronicum_id, owner, secrets)

    # only the owner's digest reopens it, fresh
    assert not store.reopen(started(chronicum_id, new_id("owner")), owner_digest(new_id("owner")))
    fresh = started(chronicum_id, owner)
    assert store.reopen(fresh, owner_digest(owner))
    assert store.get(chronicum_id) == fresh
    assert store.acta(chronicum_id, ActaQuery()) == []
    assert store.record(said(chronicum_id, "after")).content == "after"
    assert not store.reopen(fresh, owner_digest(owner))  # a live chronicum is no marker
    assert store.erase(chronicum_id, owner_digest(owner)) == 1


def test_erase_owner_erases_each_live_chronicum_of_the_owner_only(store: SQLAlchemyStore) -> None:
    owner, other = new_id("owner"), new_id("owner")
    mine = [new_id() for _ in range(3)]
    theirs = new_id()
    for chronicum_id in mine:
        store.create(started(chronicum_id, owner))
        store.record_many([said(chronicum_id, "one"), said(chronicum_id, "two")], None)
    store.create(started(theirs, other))
    store.record(said(theirs, "kept"))
    store.erase(mine[0], owner_digest(owner))

    assert store.erase_owner(owner, owner_digest(owner)) == 2
    assert store.erase_owner(owner, owner_digest(owner)) == 0
    for chronicum_id in mine:
        assert_only_the_marker(store.engine, store.plans.tables, chronicum_id, owner, {owner})
    assert [actum.content for actum in store.acta(theirs, ActaQuery())] == ["kept"]
    assert [chronicum.id for chronicum in store.list_chronica(other, 10, None)] == [theirs]
    store.erase_owner(other, owner_digest(other))


def test_async_erasure_leaves_only_the_marker(
    store: SQLAlchemyStore, async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore
) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    key = new_id("key")

    async def scenario() -> tuple[list[Actum], int, int]:
        try:
            await async_store.create(started(chronicum_id, owner))
            stored = await async_store.record_many(
                [said(chronicum_id, new_id("content")) for _ in range(4)], key
            )
            erased = await async_store.erase(chronicum_id, owner_digest(owner))
            with pytest.raises(ChronicumNotFound):
                await async_store.record_many([said(chronicum_id, "late")], key)
            with pytest.raises(ChronicumNotFound):
                await async_store.get(chronicum_id)
            assert await async_store.list_chronica(owner, 5, None) == []
            return stored, erased, await async_store.erase_owner(owner, owner_digest(owner))
        finally:
            await async_store.close()

    stored, erased, none_left = asyncio.run(scenario())
    assert (erased, none_left) == (4, 0)
    secrets = {owner, key} | {actum.id for actum in stored} | {actum.content for actum in stored}
    assert_only_the_marker(store.engine, store.plans.tables, chronicum_id, owner, secrets)


# --- batches -----------------------------------------------------------------------------------


def test_a_batch_is_two_statements_or_one_on_postgresql_and_a_replay_reads_it_back(
    store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    store.create(started(chronicum_id, owner))
    store.record(said(chronicum_id, "first"))  # the content limit is read once, before
    commits: list[str] = []
    original = store.engine.dialect.do_commit

    def counted(connection: Any) -> None:
        commits.append("commit")
        original(connection)

    monkeypatch.setattr(store.engine.dialect, "do_commit", counted)
    statements, stop = count_statements(store.engine)
    try:
        stored = store.record_many([said(chronicum_id, str(index)) for index in range(1000)], "batch-key")
        written = (list(statements), list(commits))
        statements.clear()
        again = store.record_many([said(chronicum_id, "other")], "batch-key")
        replayed = list(statements)
    finally:
        stop()
    if store.engine.dialect.name == "postgresql":  # the counter's UPDATE inside the INSERT's WITH
        assert len(written[0]) == 1, written[0]
        assert written[0][0].startswith("WITH moved AS (UPDATE chronica ")
        assert "INSERT INTO acta " in written[0][0]
        assert len(replayed) == 2, replayed  # the refused statement, the read-back
    else:
        assert len(written[0]) == 2, written[0]
        assert written[0][0].startswith("UPDATE ") and "chronica" in written[0][0]
        assert written[0][1].startswith("INSERT INTO ") and "acta" in written[0][1]
        assert len(replayed) == 3, replayed  # the update, the refused insert, the read-back
    assert written[1] == ["commit"]
    assert again == stored
    assert [actum.content for actum in stored] == [str(index) for index in range(1000)]
    assert len({actum.at for actum in stored}) == 1
    assert store.acta(chronicum_id, ActaQuery())[1:] == stored
    assert store.record_idempotent(said(chronicum_id, "single"), "batch-key") == stored[0]
    store.erase(chronicum_id, owner_digest(owner))


def test_an_async_batch_is_two_statements_or_one_on_postgresql(
    store: SQLAlchemyStore, async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore
) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    store.create(started(chronicum_id, owner))
    statements, stop = count_statements(blocking_engine(async_store))

    async def scenario() -> tuple[list[str], list[Actum]]:
        try:
            await async_store.record(said(chronicum_id, "first"))
            statements.clear()
            stored = await async_store.record_many([said(chronicum_id, "a"), said(chronicum_id, "b")], "k")
            return list(statements), stored
        finally:
            stop()
            await async_store.close()

    sent, stored = asyncio.run(scenario())
    assert len(sent) == (1 if store.engine.dialect.name == "postgresql" else 2), sent
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["first", "a", "b"]
    assert store.record_many([said(chronicum_id, "c")], "k") == stored
    store.erase(chronicum_id, owner_digest(owner))


def test_a_batch_with_one_actum_over_the_limit_sends_nothing(
    store: SQLAlchemyStore, database_url: str
) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    store.create(started(chronicum_id, owner))
    with SQLAlchemyStore.open(
        database_url.replace("+aiosqlite", ""), auto_migrate=False, max_content_bytes=1000
    ) as limited:
        limited.record(said(chronicum_id, "first"))
        statements, stop = count_statements(limited.engine)
        try:
            with pytest.raises(ActumTooLarge) as caught:
                limited.record_many([said(chronicum_id, "fits"), said(chronicum_id, "x" * 1001)], "too-large")
        finally:
            stop()
    assert (caught.value.size, caught.value.limit) == (1001, 1000)
    assert statements == []
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["first"]
    store.erase(chronicum_id, owner_digest(owner))


@pytest.mark.dialects("mariadb", "postgresql")
def test_a_batch_too_large_for_one_statement_is_split_in_one_transaction(
    store: SQLAlchemyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    store.create(started(chronicum_id, owner))
    store.record(said(chronicum_id, "first"))
    # a statement holds this much content (and 8 KiB a row for the rest): one actum a statement
    monkeypatch.setattr(store.plans, "_content_limit", 20_000)
    monkeypatch.setattr(PostgreSQLStoreDialect, "batch_budget", lambda self, limit: 20_000)
    statements, stop = count_statements(store.engine)
    try:
        stored = store.record_many([said(chronicum_id, f"{index}" * 10_000) for index in range(5)], "split")
    finally:
        stop()
    assert [statement.split()[0] for statement in statements] == ["UPDATE"] + ["INSERT"] * 5
    assert store.acta(chronicum_id, ActaQuery())[1:] == stored
    assert store.record_many([said(chronicum_id, "again")], "split") == stored
    store.erase(chronicum_id, owner_digest(owner))


def test_forty_threads_with_one_key_store_one_batch(store: SQLAlchemyStore) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    store.create(started(chronicum_id, owner))
    barrier = threading.Barrier(40)
    results: list[list[Actum]] = []
    failures: list[BaseException] = []

    def write(index: int) -> None:
        batch = [said(chronicum_id, f"{index}-{part}") for part in range(3)]
        barrier.wait()
        try:
            results.append(store.record_many(batch, "one-key"))
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            failures.append(error)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    stored = store.acta(chronicum_id, ActaQuery())
    assert len(stored) == 3
    assert all(result == stored for result in results)
    store.erase(chronicum_id, owner_digest(owner))


def test_an_erase_racing_with_batches_leaves_only_whole_batches_written_after_it(
    store: SQLAlchemyStore,
) -> None:
    owner, chronicum_id = new_id("owner"), new_id()
    chronicarius = Chronicarius(store)
    size = 4
    stop = threading.Event()
    progress = threading.Condition()
    done: list[int] = []
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            number = 0
            while not stop.is_set():
                acta = [said(chronicum_id, f"{number}:{part}") for part in range(size)]
                chronicarius.record_acta(owner, acta)
                with progress:
                    done.append(number)
                    progress.notify_all()
                number += 1
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            failures.append(error)
            with progress:
                done.extend([-1, -1])
                progress.notify_all()

    thread = threading.Thread(target=writer)
    thread.start()
    erased: list[int] = []
    for _ in range(3):
        # two batches reported after the last erase: the second began after it (the id reopened)
        with progress:
            seen = len(done)
            assert progress.wait_for(lambda: len(done) >= seen + 2, timeout=60)  # noqa: B023
        erased.append(chronicarius.erase_chronicum(owner, chronicum_id))
    with progress:
        seen = len(done)
        assert progress.wait_for(lambda: len(done) >= seen + 2, timeout=60)
    stop.set()
    thread.join()
    assert failures == []
    batches = len(done)
    assert all(count % size == 0 for count in erased), erased
    left = [actum.content.split(":") for actum in store.acta(chronicum_id, ActaQuery())]
    numbers = [int(number) for number, _ in left]
    assert [int(part) for _, part in left] == list(range(size)) * (len(left) // size)
    whole = numbers[::size]
    assert numbers == [number for number in whole for _ in range(size)]
    assert whole == list(range(batches - len(whole), batches))  # the batches after the last erase
    assert sum(erased) + len(left) == size * batches
    store.erase(chronicum_id, owner_digest(owner))


# --- listing -----------------------------------------------------------------------------------


def test_listing_orders_by_started_at_then_id_as_code_points(store: SQLAlchemyStore) -> None:
    owner = new_id("owner")
    moment = datetime(2026, 5, 4, 3, 2, 1, 123456, tzinfo=UTC)
    suffixes = ["B", "Z", "a", "b", "é", "😀", "a ", "A"]
    prefix = new_id("list")
    for suffix in suffixes:
        store.create(started(f"{prefix}{suffix}", owner, moment))
    store.create(started(f"{prefix}-later", owner, moment + timedelta(microseconds=1)))
    store.create(started(f"{prefix}-earlier", owner, moment - timedelta(microseconds=1)))
    expected = [f"{prefix}-later"]
    expected += sorted((f"{prefix}{suffix}" for suffix in suffixes), reverse=True)
    expected += [f"{prefix}-earlier"]
    walked: list[str] = []
    after = None
    while True:
        page = store.list_chronica(owner, 3, after)
        walked += [chronicum.id for chronicum in page]
        if len(page) < 3:
            break
        after = (page[-1].started_at, page[-1].id)
    assert walked == expected
    assert all(chronicum.owner_id == owner for chronicum in store.list_chronica(owner, 1000, None))
    assert store.erase_owner(owner, owner_digest(owner)) == len(expected)


def explained(engine: Engine, statement: str, parameters: Any) -> str:
    """The database's plan of ``statement``, as text."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            return "\n".join(str(row[-1]) for row in rows)
        if engine.dialect.name == "postgresql":
            rows = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters).all()
            return "\n".join(str(row[0]) for row in rows)
        result = connection.exec_driver_sql(f"EXPLAIN {statement}", parameters)
        return "\n".join(str(dict(row._mapping)) for row in result)


def test_listing_runs_along_the_index_among_other_owners(fresh_target: tuple[str, str | None]) -> None:
    url, schema = fresh_target
    with SQLAlchemyStore.open(url.replace("+aiosqlite", ""), schema=schema) as store:
        tables, engine = store.plans.tables, store.engine
        moment = datetime(2026, 1, 1, tzinfo=UTC)
        with engine.begin() as connection:
            for start in range(0, 6000, 1000):
                connection.execute(
                    insert(tables.chronica),
                    [
                        {
                            "id": f"other-{index}",
                            "owner_id": f"owner-{index % 3000}",
                            "started_at": moment + timedelta(seconds=index),
                            "last_actum_at": None,
                            "last_seq": 0,
                        }
                        for index in range(start, start + 1000)
                    ],
                )
        for index in range(30):
            store.create(started(f"mine-{index:02d}", "me", moment + timedelta(seconds=index)))
        with engine.begin() as connection:
            if engine.dialect.name == "postgresql":
                connection.exec_driver_sql(
                    f"ANALYZE {engine.dialect.identifier_preparer.format_table(tables.chronica)}"
                )
            elif engine.dialect.name == "sqlite":
                connection.exec_driver_sql("ANALYZE")
            else:
                connection.exec_driver_sql(
                    f"ANALYZE TABLE {engine.dialect.identifier_preparer.format_table(tables.chronica)}"
                )
        sent: list[tuple[str, Any]] = []

        def seen(connection: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            sent.append((statement, parameters))

        reading = store.read_engine or engine  # MariaDB: the read engine, in autocommit
        event.listen(reading, "before_cursor_execute", seen)
        try:
            first = store.list_chronica("me", 11, None)
            second = store.list_chronica("me", 11, (first[-1].started_at, first[-1].id))
        finally:
            event.remove(reading, "before_cursor_execute", seen)
        assert [chronicum.id for chronicum in first + second] == [
            f"mine-{index:02d}" for index in range(29, 7, -1)
        ]
        assert len(sent) == 2
        for statement, parameters in sent:
            plan = explained(engine, statement, parameters)
            assert LISTING_INDEX in plan, plan
            assert "filesort" not in plan.lower() and "TEMP B-TREE" not in plan and "Sort" not in plan, plan


def test_a_window_reads_the_newest_acta_along_the_primary_key(fresh_target: tuple[str, str | None]) -> None:
    """On fresh tables, no statistics gathered, a chronicum's newest acta are read backwards along
    the primary key and limited: not every actum of it through another index on ``chronicum_id``
    (on PostgreSQL, the unique index of idempotency keys when it held every actum) and then sorted.
    On PostgreSQL the plan is the generic one its session keeps for the prepared statement."""
    url, schema = fresh_target
    with SQLAlchemyStore.open(
        url.replace("+aiosqlite", ""), schema=schema, pool_size=1, max_overflow=0
    ) as store:
        rules, short, chronicum_id = Chronicarius(store), new_id("short"), new_id("long")
        rules.record_actum("me", said(short, "0"))
        rules.record_acta("me", [said(short, str(number)) for number in range(1, 100)])
        rules.record_actum("me", said(chronicum_id, "0"))
        for start in range(1, 10_000, 1000):
            batch = range(start, min(start + 1000, 10_000))
            rules.record_acta("me", [said(chronicum_id, str(number)) for number in batch])
        sent: list[tuple[str, Any]] = []

        def seen(connection: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            sent.append((statement, parameters))

        reading = store.read_engine or store.engine
        event.listen(reading, "before_cursor_execute", seen)
        try:
            for _ in range(10):  # psycopg prepares a statement on its fifth run on a connection
                window = store.acta(chronicum_id, ActaQuery(last_n=20))
        finally:
            event.remove(reading, "before_cursor_execute", seen)
        assert [actum.content for actum in window] == [str(number) for number in range(9_980, 10_000)]
        statement, parameters = sent[-1]
        if reading.dialect.name != "postgresql":
            plan = explained(reading, statement, parameters)
            assert "filesort" not in plan.lower() and "TEMP B-TREE" not in plan, plan
            return
        with reading.connect() as connection:  # the one pooled connection, which read
            name, types = connection.execute(
                text(
                    "SELECT name, parameter_types::text[] FROM pg_prepared_statements"
                    " WHERE statement LIKE '%acta.seq DESC%'"
                )
            ).one()
            values = [parameters[key] for key in dict.fromkeys(re.findall(r"%\((\w+)\)s", statement))]
            arguments = ", ".join(
                f"{value}::{kind}" if isinstance(value, int) else f"'{value}'::{kind}"  # ids hold no quote
                for value, kind in zip(values, types, strict=True)
            )
            rows = connection.exec_driver_sql(
                f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE {name}({arguments})"
            )
            plan = "\n".join(str(row[0]) for row in rows)
        [scan] = [line for line in plan.splitlines() if " on acta" in line]
        assert "Index Scan Backward using acta_pkey on acta" in scan and "rows=20 " in scan, plan


# --- migration ---------------------------------------------------------------------------------


@pytest.mark.dialects("postgresql")
def test_version_4_keeps_only_the_keyed_acta_in_the_unique_index_of_keys(
    fresh_target: tuple[str, str | None],
) -> None:
    """Tables at version 3 (a unique constraint) migrate to a unique index of the keyed acta alone,
    and a retried keyed write still lands once."""
    url, schema = fresh_target
    engine = create_engine(url)
    try:
        execute(
            plan_connections(engine, None, made_here=False),
            Plans(Tables.build(schema), engine.dialect, schema).migrate(3),
        )
        with SQLAlchemyStore.open(url, schema=schema) as store:
            rules, chronicum_id = Chronicarius(store), new_id()
            first = rules.record_actum("me", said(chronicum_id, "once"), idempotency_key="k")
            again = rules.record_actum("me", said(chronicum_id, "once"), idempotency_key="k")
            rules.record_actum("me", said(chronicum_id, "unkeyed"))
            assert again.id == first.id
            assert [actum.content for actum in rules.get_acta("me", chronicum_id)] == ["once", "unkeyed"]
        with engine.connect() as connection:
            indexes = connection.execute(
                text("SELECT indexdef FROM pg_indexes WHERE schemaname = :schema AND tablename = 'acta'"),
                {"schema": schema},
            ).scalars()
            keyed = [index for index in indexes if " acta_idempotency_key " in index]
            constraints = connection.execute(
                text(
                    "SELECT conname FROM pg_constraint"
                    " WHERE conrelid = CAST(:acta AS regclass) AND contype = 'u'"
                ),
                {"acta": f"{schema}.acta"},
            ).all()
            versions = connection.execute(select(Tables.build(schema).versions.c.version)).scalars().all()
    finally:
        engine.dispose()
    assert keyed == [
        f"CREATE UNIQUE INDEX acta_idempotency_key ON {schema}.acta"
        " USING btree (chronicum_id, idempotency_key) WHERE (idempotency_key IS NOT NULL)"
    ]
    assert constraints == []
    assert versions == [SCHEMA_VERSION] == [5]


def test_a_schema_at_version_1_migrates_and_keeps_its_acta(
    fresh_target: tuple[str, str | None],
) -> None:
    url, schema = fresh_target
    url = url.replace("+aiosqlite", "")
    engine = create_engine(url)
    try:
        old = Tables.build(schema, 1)
        assert "owner_digest" not in old.chronica.c
        older = Plans(Tables.build(schema), engine.dialect, schema).migrate(1)
        execute(plan_connections(engine, None, made_here=False), older)
        moment = datetime(2025, 6, 7, 8, 9, 10, 111213, tzinfo=UTC)
        with engine.begin() as connection:
            found = {column["name"] for column in inspect(connection).get_columns("chronica", schema=schema)}
            assert "owner_digest" not in found
            connection.execute(
                insert(old.chronica),
                {
                    "id": "old",
                    "owner_id": "elder",
                    "started_at": moment,
                    "last_actum_at": moment,
                    "last_seq": 2,
                },
            )
            connection.execute(
                insert(old.acta),
                [
                    {
                        "chronicum_id": "old",
                        "seq": seq,
                        "id": f"old-{seq}",
                        "kind": "message",
                        "actor_kind": "human",
                        "actor": "elder",
                        "content": f"kept {seq}",
                        "at": moment,
                        "idempotency_key": "old-key" if seq == 1 else None,
                    }
                    for seq in (1, 2)
                ],
            )
            connection.execute(old.versions.update().values(version=1))
        with pytest.raises(StoreError, match=r"^sqlalchemy: open: .* schema version 1, older"):
            SQLAlchemyStore.open(url, schema=schema, auto_migrate=False)
        with SQLAlchemyStore.open(url, schema=schema) as store:
            with store.engine.connect() as connection:
                versions = connection.execute(select(store.plans.tables.versions)).all()
                indexes = {
                    index["name"] for index in inspect(connection).get_indexes("chronica", schema=schema)
                }
            assert [tuple(row) for row in versions] == [("chronica", SCHEMA_VERSION)]
            assert LISTING_INDEX in indexes
            kept = store.acta("old", ActaQuery())
            assert [(actum.id, actum.content, actum.at) for actum in kept] == [
                ("old-1", "kept 1", moment),
                ("old-2", "kept 2", moment),
            ]
            assert store.record_many([said("old", "new")], "old-key") == kept[:1]
            batch = store.record_many([said("old", "x"), said("old", "y")], "new-key")
            assert store.acta("old", ActaQuery())[2:] == batch
            assert [chronicum.id for chronicum in store.list_chronica("elder", 5, None)] == ["old"]
            assert store.erase("old", owner_digest("elder")) == 4
            assert_only_the_marker(store.engine, store.plans.tables, "old", "elder", {"elder", "old-key"})
    finally:
        engine.dispose()


def test_version_5_starts_a_fork_s_last_activity_when_it_was_forked(
    fresh_target: tuple[str, str | None],
) -> None:
    """A fork whose ``last_active`` an earlier release set to its shared actum's ``at`` (version 4)
    is active from its fork time once the tables migrate to version 5; nothing else moves."""
    url, schema = fresh_target
    with SQLAlchemyStore.open(url, schema=schema) as store:
        rules, source = Chronicarius(store), new_id()
        shared = rules.record_actum("me", said(source, "long ago"))
        fork = rules.fork_chronicum("me", source)
    assert shared.at is not None and shared.at < fork.started_at
    engine = create_engine(url.replace("+aiosqlite", ""))
    try:
        tables = Tables.build(schema)
        with engine.begin() as connection:  # as version 4 left a fork
            connection.execute(
                update(tables.chronica).where(tables.chronica.c.id == fork.id).values(last_active=shared.at)
            )
            connection.execute(tables.versions.update().values(version=4))
    finally:
        engine.dispose()
    with SQLAlchemyStore.open(url, schema=schema) as store:
        with store.engine.connect() as connection:
            versions = connection.execute(select(store.plans.tables.versions.c.version)).scalars().all()
            chronica = store.plans.tables.chronica
            active = {
                row.id: row.last_active
                for row in connection.execute(select(chronica.c.id, chronica.c.last_active))
            }
        assert versions == [SCHEMA_VERSION] == [5]
        assert active == {source: shared.at, fork.id: fork.started_at}
        assert [found.id for found in store.idle_chronica(fork.started_at, "me", None, 10)] == [source]
        assert store.erase_idle(source, fork.started_at, owner_digest("me")) == 0
