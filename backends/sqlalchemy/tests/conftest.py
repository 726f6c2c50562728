"""Fixtures: one fresh database per dialect and test session, on the real servers.

``CHRONICA_SQLALCHEMY_DIALECTS`` (comma-separated: ``sqlite``, ``aiosqlite``, ``mariadb``,
``postgresql``; default all four) selects the dialects; the tox environment ``sqlite`` selects
``sqlite`` and ``aiosqlite``, ``mariadb`` and ``postgres-sqlalchemy`` one each. Servers:

- MariaDB: ``CHRONICA_TEST_MARIADB_URL`` (default ``mariadb+pymysql://root@127.0.0.1:3306/test``);
  each session creates a database ``chronica_test_<random>`` and drops it at the end.
- PostgreSQL: ``CHRONICA_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``;
  the driver is always ``psycopg``); each session creates a database ``chronica_test_<random>``
  and drops it at the end.
- SQLite: a file in a temporary directory; ``aiosqlite`` is SQLite through a ``sqlite+aiosqlite://``
  URL, whose asyncio store is ``AsyncSQLAlchemyStore`` on aiosqlite (plain SQLite URLs get
  ``AsyncThreadedSQLAlchemyStore``).

Without a reachable server a test skips naming the variable to set; with ``CI=true`` it fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import (
    AsyncSQLAlchemyStore,
    AsyncThreadedSQLAlchemyStore,
    SQLAlchemyStore,
    open_async_sqlalchemy_store,
)
from chronica_sqlalchemy.faults import SQLAlchemyFaults
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError

ALL_DIALECTS = ("sqlite", "aiosqlite", "mariadb", "postgresql")
SQLITE_DIALECTS = ("sqlite", "aiosqlite")
SERVER_VARIABLES = {"mariadb": "CHRONICA_TEST_MARIADB_URL", "postgresql": "CHRONICA_TEST_POSTGRES_URL"}
SERVER_DEFAULTS = {
    "mariadb": "mariadb+pymysql://root@127.0.0.1:3306/test",
    "postgresql": "postgresql://postgres@127.0.0.1:5432/test",
}


def selected_dialects() -> list[str]:
    chosen = os.environ.get("CHRONICA_SQLALCHEMY_DIALECTS", "")
    names = [name.strip() for name in chosen.split(",") if name.strip()] or list(ALL_DIALECTS)
    unknown = sorted(set(names) - set(ALL_DIALECTS))
    if unknown:
        raise pytest.UsageError(
            f"CHRONICA_SQLALCHEMY_DIALECTS: unknown dialect(s) {unknown}; use {ALL_DIALECTS}"
        )
    return names


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dialects(*names): run the test only on these dialects")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out (never skip) the parametrisations of dialect-specific tests on other dialects."""
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("dialects")
        callspec = getattr(item, "callspec", None)
        dialect = callspec.params.get("dialect") if callspec is not None else None
        (left_out if marker is not None and dialect not in marker.args else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def new_database_name() -> str:
    return f"chronica_test_{uuid.uuid4().hex[:12]}"


def server_url(dialect: str) -> URL:
    """The configured server URL of ``dialect`` with its blocking driver (PostgreSQL: psycopg)."""
    url = make_url(os.environ.get(SERVER_VARIABLES[dialect], SERVER_DEFAULTS[dialect]))
    backend = url.get_backend_name()
    if backend == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    elif backend in ("mysql", "mariadb") and "+" not in url.drivername:
        url = url.set(drivername=f"{backend}+pymysql")
    return url


def unavailable(dialect: str, error: Exception) -> None:
    """Skip (or, with CI=true, fail) the test: the server of ``dialect`` is not reachable."""
    variable = SERVER_VARIABLES[dialect]
    message = (
        f"no {dialect} server at {server_url(dialect).render_as_string(hide_password=True)} ({error}); "
        f"start one or set {variable} to a reachable server's URL"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


class ServerDatabases:
    """Creates and drops throw-away databases on one server (MariaDB or PostgreSQL)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.url = server_url(dialect)
        self.engine = create_engine(self.url, isolation_level="AUTOCOMMIT", pool_size=1)
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def create(self) -> URL:
        name = new_database_name()
        with self.engine.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}"))
        return self.url.set(database=name)

    def drop(self, url: URL) -> None:
        with self.engine.connect() as connection:
            if self.dialect == "postgresql":
                connection.execute(text(f"DROP DATABASE IF EXISTS {url.database} WITH (FORCE)"))
            else:
                connection.execute(text(f"DROP DATABASE IF EXISTS {url.database}"))

    def drop_schema(self, schema: str) -> None:
        """Drop a schema created by a test in the session database (MariaDB: a database)."""
        with self.engine.connect() as connection:
            if self.dialect == "postgresql":
                raise AssertionError("schemas live in the session database on PostgreSQL")
            connection.execute(text(f"DROP DATABASE IF EXISTS {schema}"))


@pytest.fixture(scope="session", params=selected_dialects())
def dialect(request: pytest.FixtureRequest) -> str:
    """The dialect under test: ``sqlite``, ``aiosqlite``, ``mariadb`` or ``postgresql``."""
    return str(request.param)


@pytest.fixture(scope="session")
def servers(dialect: str) -> Iterator[ServerDatabases | None]:
    """The dialect's server (``None`` for SQLite); skips or fails when it cannot be reached."""
    if dialect in SQLITE_DIALECTS:
        yield None
        return
    try:
        databases = ServerDatabases(dialect)
    except (SQLAlchemyError, ModuleNotFoundError) as error:
        unavailable(dialect, error)
    yield databases
    databases.engine.dispose()


@pytest.fixture(scope="session")
def database_url(
    dialect: str, servers: ServerDatabases | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A fresh, empty database for this session (dropped at the end), as a store URL."""
    if servers is None:
        path: Path = tmp_path_factory.mktemp("sqlite") / "chronica.db"
        yield f"sqlite+aiosqlite:///{path}" if dialect == "aiosqlite" else f"sqlite:///{path}"
        return
    url = servers.create()
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        servers.drop(url)


@pytest.fixture(scope="session")
def shared_store(database_url: str) -> Iterator[SQLAlchemyStore]:
    """One migrated blocking store on the session database, shared by the tests of a session."""
    store = SQLAlchemyStore.open(database_url)
    yield store
    store.close()


@pytest.fixture
def one_connection(shared_store: SQLAlchemyStore, database_url: str) -> Iterator[SQLAlchemyStore]:
    """A blocking store of its own on a pool of exactly one connection (the shared store migrated
    the tables): every call takes the same pooled connection; closed afterwards."""
    store = SQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    yield store
    store.close()


@pytest.fixture
def store(shared_store: SQLAlchemyStore) -> SQLAlchemyStore:
    """The blocking store (shared; tests use fresh chronicum ids)."""
    return shared_store


@pytest.fixture
def async_store(
    shared_store: SQLAlchemyStore, database_url: str
) -> AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore:
    """A fresh asyncio store on the session database, as ``open_async_store`` gives it; the test
    closes it in its own loop."""
    return open_async_sqlalchemy_store(database_url, auto_migrate=False)


@pytest.fixture
def chronica_driver_faults() -> SQLAlchemyFaults:
    """Driver failures for the conformance suite's driver-failure group."""
    return SQLAlchemyFaults()


@pytest.fixture
def fresh_target(
    dialect: str, servers: Any, database_url: str, tmp_path: Path
) -> Iterator[tuple[str, str | None]]:
    """A URL and schema nobody has migrated yet: a new SQLite file, MariaDB database or PG schema."""
    if servers is None:
        scheme = "sqlite+aiosqlite" if dialect == "aiosqlite" else "sqlite"
        yield f"{scheme}:///{tmp_path / 'fresh.db'}", None
        return
    schema = f"chronica_test_{uuid.uuid4().hex[:12]}"
    yield database_url, schema
    if dialect == "postgresql":
        engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        engine.dispose()
    else:
        servers.drop_schema(schema)
