"""Content size on every dialect: the limit read from the database, kept exactly, refusals translated."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from chronica_conformance import NativeContract, SizeContract
from chronica_sqlalchemy import AsyncSQLAlchemyStore, AsyncThreadedSQLAlchemyStore, SQLAlchemyStore
from chronica_sqlalchemy.dialects.mysql import STATEMENT_RESERVE as MYSQL_STATEMENT_RESERVE
from chronica_sqlalchemy.dialects.sqlite import ROW_RESERVE as SQLITE_ROW_RESERVE
from chronica_sqlalchemy.store import open_async_sqlalchemy_store
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import DBAPIError

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    AsyncChronicarius,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    InvalidOption,
)
from chronica_core.limits import POSTGRESQL_MAX_CONTENT_BYTES

SMALL = 1024 * 1024
"""The limit the contract is run at where the database's own is too large to write at."""

AnyAsyncStore = AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore


def _lower_sqlite_length(engine: Any, length: int) -> None:
    """Give every new SQLite connection of ``engine`` a length limit of ``length`` bytes."""

    @event.listens_for(engine, "connect")
    def lower(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, length)


def _lowered_sqlite_store(database_url: str, length: int) -> SQLAlchemyStore:
    """A store on the session's SQLite file whose connections have a length limit of ``length``."""
    engine = create_engine(database_url)
    _lower_sqlite_length(engine, length)
    return SQLAlchemyStore(engine, _owns_engine=True)


def _database_limit(dialect: str, database_url: str) -> int:
    """The content limit the store should read, worked out here independently."""
    if dialect in ("sqlite", "aiosqlite"):
        return sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_LENGTH) - SQLITE_ROW_RESERVE
    if dialect == "postgresql":
        return POSTGRESQL_MAX_CONTENT_BYTES
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            packet = int(connection.execute(text("SELECT @@max_allowed_packet")).scalar_one())
    finally:
        engine.dispose()
    return (packet - MYSQL_STATEMENT_RESERVE) // 2


class TestSizeContractOnEveryDialect(SizeContract, NativeContract):
    """The size contract, and the native contract (content and native data count together), at a
    limit small enough to write at.

    SQLite: the database's own limit, lowered on each connection (``setlimit``) and read from it
    by the store; the other dialects (and aiosqlite, whose connection lives on its own thread):
    the ``max_content_bytes`` option. MariaDB at its real limit is in the whole conformance suite.
    """

    @pytest.fixture(autouse=True)
    def on_dialect(self, dialect: str) -> str:
        """Every case once per selected dialect (the suite asks for ``store`` only at run time)."""
        return dialect

    @pytest.fixture
    def store(self, dialect: str, database_url: str) -> Iterator[SQLAlchemyStore]:
        if dialect == "sqlite":
            store = _lowered_sqlite_store(database_url, SMALL + SQLITE_ROW_RESERVE)
        else:
            store = SQLAlchemyStore.open(database_url, max_content_bytes=SMALL)
        with store:
            assert store.max_content_bytes() == SMALL
            yield store

    @pytest.fixture
    def async_store(self, dialect: str, database_url: str) -> AnyAsyncStore:
        if dialect == "sqlite":
            engine = create_engine(database_url)
            _lower_sqlite_length(engine, SMALL + SQLITE_ROW_RESERVE)
            return AsyncThreadedSQLAlchemyStore(engine, auto_migrate=False, _owns_engine=True)
        return open_async_sqlalchemy_store(database_url, auto_migrate=False, max_content_bytes=str(SMALL))


def test_the_default_limit_is_the_databases_own(
    dialect: str, database_url: str, store: SQLAlchemyStore
) -> None:
    expected = _database_limit(dialect, database_url)
    assert store.max_content_bytes() == expected
    if dialect == "mariadb":
        assert expected == (16 * 1024 * 1024 - 16 * 1024) // 2  # 8,380,416 on this server's 16 MiB packets

    async def in_a_loop() -> int | None:
        async_store = open_async_sqlalchemy_store(database_url, auto_migrate=False)
        try:
            return await async_store.max_content_bytes()
        finally:
            await async_store.close()

    assert asyncio.run(in_a_loop()) == expected


def test_the_option_is_range_checked(dialect: str, database_url: str) -> None:
    for value in (-1, "lots", 1.5, 2**40):
        with pytest.raises(InvalidOption) as raised:
            SQLAlchemyStore.open(database_url, max_content_bytes=value)
        assert raised.value.option == "max_content_bytes"
        assert "a whole number of bytes from 0 to " in raised.value.reason
    with SQLAlchemyStore.open(database_url, max_content_bytes="0") as store:
        assert store.max_content_bytes() == 0


def _actum(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", content, uuid.uuid4().hex)


def _twenty_mib_tool_response(chronicum_id: str) -> Actum:
    return _actum(chronicum_id, '{"results": "' + "x" * (20 * 1024 * 1024) + '"}')


def _refusing_store(dialect: str, database_url: str) -> SQLAlchemyStore:
    """A store whose database refuses content above :data:`SMALL` (SQLite) or 16 MiB (MariaDB)."""
    if dialect == "sqlite":
        return _lowered_sqlite_store(database_url, SMALL + SQLITE_ROW_RESERVE)
    return SQLAlchemyStore.open(database_url)


def _skip_unless_a_refusal_can_be_caused(dialect: str) -> None:
    if dialect not in ("sqlite", "mariadb"):
        pytest.skip(
            f"{dialect}: the database's limit cannot be lowered from a test (aiosqlite: its connection "
            "is on its own thread; PostgreSQL: a fixed 1 GiB), so it cannot refuse content the store "
            "let through"
        )


def test_a_refusal_by_the_database_is_too_large_and_the_store_goes_on(
    dialect: str, database_url: str
) -> None:
    """The database's limit went down after the store read it: its refusal is ActumTooLarge."""
    _skip_unless_a_refusal_can_be_caused(dialect)
    with _refusing_store(dialect, database_url) as store:
        real = store.max_content_bytes()
        assert real is not None
        chronicum_id = uuid.uuid4().hex
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        before = store.record(_actum(chronicum_id, "before"))
        for attempt in range(3):
            store.plans._content_limit = 2**40  # as if read before the database's limit went down
            big = _twenty_mib_tool_response(chronicum_id)
            write = functools.partial(store.record_idempotent, big, "big") if attempt % 2 else None
            with pytest.raises(ActumTooLarge) as raised:
                write() if write is not None else store.record(big)
            assert raised.value.limit == real
            assert raised.value.size == len(_twenty_mib_tool_response(chronicum_id).content)
            assert isinstance(raised.value.__cause__, DBAPIError)
        after = store.record(_actum(chronicum_id, "after"))
        keyed = store.record_idempotent(_actum(chronicum_id, "keyed"), "big")
        assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [
            before.id,
            after.id,
            keyed.id,
        ]
        assert store.get(chronicum_id).last_actum_at == keyed.at
        for _ in range(8):  # no broken connection was left in the pool
            assert len(store.acta(chronicum_id, ActaQuery(last_n=1))) == 1


def test_an_async_refusal_by_the_database_is_too_large_and_the_store_goes_on(
    dialect: str, database_url: str
) -> None:
    _skip_unless_a_refusal_can_be_caused(dialect)

    async def scenario() -> None:
        if dialect == "sqlite":
            engine = create_engine(database_url)
            _lower_sqlite_length(engine, SMALL + SQLITE_ROW_RESERVE)
            store: AnyAsyncStore = AsyncThreadedSQLAlchemyStore(engine, _owns_engine=True)
        else:
            store = open_async_sqlalchemy_store(database_url)
        try:
            real = await store.max_content_bytes()
            chronicum_id = uuid.uuid4().hex
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            for attempt in range(2):
                store.plans._content_limit = 2**40
                big = _twenty_mib_tool_response(chronicum_id)
                writing = store.record_idempotent(big, "big") if attempt else store.record(big)
                with pytest.raises(ActumTooLarge) as raised:
                    await writing
                assert raised.value.limit == real
                assert isinstance(raised.value.__cause__, DBAPIError)
            after = await store.record(_actum(chronicum_id, "after"))
            assert [actum.id for actum in await store.acta(chronicum_id, ActaQuery())] == [after.id]
            for _ in range(8):
                assert len(await store.acta(chronicum_id, ActaQuery(last_n=1))) == 1
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_twenty_mib_tool_response_is_too_large_and_creates_nothing(
    dialect: str, database_url: str, store: SQLAlchemyStore
) -> None:
    """MariaDB's 16 MiB packets cannot carry it: refused before sending, no chronicum, store fine."""
    if dialect != "mariadb":
        pytest.skip("only MariaDB's limit is below 20 MiB")
    keeper = Chronicarius(store)
    with pytest.raises(ActumTooLarge) as raised:
        keeper.record_actum("ardian", _twenty_mib_tool_response("dinner-" + uuid.uuid4().hex))
    assert raised.value.__cause__ is None  # refused before anything was sent
    chronicum_id = "dinner-" + uuid.uuid4().hex
    with pytest.raises(ActumTooLarge):
        keeper.record_actum("ardian", _twenty_mib_tool_response(chronicum_id), idempotency_key="k")
    with pytest.raises(ChronicumNotFound):
        store.get(chronicum_id)
    stored = keeper.record_actum("ardian", _actum(chronicum_id, "small"))
    assert keeper.get_acta("ardian", chronicum_id) == [stored]

    async def in_a_loop() -> None:
        async_store = open_async_sqlalchemy_store(database_url, auto_migrate=False)
        try:
            async_keeper = AsyncChronicarius(async_store)
            other = "dinner-" + uuid.uuid4().hex
            with pytest.raises(ActumTooLarge):
                await async_keeper.record_actum("ardian", _twenty_mib_tool_response(other))
            with pytest.raises(ChronicumNotFound):
                await async_store.get(other)
            small = await async_keeper.record_actum("ardian", _actum(other, "small"))
            assert await async_keeper.get_acta("ardian", other) == [small]
        finally:
            await async_store.close()

    asyncio.run(in_a_loop())
