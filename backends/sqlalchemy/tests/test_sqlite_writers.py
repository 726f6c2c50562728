"""SQLite writers of one process take turns in-process, never in SQLite's busy handler.

The tests take SQLite's busy handler away (``PRAGMA busy_timeout = 0`` on every connection of the
store, after the store's own set-up): a writer that finds the file locked then fails at once with
"database is locked" where it would otherwise have slept in the handler. So "no write failed"
means "no write entered the busy handler", whatever the machine's speed, without timing anything.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import (
    AsyncSQLAlchemyStore,
    AsyncThreadedSQLAlchemyStore,
    SQLAlchemyStore,
    open_async_sqlalchemy_store,
)
from chronica_sqlalchemy.sqlite_writers import WriterQueue, database_file, writer_queue
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, StoreError, open_async_store

WRITERS = 40
WRITES = 5


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def started(chronicum_id: str) -> Chronicum:
    return Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC))


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_id("a"))


def without_busy_handler(engine: Engine) -> None:
    """Give every connection ``engine`` opens from now on no busy handler (runs after the store's set-up)."""

    def connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA busy_timeout = 0")
        finally:
            cursor.close()

    event.listen(engine, "connect", connect)


def contents(url: str, chronicum_id: str) -> list[str]:
    with SQLAlchemyStore.open(url, auto_migrate=False) as store:
        return [actum.content for actum in store.acta(chronicum_id, ActaQuery())]


def expected(writer: int) -> list[str]:
    return [f"{writer}:{write}" for write in range(WRITES)]


@pytest.mark.parametrize("stores", ["one store", "a store per thread"])
def test_forty_writer_threads_never_wait_in_the_busy_handler(tmp_path: Path, stores: str) -> None:
    url = f"sqlite:///{tmp_path / 'threads.db'}"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(url) as first:
        first.create(started(chronicum_id))
    opened = [
        SQLAlchemyStore.open(url, auto_migrate=False) for _ in range(WRITERS if stores != "one store" else 1)
    ]
    for store in opened:
        store.engine.dispose()  # its set-up connection keeps the busy handler: open new ones
        without_busy_handler(store.engine)
    barrier = threading.Barrier(WRITERS)
    failures: list[BaseException] = []

    def write(writer: int) -> None:
        store = opened[writer % len(opened)]
        barrier.wait()
        try:
            for content in expected(writer):
                store.record(message(chronicum_id, content))
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            failures.append(error)

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    assert [str(failure) for failure in failures] == []
    landed = contents(url, chronicum_id)
    assert sorted(landed) == sorted(content for writer in range(WRITERS) for content in expected(writer))
    for writer in range(WRITERS):  # each writer's acta keep its order
        assert [content for content in landed if content.split(":")[0] == str(writer)] == expected(writer)


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
def test_forty_writer_tasks_never_wait_in_the_busy_handler(tmp_path: Path, scheme: str) -> None:
    path = tmp_path / "tasks.db"
    chronica = [new_id() for _ in range(WRITERS)]
    with SQLAlchemyStore.open(f"sqlite:///{path}") as first:
        for chronicum_id in chronica:
            first.create(started(chronicum_id))

    async def scenario() -> list[BaseException | None]:
        async_store = open_async_sqlalchemy_store(f"{scheme}:///{path}", auto_migrate=False)
        engine = async_store.engine  # not connected yet: every connection gets no busy handler
        without_busy_handler(engine.sync_engine if isinstance(engine, AsyncEngine) else engine)

        async def write(writer: int) -> None:
            for content in expected(writer):
                await async_store.record(message(chronica[writer], content))

        try:
            return await asyncio.gather(*(write(writer) for writer in range(WRITERS)), return_exceptions=True)
        finally:
            await async_store.close()

    outcomes = asyncio.run(scenario())
    assert [str(outcome) for outcome in outcomes if outcome is not None] == []
    for writer, chronicum_id in enumerate(chronica):
        assert contents(f"sqlite:///{path}", chronicum_id) == expected(writer)


def test_engines_on_one_file_share_one_queue_and_other_files_have_their_own(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    one, other = tmp_path / "one.db", tmp_path / "other.db"
    with (
        SQLAlchemyStore.open(f"sqlite:///{one}") as blocking,
        SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'here' / '..' / 'one.db'}") as again,
        SQLAlchemyStore.open(f"sqlite:///{other}") as elsewhere,
    ):
        asynchronous = AsyncSQLAlchemyStore.open(f"sqlite+aiosqlite:///{one}")
        threaded = AsyncThreadedSQLAlchemyStore.open(f"sqlite:///{one}")
        queue = writer_queue(blocking.engine)
        assert isinstance(queue, WriterQueue)
        assert queue.path == str(one.resolve())
        assert writer_queue(again.engine) is queue
        assert writer_queue(asynchronous.engine.sync_engine) is queue
        assert writer_queue(threaded.engine) is queue
        assert writer_queue(elsewhere.engine) is not queue
        asyncio.run(asynchronous.close())
        asyncio.run(threaded.close())
    with SQLAlchemyStore.open("sqlite://") as in_memory:
        assert writer_queue(in_memory.engine) is None  # its one connection makes writers take turns


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:shared?mode=memory&uri=true", None),
        ("sqlite:///file::memory:?uri=true", None),
        ("sqlite:////data/chronica.db", "/data/chronica.db"),
        ("sqlite:///file:/data/chronica.db?mode=rwc&uri=true", "/data/chronica.db"),
    ],
)
def test_the_file_a_url_names(url: str, path: str | None) -> None:
    assert database_file(make_url(url)) == path


def test_a_write_that_waits_longer_than_the_busy_timeout_for_its_turn_fails_and_writes_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'timeout.db'}"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(url, busy_timeout="0.05") as store:
        store.create(started(chronicum_id))
        queue = writer_queue(store.engine)
        assert queue is not None
        turn = queue.take(1)  # another writer of this process holds the turn
        assert turn is not None
        try:
            with pytest.raises(StoreError) as refused:
                store.record(message(chronicum_id, "too late"))
        finally:
            turn.give_back()
        assert refused.value.where == "sqlalchemy: record actum"
        assert refused.value.detail == "OperationalError: database is locked"
        assert store.record(message(chronicum_id, "in its turn")).content == "in its turn"
        assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["in its turn"]
        assert not queue.lock.locked()


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
def test_an_async_write_that_waits_longer_than_the_busy_timeout_fails_and_writes_nothing(
    tmp_path: Path, scheme: str
) -> None:
    path = tmp_path / "timeout.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(started(chronicum_id))
        queue = writer_queue(store.engine)
        assert queue is not None

        async def scenario() -> tuple[str, str, str]:
            async with open_async_store(
                f"{scheme}:///{path}", busy_timeout="0.05", auto_migrate=False
            ) as async_store:
                turn = queue.take(1)  # a thread of this process holds the turn
                assert turn is not None
                try:
                    with pytest.raises(StoreError) as refused:
                        await async_store.record(message(chronicum_id, "too late"))
                finally:
                    turn.give_back()
                written = await async_store.record(message(chronicum_id, "in its turn"))
                return refused.value.where, refused.value.detail, written.content

        assert asyncio.run(scenario()) == (
            "sqlalchemy: record actum",
            "OperationalError: database is locked",
            "in its turn",
        )
        assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["in its turn"]
        assert not queue.lock.locked()


def test_cancelled_waiters_leave_the_async_queue_and_never_keep_the_turn(tmp_path: Path) -> None:
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'queue.db'}") as store:
        queue = writer_queue(store.engine)
        assert queue is not None

        async def scenario() -> tuple[list[bool], bool]:
            held = queue.take(1)  # a thread of this process holds the turn
            assert held is not None
            waiters = [asyncio.create_task(queue.take_async(30)) for _ in range(5)]
            for _ in range(5):
                await asyncio.sleep(0)  # the first waits on a thread, the others on the loop's lock
            for waiter in waiters:
                waiter.cancel()
            outcomes = await asyncio.gather(*waiters, return_exceptions=True)
            held.give_back()  # the first waiter's thread may take it now: it gives it back itself
            turn = await queue.take_async(30)
            assert turn is not None
            turn.give_back()
            return [isinstance(outcome, asyncio.CancelledError) for outcome in outcomes], queue.lock.locked()

        assert asyncio.run(scenario()) == ([True] * 5, False)


def test_async_writes_cancelled_in_the_queue_land_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "cancelled.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(started(chronicum_id))
        queue = writer_queue(store.engine)
        assert queue is not None

    async def scenario() -> str:
        async with open_async_store(f"sqlite+aiosqlite:///{path}", busy_timeout="30") as async_store:
            await async_store.record(message(chronicum_id, "first"))
            held = queue.take(1)
            assert held is not None
            try:
                cancelled = [
                    asyncio.create_task(async_store.record(message(chronicum_id, f"cancelled {n}")))
                    for n in range(5)
                ]
                for _ in range(5):
                    await asyncio.sleep(0)  # each write is queued behind the held turn
                for task in cancelled:
                    task.cancel()
                await asyncio.gather(*cancelled, return_exceptions=True)
            finally:
                held.give_back()
            return (await async_store.record(message(chronicum_id, "after"))).content

    assert asyncio.run(scenario()) == "after"
    landed = contents(f"sqlite:///{path}", chronicum_id)
    assert landed[0] == "first"
    assert "after" in landed
    cancelled_ones = [content for content in landed if content.startswith("cancelled")]
    assert len(cancelled_ones) == len(set(cancelled_ones))  # each at most once
    assert set(landed) <= {"first", "after", *(f"cancelled {n}" for n in range(5))}
    assert not queue.lock.locked()
    other = sqlite3.connect(path, timeout=1, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # no write lock left behind
        other.execute("ROLLBACK")
    finally:
        other.close()


_CHILD = textwrap.dedent(
    """
    import sys, uuid
    from chronica_core import Actum, ActorKind, ActumKind
    from chronica_sqlalchemy import SQLAlchemyStore

    url, chronicum_id, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with SQLAlchemyStore.open(url, auto_migrate=False) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        for write in range(count):
            content, actum_id = f"child:{write}", uuid.uuid4().hex
            actum = Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "child", content, id=actum_id)
            store.record(actum)
    """
)


def test_writers_of_two_processes_meet_through_sqlites_own_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'processes.db'}"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(url) as store:
        store.create(started(chronicum_id))
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, url, chronicum_id, "50"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        failures: list[BaseException] = []

        def write(writer: int) -> None:
            try:
                for content in expected(writer):
                    store.record(message(chronicum_id, content))
            except BaseException as error:  # noqa: BLE001 - collected and asserted below
                failures.append(error)

        threads = [threading.Thread(target=write, args=(writer,)) for writer in range(10)]
        child.stdin.write("go\n")
        child.stdin.flush()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert child.wait(timeout=120) == 0
        assert failures == []
        landed = [actum.content for actum in store.acta(chronicum_id, ActaQuery())]
    assert [content for content in landed if content.startswith("child:")] == [
        f"child:{n}" for n in range(50)
    ]
    for writer in range(10):
        assert [content for content in landed if content.split(":")[0] == str(writer)] == expected(writer)
    assert len(landed) == 50 + 10 * WRITES
