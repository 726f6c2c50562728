"""Round trips per operation, counted on the wire (PostgreSQL) and by the server (MariaDB).

PostgreSQL: libpq's protocol trace (psycopg's ``PGconn.trace``) of every connection the store
takes from its pool during the operation; each ``ReadyForQuery`` the server sends ends one round
trip (a ``BEGIN``, a statement, a ``COMMIT`` each get one). MariaDB: the session's ``Questions``
status counter (statements the client sent, ``COMMIT`` and ``ROLLBACK`` included) on each of the
store's two pools (its engine's, for writes, and its read engine's), each holding one connection,
less what reading the counter itself costs.

The numbers asserted are those backends/sqlalchemy/README.md gives: one round trip per read and
per append on PostgreSQL; on MariaDB a read is its ``SELECT`` alone (on a connection in
autocommit), and an append its ``UPDATE``, ``INSERT`` and ``COMMIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

import pytest
from chronica_sqlalchemy import AsyncSQLAlchemyStore, SQLAlchemyStore
from sqlalchemy import Engine, create_engine, event

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, ChronicumNotFound
from chronica_core.erasure import owner_digest

pytestmark = pytest.mark.dialects("postgresql", "mariadb")

READY_FOR_QUERY = "\tReadyForQuery\t"
"""How libpq's trace shows the message that ends each round trip."""


def new_id(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


def said(chronicum_id: str, content: str = "hello") -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=uuid.uuid4().hex)


class Counter:
    """Counts the round trips the operations inside :meth:`counting` make on ``engine``.

    MariaDB: on ``read_engine`` too, when the store has one.
    """

    def __init__(self, engine: Engine, read_engine: Engine | None = None) -> None:
        self.engine = engine
        self.engines = [engine] if read_engine is None else [engine, read_engine]
        self.postgresql = engine.dialect.name == "postgresql"

    @contextlib.contextmanager
    def counting(self) -> Iterator[list[int]]:
        """Yield a list that holds the count once the block has ended."""
        counted: list[int] = []
        if self.postgresql:
            with self._traced() as lines:
                yield counted
                counted.append(sum(READY_FOR_QUERY in line for line in lines()))
        else:
            before = [self._questions(engine) for engine in self.engines]
            yield counted
            after = [self._questions(engine) for engine in self.engines]
            costs = [self._probe_cost(engine) for engine in self.engines]
            counted.append(sum(after) - sum(before) - sum(costs))

    @contextlib.contextmanager
    def _traced(self) -> Iterator[Callable[[], list[str]]]:
        with tempfile.TemporaryFile() as trace:
            yield from self._tracing_into(trace)

    def _tracing_into(self, trace: IO[bytes]) -> Iterator[Callable[[], list[str]]]:
        def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
            record.driver_connection.pgconn.trace(trace.fileno())

        def checkin(dbapi_connection: Any, record: Any) -> None:
            if record.driver_connection is not None:
                record.driver_connection.pgconn.untrace()  # flushes the trace

        def lines() -> list[str]:
            trace.seek(0)
            return trace.read().decode("utf-8", "replace").splitlines()

        event.listen(self.engine, "checkout", checkout)
        event.listen(self.engine, "checkin", checkin)
        try:
            yield lines
        finally:
            event.remove(self.engine, "checkout", checkout)
            event.remove(self.engine, "checkin", checkin)

    @staticmethod
    def _questions(engine: Engine) -> int:
        with engine.connect() as connection:
            row = connection.exec_driver_sql(QUESTIONS).one()
        return int(row[1])

    def _probe_cost(self, engine: Engine) -> int:
        first = self._questions(engine)
        return self._questions(engine) - first


QUESTIONS = "SHOW SESSION STATUS LIKE 'Questions'"


@pytest.fixture
def counted_store(shared_store: SQLAlchemyStore, database_url: str) -> Iterator[SQLAlchemyStore]:
    """A blocking store of its own (one pooled connection) on the session's migrated database."""
    store = SQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    yield store
    store.close()


EXPECTED = {
    "postgresql": {"read": 1, "append": 1, "create": 1, "keyed again": 2, "batch": 1, "erase": 4},
    "mariadb": {"read": 1, "append": 3, "create": 2, "keyed again": 5, "batch": 3, "erase": 3},
}
"""Round trips per operation, per dialect (see backends/sqlalchemy/README.md)."""


def prepared(store: SQLAlchemyStore) -> str:
    """A chronicum holding one actum, the store's content limit read and its connection made."""
    chronicum_id = new_id("trips")
    store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
    store.record(said(chronicum_id))
    return chronicum_id


def test_reads_take_the_documented_round_trips(counted_store: SQLAlchemyStore, dialect: str) -> None:
    store, counter = counted_store, Counter(counted_store.engine, counted_store.read_engine)
    chronicum_id = prepared(store)
    with counter.counting() as window:
        acta = store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=20))
    with counter.counting() as got:
        chronicum = store.get(chronicum_id)
    with counter.counting() as listed:
        page = store.list_chronica("ardian", 50, None)
    assert [actum.content for actum in acta] == ["hello"]
    assert chronicum.id == chronicum_id
    assert chronicum_id in [listed_chronicum.id for listed_chronicum in page]
    read = EXPECTED[dialect]["read"]
    assert (window, got, listed) == ([read], [read], [read])


def test_appends_take_the_documented_round_trips(counted_store: SQLAlchemyStore, dialect: str) -> None:
    store, counter = counted_store, Counter(counted_store.engine, counted_store.read_engine)
    chronicum_id = prepared(store)
    with counter.counting() as appended:
        first = store.record(said(chronicum_id, "one"))
    with counter.counting() as keyed:
        second = store.record_idempotent(said(chronicum_id, "two"), "key-1")
    with counter.counting() as keyed_again:
        again = store.record_idempotent(said(chronicum_id, "three"), "key-1")
    with counter.counting() as created:
        store.create(Chronicum(new_id("created"), "ardian", started_at=datetime.now(UTC)))
    assert again == second
    window = store.acta(chronicum_id, ActaQuery())
    assert [actum.content for actum in window] == ["hello", "one", "two"]
    assert window[1].at == first.at
    expected = EXPECTED[dialect]
    assert (appended, keyed, keyed_again, created) == (
        [expected["append"]],
        [expected["append"]],
        [expected["keyed again"]],
        [expected["create"]],
    )


def test_a_batch_takes_the_documented_round_trips(counted_store: SQLAlchemyStore, dialect: str) -> None:
    store, counter = counted_store, Counter(counted_store.engine, counted_store.read_engine)
    chronicum_id = prepared(store)
    with counter.counting() as batch:
        stored = store.record_many([said(chronicum_id, f"batch {index}") for index in range(3)], None)
    with counter.counting() as keyed_batch:
        keyed = store.record_many([said(chronicum_id, f"keyed {index}") for index in range(2)], "key-b")
    again = store.record_many([said(chronicum_id, "not stored")], "key-b")
    window = store.acta(chronicum_id, ActaQuery())
    assert [actum.content for actum in window] == [
        "hello",
        "batch 0",
        "batch 1",
        "batch 2",
        "keyed 0",
        "keyed 1",
    ]
    assert [actum.id for actum in window[1:4]] == [actum.id for actum in stored]
    assert {actum.at for actum in stored} == {window[1].at}
    assert again == keyed == window[4:]
    assert (batch, keyed_batch) == ([EXPECTED[dialect]["batch"]], [EXPECTED[dialect]["batch"]])


def test_an_erasure_keeps_its_transaction(counted_store: SQLAlchemyStore, dialect: str) -> None:
    store, counter = counted_store, Counter(counted_store.engine, counted_store.read_engine)
    chronicum_id = prepared(store)
    with counter.counting() as erased:
        deleted = store.erase(chronicum_id, owner_digest("ardian"))
    assert deleted == 1
    with pytest.raises(ChronicumNotFound):
        store.get(chronicum_id)
    assert erased == [EXPECTED[dialect]["erase"]]


class AsyncCounter:
    """:class:`Counter` for an asyncio store, whose MariaDB connections (asyncmy) are awaited."""

    def __init__(self, store: AsyncSQLAlchemyStore) -> None:
        self.engines = [engine for engine in (store.engine, store.read_engine) if engine is not None]
        self.traced = Counter(store.engine.sync_engine)

    @contextlib.asynccontextmanager
    async def counting(self) -> AsyncIterator[list[int]]:
        """Yield a list that holds the count once the block has ended."""
        if self.traced.postgresql:
            with self.traced.counting() as traced:
                yield traced
            return
        counted: list[int] = []
        before = await self._questions()
        yield counted
        after = await self._questions()
        counted.append(after - before - (await self._questions() - after))

    async def _questions(self) -> int:
        total = 0
        for engine in self.engines:
            async with engine.connect() as connection:
                row: Any = (await connection.exec_driver_sql(QUESTIONS)).one()
            total += int(row[1])
        return total


def test_the_asyncio_store_takes_the_documented_round_trips(
    shared_store: SQLAlchemyStore, database_url: str, dialect: str
) -> None:
    store = AsyncSQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    counter = AsyncCounter(store)

    async def scenario() -> tuple[list[list[int]], list[Actum], Chronicum, list[Chronicum]]:
        chronicum_id = new_id("async-trips")
        await store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        await store.record(said(chronicum_id, "warm"))
        await store.acta(chronicum_id, ActaQuery(last_n=20))  # both pools connected
        async with counter.counting() as appended:
            await store.record(said(chronicum_id, "counted"))
        async with counter.counting() as read:
            window = await store.acta(chronicum_id, ActaQuery(last_n=20))
        async with counter.counting() as got:
            chronicum = await store.get(chronicum_id)
        async with counter.counting() as listed:
            page = await store.list_chronica("ardian", 50, None)
        await store.close()
        return [appended, read, got, listed], window, chronicum, page

    counts, window, chronicum, page = asyncio.run(scenario())
    assert [actum.content for actum in window] == ["warm", "counted"]
    assert chronicum.id == window[0].chronicum_id
    assert chronicum.id in [listed.id for listed in page]
    expected = EXPECTED[dialect]
    assert counts == [[expected["append"]], [expected["read"]], [expected["read"]], [expected["read"]]]


@pytest.mark.dialects("postgresql")
def test_a_transaction_gives_its_connection_back_in_autocommit(counted_store: SQLAlchemyStore) -> None:
    """The store's engine keeps its connections in autocommit; an erasure's transaction leaves none open."""
    store, counter = counted_store, Counter(counted_store.engine)
    erased, kept = prepared(store), prepared(store)
    store.erase(erased, owner_digest("ardian"))
    with counter.counting() as read:
        window = store.acta(kept, ActaQuery(last_n=20))
    with counter.counting() as appended:
        store.record(said(kept, "after"))
    with store.engine.connect() as connection:  # the pool's one connection, which the erasure used
        driver: Any = connection.connection.driver_connection
        assert (driver.autocommit, driver.info.transaction_status.name) == (True, "IDLE")
    assert [actum.content for actum in window] == ["hello"]
    assert (read, appended) == ([1], [1])


@pytest.mark.dialects("postgresql")
@pytest.mark.parametrize("made_by", ["create_engine", "execution_options"])
def test_an_engine_you_made_in_autocommit_still_erases_in_one_transaction(
    shared_store: SQLAlchemyStore, database_url: str, made_by: str
) -> None:
    """An erasure on your own autocommit engine still sends its BEGIN and COMMIT (4 round trips)."""
    if made_by == "create_engine":
        engine = create_engine(database_url, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0)
        given = engine
    else:
        engine = create_engine(database_url, pool_size=1, max_overflow=0)
        given = engine.execution_options(isolation_level="AUTOCOMMIT")
    try:
        store = SQLAlchemyStore(given, auto_migrate=False)
        counter = Counter(given)
        chronicum_id, kept = prepared(store), prepared(store)
        with counter.counting() as erased:
            deleted = store.erase(chronicum_id, owner_digest("ardian"))
        with counter.counting() as read:
            window = store.acta(kept, ActaQuery(last_n=20))
        assert (deleted, erased, read, [actum.content for actum in window]) == (1, [4], [1], ["hello"])
    finally:
        engine.dispose()
