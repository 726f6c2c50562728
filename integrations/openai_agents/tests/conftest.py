"""The stores the session tests run on: memory:// always, the databases when their variable is set.

- ``sqlite``: ``CHRONICA_TEST_SQLITE_URL``, a SQLAlchemy SQLite URL of a throw-away file
  (``sqlite:///tmp/t.db``; chronica-sqlalchemy), used as it is;
- ``postgres``: ``CHRONICA_TEST_POSTGRES_URL`` (``postgresql://postgres@127.0.0.1:5432/test``),
  chronica-postgres in a fresh schema;
- ``postgres-sqlalchemy``: the same variable, through chronica-sqlalchemy and psycopg, in a
  fresh schema;
- ``mariadb``: ``CHRONICA_TEST_MARIADB_URL`` (``mariadb+pymysql://root@127.0.0.1:3306/test``),
  chronica-sqlalchemy in a fresh schema (a MariaDB database).

A variable that is not set skips that store's tests, naming the variable (with ``CI=true`` too:
the databases are opt-in here, unlike in the backends' own environments). Every fresh schema is
dropped at the end of the test session. Each test opens its own asyncio store inside its own
event loop (an asyncio store belongs to one loop) and uses fresh session ids.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from chronica_core import AsyncStore, open_async_store


@dataclass(frozen=True)
class StoreTarget:
    """A store URL and the options to open it with."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)

    def open(self) -> AsyncStore:
        """Open an asyncio store on it (close it in the loop that used it)."""
        return open_async_store(self.url, **self.options)


SERVER_VARIABLES = {
    "sqlite": "CHRONICA_TEST_SQLITE_URL",
    "postgres": "CHRONICA_TEST_POSTGRES_URL",
    "postgres-sqlalchemy": "CHRONICA_TEST_POSTGRES_URL",
    "mariadb": "CHRONICA_TEST_MARIADB_URL",
}


def _drop_schema(name: str, url: str, schema: str) -> None:
    """Drop the schema a test session created (MariaDB: a database)."""
    if name == "mariadb":
        from sqlalchemy import create_engine, text

        engine = create_engine(url, isolation_level="AUTOCOMMIT", pool_size=1)
        try:
            with engine.connect() as connection:
                connection.execute(text(f"DROP DATABASE IF EXISTS {schema}"))
        finally:
            engine.dispose()
        return
    import psycopg
    from psycopg import sql

    plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="session", params=["memory", *SERVER_VARIABLES])
def store_target(request: pytest.FixtureRequest) -> Iterator[StoreTarget]:
    """Where the test's sessions live: ``memory://``, or a database named by its variable."""
    name = str(request.param)
    if name == "memory":
        yield StoreTarget(name, "memory://")
        return
    variable = SERVER_VARIABLES[name]
    url = os.environ.get(variable, "")
    if not url:
        pytest.skip(f"{variable} is not set: set it to run the session tests on {name}")
    if name == "sqlite":
        yield StoreTarget(name, url)
        return
    if name == "postgres-sqlalchemy":
        url = url.replace("postgresql://", "postgresql+psycopg://", 1).replace(
            "postgres://", "postgresql+psycopg://", 1
        )
    schema = f"chronica_test_openai_{uuid.uuid4().hex[:12]}"
    try:
        yield StoreTarget(name, url, {"schema": schema})
    finally:
        _drop_schema(name, url, schema)
