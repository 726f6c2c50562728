"""Only tables it created, and schema names that mean exactly one schema, on every dialect.

A store opened over ``chronica`` or ``acta`` tables chronica-sqlalchemy did not create (another
application's, or chronica-postgres's) refuses at open, whatever ``auto_migrate`` says, and leaves
them as they were; chronica-postgres refuses chronica-sqlalchemy's tables the same way. A
``schema`` name is used exactly as given, or refused with ``InvalidOption`` when the database
would cut, change or refuse it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from chronica_sqlalchemy import SQLAlchemyStore, open_async_sqlalchemy_store
from conftest import SQLITE_DIALECTS, ServerDatabases
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.schema import DropSchema

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    ChronicumNotFound,
    InvalidOption,
    StoreError,
    new_actum_id,
)


@dataclass
class Place:
    """Where a test's tables live: a store URL and options, and an engine to look with."""

    url: str
    options: dict[str, Any]
    engine: Engine
    schema: str | None

    def qualified(self, table: str) -> str:
        preparer = self.engine.dialect.identifier_preparer
        name = preparer.quote(table)
        return name if self.schema is None else f"{preparer.quote_schema(self.schema)}.{name}"

    def tables(self) -> list[str]:
        return sorted(inspect(self.engine).get_table_names(schema=self.schema))

    def run(self, statement: str) -> list[tuple[Any, ...]]:
        with self.engine.begin() as connection:
            result = connection.execute(text(statement))
            return [tuple(row) for row in result] if result.returns_rows else []


def _drop(engine: Engine, schema: str) -> None:
    # DropSchema, not text(): a "%" in the name is escaped for the driver only by SQLAlchemy's own
    # constructs (text() with no parameters sent "50%% x" to PyMySQL, which dropped nothing).
    with engine.connect() as connection:
        connection.execute(DropSchema(schema, cascade=engine.dialect.name == "postgresql", if_exists=True))


@pytest.fixture
def place(dialect: str, database_url: str, tmp_path: Path) -> Iterator[Place]:
    """An empty place for tables: a new SQLite file, or a new schema (MariaDB: database)."""
    if dialect in SQLITE_DIALECTS:
        path = tmp_path / "theirs.db"
        engine = create_engine(f"sqlite:///{path}")
        scheme = "sqlite+aiosqlite" if dialect == "aiosqlite" else "sqlite"
        yield Place(f"{scheme}:///{path}", {}, engine, None)
        engine.dispose()
        return
    engine = create_engine(make_url(database_url), isolation_level="AUTOCOMMIT", pool_size=1)
    schema = f"chronica_test_place_{uuid.uuid4().hex[:12]}"
    keyword = "SCHEMA" if engine.dialect.name == "postgresql" else "DATABASE"
    with engine.connect() as connection:
        connection.execute(text(f"CREATE {keyword} {schema}"))
    try:
        yield Place(database_url, {"schema": schema}, engine, schema)
    finally:
        _drop(engine, schema)
        engine.dispose()


# -- another application's tables -----------------------------------------------------------------


def _their_table(place: Place, table: str) -> None:
    place.run(f"CREATE TABLE {place.qualified(table)} (id INTEGER PRIMARY KEY, note VARCHAR(20) NOT NULL)")
    place.run(f"INSERT INTO {place.qualified(table)} (id, note) VALUES (7, 'theirs')")


def _assert_untouched(place: Place, table: str) -> None:
    assert place.tables() == [table]  # nor was a version table of ours left behind
    columns = inspect(place.engine).get_columns(table, schema=place.schema)
    assert [column["name"] for column in columns] == ["id", "note"]
    assert place.run(f"SELECT id, note FROM {place.qualified(table)}") == [(7, "theirs")]


def _assert_refused(error: StoreError, where: str, place: Place, table: str) -> None:
    assert error.where == where
    holder = "the database" if place.schema is None else f"schema {place.schema!r}"
    assert f"{holder} holds {table}: tables chronica-sqlalchemy did not create" in error.detail
    assert "another application's" in error.detail
    assert "left these untouched" in error.detail
    expected = "another database file" if place.schema is None else "another schema (the schema option)"
    assert expected in error.detail


WHERE = [(True, "sqlalchemy: migrate"), (False, "sqlalchemy: open")]


@pytest.mark.parametrize("table", ["acta", "chronica"])
@pytest.mark.parametrize(("auto_migrate", "where"), WHERE)
def test_a_store_refuses_at_open_another_applications_table(
    place: Place, table: str, auto_migrate: bool, where: str
) -> None:
    _their_table(place, table)
    with pytest.raises(StoreError) as raised:
        SQLAlchemyStore.open(place.url, **place.options, auto_migrate=auto_migrate)
    _assert_refused(raised.value, where, place, table)
    _assert_untouched(place, table)


@pytest.mark.parametrize("table", ["acta", "chronica"])
@pytest.mark.parametrize(("auto_migrate", "where"), WHERE)
def test_an_async_store_refuses_at_first_use_another_applications_table(
    place: Place, table: str, auto_migrate: bool, where: str
) -> None:
    _their_table(place, table)

    async def first_use() -> StoreError:
        store = open_async_sqlalchemy_store(place.url, **place.options, auto_migrate=auto_migrate)
        try:
            with pytest.raises(StoreError) as raised:
                await store.create(Chronicum("c", "ardian", datetime.now(UTC)))
            return raised.value
        finally:
            await store.close()

    _assert_refused(asyncio.run(first_use()), where, place, table)
    _assert_untouched(place, table)


# -- the two PostgreSQL backends never share tables -----------------------------------------------


def _libpq_url(database_url: str) -> str:
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _hello(chronicum_id: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hello", id=new_actum_id())


@pytest.mark.dialects("postgresql")
def test_chronica_postgres_tables_are_refused_by_this_backend(place: Place) -> None:
    assert place.schema is not None
    libpq = _libpq_url(place.url)
    with PostgresStore(libpq, schema=place.schema) as theirs:
        theirs.create(Chronicum("dinner-friday", "ardian", datetime.now(UTC)))
        theirs.record(_hello("dinner-friday"))
    before = {
        table: inspect(place.engine).get_columns(table, schema=place.schema) for table in place.tables()
    }

    for auto_migrate, where in WHERE:
        with pytest.raises(StoreError) as raised:
            SQLAlchemyStore.open(place.url, schema=place.schema, auto_migrate=auto_migrate)
        assert raised.value.where == where
        assert "they look like chronica-postgres's" in raised.value.detail
        assert "or open this one with chronica-postgres" in raised.value.detail

        async def first_use(auto_migrate: bool = auto_migrate) -> StoreError:
            store = open_async_sqlalchemy_store(place.url, schema=place.schema, auto_migrate=auto_migrate)
            try:
                with pytest.raises(StoreError) as raised:
                    await store.record(_hello("dinner-friday"))
                return raised.value
            finally:
                await store.close()

        assert asyncio.run(first_use()).where == where

    after = {table: inspect(place.engine).get_columns(table, schema=place.schema) for table in place.tables()}
    assert after.keys() == before.keys() == {"acta", "chronica", "chronica_schema_version"}
    assert [(c["name"], str(c["type"])) for c in after["acta"]] == [
        (c["name"], str(c["type"])) for c in before["acta"]
    ]
    with PostgresStore(libpq, schema=place.schema) as theirs:
        assert [actum.content for actum in theirs.acta("dinner-friday", ActaQuery())] == ["hello"]


@pytest.mark.dialects("postgresql")
def test_this_backends_tables_are_refused_by_chronica_postgres(place: Place) -> None:
    assert place.schema is not None
    with SQLAlchemyStore.open(place.url, schema=place.schema) as ours:
        ours.create(Chronicum("dinner-friday", "ardian", datetime.now(UTC)))
        ours.record(_hello("dinner-friday"))
    libpq = _libpq_url(place.url)

    for auto_migrate, where in ((True, "postgres: migrate"), (False, "postgres: open")):
        with pytest.raises(StoreError) as raised:
            PostgresStore(libpq, schema=place.schema, auto_migrate=auto_migrate)
        assert raised.value.where == where
        assert "they look like chronica-sqlalchemy's" in raised.value.detail
        assert "or open this one with chronica-sqlalchemy" in raised.value.detail

        async def first_use(auto_migrate: bool = auto_migrate) -> StoreError:
            store = AsyncPostgresStore(libpq, schema=place.schema, auto_migrate=auto_migrate)
            try:
                with pytest.raises(StoreError) as raised:
                    await store.record(_hello("dinner-friday"))
                return raised.value
            finally:
                await store.close()

        assert asyncio.run(first_use()).where == where

    assert place.tables() == ["acta", "chronica", "chronica_schema", "lineages", "summaries"]
    with SQLAlchemyStore.open(place.url, schema=place.schema) as ours:
        assert [actum.content for actum in ours.acta("dinner-friday", ActaQuery())] == ["hello"]


# -- schema names --------------------------------------------------------------------------------


def _distinct_names(dialect_name: str, tag: str) -> list[str]:
    """Names the database must keep apart, each unique to this run by ``tag``."""
    names = [
        f"tenant {tag} a",
        f"tenant {tag}  a",
        f"tenant {tag}\ta",
        f"50% {tag}",
        f"50%% {tag}",
        f"x$migration$y {tag}",
        f"{{schema}} {tag}",
        f'q"uote {tag}',
        f"q`uote {tag}",
        f" lead {tag}",
    ]
    if dialect_name == "postgresql":
        longest = f"t{tag}_" + "é" * ((63 - len(tag) - 2) // 2)
        names += [f"Tenant {tag} A", longest + "x" * (63 - len(longest.encode()))]
    else:
        names.append(f"t{tag}_".ljust(64, "x"))
    return names


SERVERS = pytest.mark.dialects("mariadb", "postgresql")  # SQLite has no schemas (the option is refused)


@pytest.fixture
def server(servers: ServerDatabases | None) -> ServerDatabases:
    assert servers is not None
    return servers


def _dropping(server: ServerDatabases, database_url: str) -> Callable[[list[str]], None]:
    engine = create_engine(make_url(database_url), isolation_level="AUTOCOMMIT", pool_size=1)

    def drop(names: list[str]) -> None:
        for name in names:
            _drop(engine, name)
        engine.dispose()

    return drop


@SERVERS
def test_distinct_schema_names_are_distinct_schemas(server: ServerDatabases, database_url: str) -> None:
    dialect_name = make_url(database_url).get_backend_name()
    names = _distinct_names(dialect_name, uuid.uuid4().hex[:8])
    assert len(set(names)) == len(names)
    drop = _dropping(server, database_url)
    try:
        stores = [SQLAlchemyStore.open(database_url, schema=name, pool_size=1) for name in names]
        try:
            for store, name in zip(stores, names, strict=True):
                store.create(Chronicum("same-id", name, datetime.now(UTC)))
            for store, name in zip(stores, names, strict=True):
                assert store.get("same-id").owner_id == name
        finally:
            for store in stores:
                store.close()
    finally:
        drop(names)


@SERVERS
def test_distinct_schema_names_are_distinct_schemas_async(server: ServerDatabases, database_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    names = [f"tenant {tag} a", f"tenant {tag}  a", f"tenant {tag}\ta", f"50% {tag}"]
    drop = _dropping(server, database_url)

    async def write_and_read() -> None:
        stores = [open_async_sqlalchemy_store(database_url, schema=name, pool_size=1) for name in names]
        try:
            for store, name in zip(stores, names, strict=True):
                await store.create(Chronicum("same-id", name, datetime.now(UTC)))
                await store.record(_hello("same-id"))
            for store, name in zip(stores, names, strict=True):
                assert (await store.get("same-id")).owner_id == name
                assert len(await store.acta("same-id", ActaQuery())) == 1
        finally:
            for store in stores:
                await store.close()

    try:
        asyncio.run(write_and_read())
    finally:
        drop(names)


@SERVERS
def test_a_schema_written_under_one_name_is_not_seen_under_a_similar_one(
    server: ServerDatabases, database_url: str
) -> None:
    tag = uuid.uuid4().hex[:8]
    written, other = f"tenant {tag}\ta", f"tenant {tag} a"
    drop = _dropping(server, database_url)
    try:
        with SQLAlchemyStore.open(database_url, schema=written) as store:
            store.create(Chronicum("c", "ardian", datetime.now(UTC)))
        with SQLAlchemyStore.open(database_url, schema=other) as store, pytest.raises(ChronicumNotFound):
            store.get("c")
    finally:
        drop([written, other])


REFUSED = {
    "postgresql": [
        ("a" * 64, "64 bytes in UTF-8, longer than PostgreSQL's 63-byte identifiers"),
        ("é" * 32, "64 bytes in UTF-8"),
        ("pg_tenant", "cannot start with pg_"),
    ],
    "mariadb": [
        ("a" * 65, "65 characters, longer than MariaDB/MySQL's 64"),
        ("tenant ", "cannot end with a space"),
        ("tenant \U0001f600", "beyond U+FFFF"),
        ("#mysql50#tenant", "#mysql50#"),
        ("review_Tcase", "cannot hold capital letters"),  # "review_tcase" would clash with it
        ("TENANT", "cannot hold capital letters"),
        ("tenant \u00c9", "cannot hold capital letters"),
    ],
}


@SERVERS
def test_schema_names_the_database_would_not_keep_apart_are_refused(
    server: ServerDatabases, database_url: str
) -> None:
    dialect_name = make_url(database_url).get_backend_name()
    for name, reason in REFUSED[dialect_name] + [("", "non-empty"), ("a\x00b", "without NUL")]:
        for opener in (SQLAlchemyStore.open, open_async_sqlalchemy_store):
            with pytest.raises(InvalidOption) as raised:
                opener(database_url, schema=name)
            assert raised.value.option == "schema"
            assert reason in raised.value.reason, (name, raised.value.reason)


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.mark.dialects(*SQLITE_DIALECTS)
def test_a_schema_in_a_sqlite_url_is_refused_as_the_option_is(database_url: str) -> None:
    url = _with_query(database_url, "schema=tenant")
    for opener in (SQLAlchemyStore.open, open_async_sqlalchemy_store):
        with pytest.raises(InvalidOption) as raised:
            opener(url)
        assert (raised.value.option, raised.value.reason) == ("schema", "not supported on SQLite")


@SERVERS
def test_a_schema_in_the_url_is_the_schema_option(server: ServerDatabases, database_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    in_url, given, cid = f"url_{tag}", f"given_{tag}", f"c-{tag}"
    drop = _dropping(server, database_url)

    async def read_async(url: str, **options: Any) -> str:
        store = open_async_sqlalchemy_store(url, **options)
        try:
            return (await store.get(cid)).owner_id
        finally:
            await store.close()

    try:
        with SQLAlchemyStore.open(_with_query(database_url, f"schema={in_url}")) as store:
            store.create(Chronicum(cid, in_url, datetime.now(UTC)))
        with SQLAlchemyStore.open(database_url, schema=in_url) as store:
            assert store.get(cid).owner_id == in_url
        assert asyncio.run(read_async(_with_query(database_url, f"schema={in_url}"))) == in_url
        # an explicit option wins over the URL's
        with SQLAlchemyStore.open(_with_query(database_url, f"schema={in_url}"), schema=given) as store:
            store.create(Chronicum(cid, given, datetime.now(UTC)))
        assert asyncio.run(read_async(_with_query(database_url, f"schema={in_url}"), schema=given)) == given
        with SQLAlchemyStore.open(database_url) as store, pytest.raises(ChronicumNotFound):
            store.get(cid)
    finally:
        drop([in_url, given])
