"""The batch, listing and erasure capabilities on MongoDB, proven on the raw collections.

The conformance suite checks what the stores answer; these tests read ``chronica``, ``acta`` and
``batch_acta`` themselves: what a batch stores, what an erase leaves, which index serves a
listing, and what a database made before these capabilities gains when a store opens it.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from chronica_mongodb import AsyncMongoStore, MongoStore
from chronica_mongodb.core import BATCH_ACTA, BATCH_CHRONICUM_INDEX, BATCH_INDEX, LISTING_INDEX, MARKER_INDEX
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import AutoReconnect

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
)
from chronica_core.erasure import owner_digest

Result = TypeVar("Result")

OWNER = "ardian"
DIGEST = owner_digest(OWNER)
BATCH = 5


def run(make: Callable[[], Coroutine[Any, Any, Result]]) -> Result:
    return asyncio.run(make())


def fresh_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def started(chronicum_id: str, owner_id: str = OWNER, at: datetime | None = None) -> Chronicum:
    return Chronicum(chronicum_id, owner_id, at or datetime.now(UTC))


def batch(chronicum_id: str, label: str, size: int = BATCH) -> list[Actum]:
    return [
        Actum(
            chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, f"{label}:{index}", id=f"{label}-{index}"
        )
        for index in range(size)
    ]


def raw_counts(client: MongoClient[dict[str, Any]], database: str, chronicum_id: str) -> tuple[int, int]:
    """How many documents ``acta`` and ``batch_acta`` hold for the chronicum, read directly."""
    return (
        client[database]["acta"].count_documents({"chronicum_id": chronicum_id}),
        client[database][BATCH_ACTA].count_documents({"chronicum_id": chronicum_id}),
    )


def assert_whole_batches(contents: list[str]) -> None:
    """``contents`` are whole batches of :data:`BATCH`, each in order (``label:0`` to ``label:4``)."""
    assert len(contents) % BATCH == 0, contents
    for start in range(0, len(contents), BATCH):
        label = contents[start].split(":")[0]
        assert contents[start : start + BATCH] == [f"{label}:{index}" for index in range(BATCH)], contents


# Batches


def test_a_batch_is_its_first_actum_in_acta_and_the_others_in_batch_acta(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    stored = store.record_many(batch(chronicum_id, "b", 3), "retry-1")
    heads = list(store.database["acta"].find({"chronicum_id": chronicum_id}))
    assert len(heads) == 1
    head = heads[0]
    assert (head["seq"], head["size"], head["idempotency_key"], head["content"]) == (1, 3, "retry-1", "b:0")
    members = list(store.database[BATCH_ACTA].find({"batch": head["batch"]}).sort("pos", 1))
    assert [(member["pos"], member["content"], member["at"]) for member in members] == [
        (1, "b:1", head["at"]),
        (2, "b:2", head["at"]),
    ]
    assert store.acta(chronicum_id, ActaQuery()) == stored
    assert store.record_many(batch(chronicum_id, "other", 2), "retry-1") == stored
    assert store.record_idempotent(batch(chronicum_id, "single", 1)[0], "retry-1") == stored[0]
    assert raw_counts(store.client, store.database.name, chronicum_id) == (1, 2)


def test_batch_acta_without_their_first_actum_are_never_read(store: MongoStore) -> None:
    """A writer that died after writing a batch's other acta, before its one committing insert."""
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    kept = store.record_many(batch(chronicum_id, "kept"), None)
    orphan = ObjectId()
    store.database[BATCH_ACTA].insert_many(
        [
            {
                "chronicum_id": chronicum_id,
                "batch": orphan,
                "pos": Int64(position),
                "id": f"lost-{position}",
                "kind": "message",
                "actor_kind": "human",
                "actor": OWNER,
                "content": f"lost:{position}",
                "at": datetime.now(UTC),
            }
            for position in range(1, BATCH)
        ]
    )
    assert store.acta(chronicum_id, ActaQuery()) == kept
    assert store.acta(chronicum_id, ActaQuery(last_n=2)) == kept[-2:]
    assert store.erase(chronicum_id, DIGEST) == BATCH
    assert raw_counts(store.client, store.database.name, chronicum_id) == (0, 0)


def test_forty_same_key_batches_leave_one_batch_in_the_collections(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    barrier = threading.Barrier(40)
    results: list[list[Actum]] = []

    def write(writer: int) -> None:
        barrier.wait()
        results.append(store.record_many(batch(chronicum_id, f"w{writer}"), "same-key"))

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 40
    assert all(result == results[0] for result in results)
    assert store.acta(chronicum_id, ActaQuery()) == results[0]
    assert raw_counts(store.client, store.database.name, chronicum_id) == (1, BATCH - 1)


# Erasure


def test_erase_deletes_the_acta_documents_and_leaves_a_marker_of_id_and_digest(store: MongoStore) -> None:
    chronicum_id, other_id = fresh_id(), fresh_id()
    store.create(started(chronicum_id))
    store.create(started(other_id))
    store.record(batch(chronicum_id, "single", 1)[0])
    store.record_idempotent(batch(chronicum_id, "keyed", 1)[0], "key-1")
    store.record_many(batch(chronicum_id, "b"), "key-2")
    kept = store.record_many(batch(other_id, "other"), None)
    assert store.erase(chronicum_id, DIGEST) == 2 + BATCH
    assert store.database["chronica"].find_one({"_id": chronicum_id}) == {
        "_id": chronicum_id,
        "owner_digest": DIGEST,
    }
    assert raw_counts(store.client, store.database.name, chronicum_id) == (0, 0)
    assert store.database["acta"].count_documents({"idempotency_key": {"$in": ["key-1", "key-2"]}}) == 0
    for call in (
        lambda: store.get(chronicum_id),
        lambda: store.acta(chronicum_id, ActaQuery()),
        lambda: store.acta(chronicum_id, ActaQuery(last_n=3)),
        lambda: store.record(batch(chronicum_id, "late", 1)[0]),
        lambda: store.record_idempotent(batch(chronicum_id, "late", 1)[0], "key-1"),
        lambda: store.record_many(batch(chronicum_id, "late"), "key-2"),
        lambda: store.erase(chronicum_id, DIGEST),
    ):
        with pytest.raises(ChronicumNotFound):
            call()
    with pytest.raises(ChronicumExists):
        store.create(started(chronicum_id))
    assert raw_counts(store.client, store.database.name, chronicum_id) == (0, 0)
    assert store.list_chronica(OWNER, 10, None) == [store.get(other_id)]
    assert store.acta(other_id, ActaQuery()) == kept


def test_erase_owner_turns_only_that_owners_chronica_into_markers(store: MongoStore) -> None:
    mine, theirs = [fresh_id() for _ in range(3)], fresh_id()
    for chronicum_id in mine:
        store.create(started(chronicum_id))
        store.record_many(batch(chronicum_id, "b"), None)
    store.create(started(theirs, "rafa"))
    store.record_many(batch(theirs, "t"), None)
    assert store.erase_owner(OWNER, DIGEST) == 3
    markers = list(store.database["chronica"].find({"_id": {"$in": mine}}))
    assert sorted(markers, key=lambda marker: marker["_id"]) == [
        {"_id": chronicum_id, "owner_digest": DIGEST} for chronicum_id in sorted(mine)
    ]
    assert store.database["acta"].count_documents({"chronicum_id": {"$in": mine}}) == 0
    assert store.database[BATCH_ACTA].count_documents({"chronicum_id": {"$in": mine}}) == 0
    assert raw_counts(store.client, store.database.name, theirs) == (1, BATCH - 1)
    assert store.erase_owner(OWNER, DIGEST) == 0


def test_an_erase_cut_short_is_finished_by_erase_owner_and_leaves_nothing_to_come_back(
    store: MongoStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erase stops after its marker (a lost connection): nothing of the old chronicum is read
    or reopened, not even by its owner, until ``erase_owner`` finishes it; then the id starts
    fresh for that owner, the old acta and keys gone from the collections."""
    keeper = Chronicarius(store)
    chronicum_id = fresh_id()
    keeper.record_acta(OWNER, batch(chronicum_id, "secret"), idempotency_key="kept")
    keeper.record_actum(OWNER, batch(chronicum_id, "single", 1)[0])
    perform = store._perform

    def lose_the_connection_once(command: Any) -> Any:
        if command.method == "update_many":
            monkeypatch.setattr(store, "_perform", perform)
            raise AutoReconnect("injected: connection lost")
        return perform(command)

    monkeypatch.setattr(store, "_perform", lose_the_connection_once)
    with pytest.raises(StoreError):
        keeper.erase_chronicum(OWNER, chronicum_id)
    assert raw_counts(store.client, store.database.name, chronicum_id) != (0, 0)  # left behind
    with pytest.raises(ChronicumNotFound):
        keeper.get_acta(OWNER, chronicum_id)
    with pytest.raises(ChronicumNotFound):  # the owner cannot reopen it over what is left
        keeper.record_acta(OWNER, batch(chronicum_id, "early", 2), idempotency_key="kept")
    assert keeper.erase_owner(OWNER) == 0  # no live chronicum left, one erasure finished
    assert raw_counts(store.client, store.database.name, chronicum_id) == (0, 0)
    assert store.database["chronica"].find_one({"_id": chronicum_id}) == {
        "_id": chronicum_id,
        "owner_digest": DIGEST,
    }
    fresh = keeper.record_acta(OWNER, batch(chronicum_id, "fresh", 2), idempotency_key="kept")
    assert [actum.content for actum in fresh] == ["fresh:0", "fresh:1"]
    assert keeper.get_acta(OWNER, chronicum_id) == fresh


def test_reopen_replaces_only_a_marker_with_the_same_digest(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    store.record_many(batch(chronicum_id, "old"), None)
    fresh = started(chronicum_id, at=datetime(2026, 11, 30, 9, 0, 0, 123456, tzinfo=UTC))
    assert store.reopen(fresh, DIGEST) is False  # not a marker yet
    store.erase(chronicum_id, DIGEST)
    assert store.reopen(fresh, owner_digest("rafa")) is False
    assert store.database["chronica"].find_one({"_id": chronicum_id}) == {
        "_id": chronicum_id,
        "owner_digest": DIGEST,
    }
    assert store.reopen(fresh, DIGEST) is True
    assert store.get(chronicum_id) == fresh
    assert store.acta(chronicum_id, ActaQuery()) == []
    stored = store.record_many(batch(chronicum_id, "new"), None)
    assert store.acta(chronicum_id, ActaQuery()) == stored


def test_an_erase_racing_a_batch_writer_leaves_nothing_or_whole_batches(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    some_written = threading.Event()
    erased = threading.Event()
    writing = threading.Event()
    writing.set()
    refused: list[int] = []
    seen: list[list[str]] = []

    def write() -> None:
        for index in range(30):
            try:
                store.record_many(batch(chronicum_id, f"w{index}"), None)
            except ChronicumNotFound:
                refused.append(index)
                break
            if index == 3:
                some_written.set()
        some_written.set()

    def read() -> None:
        while writing.is_set():
            try:
                seen.append([actum.content for actum in store.acta(chronicum_id, ActaQuery())])
            except ChronicumNotFound:
                seen.append([])

    def erase() -> None:
        some_written.wait()
        store.erase(chronicum_id, DIGEST)
        erased.set()

    threads = [threading.Thread(target=target) for target in (write, read, erase)]
    for thread in threads:
        thread.start()
    threads[0].join()
    threads[2].join()
    writing.clear()
    threads[1].join()
    assert erased.is_set()
    for contents in seen:
        assert_whole_batches(contents)
    # The writer either finished before the erase (then all was erased) or was refused after it.
    assert raw_counts(store.client, store.database.name, chronicum_id) == (0, 0)
    assert store.database["chronica"].find_one({"_id": chronicum_id}) == {
        "_id": chronicum_id,
        "owner_digest": DIGEST,
    }


def test_batches_written_through_an_erase_and_reopen_are_whole(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    some_written = threading.Event()
    erasures: list[int] = []

    def write() -> None:
        for index in range(20):
            while True:
                try:
                    store.record_many(batch(chronicum_id, f"w{index}"), None)
                    break
                except ChronicumNotFound:
                    store.reopen(started(chronicum_id), DIGEST)
            if index == 5:
                some_written.set()

    def erase() -> None:
        some_written.wait()
        erasures.append(store.erase(chronicum_id, DIGEST))

    threads = [threading.Thread(target=write), threading.Thread(target=erase)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert erasures[0] % BATCH == 0 and erasures[0] >= 6 * BATCH
    contents = [actum.content for actum in store.acta(chronicum_id, ActaQuery())]
    assert_whole_batches(contents)
    assert contents[-1] == f"w19:{BATCH - 1}"
    heads, members = raw_counts(store.client, store.database.name, chronicum_id)
    assert (heads * BATCH, members) == (len(contents), heads * (BATCH - 1))


def test_async_erase_deletes_the_documents_and_races_with_batches(
    async_store: AsyncMongoStore, admin_client: MongoClient[dict[str, Any]], database: str
) -> None:
    chronicum_id = fresh_id()

    async def scenario() -> tuple[int, list[str]]:
        try:
            await async_store.create(started(chronicum_id))
            await async_store.record_many(batch(chronicum_id, "first"), "key")

            async def write() -> list[str]:
                refused: list[str] = []
                for index in range(10):
                    try:
                        await async_store.record_many(batch(chronicum_id, f"w{index}"), None)
                    except ChronicumNotFound:
                        refused.append(f"w{index}")
                return refused

            results = await asyncio.gather(write(), async_store.erase(chronicum_id, DIGEST))
            erased: int = results[1]
            with pytest.raises(ChronicumNotFound):
                await async_store.acta(chronicum_id, ActaQuery())
            with pytest.raises(ChronicumNotFound):
                await async_store.record_many(batch(chronicum_id, "late"), "key")
            return erased, results[0]
        finally:
            await async_store.close()

    erased, refused = run(scenario)
    # Every batch that was not refused landed before the erase, and was erased and counted.
    assert erased == (11 - len(refused)) * BATCH
    assert raw_counts(admin_client, database, chronicum_id) == (0, 0)
    assert admin_client[database]["chronica"].find_one({"_id": chronicum_id}) == {
        "_id": chronicum_id,
        "owner_digest": DIGEST,
    }


# Listing


def test_listing_is_served_by_the_owner_index(store: MongoStore, mongodb_server_url: str) -> None:
    """On MongoDB the plan is an index scan of ``owner_started``; mongoeco plans no index scans.

    mongoeco's explain (engine "memory", strategy "python") lists the collection's indexes but
    always scans: under it the test checks the index and its keys, and the order it gives.
    """
    base = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)
    for index in range(20):
        store.create(started(f"other-{index:02d}", "rafa", base + timedelta(seconds=index)))
    ids = [f"mine-{index:02d}" for index in range(6)]
    for index, chronicum_id in enumerate(ids):
        store.create(started(chronicum_id, at=base + timedelta(microseconds=index // 2)))
    indexes = {
        index["name"]: list(index["key"].items()) for index in store.database["chronica"].list_indexes()
    }
    assert indexes[LISTING_INDEX] == [("owner_id", 1), ("started_at", -1), ("started_at_us", -1), ("_id", -1)]
    explained = store.database.command(
        "explain",
        {
            "aggregate": "chronica",
            "pipeline": [
                {"$match": {"owner_id": OWNER}},
                {"$sort": {"started_at": -1, "started_at_us": -1, "_id": -1}},
                {"$limit": 3},
            ],
            "cursor": {},
        },
    )
    text = repr(explained)
    if "engine_plan" not in explained:  # a real MongoDB
        assert "IXSCAN" in text and LISTING_INDEX in text and "COLLSCAN" not in text
    else:
        assert LISTING_INDEX in text
    first = store.list_chronica(OWNER, 3, None)
    assert [chronicum.id for chronicum in first] == ["mine-05", "mine-04", "mine-03"]
    rest = store.list_chronica(OWNER, 10, (first[-1].started_at, first[-1].id))
    assert [chronicum.id for chronicum in rest] == ["mine-02", "mine-01", "mine-00"]
    assert rest[0].started_at == base + timedelta(microseconds=1)  # microseconds kept, not only ms


def test_a_database_of_the_previous_version_gains_the_new_indexes(
    mongodb_server_url: str, database: str, admin_client: MongoClient[dict[str, Any]]
) -> None:
    old = admin_client[database]
    old["acta"].create_index([("chronicum_id", 1), ("seq", 1)], name="chronicum_seq", unique=True)
    old["acta"].create_index(
        [("chronicum_id", 1), ("idempotency_key", 1)],
        name="chronicum_idempotency_key",
        unique=True,
        partialFilterExpression={"idempotency_key": {"$exists": True}},
    )
    at = datetime(2026, 11, 30, 8, 0, 0, 123000, tzinfo=UTC)
    old["chronica"].insert_one({"_id": "old", "owner_id": OWNER, "started_at": at, "started_at_us": 456})
    old["acta"].insert_one(
        {
            "chronicum_id": "old",
            "seq": Int64(1),
            "id": "a1",
            "kind": "message",
            "actor_kind": "human",
            "actor": OWNER,
            "content": "from before",
            "at": at,
        }
    )
    with MongoStore(mongodb_server_url, database=database) as store:
        chronica_indexes = {index["name"] for index in old["chronica"].list_indexes()}
        batch_indexes = {index["name"] for index in old[BATCH_ACTA].list_indexes()}
        assert {LISTING_INDEX, MARKER_INDEX} <= chronica_indexes
        assert {BATCH_INDEX, BATCH_CHRONICUM_INDEX} <= batch_indexes
        [listed] = store.list_chronica(OWNER, 10, None)
        assert (listed.id, listed.started_at, listed.last_actum_at) == (
            "old",
            at + timedelta(microseconds=456),
            at,
        )
        stored = store.record_many(batch("old", "new"), None)
        assert [actum.content for actum in store.acta("old", ActaQuery())] == ["from before"] + [
            actum.content for actum in stored
        ]
        assert store.erase("old", DIGEST) == 1 + BATCH
        assert raw_counts(admin_client, database, "old") == (0, 0)


def test_an_async_store_migrates_a_database_of_the_previous_version(
    mongodb_server_url: str, database: str, admin_client: MongoClient[dict[str, Any]]
) -> None:
    admin_client[database]["acta"].create_index(
        [("chronicum_id", 1), ("seq", 1)], name="chronicum_seq", unique=True
    )

    async def scenario() -> tuple[set[str], set[str], list[Chronicum]]:
        store = AsyncMongoStore(mongodb_server_url, database=database)
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_server_url)
        try:
            await store.create(started("new"))
            listed = await store.list_chronica(OWNER, 10, None)
            chronica = {index["name"] async for index in await client[database]["chronica"].list_indexes()}
            acta = {index["name"] async for index in await client[database]["acta"].list_indexes()}
            return chronica, acta, listed
        finally:
            await store.close()
            await client.close()

    chronica, acta, listed = run(scenario)
    assert LISTING_INDEX in chronica
    assert "chronicum_idempotency_key" in acta
    assert [chronicum.id for chronicum in listed] == ["new"]
