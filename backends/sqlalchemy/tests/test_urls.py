"""The URL a user types: its scheme in any case, the driver's own query parameters, SQLite read-only."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy.engine import make_url

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    StoreError,
    new_actum_id,
    open_async_store,
    open_store,
)

DRIVER_PARAMETERS = {
    "sqlite": "timeout=5&cached_statements=10",
    "aiosqlite": "timeout=5&check_same_thread=false",
    "mariadb": "connect_timeout=5&program_name=chronica-urls",
    "postgresql": "sslmode=disable&application_name=chronica-urls&keepalives=1",
}


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def write_then_read(url: str) -> list[str]:
    """Record an actum through a blocking store on ``url`` and read it through an asyncio one."""
    chronicum_id = f"urls-{uuid.uuid4().hex}"
    with open_store(url, auto_migrate=False) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        store.record(message(chronicum_id, "hi"))

    async def read() -> list[str]:
        async_store = open_async_store(url, auto_migrate=False)
        try:
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    return asyncio.run(read())


def test_a_scheme_in_upper_case_opens_the_same_database(shared_store: object, database_url: str) -> None:
    scheme, rest = database_url.split("://", 1)
    assert write_then_read(f"{scheme.upper()}://{rest}") == ["hi"]


def test_the_drivers_own_query_parameters_still_open_the_store(
    shared_store: object, dialect: str, database_url: str
) -> None:
    assert write_then_read(f"{database_url}?{DRIVER_PARAMETERS[dialect]}") == ["hi"]


@pytest.mark.dialects("sqlite", "aiosqlite")
def test_a_sqlite_file_opened_read_only_reads_and_refuses_writes(
    shared_store: object, database_url: str
) -> None:
    chronicum_id = f"urls-{uuid.uuid4().hex}"
    with open_store(database_url) as store:
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        store.record(message(chronicum_id, "written before"))
    url = make_url(database_url)
    read_only = f"{url.drivername}:///file:{url.database}?mode=ro&uri=true"

    with open_store(read_only) as store:
        assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["written before"]
        with pytest.raises(StoreError, match="readonly database") as raised:
            store.record(message(chronicum_id, "refused"))
        assert raised.value.__cause__ is not None

    async def asynchronously() -> list[str]:
        async_store = open_async_store(read_only)
        try:
            with pytest.raises(StoreError, match="readonly database"):
                await async_store.record(message(chronicum_id, "refused"))
            return [actum.content for actum in await async_store.acta(chronicum_id, ActaQuery())]
        finally:
            await async_store.close()

    assert asyncio.run(asynchronously()) == ["written before"]


FAILED_OPENS = 20
"""How many failed opens the thread test makes: before the fix, most left a dying thread."""


@pytest.mark.dialects("aiosqlite")
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_database_aiosqlite_cannot_open_leaves_no_thread_behind_its_loop(
    monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """Each open fails in its own ``asyncio.run``; no driver thread outlives (or reports to) a closed loop."""
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: died.append(hook.exc_value))
    url = f"{make_url(database_url).drivername}:////nonexistent-folder/chronica.db"

    async def first_use() -> str:
        store = open_async_store(url)
        try:
            await store.get("never-there")
        except StoreError as error:
            return error.detail
        finally:
            await store.close()
        raise AssertionError(f"{url} opened")

    before = set(threading.enumerate())
    started: set[threading.Thread] = set()
    for _ in range(FAILED_OPENS):
        assert "unable to open database file" in asyncio.run(first_use())
        started |= set(threading.enumerate()) - before
    for thread in started:
        thread.join(timeout=30)
    assert died == []
    assert [thread.name for thread in started if thread.is_alive()] == []
