"""URLs and engines: which driver a URL gets (blocking or asyncio) and how SQLite is set up.

URLs are parsed with SQLAlchemy's :func:`~sqlalchemy.engine.make_url`. A URL names a dialect and
optionally a driver; the blocking store and the asyncio store each take the driver of their kind,
so one URL serves both:

=====================  =====================  ===================================================
dialect                blocking driver        asyncio store (``open_async_store``)
=====================  =====================  ===================================================
``sqlite``             ``pysqlite`` (stdlib)  ``pysqlite`` on worker threads, one hop per operation
                                              (``sqlite+aiosqlite://``: ``aiosqlite``)
``mysql``/``mariadb``  ``pymysql``            ``asyncmy``
``postgresql``         ``psycopg``            ``psycopg`` (its async API)
=====================  =====================  ===================================================

A driver the URL names explicitly is kept when it is of the right kind and replaced by its twin
otherwise (``sqlite+aiosqlite://`` opens a blocking store on ``pysqlite``; ``mysql+aiomysql://``
opens an asyncio store on aiomysql when it is installed). :func:`async_url` gives the driver of an
``AsyncEngine`` (``aiosqlite`` for SQLite); :func:`runs_on_worker_threads` says when the asyncio
store uses worker threads instead (SQLite, unless the URL names ``aiosqlite``), and why.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, pool
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chronica_core.errors import InvalidOption, StoreError
from chronica_core.idle import CHECK_IDLE_AFTER, DEFAULT_CHECK_IDLE_AFTER, check_idle_after_option
from chronica_core.limits import MAX_CONTENT_OPTION, content_limit_option
from chronica_core.options import count_option, flag_option, seconds_option
from chronica_core.plan_cache import GENERIC_PLANS_SQL
from chronica_core.redaction import redact_error
from chronica_core.urls import split_schema
from chronica_sqlalchemy.connections import watch_idle_connections
from chronica_sqlalchemy.driver_statements import BEGIN_IMMEDIATE, begin_immediate
from chronica_sqlalchemy.plans import AUTOCOMMIT, IN_AUTOCOMMIT, WRITE_OPTION, content_ceiling
from chronica_sqlalchemy.sqlite_writers import queue_writers
from chronica_sqlalchemy.timeouts import bound_operations, check_driver, connect_arguments
from chronica_sqlalchemy.url_checks import check_driver_name, check_port, check_query

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_SECONDS",
    "DEFAULT_SYNCHRONOUS",
    "OPTION_NAMES",
    "SET_UTC",
    "EngineOptions",
    "asks_for_a_time_zone",
    "async_url",
    "checked_content_limit",
    "checked_schema",
    "configure_sqlite",
    "create_async_read_engine",
    "create_async_store_engine",
    "create_read_engine",
    "create_store_engine",
    "reads_in_autocommit",
    "runs_on_worker_threads",
    "schema_name_problem",
    "sync_url",
    "url_and_options",
    "url_text",
]

AnyEngine = TypeVar("AnyEngine", Engine, AsyncEngine)

DEFAULT_SYNCHRONOUS = "FULL"
"""SQLite's ``PRAGMA synchronous`` by default. In WAL mode ``FULL`` syncs the log at every commit,
so an acknowledged write survives a power loss; ``NORMAL`` is faster but may lose the last
commits on power loss (never on an application crash), and ``OFF`` may corrupt the file."""

DEFAULT_BUSY_TIMEOUT_SECONDS = 30.0
"""How long a SQLite writer waits for the write lock before giving up, in seconds."""

_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")
_SYNCED_AT_COMMIT = frozenset({"FULL", "EXTRA"})  # WAL: the levels that sync the log at every commit

OPTION_NAMES = (
    "auto_migrate",
    "busy_timeout",
    CHECK_IDLE_AFTER,
    "echo",
    "max_content_bytes",
    "max_overflow",
    "operation_timeout",
    "pool_size",
    "schema",
    "synchronous",
)
"""Every option ``open_store(url, **options)`` understands on this backend."""

_BACKEND = "sqlalchemy"
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
    """Parse ``url`` and check its driver name and port (see :mod:`chronica_sqlalchemy.url_checks`).

    Raises ``StoreError`` for text SQLAlchemy cannot parse as a URL, ``InvalidOption`` (option
    ``port``) for a port that is no number or out of range, ``UnknownBackend`` for a driver
    SQLAlchemy does not know. SQLAlchemy's message quotes the URL: its secrets are redacted,
    from the driver's error too.
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
    """Return ``url`` with a blocking driver: its own if it names one, else the default (table above).

    Raises ``StoreError`` when ``url`` is not a SQLAlchemy URL, ``InvalidOption`` for a port that is
    no number or out of range, ``UnknownBackend`` for a driver SQLAlchemy does not know.
    """
    parsed = _parse(url)
    driver = parsed.drivername.partition("+")[2]
    if driver and driver not in _ASYNC_ONLY:
        return parsed
    return _with_driver(parsed, _BLOCKING_DRIVERS, frozenset())


def async_url(url: str | URL) -> URL:
    """Return ``url`` with an asyncio driver: its own if it names one, else its twin (table above).

    Raises ``StoreError`` when ``url`` is not a SQLAlchemy URL, ``InvalidOption`` for a port that is
    no number or out of range, ``UnknownBackend`` for a driver SQLAlchemy does not know.
    """
    return _with_driver(_parse(url), _ASYNC_DRIVERS, _ASYNC_ONLY)


def runs_on_worker_threads(url: str | URL) -> bool:
    """Whether the asyncio store for ``url`` runs the blocking driver on worker threads.

    True for SQLite unless the URL names an asyncio driver (``sqlite+aiosqlite://``). SQLite has
    no server to wait on: its calls block on the file and its lock, so any asyncio SQLite driver
    is a thread doing the blocking calls. aiosqlite under SQLAlchemy's asyncio bridge makes about
    four round trips between the event loop and that thread per statement; running each whole
    operation on a worker thread makes one (see ``AsyncThreadedSQLAlchemyStore``).

    Raises ``StoreError`` when ``url`` is not a SQLAlchemy URL, ``InvalidOption`` for a port that is
    no number or out of range, ``UnknownBackend`` for a driver SQLAlchemy does not know.
    """
    parsed = _parse(url)
    return parsed.get_backend_name() == "sqlite" and parsed.drivername.partition("+")[2] not in _ASYNC_ONLY


class EngineOptions:
    """The options ``open_store(url, **options)`` understands, parsed from strings or values.

    Parsing does no I/O: a store checks its options before it opens or writes anything.

    Args:
        options: ``schema`` (str), ``auto_migrate`` (bool, default true), ``synchronous``
            (SQLite: ``OFF``/``NORMAL``/``FULL``/``EXTRA``, default ``FULL``), ``busy_timeout``
            (SQLite: seconds from 0 to 3600, default 30), ``check_idle_after`` (servers: seconds a
            pooled connection may sit idle and still be used unchecked, from 0 to 86400, default
            60; see :mod:`chronica_sqlalchemy.connections`), ``pool_size`` and ``max_overflow``
            (whole numbers from 0 to 1000; a ``pool_size`` of 0 sets no limit), ``echo`` (bool),
            ``operation_timeout`` (MariaDB/MySQL and PostgreSQL: seconds from 1 to 3600, default
            none; see :mod:`chronica_sqlalchemy.timeouts`), ``max_content_bytes`` (a lower limit on
            content than the database's own, in bytes; see :func:`checked_content_limit`). Values may be given
            as strings, as ``--option key=value`` does; booleans as ``true``/``false``,
            ``yes``/``no``, ``on``/``off`` or ``1``/``0``.

    Raises:
        InvalidOption: an option this backend does not know (the reason lists
            :data:`OPTION_NAMES`), or a value of the wrong shape or out of range (the reason says
            what is expected, bounds included).
    """

    def __init__(self, options: Mapping[str, Any]) -> None:
        for name in sorted(options):
            if name not in OPTION_NAMES:
                known = ", ".join(OPTION_NAMES)
                raise InvalidOption(_BACKEND, name, f"unknown option; known options: {known}")
        self.schema = checked_schema(options.get("schema"))
        self.auto_migrate = flag_option(_BACKEND, "auto_migrate", options.get("auto_migrate", True))
        self.echo = flag_option(_BACKEND, "echo", options.get("echo", False))
        synchronous = options.get("synchronous", DEFAULT_SYNCHRONOUS)
        self.synchronous = str(synchronous).strip().upper()
        if self.synchronous not in _SYNCHRONOUS_LEVELS:
            levels = ", ".join(_SYNCHRONOUS_LEVELS)
            raise InvalidOption(_BACKEND, "synchronous", f"expected one of {levels}, got {synchronous!r}")
        self.busy_timeout = seconds_option(
            _BACKEND,
            "busy_timeout",
            options.get("busy_timeout", DEFAULT_BUSY_TIMEOUT_SECONDS),
            least=0.0,
            most=_SECONDS_MOST,
        )
        self.check_idle_after = check_idle_after_option(
            _BACKEND, options.get(CHECK_IDLE_AFTER, DEFAULT_CHECK_IDLE_AFTER)
        )
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

    def check_dialect(self, url: URL) -> None:
        """Raise ``InvalidOption`` for an option the URL's dialect or driver cannot use.

        That is ``schema`` or ``operation_timeout`` on SQLite, and ``operation_timeout`` with a
        driver that cannot bound an operation.
        """
        checked_schema(self.schema, url.get_backend_name())
        checked_content_limit(self.max_content_bytes, url.get_backend_name())
        check_driver(url, self.operation_timeout)

    def store_arguments(self) -> dict[str, Any]:
        """The keyword arguments of a store's constructor that these options give."""
        return {
            "schema": self.schema,
            "auto_migrate": self.auto_migrate,
            "max_content_bytes": self.max_content_bytes,
        }


def url_and_options(url: str | URL, options: Mapping[str, Any]) -> tuple[str, EngineOptions]:
    """Parse ``options`` for ``url``, a ``schema`` query parameter in the URL counting as the option.

    ``mariadb+pymysql://host/db?schema=app`` means ``schema="app"`` on every dialect (the driver
    would refuse the parameter, or SQLite ignore it); a ``schema`` option given explicitly wins.

    Returns:
        The URL as text without that parameter, and the parsed options.

    Raises:
        InvalidOption: as :class:`EngineOptions` (the URL's ``schema`` is checked as the option is).
    """
    text, schema = split_schema(url_text(url))
    if schema is not None:
        options = {"schema": schema, **options}
    return text, EngineOptions(options)


def checked_content_limit(value: object, dialect_name: str | None = None) -> int | None:
    """Return the ``max_content_bytes`` option as an int (``None``: none given, the database's limit).

    Args:
        value: the option as given (an int, or its digits as text).
        dialect_name: the database's SQLAlchemy dialect, when known: the bound is then the most
            that dialect could take (:func:`chronica_sqlalchemy.plans.content_ceiling`), else
            the most any could.

    Raises:
        InvalidOption: not a whole number from 0 to that bound (the message names both bounds).
    """
    if value is None:
        return None
    ceiling = content_ceiling(dialect_name) if dialect_name is not None else None
    if ceiling is None:
        ceiling = max(content_ceiling(name) or 0 for name in ("mysql", "sqlite", "postgresql"))
    return content_limit_option(_BACKEND, value, ceiling)


def checked_schema(schema: object, dialect_name: str | None = None) -> str | None:
    """Return the ``schema`` option as a string (``None``: none given).

    A name that is accepted names exactly that schema (database, on MariaDB/MySQL): it is quoted
    and used as given, so two distinct accepted names never share one. Names the database would
    cut, change or refuse are refused here instead (see :func:`schema_name_problem`).

    Args:
        schema: the option as given.
        dialect_name: the database's SQLAlchemy dialect (``"sqlite"``), when known; the checks
            particular to a dialect are made once it is.

    Raises:
        InvalidOption: ``schema``, saying why the name cannot be used.
    """
    if schema is None:
        return None
    name = str(schema)
    problem = schema_name_problem(name, dialect_name)
    if problem:
        raise InvalidOption(_BACKEND, "schema", problem)
    return name


_POSTGRESQL_NAME_BYTES = 63  # NAMEDATALEN - 1: PostgreSQL silently cuts longer identifiers
_MYSQL_NAME_CHARACTERS = 64  # MariaDB/MySQL refuse longer database names


def schema_name_problem(name: str, dialect_name: str | None = None) -> str | None:
    """Why ``name`` cannot be the ``schema`` option on ``dialect_name``, or ``None`` when it can.

    Everywhere: an empty name, or one holding NUL (no database can name a schema so). SQLite:
    any name (one file is one database). PostgreSQL: longer than 63 bytes in UTF-8 (it would cut
    the name, so two names differing after that would share a schema), or starting with ``pg_``
    (reserved). MariaDB/MySQL: longer than 64 characters, ending with a space (refused by the
    server), outside the Basic Multilingual Plane (identifiers cannot hold such characters), or
    starting with ``#mysql50#`` (read as an old-style file name, not as the name itself), or
    holding capital letters (InnoDB compares the foreign-key names of two schemas without regard
    to case, so ``Tenant`` and ``tenant`` could not both hold the tables).
    """
    if not name or "\x00" in name:
        return "must be a non-empty name without NUL"
    if dialect_name == "sqlite":
        return "not supported on SQLite"
    if dialect_name == "postgresql":
        size = len(name.encode())
        if size > _POSTGRESQL_NAME_BYTES:
            return (
                f"is {size} bytes in UTF-8, longer than PostgreSQL's {_POSTGRESQL_NAME_BYTES}-byte "
                "identifiers (it would cut the name, and names differing only after that would share "
                "a schema)"
            )
        if name.startswith("pg_"):
            return "cannot start with pg_ (PostgreSQL reserves those schema names for itself)"
    if dialect_name in ("mysql", "mariadb"):
        if len(name) > _MYSQL_NAME_CHARACTERS:
            return f"is {len(name)} characters, longer than MariaDB/MySQL's {_MYSQL_NAME_CHARACTERS}"
        if name.endswith(" "):
            return "cannot end with a space on MariaDB/MySQL"
        if any(ord(character) > 0xFFFF for character in name):
            return "cannot hold characters beyond U+FFFF on MariaDB/MySQL"
        if name.startswith("#mysql50#"):
            return "cannot start with #mysql50# on MariaDB/MySQL (it marks an old-style file name)"
        if name != name.lower():
            return (
                "cannot hold capital letters on MariaDB/MySQL (InnoDB compares foreign-key names "
                "without regard to case, so two schemas whose names differ only in case would "
                "clash); use lowercase"
            )
    return None


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"


def reads_in_autocommit(url: str | URL) -> bool:
    """Whether a store on ``url`` reads on an engine of its own in autocommit (MariaDB/MySQL).

    There a session either keeps autocommit off, so that an append's ``UPDATE`` begins its
    transaction without a ``BEGIN`` round trip, or has it on, so that a read's ``SELECT`` is its
    own transaction and needs no ``ROLLBACK`` round trip; switching a session between the two
    costs a ``SET autocommit`` round trip each way. So the store keeps two pools: its engine's for
    writes (autocommit off) and a read engine's (:func:`create_read_engine`) for the
    single-statement reads. PostgreSQL switches to autocommit without a round trip, and SQLite
    reads take no transaction: one engine serves both there.
    """
    return make_url(url).get_backend_name() in ("mysql", "mariadb")


def _engine_arguments(
    url: URL, options: EngineOptions, queue_pool: type[pool.Pool], *, reads: bool = False
) -> tuple[URL, dict[str, Any]]:
    """Return the URL and ``create_engine`` keyword arguments for the store's engine.

    ``reads``: for the read engine of MariaDB/MySQL (see :func:`reads_in_autocommit`).
    """
    # Every plan ends its own transaction: it commits or rolls back, and a connection closed with
    # a transaction open rolls it back itself. The pool's rollback on return would only repeat
    # that after every write: one more round trip (an aiosqlite thread hop) per operation.
    arguments: dict[str, Any] = {"echo": options.echo, "pool_reset_on_return": None}
    dialect = url.get_backend_name()
    if dialect in ("mysql", "mariadb"):
        if "charset" not in url.query:
            url = url.update_query_dict({"charset": "utf8mb4"})
        arguments["pool_pre_ping"] = False
        if reads:
            # Set once per connection, as it connects. Each SELECT is then its own transaction,
            # holding nothing once answered; SQLAlchemy's ROLLBACK when the read's connection
            # closes is skipped while the driver's status says autocommit (PyMySQL and asyncmy
            # read it from the server's last answer: no round trip).
            arguments["isolation_level"] = AUTOCOMMIT
            arguments["skip_autocommit_rollback"] = True
        else:
            arguments["isolation_level"] = "READ COMMITTED"
    if dialect == "postgresql":
        # Lent in autocommit: most operations are one statement, and switching each connection to
        # autocommit and back cost client CPU on every operation; those that need a transaction
        # switch to it instead (see chronica_sqlalchemy.plans.IN_AUTOCOMMIT).
        arguments["isolation_level"] = AUTOCOMMIT
        arguments["execution_options"] = {IN_AUTOCOMMIT: True}
    if dialect == "sqlite" and _is_memory(url):
        # One connection, shared by turns: every thread and task sees the same in-memory database.
        arguments.update(poolclass=queue_pool, pool_size=1, max_overflow=0, pool_timeout=options.busy_timeout)
        if url.get_driver_name() == "pysqlite":
            arguments["connect_args"] = {"check_same_thread": False}
    elif dialect != "sqlite" or options.pool:
        arguments.update(options.pool)
    driver_timeouts = connect_arguments(url, options.operation_timeout)  # none on SQLite
    if driver_timeouts:
        arguments["connect_args"] = driver_timeouts
    return url, arguments


def create_store_engine(url: str | URL, options: EngineOptions) -> Engine:
    """Create the blocking engine for ``url`` (SQLite gets :func:`configure_sqlite`).

    Raises ``StoreError`` for a URL SQLAlchemy cannot use (whatever the dialect raises reading its
    query, chained to it), ``InvalidOption`` for an option the
    dialect cannot use (``schema`` on SQLite); a missing driver raises ``ModuleNotFoundError``
    (the registry reports it as ``BackendUnavailable``).
    """
    engine = _created(create_engine, sync_url(url), options, pool.QueuePool)
    _configured(engine, options)
    return engine


def create_async_store_engine(url: str | URL, options: EngineOptions) -> AsyncEngine:
    """Create the asyncio engine for ``url``; same rules and errors as :func:`create_store_engine`."""
    engine = _created(create_async_engine, async_url(url), options, pool.AsyncAdaptedQueuePool)
    _configured(engine.sync_engine, options)
    return engine


def create_read_engine(url: str | URL, options: EngineOptions) -> Engine | None:
    """Create the blocking read engine for ``url``, or return ``None`` where none is needed.

    MariaDB/MySQL only (see :func:`reads_in_autocommit`): an engine like
    :func:`create_store_engine`'s (the same driver, ``pool_size`` and ``max_overflow``, idle
    check and ``operation_timeout``) whose connections are in autocommit. Connections are opened
    as reads need them, none before. Same errors as :func:`create_store_engine`.
    """
    if not reads_in_autocommit(url):
        return None
    engine = _created(create_engine, sync_url(url), options, pool.QueuePool, reads=True)
    _configured(engine, options)
    return engine


def create_async_read_engine(url: str | URL, options: EngineOptions) -> AsyncEngine | None:
    """The asyncio twin of :func:`create_read_engine` (asyncmy, unless the URL names another)."""
    if not reads_in_autocommit(url):
        return None
    engine = _created(create_async_engine, async_url(url), options, pool.AsyncAdaptedQueuePool, reads=True)
    _configured(engine.sync_engine, options)
    return engine


def _created(
    factory: Callable[..., AnyEngine],
    url: URL,
    options: EngineOptions,
    queue_pool: type[pool.Pool],
    *,
    reads: bool = False,
) -> AnyEngine:
    options.check_dialect(url)
    check_query(url)
    url, arguments = _engine_arguments(url, options, queue_pool, reads=reads)
    try:
        return factory(url, **arguments)
    except ArgumentError as error:
        redact_error(error, url_text(url))
        raise StoreError("sqlalchemy: open", str(error)) from error
    except ImportError:  # the driver is not installed: the registry reports it as such
        raise
    except Exception as error:  # a dialect reading the URL's query (``timeout=abc``: ValueError)
        redact_error(error, url_text(url))
        raise StoreError("sqlalchemy: open", f"{type(error).__name__}: {error}") from error


def _configured(engine: Engine, options: EngineOptions) -> None:
    bound_operations(engine, options.operation_timeout)
    if engine.dialect.name == "sqlite":
        configure_sqlite(engine, synchronous=options.synchronous, busy_timeout=options.busy_timeout)
    if engine.dialect.name == "postgresql":
        if not asks_for_a_time_zone(engine.url):
            event.listen(engine, "connect", _session_in_utc)
        event.listen(engine, "connect", _session_with_generic_plans)
    watch_idle_connections(engine, options.check_idle_after)


SET_UTC = "SET TIME ZONE 'UTC'"
"""Run on each new connection of the PostgreSQL engines the store creates, unless the URL names a
time zone (see :func:`asks_for_a_time_zone`); never on an engine you give."""


def asks_for_a_time_zone(url: URL) -> bool:
    """Whether ``url``'s ``options`` query (libpq's ``-c TimeZone=...``) sets the session's time zone.

    The store then leaves the zone as asked instead of running :data:`SET_UTC`.
    """
    options = url.query.get("options", ())
    given = [options] if isinstance(options, str) else list(options)
    return any("timezone" in option.lower() for option in given)


def _session_with_generic_plans(dbapi_connection: Any, connection_record: Any) -> None:
    """Make a new PostgreSQL connection keep one generic plan per prepared statement.

    :data:`chronica_core.plan_cache.GENERIC_PLANS_SQL`: without it PostgreSQL would plan every
    context-window read again once the tables have statistics. One round trip as the connection is
    made (two if it is not in autocommit yet: it is then committed, so the setting outlives that
    transaction). SQL of your own on ``store.engine`` runs with generic plans too; an engine you
    give is left as it is.
    """
    _run_setting(dbapi_connection, GENERIC_PLANS_SQL)


def _session_in_utc(dbapi_connection: Any, connection_record: Any) -> None:
    """Set a new PostgreSQL connection's session time zone to UTC (:data:`SET_UTC`).

    One round trip as the connection is made (two if it is not in autocommit yet: it is then
    committed, so the setting outlives that transaction). psycopg then reads every
    ``timestamptz`` as a ``datetime`` in ``datetime.UTC``, with nothing to convert: in any other
    zone (a server's default, ``Etc/UTC`` included) psycopg converts each moment into it and the
    store back to UTC, about a sixth of a context-window read's client work. What the store
    reads is the same either way; SQL of your own on ``store.engine`` sees the session in UTC
    (``now()``, a ``timestamptz`` rendered as text).
    """
    _run_setting(dbapi_connection, SET_UTC)


def _run_setting(dbapi_connection: Any, statement: str) -> None:
    """Run ``statement`` (a session setting) on a new connection and keep it.

    A connection not in autocommit is then committed, so the setting outlives that transaction.
    """
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(statement)
    finally:
        cursor.close()
    if not dbapi_connection.autocommit:
        dbapi_connection.commit()


def configure_sqlite(
    engine: Engine,
    *,
    synchronous: str = DEFAULT_SYNCHRONOUS,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT_SECONDS,
) -> None:
    """Set up a SQLite engine (blocking, or an ``AsyncEngine.sync_engine``) for many writers.

    Every new connection gets WAL mode (file databases), ``PRAGMA synchronous`` as given, a busy
    timeout of ``busy_timeout`` seconds and foreign keys on. The store, not the driver's own
    transaction handling, begins transactions (through SQLAlchemy's ``begin`` event here, or for a
    single append by the driver itself: see :func:`chronica_sqlalchemy.plans.execute_plan`):
    ``BEGIN IMMEDIATE`` on connections that write (so a writer waits for the lock
    up front, under the busy timeout, instead of failing with "database is locked" when it tries
    to upgrade a read lock), and none on those that only read (the store's reads are single
    statements, atomic by themselves in WAL mode). The writers of one file in this process take
    turns in-process, each waiting at most ``busy_timeout`` seconds for its turn, instead of in
    SQLite's busy handler, and with ``synchronous`` ``FULL`` or ``EXTRA`` a blocking writer hands
    the interpreter to a blocking writer waiting for its turn as it gives it back (see
    :mod:`chronica_sqlalchemy.sqlite_writers`). Calling it twice on one engine does nothing more.
    """
    if event.contains(engine, "begin", _begin):
        return
    queue_writers(engine, busy_timeout, hand_over=synchronous.upper() in _SYNCED_AT_COMMIT)

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
    event.listen(engine, "begin", _begin)


def _use_write_ahead_log(cursor: Any, busy_timeout: float) -> None:
    """Put the database in WAL mode (a file database; an in-memory one stays in memory).

    The switch needs the file to itself, and SQLite refuses it with "database is locked" at once,
    without waiting under the busy timeout, while another connection holds a write transaction:
    that happens when several connections open a new database at the same moment. On that answer
    (``SQLITE_BUSY`` or one of its extended codes) this waits for the write lock as a writer would
    (``BEGIN IMMEDIATE``, under the busy timeout, then ``ROLLBACK``) and tries again. It tries no
    more once ``busy_timeout`` seconds have passed since the first try; as each wait may itself last
    up to the busy timeout, giving up can take a few times that when the file stays locked. Once
    the file is in WAL mode the switch changes nothing and takes no lock.
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


def _begin(connection: Connection) -> None:
    """A writing connection begins with ``BEGIN IMMEDIATE`` (on ``pysqlite``, sent by the driver itself)."""
    if connection.get_execution_options().get(WRITE_OPTION, False):
        driver_connection = connection.connection.driver_connection
        if isinstance(driver_connection, sqlite3.Connection):
            begin_immediate(driver_connection, connection.dialect)
        else:
            connection.exec_driver_sql(BEGIN_IMMEDIATE)
