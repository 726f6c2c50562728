"""Connections the server closes while they sit idle in the pool are never handed to an operation.

Each test opens a store on a fresh database whose sessions the server closes after a second idle
(MariaDB: ``SET SESSION wait_timeout = 1`` as the driver's ``init_command``; PostgreSQL: libpq
``options=-c idle_session_timeout=1000``), set for the store's own sessions only. It writes, waits
until the server has closed every connection to that database (polling the process list from the
test's own connection), then runs the next operation, which must succeed: reads, keyed writes and
plain writes, blocking and asyncio.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from chronica_sqlalchemy import SQLAlchemyStore, open_async_sqlalchemy_store
from chronica_sqlalchemy.faults import SQLAlchemyFaults
from conftest import ServerDatabases
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    InvalidOption,
    StoreError,
    new_actum_id,
)

WAIT_SECONDS = 60.0
"""How long a test waits for the server to close the store's connections (a guard, not a timing)."""

servers_only = pytest.mark.dialects("mariadb", "postgresql")


@pytest.fixture
def idle_closing(servers: ServerDatabases | None) -> Iterator[tuple[ServerDatabases, URL]]:
    """A fresh database, and a URL to it whose sessions the server closes after one idle second."""
    assert servers is not None
    url = servers.create()
    if servers.dialect == "postgresql":
        closing = url.update_query_dict({"options": "-c idle_session_timeout=1000"})
    else:
        closing = url.update_query_dict({"init_command": "SET SESSION wait_timeout = 1"})
    try:
        yield servers, closing
    finally:
        servers.drop(url)


def wait_until_closed(servers: ServerDatabases, database: str) -> None:
    """Poll the server's process list until no session is connected to ``database``."""
    if servers.dialect == "postgresql":
        query = text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name")
    else:
        query = text("SELECT count(*) FROM information_schema.processlist WHERE db = :name")
    deadline = time.monotonic() + WAIT_SECONDS
    with servers.engine.connect() as watcher:
        while watcher.execute(query, {"name": database}).scalar_one():
            assert time.monotonic() < deadline, "the server did not close the idle connections"
            time.sleep(0.05)


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


@servers_only
@pytest.mark.parametrize("check_idle_after", [3600, 60])
def test_every_operation_after_the_server_closed_idle_connections_succeeds(
    idle_closing: tuple[ServerDatabases, URL], check_idle_after: float
) -> None:
    """3600: the option alone would never check; the server's own timeout, read at connect, does."""
    servers, url = idle_closing
    database = str(url.database)
    chronicum_id = "idle-connections"
    with SQLAlchemyStore.open(url, check_idle_after=check_idle_after) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        first = store.record(message(chronicum_id, "before the pause"))
        wait_until_closed(servers, database)
        second = store.record(message(chronicum_id, "a plain write after the pause"))
        wait_until_closed(servers, database)
        keyed = store.record_idempotent(message(chronicum_id, "a keyed write after the pause"), "k-1")
        wait_until_closed(servers, database)
        assert store.get(chronicum_id).owner_id == "ardian"
        wait_until_closed(servers, database)
        window = store.acta(chronicum_id, ActaQuery())
    assert [actum.id for actum in window] == [first.id, second.id, keyed.id]


@servers_only
def test_every_async_operation_after_the_server_closed_idle_connections_succeeds(
    idle_closing: tuple[ServerDatabases, URL],
) -> None:
    servers, url = idle_closing
    database = str(url.database)
    chronicum_id = "idle-connections"

    async def pause() -> None:
        await asyncio.to_thread(wait_until_closed, servers, database)

    async def scenario() -> list[str]:
        store = open_async_sqlalchemy_store(url)
        try:
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            first = await store.record(message(chronicum_id, "before the pause"))
            await pause()
            second = await store.record(message(chronicum_id, "a plain write after the pause"))
            await pause()
            keyed = await store.record_idempotent(message(chronicum_id, "keyed, after the pause"), "k-1")
            await pause()
            assert (await store.get(chronicum_id)).owner_id == "ardian"
            await pause()
            window = await store.acta(chronicum_id, ActaQuery())
            assert [actum.id for actum in window] == [first.id, second.id, keyed.id]
            return [actum.content for actum in window]
        finally:
            await store.close()

    assert asyncio.run(scenario())[1] == "a plain write after the pause"


@pytest.fixture
def fresh(servers: ServerDatabases | None) -> Iterator[tuple[ServerDatabases, URL]]:
    """A fresh database whose sessions the server keeps open while idle."""
    assert servers is not None
    url = servers.create()
    try:
        yield servers, url
    finally:
        servers.drop(url)


def kill_connections(servers: ServerDatabases, database: str) -> None:
    """From another session, have the server close every connection to ``database``; wait till gone."""
    if servers.dialect == "postgresql":
        kill = text(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = :name AND pid <> pg_backend_pid()"
        )
        with servers.engine.connect() as killer:
            assert killer.execute(kill, {"name": database}).all(), "the store has no connection"
    else:
        find = text(
            "SELECT id FROM information_schema.processlist WHERE db = :name AND id <> CONNECTION_ID()"
        )
        with servers.engine.connect() as killer:
            ids = killer.execute(find, {"name": database}).scalars().all()
            assert ids, "the store has no connection"
            for thread_id in ids:
                killer.execute(text(f"KILL CONNECTION {int(thread_id)}"))
    wait_until_closed(servers, database)


@servers_only
def test_a_plain_write_after_the_server_killed_the_idle_connection_succeeds(
    fresh: tuple[ServerDatabases, URL],
) -> None:
    """Idle far less than check_idle_after: the closed socket alone says the connection is gone."""
    servers, url = fresh
    chronicum_id = "killed"
    with SQLAlchemyStore.open(url, check_idle_after=3600) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        first = store.record(message(chronicum_id, "before the kill"))
        kill_connections(servers, str(url.database))
        second = store.record(message(chronicum_id, "a plain write after the kill"))
        assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [first.id, second.id]


@servers_only
def test_an_async_plain_write_after_the_server_killed_the_idle_connection_succeeds(
    fresh: tuple[ServerDatabases, URL],
) -> None:
    servers, url = fresh
    chronicum_id = "killed"

    async def scenario() -> list[str]:
        store = open_async_sqlalchemy_store(url, check_idle_after=3600)
        try:
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            first = await store.record(message(chronicum_id, "before the kill"))
            await asyncio.to_thread(kill_connections, servers, str(url.database))
            second = await store.record(message(chronicum_id, "a plain write after the kill"))
            window = await store.acta(chronicum_id, ActaQuery())
            assert [actum.id for actum in window] == [first.id, second.id]
            return [actum.content for actum in window]
        finally:
            await store.close()

    assert asyncio.run(scenario())[1] == "a plain write after the kill"


@pytest.mark.dialects("postgresql")  # MariaDB/MySQL engines ping at every checkout (pool_pre_ping)
def test_a_busy_pool_is_not_pinged(
    idle_closing: tuple[ServerDatabases, URL], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections used again within their idle limit cost no extra round trip."""
    _, url = idle_closing
    pings: list[object] = []
    with SQLAlchemyStore.open(url) as store:
        store.create(Chronicum("busy", "ardian", datetime.now(UTC)))
        monkeypatch.setattr(store.engine.dialect, "do_ping", pings.append)
        for index in range(10):
            store.record(message("busy", f"busy {index}"))
        assert len(store.acta("busy", ActaQuery())) == 10
    assert pings == []


@pytest.mark.parametrize("value", [-1, 86_401, float("nan"), "soon", True])
def test_check_idle_after_is_range_checked(value: object) -> None:
    with pytest.raises(InvalidOption) as raised:
        SQLAlchemyStore.open(make_url("sqlite://"), check_idle_after=value)
    assert raised.value.option == "check_idle_after"
    assert "from 0 to 86400" in str(raised.value)


@servers_only
def test_reads_and_keyed_writes_are_tried_again_after_a_lost_connection_plain_writes_not(
    store: SQLAlchemyStore, chronica_driver_faults: SQLAlchemyFaults, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection may die unseen (a proxy's timeout): the safe operations are repeated once,
    each repeat logged as a WARNING of ``chronica.sqlalchemy``."""
    caplog.set_level(logging.WARNING, logger="chronica")
    chronicum_id = f"lost-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    # connected before the faults (MariaDB reads on an engine of their own): a connection's
    # first statements (SQLAlchemy's SELECT DATABASE() and the like) are connecting, not a read
    assert store.get(chronicum_id).owner_id == "ardian"
    with chronica_driver_faults.inject(store, "connection_reset", times=1) as injection:
        keyed = store.record_idempotent(message(chronicum_id, "keyed"), "k-1")
    assert len(injection.raised) == 1
    with chronica_driver_faults.inject(store, "connection_reset", times=1) as injection:
        assert store.get(chronicum_id).owner_id == "ardian"
    assert len(injection.raised) == 1
    with chronica_driver_faults.inject(store, "connection_reset", times=1) as injection:
        assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [keyed.id]
    assert len(injection.raised) == 1
    with (
        chronica_driver_faults.inject(store, "connection_reset", times=1) as injection,
        pytest.raises(StoreError) as raised,
    ):
        store.record(message(chronicum_id, "plain"))
    assert raised.value.__cause__ is not None
    assert raised.value.__cause__.__cause__ is injection.raised[0]
    assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [keyed.id]
    retries = [record for record in caplog.records if record.name == "chronica.sqlalchemy"]
    assert [record.levelname for record in retries] == ["WARNING"] * 3
    assert all(
        record.getMessage().endswith("; trying the read or keyed write once more on a new one")
        and record.getMessage().startswith("lost the connection (")
        for record in retries
    )
