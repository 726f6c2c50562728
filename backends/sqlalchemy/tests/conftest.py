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

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chronica_conformance import FailureKind, Injection
from chronica_sqlalchemy import (
    AsyncSQLAlchemyStore,
    AsyncThreadedSQLAlchemyStore,
    SQLAlchemyStore,
    open_async_sqlalchemy_store,
)
from sqlalchemy import Dialect, Engine, create_engine, event, text
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


_FAILURES: dict[str, dict[FailureKind, tuple[Any, ...]]] = {
    "mysql": {
        "connection_reset": (2013, "Lost connection to MySQL server during query"),
        "server_gone": (2006, "MySQL server has gone away"),
        "statement_timeout": (1969, "Query execution was interrupted (max_statement_time exceeded)"),
    },
    "postgresql": {
        "connection_reset": ("consuming input failed: server closed the connection unexpectedly",),
        "server_gone": ("terminating connection due to administrator command",),
        "statement_timeout": ("canceling statement due to statement timeout",),
    },
    "sqlite": {
        "connection_reset": ("disk I/O error",),
        "server_gone": ("unable to open database file",),
        "statement_timeout": ("database is locked",),
    },
}
"""The driver's words for each failure, per database (MariaDB's error codes first)."""


def dbapi_failure(dialect: Dialect, kind: FailureKind) -> Exception:
    """The DBAPI driver's own exception for ``kind`` (psycopg's ``QueryCanceled`` for a timeout)."""
    name = "mysql" if dialect.name in ("mysql", "mariadb") else dialect.name
    if name == "postgresql" and kind == "statement_timeout":
        import psycopg

        return psycopg.errors.QueryCanceled(*_FAILURES[name][kind])
    error_class: type[Exception] = dialect.loaded_dbapi.OperationalError
    return error_class(*_FAILURES[name][kind])


class SQLAlchemyFaults:
    """Makes the DBAPI calls of a chronica-sqlalchemy store fail (see ``DriverFaults``).

    While an injection is active, every statement (the dialect's ``do_execute`` events), commit
    and rollback on the store's engines (its ``engine``, and on MariaDB its ``read_engine``)
    counts as a driver call (a rollback SQLAlchemy
    skips in autocommit does not); a failing one raises the DBAPI
    driver's exception for the kind, and on a server, for a reset or a gone server, first closes
    the DBAPI connection, as the server would have.
    """

    @contextlib.contextmanager
    def inject(
        self, store: Any, kind: FailureKind, *, after: int = 0, times: int | None = None
    ) -> Iterator[Injection]:
        injection = Injection(kind, after, times)
        engines: list[Engine] = [
            getattr(engine, "sync_engine", engine)
            for engine in (store.engine, getattr(store, "read_engine", None))
            if engine is not None
        ]
        dialect = engines[0].dialect
        server = dialect.name != "sqlite"

        def fail(dbapi_connection: Any) -> None:
            failing = injection.next_call()
            if failing is None:
                return
            error = injection.raised_now(dbapi_failure(dialect, failing))
            if server and failing != "statement_timeout":  # the driver's own connection, not the pool's proxy
                getattr(dbapi_connection, "dbapi_connection", dbapi_connection).close()
            raise error

        def on_execute(cursor: Any, statement: Any, parameters: Any, context: Any) -> bool:
            fail(context.root_connection.connection.dbapi_connection)
            return False  # not handled here: the dialect executes it

        def on_execute_no_params(cursor: Any, statement: Any, context: Any) -> bool:
            return on_execute(cursor, statement, None, context)

        def commit_of(real_commit: Callable[[Any], None]) -> Callable[[Any], None]:
            def commit(dbapi_connection: Any) -> None:
                fail(dbapi_connection)
                real_commit(dbapi_connection)

            return commit

        def rollback_of(engine: Engine) -> Callable[[Any], None]:
            real_rollback, autocommit = engine.dialect.do_rollback, engine.dialect.skip_autocommit_rollback

            def rollback(dbapi_connection: Any) -> None:
                if autocommit and engine.dialect.detect_autocommit_setting(dbapi_connection):
                    return  # skipped by SQLAlchemy, sent to no driver (see skip_autocommit_rollback)
                fail(dbapi_connection)
                real_rollback(dbapi_connection)

            return rollback

        listeners: list[tuple[str, Callable[..., Any]]] = [
            ("do_execute", on_execute),
            ("do_executemany", on_execute),
            ("do_execute_no_params", on_execute_no_params),
        ]
        for engine in engines:
            for name, listener in listeners:
                event.listen(engine, name, listener)
        try:
            with pytest.MonkeyPatch.context() as patch:
                for engine in engines:
                    patch.setattr(engine.dialect, "do_commit", commit_of(engine.dialect.do_commit))
                    patch.setattr(engine.dialect, "do_rollback", rollback_of(engine))
                yield injection
        finally:
            for engine in engines:
                for name, listener in listeners:
                    event.remove(engine, name, listener)


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
