"""Connections the server closes while they sit idle in the pool are never handed to an operation.

Each test sets PostgreSQL's ``idle_session_timeout`` low for the store's own sessions only (libpq
``options`` in the URL), writes, waits until the server has closed every connection of the store
(polling ``pg_stat_activity`` from another connection, by the store's ``application_name``), then
runs the next operation, which must succeed: reads, keyed writes and plain writes, both flavours.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import psycopg
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_postgres.faults import PsycopgFaults
from psycopg_pool import ConnectionPool

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
from chronica_core.idle import idle_limit

WAIT_SECONDS = 60.0
"""How long a test waits for the server to close the store's connections (a guard, not a timing)."""


def idle_closing_url(url: str, application_name: str, timeout_ms: int = 1000) -> str:
    """``url`` whose sessions the server closes after ``timeout_ms`` idle milliseconds."""
    parts = urlsplit(url)
    extra = urlencode(
        {"options": f"-c idle_session_timeout={timeout_ms}", "application_name": application_name},
        quote_via=quote,
    )
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit(parts._replace(query=query))


def wait_until_closed(postgres_url: str, application_name: str) -> None:
    """Poll ``pg_stat_activity`` until no session of ``application_name`` is left."""
    deadline = time.monotonic() + WAIT_SECONDS
    with psycopg.connect(postgres_url, autocommit=True) as watcher:
        while True:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application_name,)
            ).fetchone()
            assert row is not None
            if row[0] == 0:
                return
            assert time.monotonic() < deadline, "the server did not close the idle connections"
            time.sleep(0.05)


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


@pytest.mark.parametrize("check_idle_after", [3600, 0.5])
def test_every_operation_after_the_server_closed_idle_connections_succeeds(
    postgres_url: str, schema: str, check_idle_after: float
) -> None:
    """Whether the dead connection is found by its socket (3600) or by its idle time (0.5 s)."""
    name = f"chronica-idle-{uuid.uuid4().hex[:12]}"
    url = idle_closing_url(postgres_url, name)
    chronicum_id = f"idle-{uuid.uuid4().hex}"
    with PostgresStore(url, schema=schema, check_idle_after=check_idle_after, max_size=2) as store:
        store.create(Chronicum(chronicum_id, "ardian", time_now()))
        first = store.record(message(chronicum_id, "before the pause"))
        wait_until_closed(postgres_url, name)
        second = store.record(message(chronicum_id, "a plain write after the pause"))
        wait_until_closed(postgres_url, name)
        keyed = store.record_idempotent(message(chronicum_id, "a keyed write after the pause"), "k-1")
        wait_until_closed(postgres_url, name)
        assert store.get(chronicum_id).last_actum_at == keyed.at
        wait_until_closed(postgres_url, name)
        window = store.acta(chronicum_id, ActaQuery())
    assert [actum.id for actum in window] == [first.id, second.id, keyed.id]


def test_every_async_operation_after_the_server_closed_idle_connections_succeeds(
    postgres_url: str, schema: str
) -> None:
    name = f"chronica-idle-{uuid.uuid4().hex[:12]}"
    url = idle_closing_url(postgres_url, name)
    chronicum_id = f"idle-{uuid.uuid4().hex}"

    async def pause() -> None:
        await asyncio.to_thread(wait_until_closed, postgres_url, name)

    async def scenario() -> list[str]:
        store = AsyncPostgresStore(url, schema=schema, max_size=2)
        try:
            await store.create(Chronicum(chronicum_id, "ardian", time_now()))
            first = await store.record(message(chronicum_id, "before the pause"))
            await pause()
            second = await store.record(message(chronicum_id, "a plain write after the pause"))
            await pause()
            keyed = await store.record_idempotent(message(chronicum_id, "keyed, after the pause"), "k-1")
            await pause()
            assert (await store.get(chronicum_id)).last_actum_at == keyed.at
            await pause()
            window = await store.acta(chronicum_id, ActaQuery())
            assert [actum.id for actum in window] == [first.id, second.id, keyed.id]
            return [actum.content for actum in window]
        finally:
            await store.close()

    assert asyncio.run(scenario())[1] == "a plain write after the pause"


def test_a_busy_pool_is_not_checked(postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections used again within ``check_idle_after`` cost no extra round trip."""
    name = f"chronica-busy-{uuid.uuid4().hex[:12]}"
    url = idle_closing_url(postgres_url, name, timeout_ms=0)
    chronicum_id = f"busy-{uuid.uuid4().hex}"
    with PostgresStore(url, schema=schema, max_size=1) as store:
        store.create(Chronicum(chronicum_id, "ardian", time_now()))
        checks: list[object] = []
        original = ConnectionPool.check_connection

        def counted(connection: Any) -> None:
            checks.append(connection)
            original(connection)

        monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted))
        for index in range(20):
            store.record(message(chronicum_id, f"busy {index}"))
        assert len(store.acta(chronicum_id, ActaQuery())) == 20
    assert checks == []


@pytest.mark.parametrize("value", [-1, 86_401, float("nan"), float("inf"), "soon", True])
def test_check_idle_after_is_range_checked(postgres_url: str, value: object) -> None:
    with pytest.raises(InvalidOption) as raised:
        PostgresStore(postgres_url, check_idle_after=value)
    assert raised.value.option == "check_idle_after"
    assert "from 0 to 86400" in str(raised.value)


def test_the_server_idle_timeout_shortens_the_idle_limit() -> None:
    assert idle_limit(60, 1.0) == 0.5
    assert idle_limit(60, 0) == 60
    assert idle_limit(60, None) == 60
    assert idle_limit(1, 600) == 1


def time_now() -> datetime:
    return datetime.now(UTC)


def lost_once(faults: PsycopgFaults, store: PostgresStore | AsyncPostgresStore) -> Any:
    """The next statement of ``store`` fails as if the server had closed its connection."""
    return faults.inject(store, "connection_reset", times=1)


def test_reads_and_keyed_writes_are_tried_again_after_a_lost_connection_plain_writes_not(
    store: PostgresStore, chronica_driver_faults: PsycopgFaults, caplog: pytest.LogCaptureFixture
) -> None:
    """A connection may die unseen (a proxy's timeout): the safe operations are repeated once,
    each repeat logged as a WARNING of ``chronica.postgres``."""
    caplog.set_level(logging.WARNING, logger="chronica")
    chronicum_id = f"lost-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", time_now()))
    with lost_once(chronica_driver_faults, store) as injection:
        keyed = store.record_idempotent(message(chronicum_id, "keyed"), "k-1")
    assert len(injection.raised) == 1
    with lost_once(chronica_driver_faults, store) as injection:
        assert store.get(chronicum_id).last_actum_at == keyed.at
    assert len(injection.raised) == 1
    with lost_once(chronica_driver_faults, store) as injection:
        assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [keyed.id]
    retries = [record for record in caplog.records if record.name == "chronica.postgres"]
    assert [record.levelname for record in retries] == ["WARNING"] * 3
    assert all(
        record.getMessage().endswith("; trying the read or keyed write once more on a new one")
        and record.getMessage().startswith("lost the connection (")
        for record in retries
    )
    assert len(injection.raised) == 1
    with lost_once(chronica_driver_faults, store) as injection, pytest.raises(StoreError) as raised:
        store.record(message(chronicum_id, "plain"))
    assert raised.value.__cause__ is injection.raised[0]
    assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [keyed.id]


def test_async_reads_and_keyed_writes_are_tried_again_after_a_lost_connection(
    async_store: AsyncPostgresStore, chronica_driver_faults: PsycopgFaults
) -> None:
    chronicum_id = f"lost-{uuid.uuid4().hex}"

    async def scenario() -> list[str]:
        try:
            await async_store.create(Chronicum(chronicum_id, "ardian", time_now()))
            with lost_once(chronica_driver_faults, async_store) as injection:
                keyed = await async_store.record_idempotent(message(chronicum_id, "keyed"), "k-1")
            assert len(injection.raised) == 1
            with lost_once(chronica_driver_faults, async_store):
                assert (await async_store.get(chronicum_id)).last_actum_at == keyed.at
            with lost_once(chronica_driver_faults, async_store), pytest.raises(StoreError):
                await async_store.record(message(chronicum_id, "plain"))
            with lost_once(chronica_driver_faults, async_store) as injection:
                window = await async_store.acta(chronicum_id, ActaQuery())
            assert len(injection.raised) == 1
            return [actum.id for actum in window]
        finally:
            await async_store.close()

    assert len(asyncio.run(scenario())) == 1
