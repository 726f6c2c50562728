"""Following on PostgreSQL: ``LISTEN``/``NOTIFY``, one listening connection per store, and a lost
listening connection costing no gap.

Every follower here waits on the real server, in a schema of its own (whose channel no other
test's store listens on); the writers are other stores (other connections, as another process
would be). The loops that wait for the server to reach a state are guards
with a deadline, not timing assertions.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable

import psycopg
import psycopg.sql
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_postgres.schema import follow_channel

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, AsyncChronicarius, Chronicarius

GUARD_SECONDS = 30.0
"""How long a test waits for the server or the followers before it fails as hung."""


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", content)


def _listening_pids(postgres_url: str, schema: str) -> list[int]:
    """The server processes whose last statement was the LISTEN on the schema's channel."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE query = %s ORDER BY pid",
            (f'LISTEN "{follow_channel(schema)}"',),
        ).fetchall()
    return [int(row[0]) for row in rows]


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {GUARD_SECONDS} s for {what}")
        time.sleep(0.01)


def _waiters(store: PostgresStore, chronicum_id: str) -> int:
    listener = store._listener
    return 0 if listener is None else len(listener._waiters.get(chronicum_id, ()))


def test_many_followers_share_one_listening_connection(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    followed, writer = make_store(schema=fresh_schema), make_store(schema=fresh_schema)
    owner, chronicum_id = "ardian", f"follow-{uuid.uuid4().hex}"
    first = Chronicarius(writer).record_actum(owner, _message(chronicum_id, "first"))
    chronicarius = Chronicarius(followed)
    received: list[list[str]] = [[] for _ in range(20)]

    def follow(index: int) -> None:
        for actum in chronicarius.follow(owner, chronicum_id, after=first.id, timeout=GUARD_SECONDS):
            received[index].append(actum.content)
            if len(received[index]) == 2:
                return

    threads = [threading.Thread(target=follow, args=(index,), daemon=True) for index in range(20)]
    for thread in threads:
        thread.start()
    _until(lambda: _waiters(followed, chronicum_id) == 20, "20 followers waiting")
    _until(lambda: bool(_listening_pids(postgres_url, fresh_schema)), "the listener listening")
    assert len(_listening_pids(postgres_url, fresh_schema)) == 1
    Chronicarius(writer).record_actum(owner, _message(chronicum_id, "second"))
    Chronicarius(writer).record_actum(owner, _message(chronicum_id, "third"))
    for thread in threads:
        thread.join(GUARD_SECONDS)
    assert received == [["second", "third"]] * 20


def test_a_lost_listening_connection_costs_no_gap(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    followed, writer = make_store(schema=fresh_schema), make_store(schema=fresh_schema)
    owner, chronicum_id = "ardian", f"follow-lost-{uuid.uuid4().hex}"
    writing = Chronicarius(writer)
    first = writing.record_actum(owner, _message(chronicum_id, "first"))
    received: list[str] = []
    follower = Chronicarius(followed).follow(owner, chronicum_id, after=first.id, timeout=GUARD_SECONDS)

    def follow() -> None:
        for actum in follower:
            received.append(actum.content)
            if len(received) == 6:
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    _until(lambda: _waiters(followed, chronicum_id) == 1, "the follower waiting")
    _until(lambda: bool(_listening_pids(postgres_url, fresh_schema)), "the listener listening")
    (lost,) = _listening_pids(postgres_url, fresh_schema)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (lost,))
    for index in range(3):  # written while the listener is down or reconnecting
        writing.record_actum(owner, _message(chronicum_id, f"during-{index}"))
    _until(
        lambda: _listening_pids(postgres_url, fresh_schema) not in ([], [lost]), "the listener to reconnect"
    )
    for index in range(3):
        writing.record_actum(owner, _message(chronicum_id, f"after-{index}"))
    thread.join(GUARD_SECONDS)
    assert received == ["during-0", "during-1", "during-2", "after-0", "after-1", "after-2"]


def test_asyncio_followers_share_one_listening_connection_per_loop(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    writer = make_store(schema=fresh_schema)
    owner, chronicum_id = "ardian", f"follow-async-{uuid.uuid4().hex}"
    first = Chronicarius(writer).record_actum(owner, _message(chronicum_id, "first"))

    async def main() -> tuple[list[list[str]], int, list[str]]:
        async with AsyncPostgresStore(postgres_url, schema=fresh_schema) as store:
            chronicarius = AsyncChronicarius(store)

            async def follow() -> list[str]:
                got: list[str] = []
                async for actum in chronicarius.follow(owner, chronicum_id, after=first.id):
                    got.append(actum.content)
                    if len(got) == 1:
                        return got
                return got

            tasks = [asyncio.create_task(follow()) for _ in range(50)]
            listeners = store._listeners
            deadline = time.monotonic() + GUARD_SECONDS
            while (
                listeners is None
                or not listeners
                or sum(
                    len(waiting) for listener in listeners.values() for waiting in listener._waiters.values()
                )
                < 50
            ):
                assert time.monotonic() < deadline, "the followers did not all wait"
                await asyncio.sleep(0.01)
                listeners = store._listeners
            while not await asyncio.to_thread(_listening_pids, postgres_url, fresh_schema):
                assert time.monotonic() < deadline, "the listener did not listen"
                await asyncio.sleep(0.01)
            listening = len(await asyncio.to_thread(_listening_pids, postgres_url, fresh_schema))
            await asyncio.to_thread(
                Chronicarius(writer).record_actum, owner, _message(chronicum_id, "second")
            )
            async with asyncio.timeout(GUARD_SECONDS):
                received = await asyncio.gather(*tasks)
        left = [task.get_name() for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        return received, listening, left

    received, listening, left = asyncio.run(main())
    assert listening == 1
    assert received == [["second"]] * 50
    assert left == []  # closing the store ended its listener


def test_a_store_without_notify_notifies_nobody_and_its_followers_poll(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    """``notify=False``: no append nor erasure notifies; a follower still gets every actum, by reading.

    PostgreSQL delivers one session's notifications in commit order, so a listener whose first
    notification names the chronicum written last (by a notifying store) saw none from the
    silent store's writes, all committed before it.
    """
    silent, notifying = make_store(schema=fresh_schema, notify=False), make_store(schema=fresh_schema)
    owner = "ardian"
    quiet_id, loud_id = f"quiet-{uuid.uuid4().hex}", f"loud-{uuid.uuid4().hex}"
    writing = Chronicarius(silent)
    Chronicarius(notifying).record_actum(owner, _message(loud_id, "created"))
    _mark_by_waiting(notifying, loud_id)  # followed: its appends notify
    writing.record_actum(owner, _message(quiet_id, "created"))
    _mark_by_waiting(notifying, quiet_id)  # followed too: only notify=False keeps its appends silent
    with psycopg.connect(postgres_url, autocommit=True) as listening:
        listening.execute(f'LISTEN "{follow_channel(fresh_schema)}"')
        writing.record_actum(owner, _message(quiet_id, "plain"))
        writing.record_actum(owner, _message(quiet_id, "keyed"), idempotency_key="key-1")
        writing.record_acta(owner, [_message(quiet_id, "batch 1"), _message(quiet_id, "batch 2")])
        erased_id = f"quiet-erased-{uuid.uuid4().hex}"
        writing.record_actum(owner, _message(erased_id, "to erase"))
        assert writing.erase_chronicum(owner, erased_id) == 1
        Chronicarius(notifying).record_actum(owner, _message(loud_id, "loud"))
        first = next(listening.notifies(timeout=GUARD_SECONDS, stop_after=1))
    assert first.payload == loud_id

    received: list[str] = []
    follower = Chronicarius(silent).follow(owner, quiet_id, timeout=GUARD_SECONDS)  # position: now

    def follow() -> None:
        for actum in follower:
            received.append(actum.content)
            if len(received) == 2:
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    writing.record_actum(owner, _message(quiet_id, "later 1"))
    writing.record_actum(owner, _message(quiet_id, "later 2"))
    thread.join(GUARD_SECONDS)
    assert received == ["later 1", "later 2"]
    assert silent._listener is None  # it never listened


def test_an_asyncio_store_without_notify_follows_by_reading(postgres_url: str, fresh_schema: str) -> None:
    async def scenario() -> list[str]:
        store = AsyncPostgresStore(postgres_url, schema=fresh_schema, notify=False)
        try:
            chronicarius = AsyncChronicarius(store)
            owner, chronicum_id = "ardian", f"quiet-async-{uuid.uuid4().hex}"
            first = await chronicarius.record_actum(owner, _message(chronicum_id, "first"))
            follower = chronicarius.follow(owner, chronicum_id, after=first.id)

            async def two() -> list[str]:
                return [(await anext(follower)).content, (await anext(follower)).content]

            reading = asyncio.create_task(two())
            await chronicarius.record_actum(owner, _message(chronicum_id, "second"))
            await chronicarius.record_actum(owner, _message(chronicum_id, "third"))
            async with asyncio.timeout(GUARD_SECONDS):
                received = await reading
            assert store._listeners is None  # it never listened
            return received
        finally:
            await store.close()

    assert asyncio.run(scenario()) == ["second", "third"]


# -- only followed chronica notify ----------------------------------------------------------------


def _followed_for(postgres_url: str, schema: str, chronicum_id: str) -> float | None:
    """Seconds from the server's now until the chronicum's ``followed_until`` (None: never followed)."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        row = connection.execute(
            psycopg.sql.SQL(
                "SELECT extract(epoch FROM followed_until - now())::float8 FROM {}.chronica WHERE id = %s"
            ).format(psycopg.sql.Identifier(schema)),
            (chronicum_id,),
        ).fetchone()
    assert row is not None, chronicum_id
    return None if row[0] is None else float(row[0])


def _expire(postgres_url: str, schema: str, chronicum_id: str) -> None:
    """Make the chronicum's marking end a second ago, as if nobody had followed it for minutes."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            psycopg.sql.SQL(
                "UPDATE {}.chronica SET followed_until = now() - interval '1 s' WHERE id = %s"
            ).format(psycopg.sql.Identifier(schema)),
            (chronicum_id,),
        )


def _mark_by_waiting(store: PostgresStore, chronicum_id: str) -> None:
    """A follower's wait that ends at once: it marks the chronicum followed first, as every wait does."""
    newest = store.acta(chronicum_id, ActaQuery(last_n=1))
    store.wait_for_acta(chronicum_id, newest[-1].id if newest else None, 0.0)


def test_appends_to_a_chronicum_nobody_follows_notify_nobody(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    """Unfollowed: no append (plain, keyed, batch) notifies; followed: each does.

    PostgreSQL delivers notifications in commit order, so a listener whose first notification names
    the followed chronicum, written last, got none from the writes to the unfollowed one.
    """
    writer, follower = make_store(schema=fresh_schema), make_store(schema=fresh_schema)
    owner = "ardian"
    alone_id, followed_id = f"alone-{uuid.uuid4().hex}", f"followed-{uuid.uuid4().hex}"
    writing = Chronicarius(writer)
    writing.record_actum(owner, _message(alone_id, "created"))
    writing.record_actum(owner, _message(followed_id, "created"))
    assert _followed_for(postgres_url, fresh_schema, alone_id) is None
    _mark_by_waiting(follower, followed_id)
    followed_for = _followed_for(postgres_url, fresh_schema, followed_id)
    assert followed_for is not None and 100.0 < followed_for <= 120.0
    with psycopg.connect(postgres_url, autocommit=True) as listening:
        listening.execute(f'LISTEN "{follow_channel(fresh_schema)}"')
        writing.record_actum(owner, _message(alone_id, "plain"))
        writing.record_actum(owner, _message(alone_id, "keyed"), idempotency_key="key-1")
        writing.record_acta(owner, [_message(alone_id, "batch 1"), _message(alone_id, "batch 2")])
        writing.record_actum(owner, _message(followed_id, "plain"))
        writing.record_actum(owner, _message(followed_id, "keyed"), idempotency_key="key-1")
        writing.record_acta(owner, [_message(followed_id, "batch 1"), _message(followed_id, "batch 2")])
        got = [note.payload for note in listening.notifies(timeout=GUARD_SECONDS, stop_after=3)]
    assert got == [followed_id] * 3
    assert _followed_for(postgres_url, fresh_schema, alone_id) is None


def test_an_expired_marking_is_renewed_by_the_next_waiting_follower(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    writer = make_store(schema=fresh_schema)
    owner = "ardian"
    lapsed_id, followed_id = f"lapsed-{uuid.uuid4().hex}", f"followed-{uuid.uuid4().hex}"
    writing = Chronicarius(writer)
    writing.record_actum(owner, _message(lapsed_id, "created"))
    writing.record_actum(owner, _message(followed_id, "created"))
    _mark_by_waiting(make_store(schema=fresh_schema), lapsed_id)
    _mark_by_waiting(make_store(schema=fresh_schema), followed_id)
    _expire(postgres_url, fresh_schema, lapsed_id)
    with psycopg.connect(postgres_url, autocommit=True) as listening:
        listening.execute(f'LISTEN "{follow_channel(fresh_schema)}"')
        writing.record_actum(owner, _message(lapsed_id, "after it lapsed"))
        writing.record_actum(owner, _message(followed_id, "still followed"))
        (first,) = listening.notifies(timeout=GUARD_SECONDS, stop_after=1)
        assert first.payload == followed_id  # the lapsed chronicum's append notified nobody

        _mark_by_waiting(make_store(schema=fresh_schema), lapsed_id)  # a store new to it: it marks
        renewed_for = _followed_for(postgres_url, fresh_schema, lapsed_id)
        assert renewed_for is not None and 100.0 < renewed_for <= 120.0
        writing.record_actum(owner, _message(lapsed_id, "followed again"))
        (second,) = listening.notifies(timeout=GUARD_SECONDS, stop_after=1)
    assert second.payload == lapsed_id


def test_a_marking_with_a_minute_left_is_kept_and_one_nearly_out_is_renewed(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    """Followers write the chronicum's row only when the marking runs low, not on every wait."""
    chronicum_id = f"kept-{uuid.uuid4().hex}"
    Chronicarius(make_store(schema=fresh_schema)).record_actum("ardian", _message(chronicum_id, "created"))
    store = make_store(schema=fresh_schema)
    plans = store.plans
    assert store._run_if_open(plans.follow(chronicum_id, 120.0, 60.0)) is True
    assert store._run_if_open(plans.follow(chronicum_id, 120.0, 60.0)) is False  # 120 s left: kept
    assert store._run_if_open(plans.follow(chronicum_id, 120.0, 121.0)) is True  # under 121 s: renewed
    assert store._run_if_open(plans.follow("missing-chronicum", 120.0, 60.0)) is None


def test_a_follower_that_waited_for_a_missing_chronicum_marks_it_once_it_exists(
    postgres_url: str, fresh_schema: str, make_store: Callable[..., PostgresStore]
) -> None:
    """A marking that found no chronicum is not remembered: the next wait marks the new one."""
    chronicum_id = f"later-{uuid.uuid4().hex}"
    follower = make_store(schema=fresh_schema)
    follower.wait_for_acta(chronicum_id, None, 0.0)  # missing: returns at once, marking nothing
    Chronicarius(make_store(schema=fresh_schema)).record_actum("ardian", _message(chronicum_id, "created"))
    assert _followed_for(postgres_url, fresh_schema, chronicum_id) is None
    _mark_by_waiting(follower, chronicum_id)
    followed_for = _followed_for(postgres_url, fresh_schema, chronicum_id)
    assert followed_for is not None and 100.0 < followed_for <= 120.0


def test_an_asyncio_follower_marks_its_chronicum_followed(postgres_url: str, fresh_schema: str) -> None:
    chronicum_id = f"async-marked-{uuid.uuid4().hex}"

    async def scenario() -> None:
        async with AsyncPostgresStore(postgres_url, schema=fresh_schema) as store:
            first = await AsyncChronicarius(store).record_actum("ardian", _message(chronicum_id, "first"))
            await store.wait_for_acta(chronicum_id, first.id, 0.0)

    asyncio.run(scenario())
    followed_for = _followed_for(postgres_url, fresh_schema, chronicum_id)
    assert followed_for is not None and 100.0 < followed_for <= 120.0
