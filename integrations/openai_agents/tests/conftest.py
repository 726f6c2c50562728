"""The stores the session tests run on: memory://, a SQLite file and the database servers.

- ``sqlite``: a throw-away file through chronica-sqlalchemy (``CHRONICA_TEST_SQLITE_URL`` names
  another SQLAlchemy SQLite URL, used as it is);
- ``postgres``: ``CHRONICA_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``),
  chronica-postgres in a fresh schema;
- ``postgres-sqlalchemy``: the same server, through chronica-sqlalchemy and psycopg, in a
  fresh schema;
- ``mariadb``: ``CHRONICA_TEST_MARIADB_URL`` (default ``mariadb+pymysql://root@127.0.0.1:3306/test``),
  chronica-sqlalchemy in a fresh schema (a MariaDB database).

A server that does not answer skips its tests, naming the variable to set; with ``CI=true`` that
fails instead, as in the backends' own environments. Every fresh schema is dropped at the end of
the test session. Each test opens its own asyncio store and uses fresh session ids; the store
serves whatever event loops the test runs (``Runner.run_sync``'s, ``asyncio.run()``'s).
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
        """Open an asyncio store on it (it serves any event loop; close it once, at the end)."""
        return open_async_store(self.url, **self.options)


SERVER_VARIABLES = {
    "sqlite": "CHRONICA_TEST_SQLITE_URL",
    "postgres": "CHRONICA_TEST_POSTGRES_URL",
    "postgres-sqlalchemy": "CHRONICA_TEST_POSTGRES_URL",
    "mariadb": "CHRONICA_TEST_MARIADB_URL",
}

DEFAULT_URLS = {
    "CHRONICA_TEST_POSTGRES_URL": "postgresql://postgres@127.0.0.1:5432/test",
    "CHRONICA_TEST_MARIADB_URL": "mariadb+pymysql://root@127.0.0.1:3306/test",
}


def _unreachable(name: str, url: str) -> str | None:
    """Why the server behind ``url`` cannot be used, or ``None`` when it answers."""
    try:
        if name == "mariadb":
            from sqlalchemy import create_engine, text

            engine = create_engine(url, pool_size=1, connect_args={"connect_timeout": 5})
            try:
                with engine.connect() as connection:
                    connection.execute(text("SELECT 1"))
            finally:
                engine.dispose()
        else:
            import psycopg

            plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
            with psycopg.connect(plain, connect_timeout=5) as connection:
                connection.execute("SELECT 1")
    except Exception as error:  # noqa: BLE001 - any failure to connect means "not here"
        return f"{type(error).__name__}: {error}"
    return None


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
    if name == "sqlite":
        folder = request.getfixturevalue("tmp_path_factory").mktemp("sqlite")
        yield StoreTarget(name, os.environ.get(variable) or f"sqlite:///{folder / 'sessions.db'}")
        return
    url = os.environ.get(variable) or DEFAULT_URLS[variable]
    problem = _unreachable(name, url)
    if problem is not None:
        message = f"no server at {url} for {name} ({problem}); start one or set {variable}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    if name == "postgres-sqlalchemy":
        url = url.replace("postgresql://", "postgresql+psycopg://", 1).replace(
            "postgres://", "postgresql+psycopg://", 1
        )
    schema = f"chronica_test_openai_{uuid.uuid4().hex[:12]}"
    try:
        yield StoreTarget(name, url, {"schema": schema})
    finally:
        _drop_schema(name, url, schema)
