"""URLs, options and engines: which driver a URL gets, and how each database's engine is set up.

A URL names a dialect and optionally a driver; the blocking and the asyncio store each take the
driver of their kind, so one URL serves both:

=====================  =====================  ===================================================
dialect                blocking driver        asyncio store (``open_async_store``)
=====================  =====================  ===================================================
``sqlite``             ``pysqlite`` (stdlib)  ``pysqlite`` on worker threads
                                              (``sqlite+aiosqlite://``: ``aiosqlite``)
``mysql``/``mariadb``  ``pymysql``            ``asyncmy``
``postgresql``         ``psycopg``            ``psycopg`` (its async API)
=====================  =====================  ===================================================

A driver the URL names is kept when it is of the right kind and replaced by its twin otherwise.
The engines the store creates are set up per database: SQLite by :func:`configure_sqlite`;
PostgreSQL in autocommit, its sessions in UTC with generic plans; MariaDB/MySQL in ``READ
COMMITTED`` with ``utf8mb4``, its reads on a second engine in autocommit.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event, pool
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chronica_core.errors import InvalidOption, StoreError
from chronica_core.idle import CHECK_IDLE_AFTER, DEFAULT_CHECK_IDLE_AFTER, check_idle_after_option
from chronica_core.limits import MAX_CONTENT_OPTION, content_limit_option
from chronica_core.options import count_option, flag_option, seconds_option
from chronica_core.plan_cache import GENERIC_PLANS_SQL
from chronica_core.poolers import LISTEN, PREPARED_STATEMENTS, listen_option, prepared_statements_option
from chronica_core.redaction import redact_error
from chronica_core.urls import split_query_options
from chronica_sqlalchemy.aiosqlite_connect import open_before_aiosqlite
from chronica_sqlalchemy.connections import watch_idle_connections
from chronica_sqlalchemy.dialects import store_dialect_class
from chronica_sqlalchemy.executor import DEFAULT_LEVEL, Connections
from chronica_sqlalchemy.poolers import (
    check_pooler_options,
    keep_listen_url,
    prepares,
    watch_prepared_statements,
)
from chronica_sqlalchemy.sqlite_writers import queue_writers
from chronica_sqlalchemy.timeouts import bound_operations, check_driver, connect_arguments
from chronica_sqlalchemy.url_checks import check_driver_name, check_port, check_query, check_query_names

__all__ = [
    "AUTOCOMMIT",
    "DEFAULT_BUSY_TIMEOUT_SECONDS",
    "DEFAULT_SYNCHRONOUS",
    "OPTION_NAMES",
    "SET_UTC",
    "EngineOptions",
    "async_url",
    "blocking_watcher_engine",
    "checked_content_limit",
    "checked_schema",
    "configure_sqlite",
    "create_async_engines",
    "create_engines",
    "plan_connections",
    "runs_on_worker_threads",
    "sync_url",
    "url_and_options",
    "url_text",
]

AnyEngine = TypeVar("AnyEngine", Engine, AsyncEngine)

AUTOCOMMIT = "AUTOCOMMIT"
"""SQLAlchemy's isolation level for the driver's autocommit mode (each statement its own transaction)."""

DEFAULT_SYNCHRONOUS = "FULL"
"""SQLite's ``PRAGMA synchronous`` by default: in WAL mode ``FULL`` syncs the log at every commit, so
an acknowledged write survives a power loss; ``NORMAL`` may lose the last commits then (never on
an application crash), and ``OFF`` may corrupt the file."""

DEFAULT_BUSY_TIMEOUT_SECONDS = 30.0
"""How long a SQLite writer waits for the write lock before giving up, in seconds."""

SET_UTC = "SET TIME ZONE 'UTC'"
"""Run on each new connection of the PostgreSQL engines the store creates, unless the URL names a
time zone: psycopg then reads every ``timestamptz`` in ``datetime.UTC``, with nothing to convert."""

OPTION_NAMES = (
    "auto_migrate",
    "busy_timeout",
    CHECK_IDLE_AFTER,
    "echo",
    LISTEN,
    MAX_CONTENT_OPTION,
    "max_overflow",
    "operation_timeout",
    "pool_size",
    PREPARED_STATEMENTS,
    "schema",
    "synchronous",
)
"""Every option ``open_store(url, **options)`` understands on this backend."""

_BACKEND = "sqlalchemy"
_SET_UP: weakref.WeakSet[Engine] = weakref.WeakSet()  # SQLite engines configure_sqlite set up
_SET_UP_GUARD = threading.Lock()
_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SECONDS_MOST = 3600.0  # an hour: the longest busy_timeout and operation_timeout
_POOL_MOST = 1000  # the most pool_size and max_overflow
_BLOCKING_DRIVERS = {"sqlite": "pysqlite", "mysql": "pymysql", "mariadb": "pymysql", "postgresql": "psycopg"}
_ASYNC_DRIVERS = {"sqlite": "aiosqlite", "mysql": "asyncmy", "mariadb": "asyncmy", "postgresql": "psycopg"}
_ASYNC_ONLY = frozenset({"aiosqlite", "aiomysql", "asyncmy", "asyncpg", "psycopg_async"})
_BOTH = frozenset({"psycopg"})  # one driver name, a blocking and an asyncio dialect


def url_text(url: str | URL) -> str:
    """``url`` as text, its password included: what :mod:`chronica_core.redaction` redacts."""
    return url if isinstance(url, str) else url.render_as_string(hide_password=False)


def _parse(url: str | URL) -> URL:
    """Parse ``url`` and check its driver name and port (see :mod:`.url_checks`), secrets redacted.

    Raises ``StoreError`` for text that is no SQLAlchemy URL, ``InvalidOption`` (option ``port``)
    for a bad port, ``UnknownBackend`` for a driver SQLAlchemy does not know.
    """
    try:
        parsed = make_url(url)
    except ValueError as error:  # make_url converts only the port: int("abc")
        redact_error(error, url_text(url))
        raise InvalidOption(
            _BACKEND, "port", f"the URL's port must be a whole number from 1 to 65535 ({error})"
        ) from error
    except ArgumentError as error:
        redact_error(error, url_text(url))
        raise StoreError("sqlalchemy: open", f"not a SQLAlchemy URL: {error}") from error
    check_driver_name(parsed)
    check_port(parsed)
    return parsed


def _with_driver(url: URL, drivers: Mapping[str, str], keep: frozenset[str]) -> URL:
    dialect, _, driver = url.drivername.partition("+")
    if driver in keep or driver in _BOTH or dialect not in drivers:
        return url
    return url.set(drivername=f"{dialect}+{drivers[dialect]}")


def sync_url(url: str | URL) -> URL:
    """``url`` with a blocking driver: its own if it names one, else the default (table above).

    Raises what :func:`_parse` raises.
    """
    parsed = _parse(url)
    driver = parsed.drivername.partition("+")[2]
    if driver and driver not in _ASYNC_ONLY:
        return parsed
    return _with_driver(parsed, _BLOCKING_DRIVERS, frozenset())


def async_url(url: str | URL) -> URL:
    """``url`` with an asyncio driver: its own if it names one, else its twin. Raises as :func:`sync_url`."""
    return _with_driver(_parse(url), _ASYNC_DRIVERS, _ASYNC_ONLY)


def runs_on_worker_threads(url: str | URL) -> bool:
    """Whether the asyncio store for ``url`` runs the blocking driver on worker threads.

    True for SQLite unless the URL names an asyncio driver (``sqlite+aiosqlite://``): SQLite has
    no server to wait on, so any asyncio SQLite driver is a thread making the blocking calls, and
    a worker thread running each whole operation crosses between it and the loop once.
    Raises as :func:`sync_url`.
    """
    parsed = _parse(url)
    return parsed.get_backend_name() == "sqlite" and parsed.drivername.partition("+")[2] not in _ASYNC_ONLY


class EngineOptions:
    """The options ``open_store(url, **options)`` understands, parsed from strings or values; no I/O.

    Args:
        options: ``schema`` (str), ``auto_migrate`` (bool, default true), ``synchronous``
            (SQLite: ``OFF``/``NORMAL``/``FULL``/``EXTRA``, default ``FULL``), ``busy_timeout``
            (SQLite: seconds from 0 to 3600, default 30), ``check_idle_after`` (PostgreSQL:
            seconds a pooled connection may sit idle and still be used unchecked, from 0 to
            86400, default 60), ``pool_size`` and ``max_overflow`` (whole numbers from 0 to 1000;
            a ``pool_size`` of 0 sets no limit), ``echo`` (bool), ``operation_timeout``
            (MariaDB/MySQL and PostgreSQL: seconds from 1 to 3600, default none; see
            :mod:`.timeouts`), ``max_content_bytes`` (a lower limit on content than the
            database's own, in bytes), ``prepared_statements`` (PostgreSQL on psycopg: ``auto``,
            the default, ``true`` or ``false``) and ``listen`` (PostgreSQL on psycopg: the URL
            followers listen on; see :mod:`.poolers`). Values may be text, as ``--option
            key=value`` gives them; booleans as ``true``/``false``, ``yes``/``no``, ``on``/``off``
            or ``1``/``0``.

    Raises:
        InvalidOption: an unknown option (the reason lists :data:`OPTION_NAMES`), or a value of
            the wrong shape or out of range (the reason says what is expected, bounds included).
    """

    def __init__(self, options: Mapping[str, Any]) -> None:
        for name in sorted(options):
            if name not in OPTION_NAMES:
                raise InvalidOption(
                    _BACKEND, name, f"unknown option; known options: {', '.join(OPTION_NAMES)}"
                )
        self.schema = checked_schema(options.get("schema"))
        self.auto_migrate = flag_option(_BACKEND, "auto_migrate", options.get("auto_migrate", True))
        self.echo = flag_option(_BACKEND, "echo", options.get("echo", False))
        synchronous = options.get("synchronous", DEFAULT_SYNCHRONOUS)
        self.synchronous = str(synchronous).strip().upper()
        if self.synchronous not in _SYNCHRONOUS_LEVELS:
            levels = ", ".join(_SYNCHRONOUS_LEVELS)
            raise InvalidOption(_BACKEND, "synchronous", f"expected one of {levels}, got {synchronous!r}")
        busy_timeout = options.get("busy_timeout", DEFAULT_BUSY_TIMEOUT_SECONDS)
        self.busy_timeout = seconds_option(
            _BACKEND, "busy_timeout", busy_timeout, least=0.0, most=_SECONDS_MOST
        )
        idle = options.get(CHECK_IDLE_AFTER, DEFAULT_CHECK_IDLE_AFTER)
        self.check_idle_after = check_idle_after_option(_BACKEND, idle)
        self.pool: dict[str, int] = {
            name: count_option(_BACKEND, name, options[name], least=0, most=_POOL_MOST)
            for name in ("pool_size", "max_overflow")
            if name in options
        }
        self.max_content_bytes = checked_content_limit(options.get(MAX_CONTENT_OPTION))
        timeout = options.get("operation_timeout")
        self.operation_timeout = (
            None
            if timeout is None
            else seconds_option(_BACKEND, "operation_timeout", timeout, least=1.0, most=_SECONDS_MOST)
        )
        self.prepared_statements = prepared_statements_option(_BACKEND, options.get(PREPARED_STATEMENTS))
        self.listen = listen_option(_BACKEND, options.get(LISTEN))

    def check_dialect(self, url: URL) -> None:
        """Raise ``InvalidOption`` for an option the URL's dialect or driver cannot use."""
        checked_schema(self.schema, url.get_backend_name())
        checked_content_limit(self.max_content_bytes, url.get_backend_name())
        check_driver(url, self.operation_timeout)
        check_pooler_options(url, self.prepared_statements, self.listen)

    def store_arguments(self) -> dict[str, Any]:
        """The keyword arguments of a store's constructor that these options give."""
        return {
            "schema": self.schema,
            "auto_migrate": self.auto_migrate,
            "max_content_bytes": self.max_content_bytes,
        }


def url_and_options(url: str | URL, options: Mapping[str, Any]) -> tuple[str, EngineOptions]:
    """Parse ``options`` for ``url``; some query parameters count as options (an option given wins).

    Those are ``schema``, ``prepared_statements`` and ``listen`` (percent-encoded). Returns the URL
    as text without those parameters, and the options. Raises ``InvalidOption``.
    """
    text, in_url = split_query_options(url_text(url), ("schema", PREPARED_STATEMENTS, LISTEN))
    return text, EngineOptions({**in_url, **options})


def checked_content_limit(value: object, dialect_name: str | None = None) -> int | None:
    """The ``max_content_bytes`` option as an int (``None``: none given, the database's limit).

    The bound is the most ``dialect_name`` could take, or, when that is not known, any could.
    Raises ``InvalidOption``: not a whole number from 0 to that bound (both bounds named).
    """
    if value is None:
        return None
    ceiling = store_dialect_class(dialect_name).ceiling if dialect_name is not None else None
    if ceiling is None:
        ceiling = max(store_dialect_class(name).ceiling or 0 for name in ("mysql", "sqlite", "postgresql"))
    return content_limit_option(_BACKEND, value, ceiling)


def checked_schema(schema: object, dialect_name: str | None = None) -> str | None:
    """The ``schema`` option as a string (``None``: none given), used exactly as given.

    Names the database would cut, change or refuse are refused instead, once ``dialect_name`` is
    known (see :meth:`chronica_sqlalchemy.dialects.StoreDialect.schema_name_problem`).
    Raises ``InvalidOption`` saying why.
    """
    if schema is None:
        return None
    name = str(schema)
    problem = "must be a non-empty name without NUL" if not name or "\x00" in name else None
    if problem is None and dialect_name is not None:
        problem = store_dialect_class(dialect_name).schema_name_problem(name)
    if problem:
        raise InvalidOption(_BACKEND, "schema", problem)
    return name


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"


def _engine_arguments(
    url: URL, options: EngineOptions, queue_pool: type[pool.Pool], reads: bool
) -> dict[str, Any]:
    """``create_engine``'s keyword arguments for the store's engine (``reads``: MariaDB's read engine).

    Every plan ends its own transaction, so the pool's rollback on return is not asked for.
    """
    arguments: dict[str, Any] = {"echo": options.echo, "pool_reset_on_return": None}
    dialect = url.get_backend_name()
    if dialect in ("mysql", "mariadb"):
        arguments["pool_pre_ping"] = True  # a connection the server closed is replaced before use
        arguments["isolation_level"] = AUTOCOMMIT if reads else "READ COMMITTED"
        arguments["skip_autocommit_rollback"] = reads
    elif dialect == "postgresql":
        arguments.update(isolation_level=AUTOCOMMIT, skip_autocommit_rollback=True)
    if dialect == "sqlite" and _is_memory(url):
        # one connection, shared by turns: every thread and task sees the same in-memory database
        arguments.update(poolclass=queue_pool, pool_size=1, max_overflow=0, pool_timeout=options.busy_timeout)
        if url.get_driver_name() == "pysqlite":
            arguments["connect_args"] = {"check_same_thread": False}
    elif dialect != "sqlite" or options.pool:
        arguments.update(options.pool)
    driver_timeouts = connect_arguments(url, options.operation_timeout)  # none on SQLite
    if driver_timeouts:
        arguments["connect_args"] = driver_timeouts
    return arguments


def _created(
    factory: Callable[..., AnyEngine],
    url: URL,
    options: EngineOptions,
    queue_pool: type[pool.Pool],
    reads: bool,
) -> AnyEngine:
    """The engine ``factory`` makes, set up for the store (see the module); errors translated."""
    options.check_dialect(url)
    check_query_names(url)
    check_query(url)
    if url.get_backend_name() in ("mysql", "mariadb") and "charset" not in url.query:
        url = url.update_query_dict({"charset": "utf8mb4"})
    try:
        engine = factory(url, **_engine_arguments(url, options, queue_pool, reads))
    except ArgumentError as error:
        redact_error(error, url_text(url))
        raise StoreError("sqlalchemy: open", str(error)) from error
    except ImportError:  # the driver is not installed: the registry reports it as such
        raise
    except Exception as error:  # a dialect reading the URL's query (``timeout=abc``: ValueError)
        redact_error(error, url_text(url))
        raise StoreError("sqlalchemy: open", f"{type(error).__name__}: {error}") from error
    blocking = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    bound_operations(blocking, options.operation_timeout)
    if blocking.dialect.name == "sqlite":
        if blocking.dialect.driver == "aiosqlite":
            open_before_aiosqlite(blocking)
        configure_sqlite(blocking, synchronous=options.synchronous, busy_timeout=options.busy_timeout)
    elif blocking.dialect.name == "postgresql":
        watch_prepared_statements(blocking, options.prepared_statements)  # before the settings
        event.listen(
            blocking, "connect", _session_in_utc if not _asks_for_a_time_zone(url) else _generic_plans
        )
        keep_listen_url(blocking, options.listen)
    if blocking.dialect.name not in ("mysql", "mariadb"):
        watch_idle_connections(blocking, options.check_idle_after)
    return engine


def create_engines(url: str | URL, options: EngineOptions) -> tuple[Engine, Engine | None]:
    """The store's blocking engine for ``url``, set up as the module says, and its read engine.

    The read engine (MariaDB/MySQL only; else ``None``) is like the other but in autocommit.
    Raises ``StoreError`` for a URL SQLAlchemy cannot use, ``InvalidOption`` for an option the
    dialect cannot use; a missing driver raises ``ModuleNotFoundError``.
    """
    return _pair(create_engine, sync_url(url), options, pool.QueuePool)


def create_async_engines(url: str | URL, options: EngineOptions) -> tuple[AsyncEngine, AsyncEngine | None]:
    """The asyncio twin of :func:`create_engines`: same rules and errors; nothing connects yet."""
    return _pair(create_async_engine, async_url(url), options, pool.AsyncAdaptedQueuePool)


def _pair(
    factory: Callable[..., AnyEngine], url: URL, options: EngineOptions, queue_pool: type[pool.Pool]
) -> tuple[AnyEngine, AnyEngine | None]:
    engine = _created(factory, url, options, queue_pool, False)
    if url.get_backend_name() not in ("mysql", "mariadb"):
        return engine, None
    try:
        return engine, _created(factory, url, options, queue_pool, True)
    except BaseException:
        blocking = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
        blocking.dispose(close=False)  # nothing connected yet
        raise


def plan_connections(
    engine: AnyEngine, reads: AnyEngine | None, *, made_here: bool
) -> Connections[AnyEngine]:
    """How the store's plans take their connections from ``engine`` (and ``reads``).

    PostgreSQL runs single statements in autocommit and the rest at the server's default level:
    an engine the store made lends its connections in autocommit already, one given is switched
    both ways. Any other engine given in autocommit (by its execution options) is switched to the
    default level for every plan.
    """
    levels: dict[bool, str] = {}
    given_in_autocommit = engine.get_execution_options().get("isolation_level") == AUTOCOMMIT
    if engine.dialect.name == "postgresql":
        levels = {False: DEFAULT_LEVEL} if made_here else {True: AUTOCOMMIT, False: DEFAULT_LEVEL}
    elif given_in_autocommit:
        levels = {False: DEFAULT_LEVEL}
    begin_writes = "BEGIN IMMEDIATE" if engine.dialect.name == "sqlite" else None
    return Connections(engine, reads, levels, begin_writes)


def blocking_watcher_engine(url: URL) -> Engine | None:
    """A pool-less blocking engine on ``url`` (an asyncio engine's), for a follow watcher.

    Its driver is the blocking twin; ``None`` when that driver is not installed.
    """
    try:
        engine = create_engine(sync_url(url), poolclass=pool.NullPool)
    except ModuleNotFoundError:
        return None
    if engine.dialect.name == "sqlite":
        configure_sqlite(engine)
    return engine


def _asks_for_a_time_zone(url: URL) -> bool:
    """Whether ``url``'s ``options`` query (libpq's ``-c TimeZone=...``) sets the session's time zone."""
    options = url.query.get("options", ())
    return any(
        "timezone" in option.lower() for option in ([options] if isinstance(options, str) else options)
    )


def _session_in_utc(dbapi_connection: Any, connection_record: Any) -> None:
    """A new PostgreSQL session: in UTC (:data:`SET_UTC`), and with generic plans (see below)."""
    _run_settings(dbapi_connection, SET_UTC, *_plan_settings(connection_record))


def _generic_plans(dbapi_connection: Any, connection_record: Any) -> None:
    """A new PostgreSQL session keeps one generic plan per prepared statement, unless asked otherwise.

    :data:`chronica_core.plan_cache.GENERIC_PLANS_SQL`: else PostgreSQL would plan every context
    window again once the tables have statistics. Not on a connection that prepares nothing
    (:func:`chronica_sqlalchemy.poolers.prepares`): it has no use for it, and behind a transaction
    pooler the setting would stay on the server connection for the pooler's other clients.
    """
    _run_settings(dbapi_connection, *_plan_settings(connection_record))


def _plan_settings(connection_record: Any) -> tuple[str, ...]:
    return (GENERIC_PLANS_SQL,) if prepares(connection_record) else ()


def _run_settings(dbapi_connection: Any, *statements: str) -> None:
    """Run session settings as the connection is made (SQLAlchemy's ``connect`` event), and keep them."""
    cursor = dbapi_connection.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()
    if not dbapi_connection.autocommit:
        dbapi_connection.commit()  # so that the settings outlive this transaction


def configure_sqlite(
    engine: Engine,
    *,
    synchronous: str = DEFAULT_SYNCHRONOUS,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT_SECONDS,
) -> None:
    """Set up a SQLite engine (blocking, or an ``AsyncEngine.sync_engine``) for many writers.

    Every new connection gets WAL mode (file databases), ``PRAGMA synchronous`` as given, a busy
    timeout of ``busy_timeout`` seconds and foreign keys on. The driver begins no transaction of
    its own: a store's write plan begins with ``BEGIN IMMEDIATE`` (see :mod:`.executor`), and a
    read, one statement, with none. The writers of one file in this process take turns
    in-process first (:mod:`.sqlite_writers`), each waiting at most ``busy_timeout`` seconds.
    Calling it twice on one engine does nothing more.
    """
    with _SET_UP_GUARD:
        if engine in _SET_UP:
            return
        _SET_UP.add(engine)
    queue_writers(engine, busy_timeout)

    def connect(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver issues no BEGIN of its own
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            _use_write_ahead_log(cursor, busy_timeout)
            cursor.execute(f"PRAGMA synchronous = {synchronous}")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    event.listen(engine, "connect", connect)


def _use_write_ahead_log(cursor: Any, busy_timeout: float) -> None:
    """Put the database in WAL mode (a file database; an in-memory one stays in memory).

    The switch needs the file to itself, and SQLite refuses it at once ("database is locked")
    while another connection writes, as when several open a new file together: then this waits
    for the write lock as a writer would and tries again, until ``busy_timeout`` seconds passed.
    """
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            busy = error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY  # the primary code
            if not busy or time.monotonic() >= deadline:
                raise
        cursor.execute("BEGIN IMMEDIATE")
        cursor.execute("ROLLBACK")
