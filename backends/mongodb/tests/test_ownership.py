"""Only collections it created, and database names that mean exactly one database.

``chronica`` or ``acta`` collections of another application (documents without this package's
fields, or indexes it does not make) are refused at open (``auto_migrate``) or before the first
operation (without it), and left as they were. A ``database`` name is used exactly as given, or
refused with ``InvalidOption``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from chronica_mongodb import AsyncMongoStore, MongoStore
from pymongo import MongoClient

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, InvalidOption, StoreError

THEIRS: dict[str, Any] = {"_id": 7, "note": "theirs"}


def _their_collection(url: str, database: str, collection: str, *, indexed: bool) -> None:
    with MongoClient[dict[str, Any]](url) as client:
        if indexed:  # empty, with an index of its own
            client[database][collection].create_index([("note", 1)], name="by_note")
        else:
            client[database][collection].insert_one(dict(THEIRS))


def _assert_untouched(url: str, database: str, collection: str, *, indexed: bool) -> None:
    client: MongoClient[dict[str, Any]]
    with MongoClient(url) as client:
        assert client[database].list_collection_names() == [collection]
        indexes = sorted(index["name"] for index in client[database][collection].list_indexes())
        assert indexes == (["_id_", "by_note"] if indexed else ["_id_"])
        documents: list[dict[str, Any]] = list(client[database][collection].find())
        assert documents == ([] if indexed else [THEIRS])


def _assert_refused(error: StoreError, where: str, collection: str, *, indexed: bool) -> None:
    assert error.where == where
    if indexed:
        assert f"{collection} has indexes chronica-mongodb does not make (by_note)" in error.detail
    else:
        assert f"{collection} holds documents without chronica-mongodb's fields" in error.detail
    assert "another application's" in error.detail
    assert "left these untouched" in error.detail
    assert "Give another database (the database option" in error.detail


CASES = [
    pytest.param(collection, indexed, id=f"{collection}-{'indexed' if indexed else 'document'}")
    for collection in ("acta", "chronica")
    for indexed in (False, True)
]
WHERE = [(True, "mongodb: migrate"), (False, "mongodb: open")]


@pytest.mark.parametrize(("collection", "indexed"), CASES)
@pytest.mark.parametrize(("auto_migrate", "where"), WHERE)
def test_a_store_refuses_another_applications_collections(
    mongodb_server_url: str,
    database: str,
    collection: str,
    indexed: bool,
    auto_migrate: bool,
    where: str,
) -> None:
    _their_collection(mongodb_server_url, database, collection, indexed=indexed)
    with pytest.raises(StoreError) as raised:  # noqa: PT012
        store = MongoStore(mongodb_server_url, database=database, auto_migrate=auto_migrate)
        try:  # without auto_migrate, opening does no I/O: the first operation checks
            store.create(Chronicum("c", "ardian", datetime.now(UTC)))
        finally:
            store.close()
    _assert_refused(raised.value, where, collection, indexed=indexed)
    _assert_untouched(mongodb_server_url, database, collection, indexed=indexed)


@pytest.mark.parametrize(("collection", "indexed"), CASES)
@pytest.mark.parametrize(("auto_migrate", "where"), WHERE)
def test_an_async_store_refuses_another_applications_collections(
    mongodb_server_url: str,
    database: str,
    collection: str,
    indexed: bool,
    auto_migrate: bool,
    where: str,
) -> None:
    _their_collection(mongodb_server_url, database, collection, indexed=indexed)

    async def first_use() -> StoreError:
        store = AsyncMongoStore(mongodb_server_url, database=database, auto_migrate=auto_migrate)
        try:
            with pytest.raises(StoreError) as raised:
                await store.create(Chronicum("c", "ardian", datetime.now(UTC)))
            return raised.value
        finally:
            await store.close()

    _assert_refused(asyncio.run(first_use()), where, collection, indexed=indexed)
    _assert_untouched(mongodb_server_url, database, collection, indexed=indexed)


def test_a_store_opened_without_auto_migrate_over_its_own_collections_works(
    mongodb_server_url: str, database: str
) -> None:
    with MongoStore(mongodb_server_url, database=database, auto_migrate=False) as store:
        store.create(Chronicum("c", "ardian", datetime.now(UTC)))  # not migrated: nothing in the way
    with MongoStore(mongodb_server_url, database=database) as store:  # migrates over its own documents
        store.record(Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hello"))
    with MongoStore(mongodb_server_url, database=database, auto_migrate=False) as store:
        assert [actum.content for actum in store.acta("c", ActaQuery())] == ["hello"]


def test_an_async_store_opened_without_auto_migrate_over_its_own_collections_works(
    mongodb_server_url: str, database: str
) -> None:
    async def scenario() -> list[str]:
        for auto_migrate in (False, True, False):  # unmigrated, then migrated, its own documents
            store = AsyncMongoStore(mongodb_server_url, database=database, auto_migrate=auto_migrate)
            try:
                if auto_migrate is False and not await store.database.list_collection_names():
                    await store.create(Chronicum("c", "ardian", datetime.now(UTC)))
                await store.record(Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hello"))
            finally:
                await store.close()
        store = AsyncMongoStore(mongodb_server_url, database=database, auto_migrate=False)
        try:
            return [actum.content for actum in await store.acta("c", ActaQuery())]
        finally:
            await store.close()

    assert asyncio.run(scenario()) == ["hello"] * 3


# -- database names ------------------------------------------------------------------------------


def test_distinct_database_names_are_distinct_databases(
    mongodb_server_url: str, fresh_database: Callable[[], str]
) -> None:
    base = fresh_database()
    names = [base, f"{base}\ta", f"{base}\t\ta", f"{base}%", f"{base}-{{x}}", f"{base}é", f"{base}E"]
    names.append(f"{base}_".ljust(61, "x") + "é")  # 63 bytes in UTF-8
    assert len(set(names)) == len(names)
    assert len(names[-1].encode()) == 63
    client: MongoClient[dict[str, Any]]
    with MongoClient(mongodb_server_url) as client:
        try:
            for name in names:
                with MongoStore(mongodb_server_url, database=name) as store:
                    store.create(Chronicum("same-id", name, datetime.now(UTC)))
            for name in names:
                with MongoStore(mongodb_server_url, database=name) as store:
                    assert store.get("same-id").owner_id == name
        finally:
            for name in names:
                client.drop_database(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a" * 64, "at most 63 bytes"),
        ("é" * 32, "at most 63 bytes"),
        ("tenant a", "cannot contain ' '"),
        ("tenant.a", "cannot contain '.'"),
        ("tenant/a", "cannot contain '/'"),
        ("tenant\\a", "cannot contain '\\\\'"),
        ('tenant"a', "cannot contain '\"'"),
        ("tenant$a", "cannot contain '$'"),
        ("tenant\x00a", "cannot contain '\\x00'"),
        ("", "cannot be empty"),
    ],
)
def test_database_names_mongodb_cannot_use_are_refused(name: str, reason: str) -> None:
    for opener in (MongoStore, AsyncMongoStore):
        with pytest.raises(InvalidOption) as raised:
            opener("mongodb://127.0.0.1:9", database=name, auto_migrate=False)
        assert raised.value.option == "database"
        assert reason in raised.value.reason, raised.value.reason
