"""MariaDB/MySQL reads run on a second pool kept in autocommit: each read is one statement, its own
transaction, with no ``ROLLBACK`` after it (see backends/sqlalchemy/README.md, Round trips).

What that must not cost: a read sees every write committed before it (whichever store or pool
wrote it), it leaves no transaction open on the server (that would hold the tables' metadata
locks, blocking ``ALTER`` and ``DROP``), the idle check and ``operation_timeout`` cover the read
pool's connections, and closing the store closes them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from chronica_conformance.freezable_proxy import FreezableProxy
from chronica_sqlalchemy import AsyncSQLAlchemyStore, SQLAlchemyStore
from conftest import ServerDatabases
from sqlalchemy import Engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import QueuePool
from test_idle_connections import idle_closing, wait_until_closed

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, StoreError

pytestmark = pytest.mark.dialects("mariadb")

ROUNDS = 5

SERVER_STATUS_IN_TRANS = 0x0001
"""The status flag MariaDB/MySQL set in every answer while the session has a transaction open."""


def said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=uuid.uuid4().hex)


def new_chronicum(store: SQLAlchemyStore) -> str:
    chronicum_id = f"autocommit-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
    return chronicum_id


@pytest.fixture
def writer(shared_store: SQLAlchemyStore, database_url: str) -> Iterator[SQLAlchemyStore]:
    store = SQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    yield store
    store.close()


def in_transaction(engine: Engine) -> bool:
    """Whether the server said, in its last answer on the pool's one connection, a transaction is open."""
    with engine.connect() as connection:
        driver_connection = connection.connection.dbapi_connection
        assert driver_connection is not None
        status: int = driver_connection.server_status  # PyMySQL's, from the server's last answer
        return bool(status & SERVER_STATUS_IN_TRANS)


def pooled(engine: Engine | None) -> int:
    """How many connections sit in ``engine``'s pool."""
    assert engine is not None and isinstance(engine.pool, QueuePool)
    return engine.pool.checkedin()


def test_a_read_sees_every_write_committed_before_it(
    writer: SQLAlchemyStore, one_connection: SQLAlchemyStore
) -> None:
    reader = one_connection
    chronicum_id = new_chronicum(writer)
    assert reader.acta(chronicum_id, ActaQuery()) == []  # the reader's connections are pooled now
    for index in range(ROUNDS):
        written = writer.record(said(chronicum_id, f"from the writer {index}"))
        mine = reader.record(said(chronicum_id, f"from the reader {index}"))  # its write pool
        window = reader.acta(chronicum_id, ActaQuery(last_n=2))
        assert [actum.id for actum in window] == [written.id, mine.id]
        assert reader.get(chronicum_id).last_actum_at == mine.at
        assert [actum.id for actum in writer.acta(chronicum_id, ActaQuery(last_n=1))] == [mine.id]
    assert pooled(reader.read_engine) == 1  # the reads did take the read pool's connection


def test_an_asyncio_read_sees_every_write_committed_before_it(
    writer: SQLAlchemyStore, shared_store: SQLAlchemyStore, database_url: str
) -> None:
    chronicum_id = new_chronicum(writer)
    reader = AsyncSQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)

    async def scenario() -> list[tuple[list[str], list[str]]]:
        seen = []
        await reader.acta(chronicum_id, ActaQuery())
        for index in range(ROUNDS):
            written = writer.record(said(chronicum_id, f"blocking {index}"))
            mine = await reader.record(said(chronicum_id, f"asyncio {index}"))
            window = await reader.acta(chronicum_id, ActaQuery(last_n=2))
            seen.append(([actum.id for actum in window], [written.id, mine.id]))
        await reader.close()
        return seen

    for got, expected in asyncio.run(scenario()):
        assert got == expected


def test_a_read_leaves_no_transaction_open(one_connection: SQLAlchemyStore) -> None:
    reader = one_connection
    chronicum_id = new_chronicum(reader)
    reader.record(said(chronicum_id, "hello"))
    assert reader.read_engine is not None
    reader.acta(chronicum_id, ActaQuery(last_n=20))
    assert not in_transaction(reader.read_engine)
    reader.get(chronicum_id)
    assert not in_transaction(reader.read_engine)
    reader.list_chronica("ardian", 10, None)
    assert not in_transaction(reader.read_engine)
    assert not in_transaction(reader.engine)


def test_closing_the_store_closes_the_read_pool(shared_store: SQLAlchemyStore, database_url: str) -> None:
    store = SQLAlchemyStore.open(database_url, auto_migrate=False)
    chronicum_id = new_chronicum(store)
    store.acta(chronicum_id, ActaQuery())
    assert pooled(store.read_engine) == 1
    store.close()
    assert pooled(store.read_engine) == 0


def test_a_pooled_read_connection_closed_by_the_server_is_replaced_before_use(
    idle_closing: tuple[ServerDatabases, URL], caplog: pytest.LogCaptureFixture
) -> None:
    """The idle check covers the read pool: no read meets the closed connection (none is retried)."""
    servers, url = idle_closing
    with SQLAlchemyStore.open(url) as store:
        chronicum_id = new_chronicum(store)
        assert store.acta(chronicum_id, ActaQuery()) == []
        assert pooled(store.read_engine) == 1
        wait_until_closed(servers, str(url.database))
        with caplog.at_level(logging.WARNING, logger="chronica.sqlalchemy"):
            assert store.get(chronicum_id).owner_id == "ardian"
    assert "lost the connection" not in caplog.text


def test_operation_timeout_bounds_a_pooled_read_connection(
    shared_store: SQLAlchemyStore, database_url: str
) -> None:
    parsed = make_url(database_url)
    with FreezableProxy(parsed.host or "127.0.0.1", parsed.port or 3306) as proxy:
        through = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        with SQLAlchemyStore.open(through, auto_migrate=False, operation_timeout=1) as store:
            chronicum_id = new_chronicum(store)
            assert store.acta(chronicum_id, ActaQuery()) == []  # the read pool holds its connection
            proxy.freeze()
            try:
                with pytest.raises(StoreError, match="OperationTimedOut"):
                    store.acta(chronicum_id, ActaQuery())
            finally:
                proxy.thaw()
            assert store.get(chronicum_id).owner_id == "ardian"


__all__ = ["idle_closing"]  # a fixture this module uses, imported from test_idle_connections
