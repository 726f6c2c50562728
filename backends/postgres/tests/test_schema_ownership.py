"""Schemas the store may use: only tables it created, and a schema name that means exactly one schema.

A store opened over ``chronica`` or ``acta`` tables chronica-postgres did not create (another
application's, or chronica-sqlalchemy's) refuses at open, whatever ``auto_migrate`` says, and leaves
them as they were. A schema name is used exactly as given (spaces, tabs, ``%``, ``$``, braces), or
refused with ``InvalidOption`` when PostgreSQL would not keep it apart from another.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from chronica_postgres import AsyncPostgresStore, PostgresStore
from conftest import drop_schema
from psycopg import sql

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

Rows = list[tuple[Any, ...]]


def _run(url: str, statement: sql.SQL | sql.Composed, parameters: tuple[Any, ...] = ()) -> Rows:
    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(statement, parameters)
        return cursor.fetchall() if cursor.description else []


def _tables(url: str, schema: str) -> list[str]:
    rows = _run(
        url,
        sql.SQL("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename"),
        (schema,),
    )
    return [name for (name,) in rows]


def _columns(url: str, schema: str, table: str) -> list[tuple[str, str]]:
    rows = _run(
        url,
        sql.SQL(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position"
        ),
        (schema, table),
    )
    return [(name, kind) for name, kind in rows]


@pytest.fixture
def foreign_schema(postgres_url: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A schema holding another application's table (named by the test's parameter) with one row."""
    table = str(request.param)
    schema = f"chronica_test_foreign_{uuid.uuid4().hex[:12]}"
    _run(postgres_url, sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        _run(
            postgres_url,
            sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY, note text NOT NULL)").format(
                sql.Identifier(schema, table)
            ),
        )
        _run(
            postgres_url, sql.SQL("INSERT INTO {} VALUES (7, 'theirs')").format(sql.Identifier(schema, table))
        )
        yield schema, table
    finally:
        drop_schema(postgres_url, schema)


def _assert_untouched(url: str, schema: str, table: str) -> None:
    assert _tables(url, schema) == [table]  # no version table of ours left behind either
    assert _columns(url, schema, table) == [("id", "integer"), ("note", "text")]
    rows = _run(url, sql.SQL("SELECT id, note FROM {}").format(sql.Identifier(schema, table)))
    assert rows == [(7, "theirs")]


def _assert_refused(error: StoreError, where: str, schema: str, table: str) -> None:
    assert error.where == where
    assert f"schema {schema!r} holds {table} without chronica_schema_version" in error.detail
    assert "another application's" in error.detail
    assert "left these untouched" in error.detail
    assert "Give another schema (the schema option" in error.detail


@pytest.mark.parametrize("foreign_schema", ["acta", "chronica"], indirect=True)
@pytest.mark.parametrize(("auto_migrate", "where"), [(True, "postgres: migrate"), (False, "postgres: open")])
def test_a_store_refuses_at_open_a_schema_holding_another_applications_table(
    postgres_url: str, foreign_schema: tuple[str, str], auto_migrate: bool, where: str
) -> None:
    schema, table = foreign_schema
    with pytest.raises(StoreError) as raised:
        PostgresStore(postgres_url, schema=schema, auto_migrate=auto_migrate)
    _assert_refused(raised.value, where, schema, table)
    _assert_untouched(postgres_url, schema, table)


@pytest.mark.parametrize("foreign_schema", ["acta", "chronica"], indirect=True)
@pytest.mark.parametrize(("auto_migrate", "where"), [(True, "postgres: migrate"), (False, "postgres: open")])
def test_an_async_store_refuses_at_first_use_a_schema_holding_another_applications_table(
    postgres_url: str, foreign_schema: tuple[str, str], auto_migrate: bool, where: str
) -> None:
    schema, table = foreign_schema

    async def first_use() -> StoreError:
        store = AsyncPostgresStore(postgres_url, schema=schema, auto_migrate=auto_migrate)
        try:
            with pytest.raises(StoreError) as raised:
                await store.create(Chronicum("c", "ardian", datetime.now(UTC)))
            if auto_migrate:
                with pytest.raises(StoreError) as again:
                    await store.migrate()
                _assert_refused(again.value, where, schema, table)
            return raised.value
        finally:
            await store.close()

    _assert_refused(asyncio.run(first_use()), where, schema, table)
    _assert_untouched(postgres_url, schema, table)


def test_a_schema_chronica_sqlalchemy_also_used_is_refused_at_open(
    postgres_url: str, fresh_schema: str
) -> None:
    PostgresStore(postgres_url, schema=fresh_schema).close()
    _run(
        postgres_url,
        sql.SQL("CREATE TABLE {} (component varchar(64) PRIMARY KEY, version integer NOT NULL)").format(
            sql.Identifier(fresh_schema, "chronica_schema")
        ),
    )
    for auto_migrate, where in ((True, "postgres: migrate"), (False, "postgres: open")):
        with pytest.raises(StoreError) as raised:
            PostgresStore(postgres_url, schema=fresh_schema, auto_migrate=auto_migrate)
        assert raised.value.where == where
        assert "also chronica-sqlalchemy's version table chronica_schema" in raised.value.detail


# -- schema names --------------------------------------------------------------------------------


def _names(tag: str) -> list[str]:
    """Distinct names PostgreSQL must keep apart (each unique to this run by ``tag``)."""
    exactly_63 = f"t{tag}_" + "é" * ((63 - len(tag) - 2) // 2)
    exactly_63 += "x" * (63 - len(exactly_63.encode()))
    return [
        f"tenant {tag} a",
        f"tenant {tag}  a",
        f"tenant {tag}\ta",
        f"tenant {tag}\na",
        f"50% {tag}",
        f"50%% {tag}",
        f"x$migration$y {tag}",
        f"x$migration1$y {tag}",
        f"{{schema}} {tag}",
        f'q"uote {tag}',
        f"Tenant {tag} A",
        exactly_63,
    ]


def _drop_all(url: str, names: list[str]) -> None:
    for name in names:
        drop_schema(url, name)


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def test_distinct_schema_names_are_distinct_schemas(postgres_url: str) -> None:
    names = _names(uuid.uuid4().hex[:8])
    assert len(set(names)) == len(names)
    assert len(names[-1].encode()) == 63
    try:
        stores = [PostgresStore(postgres_url, schema=name, max_size=1) for name in names]
        try:
            for store, name in zip(stores, names, strict=True):
                store.create(Chronicum("same-id", name, datetime.now(UTC)))
                store.record(_message("same-id", name))
            for store, name in zip(stores, names, strict=True):
                assert store.get("same-id").owner_id == name
                assert [actum.content for actum in store.acta("same-id", ActaQuery())] == [name]
        finally:
            for store in stores:
                store.close()
        found = _run(
            postgres_url, sql.SQL("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)"), (names,)
        )
        assert sorted(name for (name,) in found) == sorted(names)
    finally:
        _drop_all(postgres_url, names)


def test_distinct_schema_names_are_distinct_schemas_async(postgres_url: str) -> None:
    names = _names(uuid.uuid4().hex[:8])

    async def write_and_read() -> None:
        stores = [AsyncPostgresStore(postgres_url, schema=name, max_size=1) for name in names]
        try:
            for store, name in zip(stores, names, strict=True):
                await store.create(Chronicum("same-id", name, datetime.now(UTC)))
                await store.record(_message("same-id", name))
            for store, name in zip(stores, names, strict=True):
                assert (await store.get("same-id")).owner_id == name
                assert [actum.content for actum in await store.acta("same-id", ActaQuery())] == [name]
        finally:
            for store in stores:
                await store.close()

    try:
        asyncio.run(write_and_read())
    finally:
        _drop_all(postgres_url, names)


def test_a_schema_written_under_one_name_is_not_seen_under_a_similar_one(postgres_url: str) -> None:
    tag = uuid.uuid4().hex[:8]
    written, other = f"tenant {tag}\ta", f"tenant {tag} a"
    try:
        with PostgresStore(postgres_url, schema=written) as store:
            store.create(Chronicum("c", "ardian", datetime.now(UTC)))
        with PostgresStore(postgres_url, schema=other) as store, pytest.raises(ChronicumNotFound):
            store.get("c")
    finally:
        _drop_all(postgres_url, [written, other])


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a" * 64, "64 bytes in UTF-8, longer than PostgreSQL's 63-byte identifiers"),
        ("é" * 32, "64 bytes in UTF-8, longer than PostgreSQL's 63-byte identifiers"),
        ("a" * 63 + "b", "64 bytes"),
        ("pg_tenant", "cannot start with pg_"),
        ("", "must be a non-empty name"),
        ("a\x00b", "cannot hold NUL"),
    ],
)
def test_schema_names_postgresql_would_not_keep_apart_are_refused(
    postgres_url: str, name: str, reason: str
) -> None:
    for opener in (PostgresStore, AsyncPostgresStore):
        with pytest.raises(InvalidOption) as raised:
            opener(postgres_url, schema=name)
        assert raised.value.option == "schema"
        assert reason in raised.value.reason
    if "\x00" not in name:
        assert not _run(postgres_url, sql.SQL("SELECT FROM pg_namespace WHERE nspname = %s"), (name[:63],))
