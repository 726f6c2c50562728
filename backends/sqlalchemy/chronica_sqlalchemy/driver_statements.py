"""Statements compiled once by SQLAlchemy and run by the database driver itself.

SQLAlchemy's execution of a Core statement (its compiled-cache lookup, execution context,
events, result object and row processing) costs the client more CPU than a short statement
costs the database. The store's hot statements (SQLite's writes and context-window reads, and
on PostgreSQL through psycopg a context-window read, a ``get`` and a single append) are
therefore compiled once, for the store's dialect, into a :class:`DriverStatement`: the SQL text,
its parameters' names (in placeholder order for ``sqlite3``'s ``?``; by name for psycopg's
``%(name)s``), each parameter's bind processor as SQLAlchemy's type gives it on the dialect,
and the values the statement fixes itself. Each call then puts the values together and runs the
text on the pooled connection's driver connection (on psycopg, on a cursor the connection keeps
for that statement: see :func:`psycopg_call`). The connection is still the pool's, taken and
given back as for any plan (its ``checkout`` and ``checkin`` events run); on psycopg, a plan that
begins with such a statement takes it with ``engine.raw_connection()``, without a SQLAlchemy
``Connection`` around it, when the pool lends its connections in autocommit, and so does a
SQLite append, whose transaction the driver then begins and ends itself
(:func:`begin_immediate`, :func:`end_transaction`; see
:func:`chronica_sqlalchemy.plans.execute_plan`).

A failure is the ``DBAPIError`` SQLAlchemy would have raised, so the plans translate it as they
translate every other (``StoreError("sqlalchemy: <operation>", ...)``):

- SQLite (:func:`sqlite_rows`): the ``sqlite3`` error is wrapped by ``DBAPIError.instance``
  (``IntegrityError`` for a constraint, ``OperationalError`` for "database is locked"...), marked
  as a lost connection when the dialect reads it as one.
- psycopg (:func:`psycopg_rows`): the error is handed to the SQLAlchemy connection's own error
  handling, ``Connection._handle_dbapi_exception(error, statement, parameters, cursor,
  context)``, so it is wrapped, a lost connection is invalidated, and the engine's
  ``handle_error`` events run (``operation_timeout`` replaces the error there) exactly as if
  SQLAlchemy had run the statement. That method is private to SQLAlchemy: it has had this
  signature throughout 2.0 and still has it in 2.1 (checked against 2.1.9); a SQLAlchemy that
  changes it breaks this call, which the backend's PostgreSQL tests on lost connections and
  timeouts would show.

The driver's own calls are :func:`sqlite_call` and :func:`psycopg_call`, one each, so that a
test can make them fail.
"""

from __future__ import annotations

import functools
import reprlib
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy.util
from sqlalchemy import Connection, Dialect, Engine, Executable
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.pool import PoolProxiedConnection

__all__ = [
    "BEGIN_IMMEDIATE",
    "BULKY_BYTES",
    "KEPT_CURSORS",
    "DriverRun",
    "DriverStatement",
    "begin_immediate",
    "end_transaction",
    "psycopg_call",
    "psycopg_rows",
    "sqlite_call",
    "sqlite_rows",
]

BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"
"""How a SQLite writing connection begins: it waits for the write lock up front (under the busy timeout)."""

KEPT_CURSORS = "chronica_kept_cursors"
"""Key in a pooled psycopg connection's ``info`` (emptied when SQLAlchemy replaces the connection):
its kept cursors, by statement text (see :func:`psycopg_call`)."""

BULKY_BYTES = 8192
"""The most bytes a binary value (content) may hold for its call to run on a kept cursor.

Only binary values are counted (see :func:`psycopg_call`); the text values these statements
send (ids, kinds, actors) are bounded by their columns."""

_await: Callable[[Any], Any] = getattr(sqlalchemy.util, "await_", None) or sqlalchemy.util.await_only
_shown = reprlib.Repr()
_shown.maxstring = 60
_shown.maxother = 60


@dataclass(frozen=True)
class DriverStatement:
    """One SQLAlchemy statement as the driver runs it: its SQL text, compiled once, and how to bind it.

    Attributes:
        text: the statement's SQL for the dialect, with the dialect's placeholders (``?`` on
            ``pysqlite``; ``%(name)s`` on psycopg, with the casts SQLAlchemy renders for it).
        names: the parameter of each placeholder, in order (with ``?``, a parameter used twice
            is named twice); with named placeholders, each parameter once.
        processors: each name's bind processor (``None``: the value goes as it is), as
            SQLAlchemy's type of that parameter gives it on the dialect (a moment to UTC text
            on SQLite, content to UTF-8 ``bytes`` on PostgreSQL).
        dialect: the dialect it was compiled for (it reads the driver's errors).
        fixed: the values of parameters the statement fixes itself (an ``OFFSET`` of 0, the
            follow channel); a value given in the call's parameters wins.
        positional: whether the driver takes the values as a list in :attr:`names`' order
            (``sqlite3``) rather than a dict by name (psycopg).
    """

    text: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    dialect: Dialect
    fixed: dict[str, Any] = field(default_factory=dict)
    positional: bool = True
    _processed: tuple[tuple[str, Callable[[Any], Any]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        processed = tuple(
            (name, process) for name, process in zip(self.names, self.processors, strict=True) if process
        )
        object.__setattr__(self, "_processed", processed)

    @classmethod
    def compiled(
        cls, statement: Executable, dialect: Dialect, column_keys: Sequence[str] | None = None
    ) -> DriverStatement | None:
        """Compile ``statement`` for ``dialect``; ``None`` when its text is not fixed (SQLAlchemy runs it).

        Args:
            statement: a Core statement whose parameters are named bind parameters.
            dialect: a ``pysqlite`` or psycopg dialect (its placeholder style decides
                :attr:`positional`).
            column_keys: for an ``INSERT`` without values of its own, the columns the parameters
                name (as SQLAlchemy compiles it for an execution with those parameters).

        Returns ``None`` for a statement SQLAlchemy completes at execution time: a parameter
        rendered into its text or expanded (an ``IN`` list), a parameter name it had to escape,
        a value computed when it runs (a bind parameter's callable, a column default), so that
        there is no fixed text with known names and values to hand to the driver.
        """
        compiled: Any = cast(Any, statement).compile(
            dialect=dialect, column_keys=None if column_keys is None else list(column_keys)
        )
        if (
            compiled.literal_execute_params
            or compiled.post_compile_params
            or compiled.escaped_bind_names
            or compiled.insert_prefetch
            or compiled.update_prefetch
        ):
            return None
        positional = bool(compiled.positional)
        binds = compiled.binds
        names = tuple(compiled.positiontup) if positional else tuple(compiled.bind_names.values())
        if any(binds[name].callable is not None for name in names):
            return None
        processors = tuple(binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
        fixed = {name: binds[name].value for name in names if not binds[name].required}
        return cls(compiled.string, names, processors, dialect, fixed, positional)

    def values(self, parameters: dict[str, Any]) -> list[Any] | dict[str, Any]:
        """The values the driver is sent for ``parameters``: the fixed ones added, every value processed.

        A list in placeholder order when :attr:`positional`, else a dict by name: ``parameters``
        itself when nothing is added or processed (the driver only reads it). Raises
        ``KeyError`` for a parameter neither given nor fixed.
        """
        if self.fixed:
            parameters = {**self.fixed, **parameters}
        if self.positional:
            return [
                parameters[name] if process is None else process(parameters[name])
                for name, process in zip(self.names, self.processors, strict=True)
            ]
        if not self._processed:
            return parameters
        values = dict(parameters)
        for name, process in self._processed:
            values[name] = process(values[name])
        return values

    def bulky(self, values: Any) -> bool:
        """Whether a processed value of ``values`` (a dict by name) holds more than :data:`BULKY_BYTES` bytes.

        Only the values a bind processor made are looked at: that is how binary values arise
        (content on PostgreSQL, which SQLAlchemy's binary type wraps in psycopg's ``Binary``,
        whose ``obj`` holds the bytes; plain ``bytes`` count too). A statement without bind
        processors (a context window, a ``get``) is never bulky.
        """
        for name, _ in self._processed:
            value = values.get(name)
            held = getattr(value, "obj", value)
            if isinstance(held, bytes | bytearray | memoryview) and len(held) > BULKY_BYTES:
                return True
        return False


@dataclass(frozen=True)
class DriverRun:
    """One run of a SQLite :class:`DriverStatement` with its parameters: a plan's driver-call argument.

    Called with the driver's connection, it returns the rows. The statement and its parameters
    stay visible in the plan's step (plans can be inspected and rewritten, as the conformance
    suite's ``RedirectedPlans`` does).
    """

    statement: DriverStatement
    parameters: dict[str, Any]

    def __call__(self, driver_connection: Any) -> list[Any]:
        """The rows; raises as :func:`sqlite_rows`."""
        return sqlite_rows(driver_connection, self.statement, self.parameters)

    def echo(self, engine: Engine) -> None:
        """Log the statement and its parameters on ``engine``'s logger if its ``echo`` is on."""
        echo(engine, self.statement, self.parameters, "sqlite3")


def echo(engine: Engine, statement: DriverStatement, values: Any, driver: str) -> None:
    """Log ``statement``'s text and ``values`` on ``engine``'s logger when ``engine.echo`` is on.

    A statement the driver runs itself passes SQLAlchemy's execution by, and its logging with it;
    this logs it as SQLAlchemy would (the text, then the values, shortened), ``driver`` naming
    who ran it (``"sqlite3"``, ``"psycopg"``).
    """
    if engine.echo:
        engine.logger.info("%s", statement.text)
        engine.logger.info("[%s, compiled once] %s", driver, _shown.repr(values))


def sqlite_rows(driver_connection: Any, statement: DriverStatement, parameters: dict[str, Any]) -> list[Any]:
    """Every row ``statement`` gives with ``parameters`` on ``driver_connection`` (a ``sqlite3.Connection``).

    The rows are ``sqlite3``'s tuples, unprocessed (a moment is its stored text).

    Raises:
        sqlalchemy.exc.DBAPIError: the driver's error wrapped as SQLAlchemy would wrap it (its
            subclass: ``IntegrityError`` for a constraint, ``OperationalError`` for "database
            is locked" or "disk I/O error"), marked as a lost connection when the dialect reads
            it as one (a closed connection).
    """
    values = statement.values(parameters)
    try:
        return sqlite_call(driver_connection, statement, values)
    except sqlite3.Error as error:
        raise _wrapped(statement, values, error) from error


def _wrapped(statement: DriverStatement, values: Any, error: sqlite3.Error) -> StatementError:
    """``error`` wrapped as SQLAlchemy would wrap it; a lost connection if the dialect reads it as one."""
    lost = statement.dialect.is_disconnect(cast(Any, error), None, None)
    return DBAPIError.instance(statement.text, values, error, sqlite3.Error, connection_invalidated=lost)


def sqlite_call(driver_connection: sqlite3.Connection, statement: DriverStatement, values: Any) -> list[Any]:
    """``sqlite3``'s own call: every row ``statement``'s text gives with ``values``. Raises what it raises."""
    return driver_connection.execute(statement.text, values).fetchall()


def begin_immediate(driver_connection: sqlite3.Connection, dialect: Dialect) -> None:
    """Send ``BEGIN IMMEDIATE`` on ``driver_connection``, the driver's own call.

    Raises ``DBAPIError`` as :func:`sqlite_rows` does (``OperationalError`` "database is
    locked" when another process held the lock past the busy timeout).
    """
    sqlite_rows(driver_connection, _transaction_statement(BEGIN_IMMEDIATE, dialect), {})


def end_transaction(driver_connection: sqlite3.Connection, dialect: Dialect, end: str) -> None:
    """End the transaction open on ``driver_connection`` with ``end``, ``"COMMIT"`` or ``"ROLLBACK"``.

    The driver's own call, as :func:`begin_immediate` began it; nothing is sent when no
    transaction is open, as a SQLAlchemy ``Connection`` would send nothing. Raises ``DBAPIError``
    as :func:`sqlite_rows` does (``OperationalError`` "disk I/O error" for a ``COMMIT`` that
    could not be written, ``ProgrammingError`` for a connection closed underneath).
    """
    statement = _transaction_statement(end, dialect)
    try:
        open_transaction = driver_connection.in_transaction
    except sqlite3.Error as error:  # a closed connection cannot say
        raise _wrapped(statement, [], error) from error
    if open_transaction:
        sqlite_rows(driver_connection, statement, {})


@functools.lru_cache(maxsize=32)
def _transaction_statement(text: str, dialect: Dialect) -> DriverStatement:
    """``BEGIN IMMEDIATE``, ``COMMIT`` or ``ROLLBACK`` for ``dialect``, made once (an append sends two)."""
    return DriverStatement(text, (), (), dialect)


def psycopg_rows(
    engine: Engine,
    pooled: PoolProxiedConnection,
    statement: DriverStatement,
    parameters: dict[str, Any],
    connection: Connection | None = None,
) -> list[Any]:
    """Every row ``statement`` gives with ``parameters``, run on ``pooled``'s psycopg connection.

    Args:
        engine: the engine ``pooled`` was taken from (its ``echo``, its error handling).
        pooled: a connection of ``engine``'s pool, as ``engine.raw_connection()`` lends it or as
            a SQLAlchemy ``Connection`` holds it.
        statement: the statement to run.
        parameters: its parameters by name (see :meth:`DriverStatement.values`).
        connection: the SQLAlchemy ``Connection`` holding ``pooled``, if one does; without one,
            a ``Connection`` is made around ``pooled`` only to handle a failure.

    The rows are psycopg's binary rows as tuples (see :func:`psycopg_call`). Run it only where
    the connection is in autocommit (an autocommit plan's first step): psycopg would otherwise
    begin a transaction that SQLAlchemy does not know of. With the engine's ``echo`` on, the
    statement and its values are logged on the engine's logger, as SQLAlchemy would.

    Raises:
        sqlalchemy.exc.DBAPIError: the driver's error, wrapped by the SQLAlchemy connection's own
            error handling (lost connections recognised and invalidated, ``handle_error`` events
            run, which may replace it: ``operation_timeout``'s ``OperationTimedOut``). A lost
            connection is invalidated there, which gives it back to the pool
            (``pooled.is_valid`` is then false).
    """
    values = statement.values(parameters)
    echo(engine, statement, values, "psycopg")
    try:
        return psycopg_call(pooled, statement, values)
    except BaseException as error:  # noqa: BLE001 - SQLAlchemy's handling raises, as its execute's does
        handler = connection if connection is not None else Connection(engine, pooled)
        handler._handle_dbapi_exception(error, statement.text, values, None, None)


def psycopg_call(pooled: PoolProxiedConnection, statement: DriverStatement, values: Any) -> list[Any]:
    """Psycopg's own call: ``statement``'s text with ``values`` on ``pooled``'s psycopg connection.

    On an asyncio dialect the connection is psycopg's ``AsyncConnection``, awaited through
    SQLAlchemy's greenlet bridge. Asks for binary rows: ``bytea`` as ``bytes`` (as text on a
    kept cursor of a UTF-8 connection: see :func:`_kept_cursor`), ``timestamptz`` as an aware
    ``datetime`` in the session's time zone, numbers read without parsing text.

    The statement runs on the cursor ``pooled`` keeps for its text (made at its first run, kept
    in the pooled connection's ``info`` under :data:`KEPT_CURSORS`): psycopg's
    ``Connection.execute`` builds a new cursor for every call, with its own copy of the adapters
    and a new transformer that looks up again how to send each parameter and read each column,
    about 8 % of a context-window read's client instructions; a kept cursor run again on the same
    text reuses them. The result is freed once read (a context window's may be large). A call
    with a binary value longer than :data:`BULKY_BYTES` (large content) runs on a cursor of its own
    instead, which goes with the call: a kept cursor holds its last parameters until it runs
    again. Raises what psycopg raises.
    """
    driver: Any = pooled.driver_connection
    text = statement.text
    cursor = driver.cursor(binary=True) if statement.bulky(values) else _kept_cursor(pooled, driver, text)
    if statement.dialect.is_async:
        rows = cast(list[Any], _await(_fetched(cursor, text, values)))
    else:
        rows = cast(list[Any], cursor.execute(text, values).fetchall())
    result = cursor.pgresult
    if result is not None:
        result.clear()
    return rows


def _kept_cursor(pooled: PoolProxiedConnection, driver: Any, text: str) -> Any:
    """The binary cursor ``pooled`` keeps for the statement ``text``.

    Made at the statement's first run on ``driver``, ``pooled``'s psycopg connection. On a
    connection whose encoding is UTF-8 (PostgreSQL's usual ``client_encoding``) it reads ``bytea``
    (content, stored as its UTF-8 bytes) as text, decoded by psycopg's own text loader, instead
    of as ``bytes`` for the store to decode: about 1.5 % of a context window's client
    instructions. On any other encoding the loader would decode in that encoding, so ``bytes``
    come back there.
    """
    cursors: dict[str, Any] | None = pooled.info.get(KEPT_CURSORS)
    if cursors is None:
        cursors = pooled.info[KEPT_CURSORS] = {}
    cursor = cursors.get(text)
    if cursor is None:
        cursor = cursors[text] = driver.cursor(binary=True)
        if driver.info.encoding == "utf-8":
            from psycopg.types.string import TextBinaryLoader  # psycopg is there: its connection is

            cursor.adapters.register_loader("bytea", TextBinaryLoader)
    return cursor


async def _fetched(cursor: Any, text: str, values: Any) -> list[Any]:
    """The rows of ``text`` on psycopg's ``AsyncCursor`` ``cursor``."""
    await cursor.execute(text, values)
    return cast(list[Any], await cursor.fetchall())
