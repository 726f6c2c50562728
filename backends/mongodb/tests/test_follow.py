"""Following on MongoDB: the choice between a change stream and polling, and the change stream.

The conformance suite's follow cases prove order, gaps, duplicates and erasure on whichever of
the two the test server gives. These tests check the choice itself (mongoeco, the default test
server, is a standalone server: polling) and what the watcher does with change events. The
change stream's own cases need a replica set or a sharded cluster: they skip unless
``CHRONICA_TEST_MONGODB_URL`` points at one (with ``CI=true`` too: mongoeco has no
``$changeStream``, so no server here can run them).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from chronica_mongodb import AsyncMongoStore, MongoStore
from chronica_mongodb.follow import (
    CHANGE_STREAMS,
    POLLING,
    UNDECIDED,
    WATCHER_NAME,
    Watcher,
    offers_change_streams,
)
from pymongo import MongoClient

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, AsyncChronicarius, Chronicarius

URL_VARIABLE = "CHRONICA_TEST_MONGODB_URL"

GUARD_SECONDS = 30.0


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


@pytest.fixture
def server_mechanism(admin_client: MongoClient[dict[str, Any]]) -> str:
    """How the test server lets a store follow, from its own ``hello``."""
    return CHANGE_STREAMS if offers_change_streams(admin_client.admin.command("hello")) else POLLING


@pytest.fixture
def change_streams(server_mechanism: str) -> None:
    """Skip a test that needs change streams on a server without them, naming the variable."""
    if server_mechanism != CHANGE_STREAMS:
        pytest.skip(
            "the test server has no change streams (a standalone server, or mongoeco); set "
            f"{URL_VARIABLE}=mongodb://host:port/?replicaSet=NAME to test them against a replica set"
        )


@pytest.mark.parametrize(
    ("hello", "offered"),
    [
        ({"isWritablePrimary": True, "setName": "rs0"}, True),
        ({"isWritablePrimary": True, "msg": "isdbgrid"}, True),
        ({"isWritablePrimary": True}, False),
        ({"isWritablePrimary": True, "setName": None, "msg": None}, False),  # mongoeco's answer
    ],
)
def test_change_streams_are_offered_by_a_replica_set_or_a_mongos_only(
    hello: dict[str, Any], offered: bool
) -> None:
    assert offers_change_streams(hello) is offered


class Recorded:
    """Wakers that record who was woken."""

    def __init__(self) -> None:
        self.woken: list[str] = []

    def waker(self, name: str) -> Any:
        return lambda: self.woken.append(name)


def test_the_watcher_wakes_an_inserts_chronicum_and_everyone_on_a_delete() -> None:
    watcher = Watcher(None, "chronica", owns_client=False)
    recorded = Recorded()
    lunch, dinner = recorded.waker("lunch"), recorded.waker("dinner")
    watcher.watch("lunch", lunch)
    watcher.watch("dinner", dinner)
    watcher.dispatch({"operationType": "insert", "fullDocument": {"chronicum_id": "lunch"}})
    assert recorded.woken == ["lunch"]
    watcher.dispatch({"operationType": "delete", "documentKey": {"_id": "x"}})
    assert sorted(recorded.woken) == ["dinner", "lunch", "lunch"]
    watcher.unwatch("lunch", lunch)
    watcher.dispatch({"operationType": "insert", "fullDocument": {"chronicum_id": "lunch"}})
    assert sorted(recorded.woken) == ["dinner", "lunch", "lunch"]


def test_a_watcher_without_a_client_polls_and_starts_no_thread() -> None:
    watcher = Watcher(None, "chronica", owns_client=False)
    watcher.watch("lunch", lambda: None)
    assert watcher.mechanism == POLLING
    assert not [thread for thread in threading.enumerate() if thread.name == WATCHER_NAME]


def _watcher_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == WATCHER_NAME]


def test_the_blocking_store_chooses_how_to_follow_at_its_first_wait(
    store: MongoStore, server_mechanism: str
) -> None:
    chronicarius = Chronicarius(store)
    chronicarius.record_actum("ardian", _message("lunch", "hello"))
    assert store.follow_mechanism == UNDECIDED
    assert list(chronicarius.follow("ardian", "lunch", timeout=0.3)) == []
    watcher = store._watcher
    assert watcher is not None
    if watcher._thread is not None:  # the answer comes from the watcher's thread
        watcher._thread.join(GUARD_SECONDS if server_mechanism == POLLING else 0.5)
    assert store.follow_mechanism == server_mechanism
    if server_mechanism == POLLING:
        assert watcher._thread is not None and not watcher._thread.is_alive()  # nothing left behind


def test_the_asyncio_store_chooses_how_to_follow_at_its_first_wait(
    async_store: AsyncMongoStore, server_mechanism: str
) -> None:
    async def scenario() -> None:
        chronicarius = AsyncChronicarius(async_store)
        await chronicarius.record_actum("ardian", _message("lunch", "hello"))
        assert async_store.follow_mechanism == UNDECIDED
        follower = chronicarius.follow("ardian", "lunch")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await anext(follower)
        await async_store.close()

    asyncio.run(scenario())
    watcher = async_store._watcher
    assert watcher is not None and watcher._thread is not None
    watcher._thread.join(GUARD_SECONDS)  # closed: the thread ends within a second
    assert not watcher._thread.is_alive()
    assert async_store.follow_mechanism == server_mechanism


def test_an_asyncio_store_on_a_given_client_polls(mongodb_server_url: str, database: str) -> None:
    async def scenario() -> str:
        from pymongo import AsyncMongoClient

        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_server_url)
        store = AsyncMongoStore(client=client, database=database)
        try:
            chronicarius = AsyncChronicarius(store)
            first = await chronicarius.record_actum("ardian", _message("lunch", "hello"))
            follower = chronicarius.follow("ardian", "lunch", after=first.id)
            reading = asyncio.create_task(anext(follower))
            await asyncio.sleep(0)
            await chronicarius.record_actum("ardian", _message("lunch", "a table?"))
            async with asyncio.timeout(GUARD_SECONDS):
                got = await reading
            assert store.follow_mechanism == POLLING
            return got.content
        finally:
            await store.close()
            await client.close()

    assert asyncio.run(scenario()) == "a table?"


class CountedReads(MongoStore):
    """The blocking store, counting its reads of a chronicum's newest actum."""

    newest_reads = 0

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        if query.last_n == 1:
            self.newest_reads += 1
        return super().acta(chronicum_id, query)


@pytest.fixture
def counted_store(mongodb_server_url: str, database: str) -> Iterator[CountedReads]:
    with CountedReads(mongodb_server_url, database=database) as opened:
        yield opened


@pytest.mark.usefixtures("change_streams")
def test_on_a_change_stream_an_idle_follower_reads_nothing_until_a_write(counted_store: CountedReads) -> None:
    chronicarius = Chronicarius(counted_store)
    first = chronicarius.record_actum("ardian", _message("lunch", "hello"))
    list(chronicarius.follow("ardian", "lunch", after=first.id, timeout=0.2))  # starts the watcher
    watcher = counted_store._watcher
    assert watcher is not None
    for _ in range(100):  # the stream opens in the watcher's thread
        if watcher.streaming:
            break
        threading.Event().wait(0.05)
    assert counted_store.follow_mechanism == CHANGE_STREAMS and watcher.streaming
    before = counted_store.newest_reads
    counted_store.wait_for_acta("lunch", first.id, 1.5)  # no write: one check, then the stream
    assert counted_store.newest_reads - before == 1
    woken = threading.Event()

    def write_later() -> None:
        woken.wait(0.2)
        chronicarius.record_actum("ardian", _message("lunch", "a table for four?"))

    writer = threading.Thread(target=write_later)
    writer.start()
    got = next(chronicarius.follow("ardian", "lunch", after=first.id, timeout=GUARD_SECONDS))
    writer.join()
    assert got.content == "a table for four?"
