"""What only the MongoDB backend promises: documents, indexes, order, sizes, errors, registration."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import bson
import pytest
from chronica_mongodb import MAX_DOCUMENT_BYTES, AsyncMongoStore, MongoStore, core
from chronica_mongodb.core import DOCUMENT_RESERVE
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import PyMongoError

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    Chronicarius,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    InvalidOption,
    Native,
    StoreError,
    open_async_store,
    open_store,
)
from chronica_core.erasure import owner_digest
from chronica_core.model import MAX_ID_LENGTH
from chronica_core.plans import run_plan
from chronica_core.redaction import linked_exceptions
from chronica_core.registry import registry

Result = TypeVar("Result")


def run(make: Callable[[], Coroutine[Any, Any, Result]]) -> Result:
    return asyncio.run(make())


def fresh_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def message(chronicum_id: str, content: str, actum_id: str = "") -> Actum:
    return Actum(
        chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=actum_id or uuid.uuid4().hex
    )


def started(chronicum_id: str) -> Chronicum:
    return Chronicum(chronicum_id, "ardian", datetime.now(UTC))


def sequence_numbers(store: MongoStore, chronicum_id: str) -> list[int]:
    documents = store.database["acta"].find({"chronicum_id": chronicum_id}, {"seq": 1}).sort("seq", 1)
    return [int(document["seq"]) for document in documents]


# Registration and opening


def test_registered_through_the_entry_point_group() -> None:
    backend = registry().backend_for("mongodb://example/x")
    assert backend.name == "mongodb"
    assert backend.schemes == ("mongodb", "mongodb+srv")
    assert backend.idempotent is True
    assert backend.install == "chronica-mongodb"
    assert registry().backend_for("mongodb+srv://cluster.example/x") == backend
    assert backend.open_async is not None


def test_open_store_takes_the_database_from_the_url_path(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    name = fresh_database()
    url = urlunsplit(urlsplit(mongodb_server_url)._replace(path=f"/{name}"))
    with open_store(url) as opened:
        assert isinstance(opened, MongoStore)
        assert opened.database.name == name
        opened.create(started(fresh_id()))
        assert opened.database["chronica"].count_documents({}) == 1


def test_database_option_wins_over_the_url_path(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    name = fresh_database()
    with open_store(mongodb_server_url, database=name) as opened:
        assert opened.database.name == name  # type: ignore[attr-defined]


def test_open_async_store_gives_the_async_flavour(mongodb_server_url: str, database: str) -> None:
    async def scenario() -> Chronicum:
        opened = open_async_store(mongodb_server_url, database=database)
        assert isinstance(opened, AsyncMongoStore)
        chronicum_id = fresh_id()
        try:
            await opened.create(started(chronicum_id))
            return await opened.get(chronicum_id)
        finally:
            await opened.close()

    assert run(scenario).owner_id == "ardian"


def test_both_flavours_stop_at_close_and_the_async_one_serves_a_second_loop_meanwhile(
    async_store: AsyncMongoStore, mongodb_server_url: str, database: str
) -> None:
    with MongoStore(mongodb_server_url, database=database) as blocking:
        pass
    with pytest.raises(StoreError, match=r"^mongodb: store: the store is closed$"):
        blocking.get("any")
    chronicum_id = fresh_id()
    with asyncio.Runner() as first_loop:
        first_loop.run(async_store.create(started(chronicum_id)))
        assert asyncio.run(async_store.get(chronicum_id)).id == chronicum_id  # a client of its own
        assert first_loop.run(async_store.get(chronicum_id)).id == chronicum_id
        first_loop.run(async_store.close())
        with pytest.raises(StoreError) as after_close:
            first_loop.run(async_store.get(chronicum_id))
        with pytest.raises(StoreError, match=r"^mongodb: async store: the store is closed$"):
            first_loop.run(async_store.migrate())
        with pytest.raises(StoreError, match=r"^mongodb: async store: the store is closed$"):
            asyncio.run(async_store.get(chronicum_id))
    assert str(after_close.value) == "mongodb: async store: the store is closed"


def test_auto_migrate_creates_the_unique_indexes(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    with MongoStore(mongodb_server_url, database=fresh_database()) as opened:
        indexes = {index["name"]: index for index in opened.database["acta"].list_indexes()}
    sequence = indexes["chronicum_seq"]
    assert list(sequence["key"].items()) == [("chronicum_id", 1), ("seq", 1)]
    assert sequence["unique"] is True
    keyed = indexes["chronicum_idempotency_key"]
    assert list(keyed["key"].items()) == [("chronicum_id", 1), ("idempotency_key", 1)]
    assert keyed["unique"] is True
    assert keyed["partialFilterExpression"] == {"idempotency_key": {"$exists": True}}


@pytest.mark.parametrize("flag", [False, "false", "0"])
def test_auto_migrate_can_be_turned_off(
    mongodb_server_url: str, fresh_database: Callable[[], str], flag: bool | str
) -> None:
    with MongoStore(mongodb_server_url, database=fresh_database(), auto_migrate=flag) as opened:
        assert opened.database.list_collection_names() == []
        opened.migrate()
        assert {"chronicum_seq", "chronicum_idempotency_key"} <= set(
            opened.database["acta"].index_information()
        )


def test_async_store_migrates_on_first_use(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    name = fresh_database()

    async def scenario() -> set[str]:
        opened = AsyncMongoStore(mongodb_server_url, database=name)
        try:
            await opened.create(started(fresh_id()))
            return set(await opened.database["acta"].index_information())
        finally:
            await opened.close()

    assert {"chronicum_seq", "chronicum_idempotency_key"} <= run(scenario)


def test_store_on_an_existing_client_leaves_it_open(mongodb_server_url: str, database: str) -> None:
    client: MongoClient[dict[str, Any]]
    with MongoClient(mongodb_server_url) as client:
        chronicum_id = fresh_id()
        with MongoStore(client=client, database=database) as opened:
            opened.create(started(chronicum_id))
        assert client[database]["chronica"].find_one({"_id": chronicum_id}) is not None


def test_async_store_on_an_existing_client_leaves_it_open(mongodb_server_url: str, database: str) -> None:
    async def scenario() -> dict[str, Any] | None:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongodb_server_url)
        chronicum_id = fresh_id()
        opened = AsyncMongoStore(client=client, database=database)
        await opened.create(started(chronicum_id))
        await opened.close()
        try:
            return await client[database]["chronica"].find_one({"_id": chronicum_id})
        finally:
            await client.close()

    assert run(scenario) is not None


# Documents and round trips


def test_chronicum_reads_back_exactly_as_created(store: MongoStore) -> None:
    chronicum = Chronicum(fresh_id(), "ardian", datetime(2026, 11, 30, 8, 0, 0, 123456, tzinfo=UTC))
    store.create(chronicum)
    assert store.get(chronicum.id) == chronicum
    document = store.database["chronica"].find_one({"_id": chronicum.id})
    assert document is not None
    assert document["owner_id"] == "ardian"


def test_create_of_a_taken_id_raises_exists(store: MongoStore) -> None:
    chronicum = started(fresh_id())
    store.create(chronicum)
    with pytest.raises(ChronicumExists):
        store.create(Chronicum(chronicum.id, "rafa", datetime.now(UTC)))
    assert store.get(chronicum.id).owner_id == "ardian"


def test_record_sets_at_to_the_millisecond_and_moves_last_actum_at(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    stored = store.record(message(chronicum_id, "Find us a quiet table.", "a" * 32))
    assert stored.id == "a" * 32
    assert (
        stored.at is not None
        and stored.at.tzinfo is not None
        and stored.at.utcoffset() == UTC.utcoffset(None)
    )
    assert stored.at.microsecond % 1000 == 0
    assert store.acta(chronicum_id, ActaQuery()) == [stored]
    assert store.get(chronicum_id).last_actum_at == stored.at


@pytest.mark.parametrize(
    "content",
    ["", "a\x00b", "\x00", "line one\nline two\r\n", "emoji 🍽️ and 𝄞 and \U0010fffd", "x" * (1024 * 1024)],
    ids=["empty", "nul-inside", "nul", "multi-line", "planes", "1MiB"],
)
def test_content_round_trips(store: MongoStore, content: str) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    store.record(Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", content, id="t"))
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == [content]


def test_documents_hold_the_sequence_and_no_key_when_none_was_given(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    store.record(message(chronicum_id, "one"))
    store.record_idempotent(message(chronicum_id, "two"), "retry-1")
    documents = list(store.database["acta"].find({"chronicum_id": chronicum_id}).sort("seq", 1))
    assert [document["seq"] for document in documents] == [1, 2]
    assert "idempotency_key" not in documents[0]
    assert documents[1]["idempotency_key"] == "retry-1"


# Missing and empty


def test_missing_chronicum_is_not_found_everywhere(store: MongoStore) -> None:
    missing = fresh_id("missing")
    for call in (
        lambda: store.get(missing),
        lambda: store.acta(missing, ActaQuery()),
        lambda: store.acta(missing, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3)),
        lambda: store.record(message(missing, "hello")),
        lambda: store.record_idempotent(message(missing, "hello"), "k"),
    ):
        with pytest.raises(ChronicumNotFound):
            call()
    assert store.database["acta"].count_documents({"chronicum_id": missing}) == 0


def test_empty_chronicum_and_empty_window_are_empty_lists(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    assert store.acta(chronicum_id, ActaQuery()) == []
    store.record(Actum(chronicum_id, ActumKind.THOUGHT, ActorKind.AGENT, "concierge", "Search first."))
    assert store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3)) == []


# Order


def test_window_filters_before_the_limit_and_returns_oldest_first(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    written = []
    for index in range(10):
        kind = ActumKind.MESSAGE if index % 3 == 0 else ActumKind.THOUGHT
        written.append(
            store.record(Actum(chronicum_id, kind, ActorKind.AGENT, "a", f"{index}", id=f"{index}"))
        )
    window = store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3))
    assert [actum.content for actum in window] == ["3", "6", "9"]
    assert store.acta(chronicum_id, ActaQuery(last_n=-1)) == written


def test_forty_threads_into_one_chronicum_leave_an_unbroken_sequence(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    barrier = threading.Barrier(40)
    results: list[Actum] = []

    def write(index: int) -> None:
        barrier.wait()
        results.append(store.record(message(chronicum_id, f"{index}", f"id-{index}")))

    threads = [threading.Thread(target=write, args=(index,)) for index in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = store.acta(chronicum_id, ActaQuery())
    assert sorted(actum.id for actum in stored) == sorted(f"id-{index}" for index in range(40))
    assert sequence_numbers(store, chronicum_id) == list(range(1, 41))


def test_readers_never_see_an_actum_without_those_before_it(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    done = threading.Event()
    broken: list[list[str]] = []

    def write(writer: int) -> None:
        for index in range(15):
            store.record(message(chronicum_id, f"{writer}:{index}", f"{writer}-{index:02d}"))

    def read() -> None:
        previous: list[str] = []
        while not done.is_set():
            current = [actum.id for actum in store.acta(chronicum_id, ActaQuery())]
            if current[: len(previous)] != previous:  # an earlier window must be a prefix of a later one
                broken.append(current)
            previous = current

    writers = [threading.Thread(target=write, args=(writer,)) for writer in range(6)]
    reader = threading.Thread(target=read)
    reader.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    reader.join()
    assert broken == []
    assert sequence_numbers(store, chronicum_id) == list(range(1, 91))


def test_two_stores_writing_one_chronicum_keep_one_order(
    store: MongoStore, mongodb_server_url: str, database: str
) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    with MongoStore(mongodb_server_url, database=database) as other:
        expected = []
        for index in range(6):
            writer = store if index % 2 else other  # each one's remembered sequence goes stale in turn
            expected.append(writer.record(message(chronicum_id, f"{index}")).id)
    assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == expected
    assert sequence_numbers(store, chronicum_id) == list(range(1, 7))


# Idempotency


def test_forty_threads_with_one_key_store_one_actum(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    store.record(message(chronicum_id, "before"))
    barrier = threading.Barrier(40)
    results: list[Actum] = []

    def write(index: int) -> None:
        barrier.wait()
        results.append(
            store.record_idempotent(message(chronicum_id, f"reply {index}", f"k-{index}"), "booking-reply-1")
        )

    threads = [threading.Thread(target=write, args=(index,)) for index in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({actum.id for actum in results}) == 1
    assert len(set(results)) == 1
    stored = store.acta(chronicum_id, ActaQuery())
    assert [actum.content for actum in stored] == ["before", results[0].content]
    assert stored[1] == results[0]
    after = store.record(message(chronicum_id, "after"))
    assert store.acta(chronicum_id, ActaQuery(last_n=1)) == [after]
    assert sequence_numbers(store, chronicum_id) == [1, 2, 3]


def test_forty_tasks_with_one_key_store_one_actum(mongodb_server_url: str, database: str) -> None:
    chronicum_id = fresh_id()

    async def scenario() -> tuple[list[Actum], list[Actum]]:
        opened = AsyncMongoStore(mongodb_server_url, database=database)
        try:
            await opened.create(started(chronicum_id))
            results = await asyncio.gather(
                *(
                    opened.record_idempotent(message(chronicum_id, f"{index}", f"k-{index}"), "key")
                    for index in range(40)
                )
            )
            return list(results), await opened.acta(chronicum_id, ActaQuery())
        finally:
            await opened.close()

    results, stored = run(scenario)
    assert len(set(results)) == 1
    assert stored == [results[0]]


def test_retry_with_reworded_content_returns_the_first_one(store: MongoStore) -> None:
    chronicarius = Chronicarius(store)
    chronicum_id = fresh_id("dinner-friday")
    first = chronicarius.record_actum(
        "ardian", message(chronicum_id, "Booked Rumah Teduh."), idempotency_key="booking-reply-1"
    )
    retry = chronicarius.record_actum(
        "ardian", message(chronicum_id, "Rumah Teduh is booked."), idempotency_key="booking-reply-1"
    )
    assert retry == first
    other = fresh_id("other")
    elsewhere = chronicarius.record_actum(
        "ardian", message(other, "same key"), idempotency_key="booking-reply-1"
    )
    assert elsewhere.id != first.id
    assert chronicarius.get_acta("ardian", chronicum_id) == [first]


# Size


def test_an_actum_over_the_limit_is_refused_and_nothing_is_written(store: MongoStore) -> None:
    limit = store.max_content_bytes()
    assert limit == MAX_DOCUMENT_BYTES - DOCUMENT_RESERVE
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    store.record(message(chronicum_id, "before"))
    with pytest.raises(ActumTooLarge) as raised:
        store.record(message(chronicum_id, "y" * MAX_DOCUMENT_BYTES))
    assert (raised.value.size, raised.value.limit) == (MAX_DOCUMENT_BYTES, limit)
    assert str(raised.value.size) in str(raised.value)
    with pytest.raises(ActumTooLarge):  # four bytes a code point: the exact size decides, not the length
        store.record_idempotent(message(chronicum_id, "🍽" * (limit // 4 + 1)), "big")
    after = store.record(message(chronicum_id, "after"))
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["before", "after"]
    assert store.get(chronicum_id).last_actum_at == after.at
    assert sequence_numbers(store, chronicum_id) == [1, 2]


def test_content_of_the_limit_fits_with_every_id_at_its_largest(store: MongoStore) -> None:
    """The reserve holds: the widest ids, key, native format and content fit in one document."""
    limit = store.max_content_bytes()
    assert limit is not None
    widest = "🍽" * MAX_ID_LENGTH
    store.create(started(widest))
    native = Native(widest, "")
    kind = ActumKind.TOOL_RESPONSE
    actum = Actum(widest, kind, ActorKind.SYSTEM, widest, "x" * limit, widest, native=native)
    stored = store.record_idempotent(actum, widest)
    (read,) = store.acta(widest, ActaQuery())
    assert read.content == actum.content and read.id == widest and stored.at == read.at
    assert read.native == native
    document = store.database["acta"].find_one({"chronicum_id": widest})
    assert document is not None
    assert len(bson.encode(document)) <= MAX_DOCUMENT_BYTES


def test_the_limit_is_the_servers_and_the_option_lowers_it(
    store: MongoStore, mongodb_server_url: str, database: str
) -> None:
    client: MongoClient[dict[str, Any]]
    with MongoClient(mongodb_server_url) as client:
        largest = int(client.admin.command("hello")["maxBsonObjectSize"])
    assert store.max_content_bytes() == largest - DOCUMENT_RESERVE
    with MongoStore(mongodb_server_url, database=database, max_content_bytes="10") as lowered:
        assert lowered.max_content_bytes() == 10
        lowered.create(started(chronicum_id := fresh_id()))
        with pytest.raises(ActumTooLarge):
            lowered.record(message(chronicum_id, "x" * 11))
    for value in (-1, "lots", MAX_DOCUMENT_BYTES):
        with pytest.raises(InvalidOption) as invalid:
            MongoStore(mongodb_server_url, database=database, max_content_bytes=value)
        assert invalid.value.option == "max_content_bytes"
        assert "from 0 to " in invalid.value.reason


def test_a_refusal_of_the_document_is_too_large_and_the_store_goes_on(store: MongoStore) -> None:
    """The server's limit went down after the store read it: pymongo's refusal is ActumTooLarge."""
    limit = store.max_content_bytes()
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    store.plans._content_limit = 2**40  # as if read before the limit went down
    with pytest.raises(ActumTooLarge) as raised:
        store.record(message(chronicum_id, "x" * (20 * 1024 * 1024)))
    assert (raised.value.size, raised.value.limit) == (20 * 1024 * 1024, limit)
    assert raised.value.__cause__ is not None
    after = store.record(message(chronicum_id, "after"))
    assert store.acta(chronicum_id, ActaQuery()) == [after]


def test_an_async_refusal_of_the_document_is_too_large_and_the_store_goes_on(
    async_store: AsyncMongoStore,
) -> None:
    async def scenario() -> None:
        try:
            limit = await async_store.max_content_bytes()
            assert limit == MAX_DOCUMENT_BYTES - DOCUMENT_RESERVE
            chronicum_id = fresh_id()
            await async_store.create(started(chronicum_id))
            async_store.plans._content_limit = 2**40
            writing = async_store.record_idempotent(message(chronicum_id, "x" * (20 * 1024 * 1024)), "big")
            with pytest.raises(ActumTooLarge) as raised:
                await writing
            assert raised.value.limit == limit
            after = await async_store.record_idempotent(message(chronicum_id, "after"), "big")
            assert await async_store.acta(chronicum_id, ActaQuery()) == [after]
        finally:
            await async_store.close()

    asyncio.run(scenario())


def test_an_actum_of_exactly_the_limit_is_stored(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    content = "z" * (MAX_DOCUMENT_BYTES - DOCUMENT_RESERVE)
    store.record(message(chronicum_id, content))
    assert store.acta(chronicum_id, ActaQuery())[0].content == content


# Errors


def test_an_unreachable_server_is_a_connect_store_error_whatever_the_operation(store: MongoStore) -> None:
    with MongoStore(
        "mongodb://127.0.0.1:9/chronica",
        auto_migrate=False,
        serverSelectionTimeoutMS=200,
        connectTimeoutMS=200,
    ) as unreachable:
        # Opened without auto_migrate, the store first looks at its collections before its first
        # operation; whatever needed the server, the error says it could not connect.
        with pytest.raises(StoreError) as raised:
            unreachable.get("anything")
        assert raised.value.where == "mongodb: connect"
        assert isinstance(raised.value.__cause__, PyMongoError)
        with pytest.raises(StoreError, match=r"^mongodb: connect: "):
            unreachable.record(message("anything", "hello"))
        with pytest.raises(StoreError, match=r"^mongodb: connect: "):
            unreachable.acta("anything", ActaQuery())
        with pytest.raises(StoreError, match=r"^mongodb: connect: "):
            unreachable.create(started("anything"))


def test_unreachable_server_in_the_async_flavour(mongodb_server_url: str) -> None:
    async def scenario() -> StoreError:
        unreachable = AsyncMongoStore("mongodb://127.0.0.1:9/chronica", serverSelectionTimeoutMS=200)
        try:
            await unreachable.get("anything")
        except StoreError as error:
            return error
        finally:
            await unreachable.close()
        raise AssertionError("no error")

    error = run(scenario)
    assert error.where == "mongodb: connect"  # not the migration a first use runs
    assert isinstance(error.__cause__, PyMongoError)


@pytest.mark.parametrize("url", ["mongodb://", "mongodb://127.0.0.1:notaport/x"])
def test_a_malformed_url_is_an_open_error(url: str) -> None:
    with pytest.raises(StoreError, match=r"^mongodb: open: ") as raised:
        open_store(url)
    assert isinstance(raised.value.__cause__, PyMongoError | ValueError)
    with pytest.raises(StoreError, match=r"^mongodb: open: "):
        open_async_store(url)


@pytest.mark.parametrize("opener", [open_store, open_async_store])
def test_a_url_that_cannot_be_split_is_an_open_error_without_its_password(opener: Callable[..., Any]) -> None:
    with pytest.raises(StoreError, match=r"^mongodb: open: ") as raised:
        opener("mongodb://u:pw-never-shown-7q@[::1/db")
    assert isinstance(raised.value.__cause__, ValueError)
    assert all("pw-never-shown-7q" not in str(linked) for linked in linked_exceptions(raised.value))


UNREACHABLE = "mongodb://127.0.0.1:9/chronica"  # nothing listens: every option is checked before connecting
Opener = Callable[..., Any]
OPENERS = [pytest.param(open_store, id="blocking"), pytest.param(open_async_store, id="asyncio")]


@pytest.mark.parametrize("opener", OPENERS)
@pytest.mark.parametrize(("option", "suggestion"), [("colour", None), ("datbase", "database")])
def test_an_unknown_option_is_invalid_and_lists_the_known_ones(
    opener: Opener, option: str, suggestion: str | None
) -> None:
    with pytest.raises(InvalidOption) as raised:
        opener(UNREACHABLE, **{option: "blue"})
    error = raised.value
    assert (error.backend, error.option) == ("mongodb", option)
    assert error.reason.startswith("unknown option")
    known = error.reason.partition("; known options: ")[2]
    assert known.startswith(
        "database, auto_migrate, operation_timeout, max_content_bytes, "
        "and pymongo's MongoClient options (any case): "
    )
    assert {"maxpoolsize", "w", "port", "serverselectiontimeoutms"} <= set(
        known.split(": ", 1)[1].split(", ")
    )
    assert ("did you mean database?" in error.reason) == (suggestion == "database")
    assert isinstance(error, ValueError)
    assert not isinstance(error, StoreError)


@pytest.mark.parametrize("opener", OPENERS)
@pytest.mark.parametrize(
    ("options", "option", "reason"),
    [
        ({"auto_migrate": "maybe"}, "auto_migrate", "expected true or false, got 'maybe'"),
        ({"database": ""}, "database", "a database name cannot be empty, got ''"),
        ({"database": "a b"}, "database", "a database name cannot contain ' ', got 'a b'"),
        ({"database": "x.y"}, "database", "a database name cannot contain '.', got 'x.y'"),
        (
            {"database": "d" * 64},
            "database",
            "a database name is at most 63 bytes in UTF-8, got '" + "d" * 64 + "'",
        ),
        ({"database": 7}, "database", "expected a database name, got 7"),
        ({"maxPoolSize": "many"}, "maxPoolSize", "expected a whole number from 0 to 1000, got 'many'"),
        (
            {"localThresholdMS": "soon"},
            "localThresholdMS",
            "expected milliseconds from 0 to 3.6e+06, got 'soon'",
        ),
        ({"retryWrites": "often"}, "retryWrites", "The value of retryWrites must be 'true' or 'false'"),
        ({"tls": "perhaps"}, "tls", "The value of tls must be 'true' or 'false'"),
        ({"port": "27017"}, "port", "expected a port number (an int), got '27017'"),
        ({"host": "elsewhere"}, "host", "the URL names the host(s); give it there"),
        (
            {"tls": True, "tlsInsecure": True, "tlsAllowInvalidCertificates": True},
            "tlsInsecure",
            "URI options tlsInsecure and tlsAllowInvalidCertificates cannot be specified simultaneously.",
        ),
    ],
)
def test_a_malformed_option_is_invalid_and_names_it(
    opener: Opener, options: dict[str, Any], option: str, reason: str
) -> None:
    with pytest.raises(InvalidOption) as raised:
        opener(UNREACHABLE, **options)
    assert (raised.value.backend, raised.value.option, raised.value.reason) == ("mongodb", option, reason)
    assert str(raised.value) == f"mongodb: option {option}: {reason}"


def test_well_formed_options_given_as_text_are_accepted() -> None:
    options: dict[str, Any] = {
        "auto_migrate": "off",
        "maxPoolSize": "7",
        "w": "majority",
        "serverSelectionTimeoutMS": "200",
    }
    with MongoStore(UNREACHABLE, database="given", **options) as store:
        assert store.database.name == "given"
        assert store.client.options.pool_options.max_pool_size == 7
        assert store.client.write_concern.document == {"w": "majority"}


def test_an_unusable_database_in_the_url_path_is_an_open_error() -> None:
    with pytest.raises(StoreError, match=r"^mongodb: open: the URL's path names no database: .*'a\.b'"):
        open_store("mongodb://127.0.0.1:9/a.b", auto_migrate=False)


def test_a_conflicting_index_is_a_migrate_error(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    name = fresh_database()
    client: MongoClient[dict[str, Any]]
    with MongoClient(mongodb_server_url) as client:
        client[name]["acta"].create_index([("seq", 1)], name="chronicum_seq")
    with pytest.raises(StoreError, match=r"^mongodb: migrate: "):
        MongoStore(mongodb_server_url, database=name)


def test_a_writer_whose_clock_is_behind_never_moves_at_backwards(
    store: MongoStore, mongodb_server_url: str, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second host an hour behind writes after the first: its actum takes the newer ``at``."""
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    first = store.record(message(chronicum_id, "from the host on time"))
    behind_by = timedelta(hours=1)
    on_time = core._now
    monkeypatch.setattr(core, "_now", lambda: on_time() - behind_by)
    with MongoStore(mongodb_server_url, database=database) as behind:
        second = behind.record(message(chronicum_id, "from the host behind"))
        third = behind.record(message(chronicum_id, "again from the host behind"))
    assert second.at == third.at == first.at
    assert [actum.at for actum in store.acta(chronicum_id, ActaQuery())] == [first.at] * 3
    assert store.get(chronicum_id).last_actum_at == first.at


# Withdraw: a writer landing between its steps


def _withdraw_with_a_writer(store: MongoStore, chronicum_id: str, after: tuple[str, str]) -> tuple[bool, Any]:
    """Run ``withdraw`` with another writer's ``record`` right after its command ``(collection, method)``.

    Returns what withdraw returned and what the writer's record returned (or raised).
    """
    writer: list[Any] = []

    def perform(command: core.Command) -> Any:
        outcome = getattr(store.database[command.collection], command.method)(*command.args, **command.kwargs)
        outcome = outcome.to_list() if command.cursor else outcome
        if (command.collection, command.method) == after and not writer:
            try:
                writer.append(store.record(message(chronicum_id, "landed meanwhile")))
            except ChronicumNotFound as refused:
                writer.append(refused)
        return outcome

    withdrawn = run_plan(store.plans.withdraw(chronicum_id, owner_digest("ardian")), perform)
    return withdrawn, writer[0]


def test_withdraw_gives_back_a_chronicum_written_between_its_look_and_its_marker(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    withdrawn, written = _withdraw_with_a_writer(store, chronicum_id, ("acta", "find_one"))
    assert withdrawn is False
    assert isinstance(written, Actum)
    assert store.get(chronicum_id).owner_id == "ardian"
    assert [actum.id for actum in store.acta(chronicum_id, ActaQuery())] == [written.id]
    assert store.record(message(chronicum_id, "and after")).content == "and after"
    assert sequence_numbers(store, chronicum_id) == [1, 2]


def test_withdraw_refuses_a_write_that_lands_after_its_marker(store: MongoStore) -> None:
    chronicum_id = fresh_id()
    store.create(started(chronicum_id))
    withdrawn, written = _withdraw_with_a_writer(store, chronicum_id, ("chronica", "find_one_and_replace"))
    assert withdrawn is True
    assert isinstance(written, ChronicumNotFound)
    with pytest.raises(ChronicumNotFound):
        store.get(chronicum_id)
    assert sequence_numbers(store, chronicum_id) == []
    assert store.database["chronica"].find_one({"_id": chronicum_id}) == {
        "_id": chronicum_id,
        "owner_digest": owner_digest("ardian"),
    }
