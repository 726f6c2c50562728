"""Following on every dialect: one watcher per store, for blocking and asyncio followers alike, that
stops when its last follower leaves; on PostgreSQL it listens, and reconnects after a lost connection.

Each test opens a store of its own on the session database (the shared store's watcher belongs
to other tests). The loops that wait for a follower or a watcher to reach a state are guards with
a deadline, not timing assertions.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from chronica_sqlalchemy import AsyncSQLAlchemyStore, AsyncThreadedSQLAlchemyStore, SQLAlchemyStore
from chronica_sqlalchemy.follow import WATCHER_NAME, Watcher
from sqlalchemy import Engine, event, text
from sqlalchemy.engine import make_url

from chronica_core import ActorKind, Actum, ActumKind, AsyncChronicarius, Chronicarius, ChronicumNotFound
from chronica_core.capabilities import FOLLOW, store_capabilities

GUARD_SECONDS = 30.0
OWNER = "ardian"


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {GUARD_SECONDS} s for {what}")
        time.sleep(0.01)


def _said(chronicum_id: str, content: str, actor: str = "booking") -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, actor, content)


def _waiting(watcher: Watcher | None, chronicum_id: str) -> bool:
    return watcher is not None and bool(watcher._wakers.get(chronicum_id))


@pytest.fixture
def own_store(database_url: str, shared_store: SQLAlchemyStore) -> Iterator[SQLAlchemyStore]:
    """A blocking store of the test's own on the session database (migrated by the shared one)."""
    store = SQLAlchemyStore.open(database_url, auto_migrate=False)
    try:
        yield store
    finally:
        store.close()


def _follow_in_thread(
    store: SQLAlchemyStore, chronicum_id: str, after: str, count: int
) -> tuple[threading.Thread, list[str]]:
    got: list[str] = []
    follower = Chronicarius(store).follow(OWNER, chronicum_id, after=after, timeout=GUARD_SECONDS)

    def follow() -> None:
        for actum in follower:
            got.append(actum.content)
            if len(got) == count:
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    return thread, got


def test_the_watcher_stops_when_its_last_follower_leaves_and_starts_again(own_store: SQLAlchemyStore) -> None:
    store = own_store
    chronicum_id = f"stop-{uuid.uuid4().hex}"
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum(OWNER, _said(chronicum_id, "hello"))
    follower, got = _follow_in_thread(store, chronicum_id, first.id, 1)
    _until(lambda: _waiting(store._watcher, chronicum_id), "the follower waiting")
    watcher = store._watcher
    assert watcher is not None and watcher.running
    watching = watcher._thread
    assert watching is not None and watching.name == WATCHER_NAME
    chronicarius.record_actum(OWNER, _said(chronicum_id, "one"))
    follower.join(GUARD_SECONDS)
    assert got == ["one"]

    watching.join(GUARD_SECONDS)  # the last follower left: the thread ends on its own
    assert not watching.is_alive()
    assert not watcher.running
    assert store.engine.pool.checkedout() == 0  # its connection went back (or was closed)
    by_the_watcher: list[str] = []

    def seen(connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if threading.current_thread().name == WATCHER_NAME:
            by_the_watcher.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        second = chronicarius.record_actum(OWNER, _said(chronicum_id, "two"))  # nobody follows: no probe
        assert by_the_watcher == []
        follower, got = _follow_in_thread(store, chronicum_id, second.id, 1)
        _until(lambda: _waiting(watcher, chronicum_id), "the next follower waiting")
        assert watcher.running  # started again by the wait
        chronicarius.record_actum(OWNER, _said(chronicum_id, "three"))
        follower.join(GUARD_SECONDS)
        assert got == ["three"]
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)


def test_the_asyncio_stores_have_the_follow_capability(
    async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore,
) -> None:
    assert FOLLOW in store_capabilities(async_store)

    async def close() -> None:
        await async_store.close()

    asyncio.run(close())


def test_asyncio_followers_on_two_loops_share_one_watcher_and_read_nothing_while_idle(
    async_store: AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore, store: SQLAlchemyStore
) -> None:
    """Two loops (threads) follow one chronicum each; while one is idle, only the other reads."""
    idle_id, busy_id = f"idle-{uuid.uuid4().hex}", f"busy-{uuid.uuid4().hex}"
    writer = Chronicarius(store)
    idle_first = writer.record_actum(OWNER, _said(idle_id, "hello"))
    busy_first = writer.record_actum(OWNER, _said(busy_id, "hello"))
    idle_reads: list[str] = []

    def seen(connection: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        # any engine: a second loop's engine is a new one; the watcher's probes do not count
        if idle_id in repr(parameters) and threading.current_thread().name != WATCHER_NAME:
            idle_reads.append(statement)

    got: dict[str, list[str]] = {idle_id: [], busy_id: []}

    def follow(chronicum_id: str, after: str, count: int) -> None:
        async def run() -> None:
            follower = AsyncChronicarius(async_store).follow(OWNER, chronicum_id, after=after)
            async for actum in follower:
                got[chronicum_id].append(actum.content)
                if len(got[chronicum_id]) == count:
                    break

        asyncio.run(asyncio.wait_for(run(), GUARD_SECONDS))

    threads = [
        threading.Thread(target=follow, args=(idle_id, idle_first.id, 1), daemon=True),
        threading.Thread(target=follow, args=(busy_id, busy_first.id, 10), daemon=True),
    ]
    watchers_before = sum(thread.name == WATCHER_NAME for thread in threading.enumerate())
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        for thread in threads:
            thread.start()
        _until(
            lambda: _waiting(async_store._watcher, idle_id) and _waiting(async_store._watcher, busy_id),
            "both followers waiting",
        )
        busy = [f"busy {number}" for number in range(10)]
        for content in busy:
            writer.record_actum(OWNER, _said(busy_id, content))
        threads[1].join(GUARD_SECONDS)
        assert got[busy_id] == busy
        # The idle follower's own reads: the chronicum, its first read and its wait's check, and
        # at most one wake-up (the watcher's first look at a chronicum newly followed), which,
        # bringing nothing, costs a read, a pause, a read and a check: however many acta the
        # other follower got (each waking it would cost at least two reads).
        assert len(idle_reads) <= 6, [statement.split()[:6] for statement in idle_reads]
        assert sum(thread.name == WATCHER_NAME for thread in threading.enumerate()) <= watchers_before + 1
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    writer.record_actum(OWNER, _said(idle_id, "news"))
    threads[0].join(GUARD_SECONDS)
    assert got[idle_id] == ["news"]

    async def close() -> None:
        await async_store.close()

    asyncio.run(close())


# --- PostgreSQL: LISTEN/NOTIFY ------------------------------------------------------------------


def _listening_pids(store: SQLAlchemyStore, application_name: str) -> list[int]:
    """The server processes of ``application_name``'s connections that listen (only the test's own)."""
    with store.engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = :name AND query LIKE 'LISTEN %'"
            ),
            {"name": application_name},
        ).all()
    return [int(row[0]) for row in rows]


@pytest.mark.dialects("postgresql")
def test_postgresql_appends_and_erasures_notify_when_they_commit(
    dialect: str, store: SQLAlchemyStore
) -> None:
    chronicum_id, other_id = f"notify-{uuid.uuid4().hex}", f"notify-{uuid.uuid4().hex}"
    url = store.engine.url.set(drivername="postgresql")
    chronicarius = Chronicarius(store)
    chronicarius.record_actum(OWNER, _said(chronicum_id, "hello"))
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f'LISTEN "{store.plans.channel}"')
        with pytest.raises(ChronicumNotFound):
            store.record(_said(f"missing-{uuid.uuid4().hex}", "lost"))  # no row locked: no notification
        chronicarius.record_actum(OWNER, _said(chronicum_id, "one"))
        chronicarius.record_acta(OWNER, [_said(other_id, "a"), _said(other_id, "b")])
        chronicarius.erase_chronicum(OWNER, chronicum_id)
        notifications = listener.notifies(timeout=GUARD_SECONDS, stop_after=3)
        payloads = [notification.payload for notification in notifications]
    assert payloads == [chronicum_id, other_id, chronicum_id]


@pytest.mark.dialects("postgresql")
def test_postgresql_one_listener_reconnects_and_the_follower_gets_every_actum_once(
    dialect: str, database_url: str, shared_store: SQLAlchemyStore
) -> None:
    application_name = f"chronica-listener-{uuid.uuid4().hex[:8]}"
    url = make_url(database_url).update_query_dict({"application_name": application_name})
    store = SQLAlchemyStore.open(url, auto_migrate=False)
    try:
        chronicum_id = f"reconnect-{uuid.uuid4().hex}"
        writer = Chronicarius(shared_store)
        first = writer.record_actum(OWNER, _said(chronicum_id, "hello"))
        follower, got = _follow_in_thread(store, chronicum_id, first.id, 4)
        second, second_got = _follow_in_thread(store, chronicum_id, first.id, 4)
        _until(lambda: len(_listening_pids(store, application_name)) == 1, "the store's one listener")
        lost = _listening_pids(store, application_name)
        writer.record_actum(OWNER, _said(chronicum_id, "one"))
        _until(lambda: got == ["one"] and second_got == ["one"], "the first actum")
        with shared_store.engine.connect() as connection:  # only the test's own listener
            ended = connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": lost[0]}).scalar()
        assert ended is True
        writer.record_actum(OWNER, _said(chronicum_id, "two"))  # while it may not listen
        _until(
            lambda: (pids := _listening_pids(store, application_name)) != [] and pids != lost,
            "the listener connecting again",
        )
        writer.record_actum(OWNER, _said(chronicum_id, "three"))
        writer.record_actum(OWNER, _said(chronicum_id, "four"))
        follower.join(GUARD_SECONDS)
        second.join(GUARD_SECONDS)
        assert got == ["one", "two", "three", "four"]
        assert second_got == ["one", "two", "three", "four"]
        assert len(_listening_pids(store, application_name)) == 1
    finally:
        store.close()
