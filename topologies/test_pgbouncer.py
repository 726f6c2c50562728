"""Through PgBouncer in transaction mode: every write lands, every read answers, followers wake.

In transaction mode the pooler hands each transaction of a client connection to whichever server
connection is free, so what a session keeps (psycopg's prepared statements, a ``LISTEN``) is not
there for the client's next transaction. Both PostgreSQL backends, blocking and asyncio, through
a PgBouncer of the tests' own (``conftest.pgbouncer_port``), each test in a schema of its own
dropped afterwards. The conformance suite runs through the same pooler from
``topologies/through_pgbouncer.py``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import quote

import psycopg
import pytest
from chronica_postgres.schema import follow_channel as postgres_channel
from chronica_sqlalchemy.dialects.postgresql import follow_channel as sqlalchemy_channel
from psycopg import sql

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    StoreError,
    new_chronicum_id,
    open_async_store,
    open_store,
)

DIRECT = "postgresql://postgres@127.0.0.1:5432/test"
"""The machine's PostgreSQL itself, where the pooler sends its connections."""

URLS: dict[str, Callable[[int, str], str]] = {
    "chronica-postgres": lambda port, schema: f"postgresql://postgres@127.0.0.1:{port}/test?schema={schema}",
    "chronica-sqlalchemy": lambda port, schema: (
        f"postgresql+psycopg://postgres@127.0.0.1:{port}/test?schema={schema}"
    ),
}

CHANNELS: dict[str, Callable[[str], str]] = {
    "chronica-postgres": postgres_channel,
    "chronica-sqlalchemy": sqlalchemy_channel,
}
"""The channel each backend's followers listen on, by schema."""

WRITERS = 8
ROUNDS = 25
"""Each writer's appends, each followed by a read of its chronicum: far more than the five runs of
one statement after which psycopg prepares it."""

OWNER = "pooled"

WAKE_GUARD = 10.0
"""Seconds a follower is given to see an actum written while it waits: a third of the longest
wait (30 s), which is when a follower that nothing wakes reads again."""

SETTLE = 0.3
"""Seconds the test lets a follower reach its wait before it writes (not measured)."""


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name, the schema dropped afterwards on the server itself."""
    name = f"chronica_pooled_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(DIRECT, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _actum(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "pooled", content)


@pytest.mark.parametrize("backend", URLS)
def test_every_write_lands_and_every_read_answers_through_a_transaction_pooler(
    pgbouncer_port: int, schema: str, backend: str
) -> None:
    failures: list[str] = []
    with open_store(URLS[backend](pgbouncer_port, schema)) as store:
        keeper = Chronicarius(store)
        chronica = [new_chronicum_id() for _ in range(WRITERS)]

        def write(chronicum_id: str) -> None:
            for count in range(ROUNDS):
                try:
                    keeper.record_actum(OWNER, _actum(chronicum_id, str(count)))
                    keeper.get_acta(OWNER, chronicum_id)
                except StoreError as error:
                    failures.append(str(error))

        threads = [threading.Thread(target=write, args=(chronicum_id,)) for chronicum_id in chronica]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == [], f"{len(failures)} of {WRITERS * ROUNDS * 2} calls failed: {failures[:3]}"
        for chronicum_id in chronica:
            stored = [actum.content for actum in keeper.get_acta(OWNER, chronicum_id)]
            assert stored == [str(count) for count in range(ROUNDS)]


@pytest.mark.parametrize("backend", URLS)
def test_every_asyncio_write_lands_and_every_read_answers_through_a_transaction_pooler(
    pgbouncer_port: int, schema: str, backend: str
) -> None:
    async def run() -> tuple[list[str], list[list[str]], list[str]]:
        store = open_async_store(URLS[backend](pgbouncer_port, schema))
        try:
            keeper = AsyncChronicarius(store)
            chronica = [new_chronicum_id() for _ in range(WRITERS)]
            failures: list[str] = []

            async def write(chronicum_id: str) -> None:
                for count in range(ROUNDS):
                    try:
                        await keeper.record_actum(OWNER, _actum(chronicum_id, str(count)))
                        await keeper.get_acta(OWNER, chronicum_id)
                    except StoreError as error:
                        failures.append(str(error))

            await asyncio.gather(*(write(chronicum_id) for chronicum_id in chronica))
            stored = [
                [actum.content for actum in await keeper.get_acta(OWNER, chronicum_id)]
                for chronicum_id in chronica
            ]
            return failures, stored, chronica
        finally:
            await store.close()

    failures, stored, chronica = asyncio.run(run())
    assert failures == [], f"{len(failures)} of {WRITERS * ROUNDS * 2} calls failed: {failures[:3]}"
    assert stored == [[str(count) for count in range(ROUNDS)]] * len(chronica)


@pytest.mark.parametrize("backend", URLS)
def test_a_store_behind_the_pooler_leaves_no_plan_setting_to_the_pooler_s_other_clients(
    pgbouncer_port: int, schema: str, backend: str
) -> None:
    """A store that prepares nothing sets no ``plan_cache_mode``: it would stay on the server
    connection, which the pooler hands to its other clients next (the most recently used first)."""
    with open_store(URLS[backend](pgbouncer_port, schema)) as store:
        Chronicarius(store).record_actum(OWNER, _actum(new_chronicum_id(), "hello"))
        pooled = f"postgresql://postgres@127.0.0.1:{pgbouncer_port}/test"
        with psycopg.connect(pooled, autocommit=True, prepare_threshold=None) as other:
            modes = {other.execute("SHOW plan_cache_mode").fetchone() for _ in range(20)}
    assert modes == {("auto",)}


def _listen_url(url: str) -> str:
    """``url`` with the ``listen`` option naming the server itself (percent-encoded)."""
    return f"{url}&listen={quote(DIRECT, safe='')}"


FOLLOWING: dict[str, Callable[[str], str]] = {"polling": lambda url: url, "listen-url": _listen_url}
"""How a follower through the pooler learns of new acta: by itself (the store finds the pooler and
reads again), or listening on a direct connection the ``listen`` option names."""


def _listeners(channel: str) -> int:
    """How many server processes listen on ``channel`` now (their last statement was its ``LISTEN``)."""
    with psycopg.connect(DIRECT, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query = %s AND state = 'idle'",
            (f'LISTEN "{channel}"',),
        ).fetchone()
    assert row is not None
    return int(row[0])


LISTENERS = {"polling": 0, "listen-url": 1}
"""Server processes listening on the schema's channel while a follower waits: none when the store
found the pooler (it reads again instead), the direct connection of the ``listen`` URL otherwise."""


@pytest.mark.parametrize("following", FOLLOWING)
@pytest.mark.parametrize("backend", URLS)
def test_a_follower_through_a_transaction_pooler_sees_each_new_actum_at_once(
    pgbouncer_port: int, schema: str, backend: str, following: str
) -> None:
    url = FOLLOWING[following](URLS[backend](pgbouncer_port, schema))
    with open_store(url) as follower, open_store(URLS[backend](pgbouncer_port, schema)) as writer:
        writing = Chronicarius(writer)
        chronicum_id = new_chronicum_id()
        first = writing.record_actum(OWNER, _actum(chronicum_id, "first"))
        seen: queue.Queue[str | None] = queue.Queue()

        def follow() -> None:
            try:
                for actum in Chronicarius(follower).follow(
                    OWNER, chronicum_id, after=first.id, timeout=WAKE_GUARD
                ):
                    seen.put(actum.content)
                    if actum.content == "last":
                        return
            finally:
                seen.put(None)  # ended: the follower gave up waiting

        thread = threading.Thread(target=follow)
        thread.start()
        try:
            for content in ("one", "two", "last"):
                time.sleep(SETTLE)  # the follower waits by now
                writing.record_actum(OWNER, _actum(chronicum_id, content))
                assert seen.get(timeout=WAKE_GUARD + 5) == content, "the follower was not woken"
                if content == "one":
                    time.sleep(SETTLE)
                    assert _listeners(CHANNELS[backend](schema)) == LISTENERS[following]
        finally:
            thread.join(WAKE_GUARD + 5)


@pytest.mark.parametrize("following", FOLLOWING)
@pytest.mark.parametrize("backend", URLS)
def test_an_asyncio_follower_through_a_transaction_pooler_sees_each_new_actum_at_once(
    pgbouncer_port: int, schema: str, backend: str, following: str
) -> None:
    url = FOLLOWING[following](URLS[backend](pgbouncer_port, schema))

    async def run() -> list[str]:
        follower, writer = open_async_store(url), open_async_store(URLS[backend](pgbouncer_port, schema))
        try:
            writing = AsyncChronicarius(writer)
            chronicum_id = new_chronicum_id()
            first = await writing.record_actum(OWNER, _actum(chronicum_id, "first"))
            following = AsyncChronicarius(follower).follow(OWNER, chronicum_id, after=first.id)
            await following.start()
            seen: list[str] = []
            for content in ("one", "two", "last"):
                step = asyncio.ensure_future(anext(following))
                await asyncio.sleep(SETTLE)  # the follower waits by now
                await writing.record_actum(OWNER, _actum(chronicum_id, content))
                try:
                    async with asyncio.timeout(WAKE_GUARD):
                        seen.append((await step).content)
                except TimeoutError:
                    seen.append("not woken")
                    break
                if content == "one":
                    await asyncio.sleep(SETTLE)
                    seen.append(f"{await asyncio.to_thread(_listeners, CHANNELS[backend](schema))} listening")
            return seen
        finally:
            await follower.close()
            await writer.close()

    assert asyncio.run(run()) == ["one", f"{LISTENERS[following]} listening", "two", "last"]
