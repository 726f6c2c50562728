"""Every store operation written once, as a plan that does no I/O (see :mod:`chronica_core.plans`).

A plan yields :class:`Step` values (execute a statement, commit, roll back) and receives each
step's outcome (a SQLAlchemy ``CursorResult`` for ``execute``). It builds the statements' parameters,
turns rows into :class:`Actum` and :class:`Chronicum`, and turns SQLAlchemy errors into Chronica
errors. :func:`execute_plan` performs the steps on one connection of a blocking ``Engine``; the
asyncio store runs that same function inside SQLAlchemy's greenlet bridge on its ``AsyncEngine``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar, cast

from sqlalchemy import (
    Connection,
    CursorResult,
    Dialect,
    Engine,
    Executable,
    Integer,
    LargeBinary,
    String,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    text,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateSchema, CreateTable
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.elements import BindParameter

from chronica_core.errors import ActumTooLarge, ChronicaError, ChronicumExists, ChronicumNotFound, StoreError
from chronica_core.limits import POSTGRESQL_MAX_CONTENT_BYTES, check_content_size, content_size
from chronica_core.model import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, build_actum, recorded_at
from chronica_core.plans import Plan, run_plan
from chronica_core.rows import check_row, check_rows
from chronica_core.store import ListingPosition
from chronica_sqlalchemy.driver_statements import (
    DriverRun,
    DriverStatement,
    begin_immediate,
    end_transaction,
    psycopg_rows,
)
from chronica_sqlalchemy.follow import follow_channel, follow_notification
from chronica_sqlalchemy.psycopg_acta import chronicum_of, runs_on_psycopg, utc, window_acta
from chronica_sqlalchemy.schema import (
    OTHER_BACKEND_VERSIONS,
    SCHEMA_VERSION,
    Content,
    Identifier,
    Tables,
    UTCDateTime,
    find_tables,
    is_mysql,
    listing_index,
)
from chronica_sqlalchemy.sqlite_writers import WriterTurn, take_turn, writer_queue

__all__ = [
    "AUTOCOMMIT",
    "COMMIT",
    "DRIVER_CALL",
    "DRIVER_STATEMENT",
    "DROP_CONNECTION",
    "IN_AUTOCOMMIT",
    "MYSQL_STATEMENT_RESERVE",
    "RECONNECT",
    "ROLLBACK",
    "SQLITE_ROW_RESERVE",
    "WRITE_OPTION",
    "Plans",
    "Step",
    "actum_row",
    "content_ceiling",
    "execute_plan",
]

Result = TypeVar("Result")

AUTOCOMMIT = "AUTOCOMMIT"
"""SQLAlchemy's isolation level for the driver's autocommit mode (each statement its own transaction)."""

WRITE_OPTION = "chronica_write"
"""Execution option marking a connection that writes (SQLite then begins with ``BEGIN IMMEDIATE``)."""

DRIVER_CALL = "driver call"
"""The method of a :class:`Step` whose one argument is called with the driver's own connection."""

DRIVER_STATEMENT = "driver statement"
"""The method of a :class:`Step` whose arguments are a
:class:`chronica_sqlalchemy.driver_statements.DriverStatement` and its parameters: run on the
connection's psycopg connection (:func:`~chronica_sqlalchemy.driver_statements.psycopg_rows`),
its outcome the rows. Only as the first step of an autocommit plan (see :func:`execute_plan` for
the connection it takes)."""

IN_AUTOCOMMIT = "chronica_in_autocommit"
"""Engine execution option: the engine's connections are in autocommit whenever the pool lends them
(``isolation_level="AUTOCOMMIT"``, PostgreSQL engines the store creates). A plan that takes a
transaction then switches its connection to the dialect's default isolation level, and an
autocommit plan switches nothing; the pool sets autocommit back when the connection returns."""

MYSQL_STATEMENT_RESERVE = 16 * 1024
"""Bytes of ``max_allowed_packet`` kept for the insert's own text and its other values (ids, key,
time), at their largest and escaped; the content gets half of the rest, since the driver sends it
escaped inside the statement and escaping can double it (a quote, a backslash or NUL becomes two
bytes)."""

SQLITE_ROW_RESERVE = 8 * 1024
"""Bytes of SQLite's length limit (``SQLITE_LIMIT_LENGTH``, which bounds a whole row too) kept for
the row's other columns at their largest."""

_MYSQL_MAX_PACKET = 1024 * 1024 * 1024  # the largest max_allowed_packet MariaDB/MySQL allow
_SQLITE_MAX_LENGTH = 2**31 - 1  # the largest SQLITE_MAX_LENGTH SQLite can be built with
# ER_NET_PACKET_TOO_LARGE, ER_WARN_ALLOWED_PACKET_OVERFLOWED, and the server gone or the
# connection lost while the statement was being sent (how a too-large packet usually ends)
_MYSQL_REFUSALS = frozenset({1153, 1301, 2006, 2013})
_POSTGRESQL_LIMIT_EXCEEDED = "54000"  # program_limit_exceeded
_COMPONENT = "chronica"
_LOCK_TIMEOUT_SECONDS = 60
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MOST_PARAMETERS = {
    # SQLite's SQLITE_MAX_VARIABLE_NUMBER default (999 before 3.32); PostgreSQL's protocol limit
    "sqlite": 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999,
    "postgresql": 65535,
}
"""The most parameters one statement of a batch takes, per dialect. MariaDB/MySQL drivers put the
values into the statement's text, which only ``max_allowed_packet`` bounds; PostgreSQL's figure
is used there too."""
_BATCH_COLUMNS = 10  # the columns of an acta row: the parameters one row of a batch's INSERT takes
_BATCH_ROW_RESERVE = 8 * 1024  # bytes of a batch row's other values, escaped, at their largest
_MICROSECOND = timedelta(microseconds=1)
_KINDS = {kind.value: kind for kind in ActumKind}
_ACTOR_KINDS = {actor_kind.value: actor_kind for actor_kind in ActorKind}


class Step(NamedTuple):
    """One thing to do on the plan's connection: call its ``method`` with ``args``.

    Attributes:
        method: ``"execute"``, ``"begin"``, ``"commit"`` or ``"rollback"`` (the plan's
            ``Connection``'s method of that name), or :data:`DRIVER_CALL`.
        args: the arguments, e.g. ``(statement, parameters)`` for ``execute``.
        write: whether the connection must be a writing one (only the first step's flag counts).
        autocommit: whether the connection runs each statement as its own transaction, in the
            driver's autocommit mode (only the first step's flag counts; see
            :attr:`Plans.autocommit`): no ``BEGIN`` is sent before the statement, and the plan's
            ``COMMIT`` and ``ROLLBACK`` send nothing.
    """

    method: str
    args: tuple[Any, ...] = ()
    write: bool = False
    autocommit: bool = False


COMMIT = Step("commit")
ROLLBACK = Step("rollback")
RECONNECT = Step("reconnect")
"""Give back the plan's connection (SQLAlchemy found it lost) and take a new one at the next step."""
DROP_CONNECTION = Step("drop")
"""End the plan's connection's session (what it holds on the server goes with it); the pool
replaces the connection."""


def _execute(
    statement: Executable,
    parameters: dict[str, Any] | None = None,
    *,
    write: bool = False,
    autocommit: bool = False,
) -> Step:
    return Step("execute", (statement, parameters or {}), write, autocommit)


def content_ceiling(dialect_name: str) -> int | None:
    """The most content, in bytes, a store on ``dialect_name`` could ever accept (``None``: not known).

    The bound of the ``max_content_bytes`` option: what the database's own limit gives at its
    largest setting (see :meth:`Plans.content_limit` for how each limit is read).
    """
    if dialect_name in ("mysql", "mariadb"):
        return (_MYSQL_MAX_PACKET - MYSQL_STATEMENT_RESERVE) // 2
    if dialect_name == "sqlite":
        return _SQLITE_MAX_LENGTH - SQLITE_ROW_RESERVE
    if dialect_name == "postgresql":
        return POSTGRESQL_MAX_CONTENT_BYTES
    return None


def _sqlite_length_limit(driver_connection: Any) -> int:
    """SQLite's ``SQLITE_LIMIT_LENGTH`` for ``driver_connection`` (a ``sqlite3.Connection``).

    aiosqlite keeps its ``sqlite3`` connection on a thread of its own; for it, the limit of the
    same SQLite library is read on a fresh in-memory connection (the same unless an app lowered
    it on its own connections).
    """
    if isinstance(driver_connection, sqlite3.Connection):
        return driver_connection.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    probe = sqlite3.connect(":memory:")
    try:
        return probe.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    finally:
        probe.close()


def lends_in_autocommit(engine: Engine) -> bool:
    """Whether ``engine``'s pool lends its connections in autocommit.

    True for the PostgreSQL engines the store creates (:data:`IN_AUTOCOMMIT`), and for an engine
    you made in autocommit, by ``engine.execution_options(isolation_level="AUTOCOMMIT")`` or
    ``create_engine(..., isolation_level="AUTOCOMMIT")``: a plan that needs a transaction (an
    erasure, a batch split into several statements, a migration) then switches its connection
    to the dialect's default isolation level, so it is one transaction there too. SQLAlchemy has
    no public accessor for ``create_engine``'s ``isolation_level``; it keeps it on the dialect as
    ``_on_connect_isolation_level`` (read with a default, so a SQLAlchemy without it reads as not
    in autocommit, the behaviour of earlier versions of this store).
    """
    options = engine.get_execution_options()
    if options.get(IN_AUTOCOMMIT) or options.get("isolation_level") == AUTOCOMMIT:
        return True
    return pool_lends_in_autocommit(engine)


def pool_lends_in_autocommit(engine: Engine) -> bool:
    """Whether ``engine``'s pool itself hands out connections in autocommit.

    True for an engine created with ``isolation_level="AUTOCOMMIT"`` (the PostgreSQL engines the
    store creates): the level is set on each new driver connection, so a connection taken with
    ``engine.raw_connection()`` is in autocommit too. False for an engine that only asks for
    autocommit through ``execution_options``: SQLAlchemy switches each ``Connection`` it makes, not
    the pool's connections. Read from the dialect's ``_on_connect_isolation_level`` (see
    :func:`lends_in_autocommit`).
    """
    return bool(getattr(engine.dialect, "_on_connect_isolation_level", None) == AUTOCOMMIT)


def execute_plan(engine: Engine, plan: Plan[Step, Result], reads: Engine | None = None) -> Result:
    """Run ``plan`` on one connection of ``engine`` (taken at the first step, returned at the end).

    ``reads``: an engine whose connections are in autocommit already (MariaDB/MySQL's read
    engine, see :func:`chronica_sqlalchemy.engines.reads_in_autocommit`); a plan whose first step
    asks for autocommit and does not write takes its connection there instead, as it is.

    Runs as plain blocking code; the asyncio store calls it through SQLAlchemy's greenlet bridge
    with its ``AsyncEngine.sync_engine``. A failure to connect is thrown into the plan like any
    other step's failure, so the plan's error translation covers it. :data:`RECONNECT` gives the
    connection back and :data:`DROP_CONNECTION` ends it; the next step takes a new one.

    A connection on which a step failed with anything but a constraint violation is ended, not
    given back: the database may still hold its transaction open (SQLite keeps it after a failed
    ``COMMIT``; SQLAlchemy then forgets it, and the pool does not roll back on return), or a lock.
    Giving the connection back never raises: if that fails (the server is gone), the pool drops
    it, and the plan's result or error stands. On a SQLite file a writing connection is taken
    only in the writer's turn (:mod:`chronica_sqlalchemy.sqlite_writers`), given back with it; a
    turn not had within the busy timeout is thrown into the plan as SQLite's "database is
    locked". On an engine whose connections are lent in autocommit (:data:`IN_AUTOCOMMIT`) a
    plan whose first step is not an autocommit one runs at the dialect's default isolation level,
    in a transaction; elsewhere an autocommit plan's connection is switched to autocommit.

    A plan whose first step is a :data:`DRIVER_STATEMENT`, on an engine whose pool itself lends in
    autocommit (:func:`pool_lends_in_autocommit`), borrows the pool's connection with
    ``engine.raw_connection()``: no SQLAlchemy ``Connection`` is made around it (the engine's
    ``engine_connect`` event does not run for it; the pool's ``checkout`` and ``checkin`` do), and
    its ``COMMIT`` and ``ROLLBACK`` send nothing, as in autocommit they would not. So does a plan
    whose first step is a writing ``begin`` on a SQLite file read by ``pysqlite`` (a single
    append): the driver itself sends its ``BEGIN IMMEDIATE``, runs its :data:`DRIVER_CALL` steps
    and sends its ``COMMIT`` or ``ROLLBACK`` (:mod:`chronica_sqlalchemy.driver_statements`), and
    the engine's ``engine_connect``, ``begin`` and ``commit`` events do not run for it. A later
    step that SQLAlchemy must run gets a ``Connection`` around that same pooled connection (on
    SQLite it runs inside the transaction the driver began, if one is open); if a failure the
    plan caught lost that connection, the next step takes a new one, as a ``Connection`` would
    reconnect. Returns the plan's result.
    """
    held: list[Connection] = []
    # A plan that begins with a driver statement on an engine lending in autocommit borrows the
    # pool's connection itself (``engine.raw_connection()``): a SQLAlchemy ``Connection`` around
    # it, made and closed for every such read, cost about a twentieth of the read's client CPU.
    # The plan's next step that needs SQLAlchemy's execution gets a ``Connection`` around it then.
    lent: list[PoolProxiedConnection] = []
    failed: list[Connection | PoolProxiedConnection] = []
    turns: list[WriterTurn] = []  # SQLite: the file's writer turn, held while a writing connection is
    lends_raw = pool_lends_in_autocommit(engine)
    in_autocommit = lends_raw or lends_in_autocommit(engine)
    # A SQLite append's BEGIN IMMEDIATE, statements and COMMIT by the driver itself: the
    # Connection made, begun, committed and closed around them cost about a fifth of the
    # append's client CPU, all of it inside the writer's turn on the file.
    drives_sqlite = engine.dialect.driver == "pysqlite" and writer_queue(engine) is not None

    def give_back_lent(pooled: PoolProxiedConnection, drop: bool) -> None:
        if drives_sqlite:  # what the driver began and the plan did not end, as Connection.close() would
            _roll_back_open_transaction(engine, pooled, failed)
        _give_back_lent(pooled, drop=drop or pooled in failed)

    def perform(step: Step) -> Any:
        method = step.method
        if method in (RECONNECT.method, DROP_CONNECTION.method):
            if held:
                connection = held.pop()
                _release(connection, drop=step is DROP_CONNECTION or connection in failed)
            elif lent:
                give_back_lent(lent.pop(), drop=step is DROP_CONNECTION)
            _give_back(turns)
            return None
        if lent and not lent[0].is_valid:
            lent.pop()  # invalidated by a failure the plan caught: back in the pool, take another
        if lent and drives_sqlite and method in _DRIVEN_ON_SQLITE:
            return _driven_on_sqlite(engine, lent[0], step, failed)
        if lent and method != DRIVER_STATEMENT:
            if method in (COMMIT.method, ROLLBACK.method):
                return None  # in autocommit, with nothing begun: nothing to send, as on a Connection
            held.append(Connection(engine, connection=lent[0]))  # raising, it leaves lent to give back
            if lent.pop() in failed:
                failed.append(held[0])
        if not held and not lent:
            if step.write and (turn := take_turn(engine)) is not None:
                turns.append(turn)
            source = reads if reads is not None and step.autocommit and not step.write else engine
            if method == DRIVER_STATEMENT and source is engine and lends_raw:
                lent.append(_connecting(lambda: _raw_connection(engine)))
            elif method == "begin" and step.write and drives_sqlite:
                lent.append(_connecting(lambda: _raw_connection(engine)))
                return _driven_on_sqlite(engine, lent[0], step, failed)
            else:
                held.append(_connected(source))
                if step.write:
                    held[0].execution_options(**{WRITE_OPTION: True})
                # psycopg's autocommit is a client-side switch (no round trip); SQLAlchemy sets
                # the engine's isolation level back when the connection returns to the pool. A
                # connection of the read engine is in autocommit already.
                if source is engine and step.autocommit != in_autocommit:
                    level = AUTOCOMMIT if step.autocommit else engine.dialect.default_isolation_level
                    held[0].execution_options(isolation_level=level)
        current: Connection | PoolProxiedConnection = lent[0] if lent else held[0]
        try:
            if method == DRIVER_STATEMENT:
                statement, parameters = step.args
                if lent:
                    return psycopg_rows(engine, lent[0], statement, parameters)
                connection = held[0]
                return psycopg_rows(
                    connection.engine, connection.connection, statement, parameters, connection
                )
            connection = held[0]
            if method == DRIVER_CALL:
                call: Callable[[Any], Any] = step.args[0]
                if isinstance(call, DriverRun):
                    call.echo(connection.engine)
                return call(connection.connection.driver_connection)
            return getattr(connection, method)(*step.args)
        except IntegrityError:  # a statement refused: the connection and its transaction are sound
            raise
        except SQLAlchemyError:
            failed.append(current)
            raise

    try:
        return run_plan(plan, perform)
    finally:
        try:
            if held:
                _release(held[0], drop=held[0] in failed)
            if lent:
                give_back_lent(lent[0], drop=False)
        finally:
            _give_back(turns)  # whatever happened above: the file's next writer must not wait for ever


_DRIVEN_ON_SQLITE = frozenset(("begin", COMMIT.method, ROLLBACK.method, DRIVER_CALL))
"""The steps SQLite's driver performs itself on a connection lent from the pool (:func:`execute_plan`)."""


def _driven_on_sqlite(
    engine: Engine,
    pooled: PoolProxiedConnection,
    step: Step,
    failed: list[Connection | PoolProxiedConnection],
) -> Any:
    """Perform ``step`` (one of :data:`_DRIVEN_ON_SQLITE`) with ``pooled``'s ``sqlite3`` connection.

    ``begin`` sends ``BEGIN IMMEDIATE``, ``commit`` and ``rollback`` end the open transaction (nothing
    when none is open), a :data:`DRIVER_CALL` runs its call. Raises the ``DBAPIError`` the driver's
    error is wrapped in; ``pooled`` is then added to ``failed`` (to be ended, not given back)
    unless a constraint refused the statement, which leaves the connection sound.
    """
    driver_connection = pooled.driver_connection
    method = step.method
    try:
        if method == DRIVER_CALL:
            call: Callable[[Any], Any] = step.args[0]
            if isinstance(call, DriverRun):
                call.echo(engine)
            return call(driver_connection)
        if method == "begin":
            begin_immediate(cast(sqlite3.Connection, driver_connection), engine.dialect)
        else:
            end_transaction(cast(sqlite3.Connection, driver_connection), engine.dialect, method.upper())
        return None
    except IntegrityError:
        raise
    except SQLAlchemyError:
        failed.append(pooled)
        raise


def _roll_back_open_transaction(
    engine: Engine, pooled: PoolProxiedConnection, failed: list[Connection | PoolProxiedConnection]
) -> None:
    """Roll back a transaction SQLite's driver left open on ``pooled``, as a closed ``Connection`` would.

    A plan that raises ends without ending its transaction. Never raises: if the rollback fails,
    ``pooled`` joins ``failed``, to be ended rather than given back.
    """
    if not pooled.is_valid:
        return
    try:
        end_transaction(cast(sqlite3.Connection, pooled.driver_connection), engine.dialect, "ROLLBACK")
    except Exception:  # noqa: BLE001 - the plan's result or error stands; the connection is ended
        failed.append(pooled)


def _give_back(turns: list[WriterTurn]) -> None:
    """Give back the writer turn a plan holds, if any (see :mod:`chronica_sqlalchemy.sqlite_writers`)."""
    while turns:
        turns.pop().give_back()


_log = logging.getLogger("chronica.sqlalchemy")

CONNECT = "sqlalchemy: connect"
"""Where a failure to connect is reported, whichever operation needed the connection."""


def _connected(engine: Engine) -> Connection:
    """A connection of ``engine``; any failure is ``StoreError("sqlalchemy: connect", ...)``.

    Labelled by what failed, connecting, not by the operation that wanted the connection (a read
    whose server is down did not fail to migrate or to read). SQLAlchemy wraps only the driver's
    database errors (``DBAPIError``: a refused connection, a wrong password). Drivers check their
    connect arguments (the URL's query, the dialect's keywords) as they connect and raise plain
    Python exceptions for those they cannot use (``TypeError`` for an unknown keyword, say; the
    values :mod:`chronica_sqlalchemy.url_checks` knows are refused before). Every such exception is
    translated here, chained to it, whatever its class.
    """
    return _connecting(engine.connect)


_Connected = TypeVar("_Connected")


def _connecting(connect: Callable[[], _Connected]) -> _Connected:
    """``connect()``, any failure translated as :func:`_connected` says."""
    try:
        return connect()
    except ChronicaError:
        raise
    except SQLAlchemyError as error:
        raise StoreError(CONNECT, _detail(error)) from error
    except Exception as error:
        raise StoreError(CONNECT, f"{type(error).__name__}: {error}") from error


def _raw_connection(engine: Engine) -> PoolProxiedConnection:
    """``engine.raw_connection()``, a driver's failure wrapped as ``engine.connect()`` wraps it.

    That is SQLAlchemy's ``DBAPIError``, after the engine's ``handle_error`` events have run
    (``operation_timeout`` turns a connect timeout into ``OperationTimedOut`` there), through
    the same classmethod ``Connection`` calls when it fails to connect,
    ``Connection._handle_dbapi_exception_noconnection(error, dialect, engine)``: private to
    SQLAlchemy, called this way by ``Connection``'s own constructor (checked against 2.1.9); the
    backend's tests of refused connections and connect timeouts would show a change.
    """
    try:
        return engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as error:
        Connection._handle_dbapi_exception_noconnection(error, engine.dialect, engine)
        raise


def _give_back_lent(pooled: PoolProxiedConnection, *, drop: bool = False) -> None:
    """Give back a connection borrowed from the pool itself (``drop``: end it instead); never raises.

    One invalidated while its failure was handled is back in the pool already.
    """
    if not pooled.is_valid:
        return
    if not drop:
        try:
            pooled.close()
            return
        except Exception:  # noqa: BLE001 - the plan's result or error stands; the pool drops it
            if not pooled.is_valid:
                return
    with contextlib.suppress(Exception):
        pooled.invalidate()  # ends the driver connection and gives its place back to the pool


def _release(connection: Connection, *, drop: bool = False) -> None:
    """Give ``connection`` back to its pool (``drop``: end it instead); if that fails, end it."""
    if drop:
        with contextlib.suppress(SQLAlchemyError):
            connection.invalidate()
    try:
        connection.close()
    except SQLAlchemyError:
        with contextlib.suppress(SQLAlchemyError):
            connection.invalidate()
            connection.close()


def _again_if_disconnected(make: Callable[[], Plan[Step, Result]]) -> Plan[Step, Result]:
    """Run the plan ``make()`` gives; after a lost connection, once more on a new one.

    Only for plans safe to repeat: reads, and keyed writes (the repeat finds the actum the first
    try stored, if it did). A connection is lost when SQLAlchemy says so (``connection_invalidated``:
    the dialect recognised a disconnect). The error of the second try propagates.
    """
    try:
        return (yield from make())
    except DBAPIError as error:
        if not error.connection_invalidated:
            raise
        lost = type(error.orig if error.orig is not None else error).__name__
    _log.warning("lost the connection (%s); trying the read or keyed write once more on a new one", lost)
    yield RECONNECT
    return (yield from make())


def _detail(error: SQLAlchemyError) -> str:
    """The driver's own message, without SQLAlchemy's echo of the statement and its parameters."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        return f"{type(error.orig).__name__}: {error.orig}".strip()
    return f"{type(error).__name__}: {error}"


def _translated(operation: str, plan: Plan[Step, Result]) -> Plan[Step, Result]:
    """Run ``plan``, turning any SQLAlchemy error into ``StoreError("sqlalchemy: <operation>", ...)``."""
    try:
        return (yield from plan)
    except ChronicaError:
        raise
    except SQLAlchemyError as error:
        raise StoreError(f"sqlalchemy: {operation}", _detail(error)) from error


def actum_row(actum: Actum, seq: int, at: datetime, key: str | None = None) -> dict[str, Any]:
    """The parameters of :attr:`Plans.insert_actum_statement` for ``actum`` at ``seq``.

    On MariaDB/MySQL that statement takes ``seq`` and ``at`` from the chronicum's row and ignores
    the two given here.
    """
    return {
        "chronicum_id": actum.chronicum_id,
        "seq": seq,
        "id": actum.id,
        "kind": actum.kind.value,
        "actor_kind": actum.actor_kind.value,
        "actor": actum.actor,
        "content": actum.content,
        "at": at,
        "idempotency_key": key,
    }


def _slots(name: str, count: int) -> list[BindParameter[str]]:
    return [bindparam(f"{name}_{index}", type_=String()) for index in range(count)]


@functools.lru_cache(maxsize=256)
def _padded(name: str, kinds: tuple[ActumKind | ActorKind, ...], count: int) -> dict[str, str]:
    """The values of ``kinds`` in ``count`` parameters ``name_0``..., the last repeated (``IN`` ignores it).

    Kept per filter (a context window is read before every model call, nearly always with the
    same filter); the caller copies the dict, never changes it.
    """
    values = [kind.value for kind in kinds[:count]]
    return {f"{name}_{index}": values[min(index, len(values) - 1)] for index in range(count)}


class Plans:
    """The statements of one store, built once for its dialect and tables, and its operations as plans.

    The statements of ``record`` and of a context window are public (``advance_statement``,
    ``counter``, ``insert_actum_statement``; on PostgreSQL ``record_statement``, run in
    autocommit as ``autocommit`` says, with :meth:`record_parameters`; :meth:`window`) so that
    benchmarks can time SQLAlchemy Core running exactly them.

    Round trips on PostgreSQL (``autocommit``): every operation that is one statement runs in
    the driver's autocommit mode, the statement its own transaction, so no ``BEGIN`` and no
    ``COMMIT`` go to the server: a read (``get``, a context window, a listing), ``create``,
    ``reopen``, and an append, single or batch, whose counter move and insert are one
    statement (``WITH moved AS (UPDATE chronica ... RETURNING ...) INSERT INTO acta ... SELECT
    ... FROM moved``). A keyed append whose key was used before adds the read-back; an erasure
    keeps its transaction (its ``DELETE`` must see every actum committed before it locked the
    chronicum's row, which one statement's snapshot would not), and so does a batch too large
    for one statement. Elsewhere every operation is one transaction as before.

    Args:
        tables: the table definitions (see :class:`chronica_sqlalchemy.schema.Tables`).
        dialect: the engine's dialect; decides how the per-chronicum counter is read back and how
            migrations are locked.
        schema: the schema (database, on MariaDB/MySQL) holding the tables, created if missing;
            ``None`` for the connection's default.
        max_content_bytes: a limit on content below the database's own (``None``: the database's).
        reads_in_autocommit: MariaDB/MySQL: the store runs :func:`execute_plan` with a read
            engine in autocommit, so the reads (``get``, a context window, a listing: one
            statement each) ask for autocommit (``read_autocommit``) and take one round trip.
    """

    def __init__(
        self,
        tables: Tables,
        dialect: Dialect,
        schema: str | None = None,
        max_content_bytes: int | None = None,
        reads_in_autocommit: bool = False,
    ) -> None:
        self.tables = tables
        self.dialect = dialect
        self.dialect_name = "mysql" if is_mysql(dialect) else dialect.name
        self.schema = schema
        self.max_content_bytes = max_content_bytes
        self.channel = follow_channel(schema)  # PostgreSQL: the channel appends and erasures notify
        self._content_limit: int | None = None  # the database's, read once (see content_limit)
        chronica, acta = tables.chronica, tables.acta
        live = chronica.c.owner_digest.is_(None)  # not an erased chronicum's marker
        self._insert_chronicum = insert(chronica)
        chronicum_columns = (
            chronica.c.id,
            chronica.c.owner_id,
            chronica.c.started_at,
            chronica.c.last_actum_at,
        )
        self._select_chronicum = select(*chronicum_columns).where(chronica.c.id == bindparam("id"), live)
        self._select_any_chronicum = select(chronica.c.id).where(chronica.c.id == bindparam("id"))
        # The actum's `at`: the writer's clock, raised to the chronicum's last_actum_at when that is
        # later (another host's clock, a clock stepped back). Decided in the statement that locks
        # the chronicum's row, so `at` never decreases along the order and last_actum_at is the
        # newest actum's `at`. A batch moves the counter by its size in that one statement.
        one: Any = literal_column("1")
        if dialect.update_returning:
            self.counter = "returning"
        elif self.dialect_name == "mysql":
            self.counter = "lastrowid"
        else:
            self.counter = "select"
        self.advance_statement: Executable = self._advance(one)
        self._advance_many = self._advance(bindparam("count", type_=Integer()))
        # PostgreSQL: single-statement operations run in autocommit (one round trip each, no
        # BEGIN or COMMIT), and an append is one statement (see _one_statement_append).
        self.autocommit = self.dialect_name == "postgresql"
        self.read_autocommit = self.autocommit or reads_in_autocommit
        self.record_statement: Executable | None = self._one_statement_append() if self.autocommit else None
        self._record_many_statement = self._one_statement_batch() if self.autocommit else None
        if self.counter == "returning":
            self.insert_actum_statement: Executable = insert(acta).returning(acta.c.chronicum_id, acta.c.id)
            self._insert_actum_returning: Executable = self.insert_actum_statement
        elif self.counter == "lastrowid":
            # One round trip each, and no RETURNING: LAST_INSERT_ID(expr) hands the new `at` (in
            # microseconds since 1970) to the client as lastrowid, and the insert takes its `seq`
            # and `at` from the chronicum's row, which this transaction holds.
            from_chronicum = self._insert_acta_from(
                chronica.c.id,
                chronica.c.last_seq,
                chronica.c.last_actum_at,
                "id",
                where=chronica.c.id == bindparam("chronicum_id"),
            )
            self.insert_actum_statement = from_chronicum
            # MariaDB 10.5+ echoes the inserted row's ids (known once connected); MySQL cannot.
            self._insert_actum_returning = from_chronicum.returning(acta.c.chronicum_id, acta.c.id)
        else:
            self.insert_actum_statement = self._insert_actum_returning = insert(acta)
        self._select_counter = select(chronica.c.id, chronica.c.last_seq, chronica.c.last_actum_at).where(
            chronica.c.id == bindparam("chronicum_id")
        )
        self._actum_columns = (
            acta.c.id,
            acta.c.kind,
            acta.c.actor_kind,
            acta.c.actor,
            acta.c.content,
            acta.c.at,
        )
        # A batch's rows, sent as executemany (SQLAlchemy makes one multi-row INSERT of them).
        self._insert_actum = insert(acta)
        self._insert_returning = insert(acta).returning(
            acta.c.chronicum_id, acta.c.id, sort_by_parameter_order=True
        )
        self._select_keyed = select(acta.c.chronicum_id, *self._actum_columns).where(
            acta.c.chronicum_id == bindparam("chronicum_id"),
            acta.c.idempotency_key == bindparam("idempotency_key"),
        )
        # What a key's write stored: the keyed actum and the batch_size - 1 acta after it.
        keyed = acta.alias("keyed")
        self._select_keyed_batch = (
            select(acta.c.chronicum_id, *self._actum_columns)
            .select_from(
                keyed.join(
                    acta,
                    and_(
                        acta.c.chronicum_id == keyed.c.chronicum_id,
                        acta.c.seq >= keyed.c.seq,
                        acta.c.seq < keyed.c.seq + func.coalesce(keyed.c.batch_size, 1),
                    ),
                )
            )
            .where(
                keyed.c.chronicum_id == bindparam("chronicum_id"),
                keyed.c.idempotency_key == bindparam("idempotency_key"),
            )
            .order_by(acta.c.seq)
        )
        # Erasure: the first statement locks the chronicum's row as `record`'s does (and empties
        # it into the marker), then its acta go; a reopen brings a marker back as a fresh chronicum.
        mark = (
            update(chronica)
            .where(chronica.c.id == bindparam("chronicum_id"), live)
            .values(
                owner_id="",
                started_at=_EPOCH,
                last_actum_at=None,
                last_seq=0,
                owner_digest=bindparam("digest", type_=Identifier()),
            )
        )
        self._mark_erased: Executable = mark.returning(chronica.c.id) if dialect.update_returning else mark
        if self.dialect_name == "postgresql":
            self._mark_erased = mark.returning(chronica.c.id, follow_notification(chronica, schema))
        self._delete_acta = delete(acta).where(acta.c.chronicum_id == bindparam("chronicum_id"))
        self._select_owned = select(chronica.c.id, chronica.c.owner_id).where(
            chronica.c.owner_id == bindparam("owner"), live
        )
        reopen = (
            update(chronica)
            .where(chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest == bindparam("digest"))
            .values(
                owner_id=bindparam("owner", type_=Identifier()),
                started_at=bindparam("started", type_=UTCDateTime()),
                last_actum_at=bindparam("last", type_=UTCDateTime()),
                last_seq=0,
                owner_digest=None,
            )
        )
        self._reopen: Executable = reopen.returning(chronica.c.id) if dialect.update_returning else reopen
        # Listing: one owner's live chronica along the index, newest first; ids compared as code
        # points (PostgreSQL's collation may be a language's: "C" is code point order).
        self._listing_index = listing_index(chronica, self.dialect_name)
        self._batch_parameters = _MOST_PARAMETERS.get(self.dialect_name, _MOST_PARAMETERS["postgresql"])
        listed_id: Any = chronica.c.id.collate("C") if self.dialect_name == "postgresql" else chronica.c.id
        listing = select(*chronicum_columns).where(chronica.c.owner_id == bindparam("owner"), live)
        after_at = bindparam("after_at", type_=UTCDateTime())
        after_id = bindparam("after_id", type_=Identifier())
        after: Any
        if self.dialect_name == "postgresql":
            # a row comparison: PostgreSQL walks the index backwards from that position (the OR
            # form would be a bitmap scan of every earlier chronicum of the owner, then a sort)
            after = tuple_(chronica.c.started_at, listed_id) < tuple_(after_at, after_id)
        else:
            # the first bound lets the index range start at the position
            after = and_(
                chronica.c.started_at <= after_at,
                or_(
                    chronica.c.started_at < after_at,
                    and_(chronica.c.started_at == after_at, listed_id < after_id),
                ),
            )
        order = (chronica.c.started_at.desc(), listed_id.desc())
        limit = bindparam("limit", type_=Integer())
        self._listings: dict[bool, Executable] = {
            False: listing.order_by(*order).limit(limit),
            True: listing.where(after).order_by(*order).limit(limit),
        }
        self._windows: dict[tuple[bool, bool, bool], Executable] = {}
        # Each kept statement compiled once for its driver (a window per shape, psycopg's hot ones)
        self._driver_statements: dict[int, DriverStatement | None] = {}
        self._reads_on_driver = dialect.name == "sqlite" and dialect.driver == "pysqlite"
        self._driver_append = self._compiled_driver_append() if self._reads_on_driver else None
        # PostgreSQL on psycopg: the hot statements run on psycopg itself (see _on_psycopg)
        self._runs_on_psycopg = runs_on_psycopg(dialect)
        parse_at = UTCDateTime().result_processor(dialect, None)
        self._parse_at: Callable[[Any], Any] = parse_at if parse_at is not None else (lambda value: value)
        self._lock_key = self._migration_lock_key()

    def _advance(self, by: Any) -> Update:
        """The statement that locks a live chronicum's row, moves ``last_seq`` on ``by`` and decides ``at``.

        Its parameters: ``chronicum_id``, and ``at`` (the writer's clock) or, on MariaDB/MySQL,
        ``at_us`` (the same in microseconds since 1970), and ``count`` when ``by`` is that parameter.
        """
        chronica = self.tables.chronica
        advance = update(chronica).where(
            chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None)
        )
        if self.counter == "lastrowid":
            epoch: Any = literal_column("'1970-01-01 00:00:00'")
            stored = func.timestampdiff(text("MICROSECOND"), epoch, chronica.c.last_actum_at)
            newest = func.greatest(bindparam("at_us", type_=Integer()), func.coalesce(stored, 0))
            return advance.values(
                last_seq=chronica.c.last_seq + by,
                last_actum_at=func.timestampadd(text("MICROSECOND"), func.last_insert_id(newest), epoch),
            )
        at = bindparam("at", type_=UTCDateTime())
        moved = advance.values(
            last_seq=chronica.c.last_seq + by,
            last_actum_at=case((chronica.c.last_actum_at > at, chronica.c.last_actum_at), else_=at),
        )
        if self.counter == "returning":
            return moved.returning(*self._moved_columns())
        return moved

    def _compiled_driver_append(self) -> tuple[DriverStatement, DriverStatement] | None:
        """``record``'s two statements as SQLite's driver runs them (see :mod:`.driver_statements`).

        The counter's ``UPDATE ... RETURNING`` and the actum's ``INSERT ... RETURNING``; ``None``
        when either cannot be handed to the driver (SQLAlchemy then runs both).
        """
        advance = DriverStatement.compiled(self.advance_statement, self.dialect)
        keys = list(actum_row(Actum("", ActumKind.MESSAGE, ActorKind.HUMAN, ""), 0, _EPOCH))
        insert_actum = DriverStatement.compiled(self.insert_actum_statement, self.dialect, keys)
        if advance is None or insert_actum is None:
            return None
        return advance, insert_actum

    def _moved_columns(self) -> tuple[Any, ...]:
        """What the statement moving a chronicum's counter returns: ``(id, last_seq, last_actum_at)``.

        The values after the move. Every append's statement (single or batch) returns these,
        under the chronicum's row lock and in the append's own transaction. On PostgreSQL a
        fourth, ``pg_notify(channel, id)``: the followers' notification, sent only if the append
        commits (see :mod:`chronica_sqlalchemy.follow`).
        """
        chronica = self.tables.chronica
        columns = (chronica.c.id, chronica.c.last_seq, chronica.c.last_actum_at)
        if self.dialect_name == "postgresql":
            return (*columns, follow_notification(chronica, self.schema))
        return columns

    def _insert_acta_from(
        self, chronicum_id: Any, seq: Any, at: Any, actum_id_parameter: str, *, where: Any = None
    ) -> Insert:
        """``INSERT INTO acta ... SELECT`` of one new actum, its place from the given columns.

        ``chronicum_id``, ``seq`` and ``at`` come from the given columns (the chronicum's row, or
        what moving its counter returned), the rest from parameters (``actum_id_parameter`` names
        the actum id's); the ``SELECT`` is restricted by ``where`` when given.
        """
        acta = self.tables.acta
        row = select(
            chronicum_id,
            seq,
            bindparam(actum_id_parameter, type_=Identifier()),
            bindparam("kind", type_=String()),
            bindparam("actor_kind", type_=String()),
            bindparam("actor", type_=Identifier()),
            bindparam("content", type_=Content()),
            at,
            bindparam("idempotency_key", type_=Identifier()),
        )
        if where is not None:
            row = row.where(where)
        return insert(acta).from_select(self._new_actum_columns(), row)

    def _new_actum_columns(self) -> list[Any]:
        """The ``acta`` columns an ``INSERT ... SELECT`` of new acta fills, in its ``SELECT``'s order."""
        acta = self.tables.acta
        return [
            acta.c.chronicum_id,
            acta.c.seq,
            acta.c.id,
            acta.c.kind,
            acta.c.actor_kind,
            acta.c.actor,
            acta.c.content,
            acta.c.at,
            acta.c.idempotency_key,
        ]

    @staticmethod
    def record_parameters(actum: Actum, at: datetime, key: str | None = None) -> dict[str, Any]:
        """The parameters of :attr:`record_statement` for ``actum``, ``at`` the writer's clock."""
        return {
            "chronicum_id": actum.chronicum_id,
            "actum_id": actum.id,
            "kind": actum.kind.value,
            "actor_kind": actum.actor_kind.value,
            "actor": actum.actor,
            "content": actum.content,
            "at": at,
            "idempotency_key": key,
        }

    def _one_statement_batch(self) -> Executable:
        """``record_many``'s one statement (PostgreSQL): move the counter by ``count``, insert the batch.

        Like :meth:`_one_statement_append`, its acta given as arrays, one element per actum in
        batch order, unnested with their place (1 to ``count``): the actum at place ``p`` gets
        ``seq`` ``last_seq - count + p``, and the first one the key and ``batch_size``.

        Parameters: ``chronicum_id``, ``at``, ``count``, ``idempotency_key`` and ``batch_size``
        (``None`` without a key, or for one actum), and the arrays ``actum_ids``, ``kinds``,
        ``actor_kinds``, ``actors`` and ``contents`` (UTF-8 bytes). Returns ``(chronicum id, actum
        id, at)`` per actum inserted; no row when there is no live chronicum.
        """
        acta = self.tables.acta
        count = bindparam("count", type_=Integer())
        moved = self._advance(count).cte("moved")
        given = (
            func.unnest(
                bindparam("actum_ids", type_=ARRAY(Identifier())),
                bindparam("kinds", type_=ARRAY(String())),
                bindparam("actor_kinds", type_=ARRAY(String())),
                bindparam("actors", type_=ARRAY(Identifier())),
                bindparam("contents", type_=ARRAY(LargeBinary())),
            )
            .table_valued("actum_id", "kind", "actor_kind", "actor", "content", with_ordinality="place")
            .render_derived()
        )
        first = given.c.place == 1
        return (
            insert(acta)
            .from_select(
                [*self._new_actum_columns(), acta.c.batch_size],
                select(
                    moved.c.id,
                    moved.c.last_seq - count + given.c.place,
                    given.c.actum_id,
                    given.c.kind,
                    given.c.actor_kind,
                    given.c.actor,
                    given.c.content,
                    moved.c.last_actum_at,
                    case((first, bindparam("idempotency_key", type_=Identifier())), else_=null()),
                    case((first, bindparam("batch_size", type_=Integer())), else_=null()),
                ).select_from(moved.join(given, true())),
            )
            .returning(acta.c.chronicum_id, acta.c.id, acta.c.at)
        )

    def _one_statement_append(self) -> Executable:
        """``record``'s one statement (PostgreSQL): move the counter, insert the actum from its result.

        ``WITH moved AS (UPDATE chronica ... RETURNING ...) INSERT INTO acta ... SELECT ... FROM
        moved RETURNING chronicum_id, id, at``: the ``UPDATE`` is :meth:`_advance`'s (locking the
        chronicum's row until the statement's transaction ends, so writers of one chronicum commit
        in ``seq`` order), and the insert takes ``seq`` and ``at`` from its row. Run in
        autocommit, the statement is the whole transaction: one round trip. No row back means
        no live chronicum (nothing was written).

        Parameters: see :meth:`record_parameters` (``actum_id``, not ``id``: the ``UPDATE`` would
        take a parameter named after one of its table's columns as a value to set).
        """
        acta = self.tables.acta
        moved = self._advance(literal_column("1")).cte("moved")
        return self._insert_acta_from(
            moved.c.id, moved.c.last_seq, moved.c.last_actum_at, "actum_id"
        ).returning(acta.c.chronicum_id, acta.c.id, acta.c.at)

    # --- the store's operations -------------------------------------------------------------

    def create(self, chronicum: Chronicum) -> Plan[Step, None]:
        """Save ``chronicum``; ``ChronicumExists`` if the primary key is taken (read back to be sure)."""
        return _translated("create chronicum", self._create(chronicum))

    def get(self, chronicum_id: str) -> Plan[Step, Chronicum]:
        """Return the chronicum; ``ChronicumNotFound`` if there is none."""
        return _translated("get chronicum", _again_if_disconnected(lambda: self._get(chronicum_id)))

    def record(self, actum: Actum) -> Plan[Step, Actum]:
        """Append ``actum`` at the chronicum's next ``seq``; ``ChronicumNotFound`` if there is none."""
        return _translated("record actum", self._record(actum, None))

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Step, Actum]:
        """Append ``actum`` under ``key``, or return the actum the key already holds in the chronicum."""
        return _translated("record actum", _again_if_disconnected(lambda: self._record(actum, key)))

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Step, list[Actum]]:
        """Return the context window in one query; ``ChronicumNotFound`` if the chronicum is missing."""
        return _translated("get acta", _again_if_disconnected(lambda: self._acta(chronicum_id, query)))

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Step, list[Actum]]:
        """Append ``acta`` (one chronicum's, at least one) in one transaction; see :meth:`_record_many`.

        With ``key``, returns what the key's write stored if it was used in the chronicum.
        Raises ``ChronicumNotFound`` or ``ActumTooLarge``, nothing written.
        """
        batch = list(acta)
        if key is None:
            return _translated("record acta", self._record_many(batch, None))
        return _translated("record acta", _again_if_disconnected(lambda: self._record_many(batch, key)))

    def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Step, list[Chronicum]]:
        """Return up to ``limit`` of the owner's live chronica, newest first, after ``after``; one query.

        ``ORDER BY started_at DESC, id DESC`` (ids as code points) along the index
        :data:`chronica_sqlalchemy.schema.LISTING_INDEX`.
        """
        return _translated(
            "list chronica", _again_if_disconnected(lambda: self._list_chronica(owner_id, limit, after))
        )

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Step, int]:
        """Erase the chronicum into its marker in one transaction; return the acta deleted.

        Raises ``ChronicumNotFound`` when there is no live chronicum with that id.
        """
        return _translated("erase chronicum", self._erase(chronicum_id, owner_digest))

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Step, int]:
        """Erase every live chronicum of ``owner_id``, each in its own transaction; return how many."""
        return _translated("erase owner", self._erase_owner(owner_id, owner_digest))

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> Plan[Step, bool]:
        """Turn the marker of ``chronicum.id`` holding ``owner_digest`` into ``chronicum``; one UPDATE.

        Returns whether it did (``False``: no such marker; nothing changed).
        """
        return _translated("reopen chronicum", self._reopen_marker(chronicum, owner_digest))

    def migrate(self, version: int = SCHEMA_VERSION) -> Plan[Step, None]:
        """Create the tables, or bring them to ``version``, under a lock (see :meth:`_migrate`).

        ``version`` is :data:`SCHEMA_VERSION` but to build an older release's tables (tests of a
        migration do).
        """
        return _translated("migrate", self._migrate(version))

    def content_limit(self) -> Plan[Step, int | None]:
        """Return the largest content ``record`` accepts, in bytes of UTF-8 (``None``: not known).

        Read from the database on first use, then remembered (read again after the database
        refused a write as too large):

        - MariaDB/MySQL: ``(@@max_allowed_packet - MYSQL_STATEMENT_RESERVE) // 2`` (8,380,416 at
          the default 16 MiB): the whole insert must fit in one packet, content escaped.
        - SQLite: the connection's ``SQLITE_LIMIT_LENGTH`` less :data:`SQLITE_ROW_RESERVE`
          (999,991,808 with SQLite's default of 1,000,000,000).
        - PostgreSQL: :data:`chronica_core.limits.POSTGRESQL_MAX_CONTENT_BYTES` (no setting to read).

        Never above the ``max_content_bytes`` option. Raises ``StoreError`` when it cannot be read.
        """
        return _translated("read content limit", self._limit(write=False))

    def _limit(self, *, write: bool) -> Plan[Step, int | None]:
        limit = self._content_limit
        if limit is None:
            if self.dialect_name == "mysql":
                result: CursorResult[Any] = yield _execute(text("SELECT @@max_allowed_packet"), write=write)
                limit = (int(result.scalar_one()) - MYSQL_STATEMENT_RESERVE) // 2
            elif self.dialect_name == "sqlite":
                length = yield Step(DRIVER_CALL, (_sqlite_length_limit,), write)
                limit = int(length) - SQLITE_ROW_RESERVE
            elif self.dialect_name == "postgresql":
                limit = POSTGRESQL_MAX_CONTENT_BYTES
            self._content_limit = limit = None if limit is None else max(limit, 0)
        if self.max_content_bytes is not None and (limit is None or self.max_content_bytes < limit):
            return self.max_content_bytes
        return limit

    # --- the plans --------------------------------------------------------------------------

    def _create(self, chronicum: Chronicum) -> Plan[Step, None]:
        row = {
            "id": chronicum.id,
            "owner_id": chronicum.owner_id,
            "started_at": chronicum.started_at,
            "last_actum_at": chronicum.last_actum_at,
            "last_seq": 0,
        }
        try:
            yield _execute(self._insert_chronicum, row, write=True, autocommit=self.autocommit)
            yield COMMIT
        except IntegrityError:
            yield ROLLBACK
            # taken by a chronicum or by an erased one's marker
            existing: CursorResult[Any] = yield _execute(self._select_any_chronicum, {"id": chronicum.id})
            if existing.first() is not None:
                raise ChronicumExists(chronicum.id) from None
            raise

    def _get(self, chronicum_id: str) -> Plan[Step, Chronicum]:
        parameters = {"id": chronicum_id}
        on_psycopg = self._on_psycopg(self._select_chronicum, parameters)
        if on_psycopg is not None:
            rows: list[Any] = yield on_psycopg
            row: Any = rows[0] if rows else None
        else:
            result: CursorResult[Any] = yield _execute(
                self._select_chronicum, parameters, autocommit=self.read_autocommit
            )
            row = result.first()
        if row is None:
            raise ChronicumNotFound(chronicum_id)
        check_row("sqlalchemy: get chronicum", "chronicum id", chronicum_id, row[0])
        if on_psycopg is not None:
            return chronicum_of(row)
        return Chronicum(id=row[0], owner_id=row[1], started_at=row[2], last_actum_at=row[3])

    def _on_psycopg(
        self, statement: Executable, parameters: dict[str, Any], *, write: bool = False
    ) -> Step | None:
        """The autocommit step running ``statement`` on psycopg itself, or ``None`` (SQLAlchemy runs it).

        On PostgreSQL through psycopg (blocking or asyncio), a statement that is a whole
        operation is compiled by SQLAlchemy once (:class:`DriverStatement`) and run on the pooled
        connection's psycopg connection (:data:`DRIVER_STATEMENT`); its rows are psycopg's,
        ``bytea`` as bytes and moments in the session's time zone. Only for an autocommit plan's
        first step.
        """
        if not self._runs_on_psycopg:
            return None
        driver = self._driver_statement(statement)
        if driver is None:
            return None
        return Step(DRIVER_STATEMENT, (driver, parameters), write, autocommit=True)

    def _append(self, actum: Actum, key: str | None) -> Plan[Step, datetime]:
        """Give ``actum`` the chronicum's next ``seq`` and its ``at``, and insert it; return the ``at``.

        The first statement moves the chronicum's counter and ``last_actum_at`` and locks its row
        until commit, so the writers of one chronicum take turns: that turn is the actum's place,
        and ``at`` is decided in it (see :class:`Plans`). Raises ``ChronicumNotFound``, or
        ``StoreError`` when a row answers for another chronicum or actum than asked.
        """
        chronicum_id, now = actum.chronicum_id, datetime.now(UTC)
        where = "sqlalchemy: record actum"
        if self.record_statement is not None:
            parameters = self.record_parameters(actum, now, key)
            on_psycopg = self._on_psycopg(self.record_statement, parameters, write=True)
            row: Any
            if on_psycopg is not None:
                rows: list[Any] = yield on_psycopg
                row = rows[0] if rows else None
            else:
                stored: CursorResult[Any] = yield _execute(
                    self.record_statement, parameters, write=True, autocommit=True
                )
                row = stored.first()
            if row is None:
                raise ChronicumNotFound(chronicum_id)
            check_row(where, "chronicum id", chronicum_id, row[0])
            check_row(where, "actum id", actum.id, row[1])
            stored_at: datetime = row[2]
            return stored_at if on_psycopg is None else utc(stored_at)
        if self.counter == "lastrowid":
            moved: CursorResult[Any] = yield _execute(
                self.advance_statement,
                {"chronicum_id": chronicum_id, "at_us": (now - _EPOCH) // _MICROSECOND},
                write=True,
            )
            if moved.rowcount == 0:
                raise ChronicumNotFound(chronicum_id)
            echoes = self.dialect.insert_returning
            statement = self._insert_actum_returning if echoes else self.insert_actum_statement
            inserted: CursorResult[Any] = yield _execute(statement, actum_row(actum, 0, now, key))
            if echoes:
                self._check_echo(inserted, actum)
            elif inserted.rowcount != 1:
                raise StoreError(where, f"the actum was not inserted into chronicum {chronicum_id!r}")
            return _EPOCH + int(moved.lastrowid) * _MICROSECOND
        if self._driver_append is not None:
            return (yield from self._append_on_driver(self._driver_append, actum, key, now))
        seq, at = yield from self._moved_counter(
            self.advance_statement, {"chronicum_id": chronicum_id, "at": now}, where
        )
        inserted = yield _execute(self.insert_actum_statement, actum_row(actum, seq, at, key))
        if self.counter == "returning":
            self._check_echo(inserted, actum)
        return at

    def _append_on_driver(
        self,
        statements: tuple[DriverStatement, DriverStatement],
        actum: Actum,
        key: str | None,
        now: datetime,
    ) -> Plan[Step, datetime]:
        """:meth:`_append` on SQLite's own driver: the same two statements in the same transaction.

        The ``begin`` step begins it (``BEGIN IMMEDIATE``, in the writer's turn): on a SQLite file
        :func:`execute_plan` has the driver send it, and the plan's ``COMMIT`` or ``ROLLBACK``,
        itself, and rolls back one the plan left open; elsewhere SQLAlchemy's ``Connection`` does.
        The statements run on the driver connection (:class:`DriverRun`), their errors wrapped as
        SQLAlchemy wraps them. Returns the actum's ``at``.
        """
        advance, insert_actum = statements
        chronicum_id, where = actum.chronicum_id, "sqlalchemy: record actum"
        yield Step("begin", (), write=True)
        counter = DriverRun(advance, {"chronicum_id": chronicum_id, "at": now})
        moved: list[Any] = yield Step(DRIVER_CALL, (counter,))
        if not moved:
            raise ChronicumNotFound(chronicum_id)
        check_row(where, "chronicum id", chronicum_id, moved[0][0])
        seq, at = int(moved[0][1]), self._parse_at(moved[0][2])
        inserted = DriverRun(insert_actum, actum_row(actum, seq, at, key))
        echoed: list[Any] = yield Step(DRIVER_CALL, (inserted,))
        check_row(where, "chronicum id", chronicum_id, echoed[0][0] if echoed else None)
        check_row(where, "actum id", actum.id, echoed[0][1] if echoed else None)
        return cast(datetime, at)

    @staticmethod
    def _check_echo(inserted: CursorResult[Any], actum: Actum) -> None:
        """Check the ``(chronicum id, actum id)`` row an insert echoed back is ``actum``'s."""
        echoed: Any = inserted.first()
        where = "sqlalchemy: record actum"
        check_row(where, "chronicum id", actum.chronicum_id, None if echoed is None else echoed[0])
        check_row(where, "actum id", actum.id, None if echoed is None else echoed[1])

    def _record(self, actum: Actum, key: str | None) -> Plan[Step, Actum]:
        limit = yield from self._limit(write=True)
        check_content_size(actum.content, limit)
        try:
            try:
                at = yield from self._append(actum, key)
            except DBAPIError as error:
                yield from self._refused_as_too_large(error, actum.content)
                raise
            yield COMMIT
        except IntegrityError:
            if key is None:
                raise
            # Another write holds the key: discard ours and read theirs back (a fresh transaction).
            yield ROLLBACK
            keyed: CursorResult[Any] = yield _execute(
                self._select_keyed, {"chronicum_id": actum.chronicum_id, "idempotency_key": key}
            )
            first = keyed.first()
            if first is None:
                raise
            check_row("sqlalchemy: record actum", "chronicum id", actum.chronicum_id, first[0])
            return self._actum(first[0], first, 1)
        return recorded_at(actum, at)

    def _record_many(self, acta: list[Actum], key: str | None) -> Plan[Step, list[Actum]]:
        """Lock the chronicum's row moving its counter on by ``len(acta)``, insert them, commit.

        Every content is checked against the limit first. The first statement (``record``'s,
        see :meth:`_advance`) decides one ``at`` for the whole batch and gives it
        ``seq`` ``last_seq - len(acta) + 1`` to ``last_seq``; one multi-row ``INSERT`` (more only
        when the batch would not fit in one statement, see :meth:`_chunks`) stores them, the key
        and the batch's size on the first. A key another write holds makes the insert fail: the
        transaction is rolled back and that write's acta are read back instead.
        """
        limit = yield from self._limit(write=True)
        for actum in acta:
            check_content_size(actum.content, limit)
        sizes = [content_size(actum.content) for actum in acta]
        try:
            try:
                stored = yield from self._append_many(acta, key, sizes)
            except DBAPIError as error:
                largest = max(range(len(acta)), key=sizes.__getitem__)
                yield from self._refused_as_too_large(error, acta[largest].content)
                raise
            yield COMMIT
        except IntegrityError:
            if key is None:
                raise
            yield ROLLBACK
            kept = yield from self._keyed_batch(acta[0].chronicum_id, key)
            if not kept:
                raise
            return kept
        return stored

    def _append_many(self, acta: list[Actum], key: str | None, sizes: list[int]) -> Plan[Step, list[Actum]]:
        """The statements of :meth:`_record_many` up to the commit; returns the acta with ``at``."""
        chronicum_id, count, now = acta[0].chronicum_id, len(acta), datetime.now(UTC)
        where = "sqlalchemy: record acta"
        at_once = self._record_many_statement
        if at_once is not None and len(self._chunks(sizes)) == 1:
            return (yield from self._append_many_at_once(at_once, acta, key, now))
        first_seq: int | None = None  # MariaDB/MySQL: read from the row by the insert itself
        if self.counter == "lastrowid":
            moved: CursorResult[Any] = yield _execute(
                self._advance_many,
                {"chronicum_id": chronicum_id, "count": count, "at_us": (now - _EPOCH) // _MICROSECOND},
                write=True,
            )
            if moved.rowcount == 0:
                raise ChronicumNotFound(chronicum_id)
            at = _EPOCH + int(moved.lastrowid) * _MICROSECOND
        else:
            last_seq, at = yield from self._moved_counter(
                self._advance_many, {"chronicum_id": chronicum_id, "count": count, "at": now}, where
            )
            first_seq = last_seq - count + 1
        echoes = self.counter == "returning" or (
            self.counter == "lastrowid" and self.dialect.insert_returning
        )
        start = 0
        for end in self._chunks(sizes):
            rows = [
                self._batch_row(acta[index], index, count, first_seq, at, key) for index in range(start, end)
            ]
            if first_seq is None:  # MariaDB/MySQL: each row's seq is its own expression
                statement: Any = insert(self.tables.acta).values(rows)
                if echoes:
                    statement = statement.returning(self.tables.acta.c.chronicum_id, self.tables.acta.c.id)
                inserted: CursorResult[Any] = yield _execute(statement)
            else:
                # One statement compiled once and cached, its rows sent as one multi-row INSERT by
                # SQLAlchemy's "insertmanyvalues": compiling a 20-row VALUES list on every batch
                # cost more than the database's own work on SQLite.
                statement = self._insert_returning if echoes else self._insert_actum
                inserted = yield Step("execute", (statement, rows), False)
            if echoes:
                echoed = [tuple(row) for row in inserted.all()]
                check_rows(where, "chronicum id", chronicum_id, echoed)
                expected = sorted(actum.id for actum in acta[start:end])
                got = sorted(str(actum_id) for _, actum_id in echoed)
                if got != expected:
                    check_row(where, "actum id", acta[start].id, None)
            elif inserted.rowcount != end - start:
                raise StoreError(where, f"the acta were not inserted into chronicum {chronicum_id!r}")
            start = end
        return [recorded_at(actum, at) for actum in acta]

    def _append_many_at_once(
        self, statement: Executable, acta: list[Actum], key: str | None, now: datetime
    ) -> Plan[Step, list[Actum]]:
        """The batch in ``statement``, in autocommit (PostgreSQL; see :meth:`_one_statement_batch`)."""
        chronicum_id, count = acta[0].chronicum_id, len(acta)
        where = "sqlalchemy: record acta"
        parameters = {
            "chronicum_id": chronicum_id,
            "at": now,
            "count": count,
            "idempotency_key": key,
            "batch_size": count if key is not None and count > 1 else None,
            "actum_ids": [actum.id for actum in acta],
            "kinds": [actum.kind.value for actum in acta],
            "actor_kinds": [actum.actor_kind.value for actum in acta],
            "actors": [actum.actor for actum in acta],
            "contents": [actum.content.encode("utf-8") for actum in acta],
        }
        inserted: CursorResult[Any] = yield _execute(statement, parameters, write=True, autocommit=True)
        rows = [tuple(row) for row in inserted.all()]
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_rows(where, "chronicum id", chronicum_id, rows)
        if sorted(str(row[1]) for row in rows) != sorted(actum.id for actum in acta):
            check_row(where, "actum id", acta[0].id, None)
        at: datetime = rows[0][2]
        return [recorded_at(actum, at) for actum in acta]

    def _moved_counter(
        self, advance: Executable, parameters: dict[str, Any], where: str
    ) -> Plan[Step, tuple[int, datetime]]:
        """Run ``advance``, which moves the chronicum's counter and locks its row until commit.

        Returns the new ``last_seq`` and the ``at`` decided under that lock. On dialects without
        ``UPDATE ... RETURNING`` the row is read back in the same transaction.
        Raises ``ChronicumNotFound`` (no live chronicum), or ``StoreError`` when the row answers for
        another chronicum than asked.
        """
        chronicum_id = parameters["chronicum_id"]
        result: CursorResult[Any] = yield _execute(advance, parameters, write=True)
        if self.counter == "select":
            if result.rowcount == 0:
                raise ChronicumNotFound(chronicum_id)
            result = yield _execute(self._select_counter, {"chronicum_id": chronicum_id})
        row: Any = result.first()
        if row is None:
            raise ChronicumNotFound(chronicum_id)
        check_row(where, "chronicum id", chronicum_id, row[0])
        return int(row[1]), row[2]

    def _batch_row(
        self, actum: Actum, index: int, count: int, first_seq: int | None, at: datetime, key: str | None
    ) -> dict[str, Any]:
        """The values of the ``index``-th actum of a batch of ``count``; the key and size on the first.

        With no ``first_seq`` (MariaDB/MySQL) its ``seq`` is read from the chronicum's row, which
        this transaction moved and holds: ``last_seq - (count - 1 - index)``.
        """
        chronica = self.tables.chronica
        row = actum_row(actum, 0, at, key if index == 0 else None)
        row["batch_size"] = count if index == 0 and key is not None and count > 1 else None
        if first_seq is None:
            last_seq = (
                select(chronica.c.last_seq).where(chronica.c.id == actum.chronicum_id).scalar_subquery()
            )
            row["seq"] = last_seq - (count - 1 - index)
        else:
            row["seq"] = first_seq + index
        return row

    def _chunks(self, sizes: list[int]) -> list[int]:
        """Where each ``INSERT`` of a batch whose contents are ``sizes`` bytes ends (exclusive indices).

        One statement holds at most :data:`_MOST_PARAMETERS` parameters' worth of rows, and on
        MariaDB/MySQL (whose statement, content escaped, must fit in ``max_allowed_packet``) and
        PostgreSQL (whose message is at most about 1 GiB) at most one actum's limit of content,
        counting :data:`_BATCH_ROW_RESERVE` bytes a row for its other values; usually the whole
        batch is one statement.
        """
        rows = self._batch_parameters // _BATCH_COLUMNS
        budget: int | None = None
        if self.dialect_name == "mysql":
            budget = self._content_limit
        elif self.dialect_name == "postgresql":
            budget = POSTGRESQL_MAX_CONTENT_BYTES
        ends: list[int] = []
        start, used = 0, 0
        for index, size in enumerate(sizes):
            cost = size + _BATCH_ROW_RESERVE
            if index > start and (index - start >= rows or (budget is not None and used + cost > budget)):
                ends.append(index)
                start, used = index, 0
            used += cost
        ends.append(len(sizes))
        return ends

    def _keyed_batch(self, chronicum_id: str, key: str) -> Plan[Step, list[Actum]]:
        """Read back what the write keyed ``key`` stored in the chronicum, in order (``[]``: nothing)."""
        result: CursorResult[Any] = yield _execute(
            self._select_keyed_batch, {"chronicum_id": chronicum_id, "idempotency_key": key}
        )
        rows: list[Any] = list(result.all())
        check_rows("sqlalchemy: record acta", "chronicum id", chronicum_id, rows)
        return [self._actum(row[0], row, 1) for row in rows]

    def _list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Step, list[Chronicum]]:
        parameters: dict[str, Any] = {"owner": owner_id, "limit": limit}
        if after is not None:
            parameters["after_at"], parameters["after_id"] = after
        result: CursorResult[Any] = yield _execute(
            self._listings[after is not None], parameters, autocommit=self.read_autocommit
        )
        rows: list[Any] = list(result.all())
        check_rows("sqlalchemy: list chronica", "owner id", owner_id, rows, column=1)
        return [
            Chronicum(id=row[0], owner_id=row[1], started_at=row[2], last_actum_at=row[3]) for row in rows
        ]

    def _erase(self, chronicum_id: str, owner_digest: str) -> Plan[Step, int]:
        """Mark (locking the row, as ``record`` does first), delete the acta, commit; return how many."""
        marked: CursorResult[Any] = yield _execute(
            self._mark_erased, {"chronicum_id": chronicum_id, "digest": owner_digest}, write=True
        )
        if self.dialect.update_returning:
            row: Any = marked.first()
            if row is None:
                raise ChronicumNotFound(chronicum_id)
            check_row("sqlalchemy: erase chronicum", "chronicum id", chronicum_id, row[0])
        elif marked.rowcount == 0:
            raise ChronicumNotFound(chronicum_id)
        deleted: CursorResult[Any] = yield _execute(self._delete_acta, {"chronicum_id": chronicum_id})
        yield COMMIT
        return int(deleted.rowcount)

    def _erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Step, int]:
        """Find the owner's live chronica along the listing index, then erase each (see :meth:`_erase`).

        One erased meanwhile by someone else is not counted.
        """
        result: CursorResult[Any] = yield _execute(self._select_owned, {"owner": owner_id}, write=True)
        rows: list[Any] = list(result.all())
        check_rows("sqlalchemy: erase owner", "owner id", owner_id, rows, column=1)
        erased = 0
        for row in rows:
            try:
                yield from self._erase(str(row[0]), owner_digest)
            except ChronicumNotFound:
                yield ROLLBACK
                continue
            erased += 1
        return erased

    def _reopen_marker(self, chronicum: Chronicum, owner_digest: str) -> Plan[Step, bool]:
        parameters = {
            "chronicum_id": chronicum.id,
            "digest": owner_digest,
            "owner": chronicum.owner_id,
            "started": chronicum.started_at,
            "last": chronicum.last_actum_at,
        }
        reopened: CursorResult[Any] = yield _execute(
            self._reopen, parameters, write=True, autocommit=self.autocommit
        )
        if self.dialect.update_returning:
            row: Any = reopened.first()
            if row is not None:
                check_row("sqlalchemy: reopen chronicum", "chronicum id", chronicum.id, row[0])
            done = row is not None
        else:
            done = reopened.rowcount == 1
        yield COMMIT if done else ROLLBACK
        return done

    def _refused_as_too_large(self, error: DBAPIError, content: str) -> Plan[Step, None]:
        """Raise ``ActumTooLarge`` if the database refused the insert because ``content`` is too large.

        That happens only when the database's limit was lowered after the store read it (or a
        connection was set up with a lower one). Then the transaction is rolled back, the limit
        read again (MariaDB/MySQL closes the connection after such a refusal, or even before it
        has read the whole statement: the connection is dropped and a fresh one reads it), and
        the content is too large if it is over that. Otherwise this returns and the caller's
        error stands (a ``StoreError``).
        """
        self._content_limit = None
        original = error.orig
        if self.dialect_name == "mysql":
            code = original.args[0] if original is not None and original.args else None
            if code not in _MYSQL_REFUSALS:
                return
            if not error.connection_invalidated:
                yield Step("invalidate")
        elif self.dialect_name == "sqlite":
            if getattr(original, "sqlite_errorcode", None) != sqlite3.SQLITE_TOOBIG:
                return
        elif getattr(original, "sqlstate", None) != _POSTGRESQL_LIMIT_EXCEEDED:
            return
        yield ROLLBACK
        limit = yield from self._limit(write=False)
        size = content_size(content)
        if limit is not None and size > limit:
            raise ActumTooLarge(size, limit) from error

    def _acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Step, list[Actum]]:
        statement, parameters = self.window_for(chronicum_id, query)
        on_psycopg = self._on_psycopg(statement, parameters)
        if on_psycopg is not None:
            found: list[Any] = yield on_psycopg
            if not found:
                raise ChronicumNotFound(chronicum_id)
            check_rows("sqlalchemy: get acta", "chronicum id", chronicum_id, found)
            return window_acta(found)
        driver_window = self._driver_statement(statement) if self._reads_on_driver else None
        if driver_window is not None:
            rows: list[Any] = yield Step(DRIVER_CALL, (DriverRun(driver_window, parameters),))
        else:
            result: CursorResult[Any] = yield _execute(statement, parameters, autocommit=self.read_autocommit)
            rows = list(result.all())
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_rows("sqlalchemy: get acta", "chronicum id", chronicum_id, rows)
        if query.last_n > 0 and self.dialect_name == "sqlite":
            rows.reverse()  # read newest first (see _sqlite_window)
        if driver_window is not None:
            return self._window_acta(rows, self._parse_at)
        return self._window_acta(rows)

    def reads_on_driver(self, query: ActaQuery) -> bool:
        """Whether ``acta`` for ``query`` is one read by SQLite's own driver (:class:`DriverStatement`).

        Its plan then yields :data:`DRIVER_CALL` steps only (and :data:`RECONNECT` after a lost
        connection), none of them writing.
        """
        if not self._reads_on_driver:
            return False
        statement, _ = self.window_for("", query)
        return self._driver_statement(statement) is not None

    def _driver_statement(self, statement: Executable) -> DriverStatement | None:
        """``statement``, one this object built and keeps, as the driver runs it (compiled once).

        ``None`` when SQLAlchemy must run it (see :meth:`DriverStatement.compiled`).
        """
        key = id(statement)  # kept statements only: an id is never reused while this object lives
        if key not in self._driver_statements:
            self._driver_statements[key] = DriverStatement.compiled(statement, self.dialect)
        return self._driver_statements[key]

    def window_for(self, chronicum_id: str, query: ActaQuery) -> tuple[Executable, dict[str, Any]]:
        """Return the context-window statement for ``query`` and its parameters."""
        parameters: dict[str, Any] = {"chronicum_id": chronicum_id}
        if query.actum_kinds:
            parameters.update(_padded("actum_kind", tuple(query.actum_kinds), len(_KINDS)))
        if query.actor_kinds:
            parameters.update(_padded("actor_kind", tuple(query.actor_kinds), len(_ACTOR_KINDS)))
        if query.last_n > 0:
            parameters["last_n"] = query.last_n
        shape = (bool(query.actum_kinds), bool(query.actor_kinds), query.last_n > 0)
        return self.window(*shape), parameters

    def window(self, by_kind: bool, by_actor_kind: bool, limited: bool) -> Executable:
        """The one query of a context window, built once per shape.

        Its parameters (see :meth:`window_for`): ``chronicum_id``; ``actum_kind_0`` to
        ``actum_kind_3`` and ``actor_kind_0`` to ``actor_kind_2`` (the wanted values, the last one
        repeated to fill every slot: a fixed number of parameters keeps the SQL text, and so its
        compiled form, the same for every query of a shape); ``last_n``.

        Its rows are ``(chronicum id, seq, id, kind, actor kind, actor, content, at)``: the acta
        that pass the filters (the newest ``last_n`` of them by ``seq``, read backwards along the
        primary key), plus one row with a ``NULL`` ``seq`` for the chronicum itself. No row at all
        means the chronicum is missing; only the ``NULL`` row means it has no matching acta.
        On PostgreSQL the chronicum's row is outer-joined to the limited acta, in order. On
        SQLite the acta are outer-joined to the chronicum's row directly, the filters in the join's
        condition, so that SQLite reads them along the primary key without a derived table to
        materialise and sort: newest first when limited (:meth:`_acta` turns them round), else
        oldest first. MariaDB/MySQL would materialise that derived table (with its ``LONGTEXT``)
        in an on-disk temporary table, so there the two are a ``UNION ALL`` and the rows are put
        in order by :meth:`_window_acta`.
        """
        shape = (by_kind, by_actor_kind, limited)
        statement = self._windows.get(shape)
        if statement is not None:
            return statement
        chronica, acta = self.tables.chronica, self.tables.acta
        if self.dialect_name == "sqlite":
            statement = self._sqlite_window(by_kind, by_actor_kind, limited)
            self._windows[shape] = statement
            return statement
        recent = select(acta.c.chronicum_id, acta.c.seq, *self._actum_columns).where(
            acta.c.chronicum_id == bindparam("chronicum_id")
        )
        if by_kind:
            recent = recent.where(acta.c.kind.in_(_slots("actum_kind", len(_KINDS))))
        if by_actor_kind:
            recent = recent.where(acta.c.actor_kind.in_(_slots("actor_kind", len(_ACTOR_KINDS))))
        if limited:
            recent = recent.order_by(acta.c.seq.desc()).limit(bindparam("last_n", type_=Integer()))
        if self.dialect_name == "mysql":
            itself = select(chronica.c.id, *(null() for _ in range(len(self._actum_columns) + 1))).where(
                chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None)
            )
            statement = union_all(recent, itself)
        else:
            window = recent.subquery("recent")
            statement = (
                select(chronica.c.id, *list(window.c)[1:])
                .select_from(chronica.outerjoin(window, true()))
                .where(chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None))
                .order_by(window.c.seq)
            )
        self._windows[shape] = statement
        return statement

    def _sqlite_window(self, by_kind: bool, by_actor_kind: bool, limited: bool) -> Executable:
        """SQLite's context-window query (see :meth:`window`): the chronicum's row, its acta joined.

        ``chronica LEFT JOIN acta ON acta.chronicum_id = chronica.id AND <filters>``, ordered by
        ``seq`` (descending and limited to ``last_n`` when ``limited``): one row with a ``NULL``
        ``seq`` when no actum passes the filters, none when the chronicum is missing.
        """
        chronica, acta = self.tables.chronica, self.tables.acta
        joined = acta.c.chronicum_id == chronica.c.id
        if by_kind:
            joined = and_(joined, acta.c.kind.in_(_slots("actum_kind", len(_KINDS))))
        if by_actor_kind:
            joined = and_(joined, acta.c.actor_kind.in_(_slots("actor_kind", len(_ACTOR_KINDS))))
        statement = (
            select(chronica.c.id, acta.c.seq, *self._actum_columns)
            .select_from(chronica.outerjoin(acta, joined))
            .where(chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None))
        )
        if limited:
            return statement.order_by(acta.c.seq.desc()).limit(bindparam("last_n", type_=Integer()))
        return statement.order_by(acta.c.seq)

    @staticmethod
    def _actum(chronicum_id: str, row: Any, offset: int) -> Actum:
        """Turn ``row[offset:]`` (id, kind, actor kind, actor, content, at) into an actum."""
        actum_id, kind, actor_kind, actor, content, at = row[offset : offset + 6]
        return build_actum(chronicum_id, _KINDS[kind], _ACTOR_KINDS[actor_kind], actor, content, actum_id, at)

    def _window_acta(self, rows: list[Any], parse_at: Callable[[Any], Any] | None = None) -> list[Actum]:
        """Turn the rows of :meth:`window` into acta (a row without ``seq`` stands for none).

        ``parse_at`` turns the ``at`` column as the driver gives it into a UTC datetime, for rows
        read without SQLAlchemy's result processing (:class:`DriverStatement`).
        """
        kinds, actor_kinds = _KINDS, _ACTOR_KINDS
        if self.dialect_name == "mysql":
            rows = sorted((row for row in rows if row[1] is not None), key=itemgetter(1))
        if parse_at is not None:
            return [
                build_actum(
                    chronicum_id, kinds[kind], actor_kinds[actor_kind], actor, content, actum_id, parse_at(at)
                )
                for chronicum_id, seq, actum_id, kind, actor_kind, actor, content, at in rows
                if seq is not None
            ]
        return [
            build_actum(chronicum_id, kinds[kind], actor_kinds[actor_kind], actor, content, actum_id, at)
            for chronicum_id, seq, actum_id, kind, actor_kind, actor, content, at in rows
            if seq is not None
        ]

    # --- migration --------------------------------------------------------------------------

    def _migrate(self, target: int = SCHEMA_VERSION) -> Plan[Step, None]:
        """Bring the tables to ``target``, safe with many processes starting at once.

        Fresh tables are created at ``target``; older ones are taken through each migration step
        after their version (see :meth:`_step`), and the version recorded, in the same lock.

        Serialised per database (and schema): SQLite by ``BEGIN IMMEDIATE`` (its DDL is
        transactional), PostgreSQL by a transaction-scoped advisory lock, MariaDB/MySQL by
        ``GET_LOCK`` (its DDL commits by itself, so the lock is held by the session and
        released at the end). Every ``CREATE`` also says ``IF NOT EXISTS``. It first looks in the
        catalog (once, in the steady state, instead of creating the version table if missing), and
        refuses tables this package did not create (see :meth:`_own_tables`).
        """
        locked = yield from self._lock()
        try:
            yield from self._create_tables(target)
        except GeneratorExit:
            raise
        except BaseException:
            if locked:
                yield from self._release_lock()
            raise
        if locked:
            failed = yield from self._release_lock()
            if failed is not None:
                raise failed

    def _release_lock(self) -> Plan[Step, SQLAlchemyError | None]:
        """Release the migration lock; if that fails, end the session, and the lock with it.

        A connection must not go back to the pool holding the lock: every later migration would
        wait for it. Returns the error of the release (``None`` when it went well).
        """
        try:
            yield from self._unlock()
        except SQLAlchemyError as error:
            yield DROP_CONNECTION
            return error
        return None

    def _create_tables(self, target: int) -> Plan[Step, None]:
        tables = self.tables
        found = yield from self._own_tables("migrate")
        if tables.versions.name not in found:
            if self.schema is not None and self.dialect_name in ("postgresql", "mysql"):
                yield _execute(CreateSchema(self.schema, if_not_exists=True), write=True)
            yield _execute(CreateTable(tables.versions, if_not_exists=True), write=True)
        result: CursorResult[Any] = yield _execute(
            select(tables.versions.c.version).where(tables.versions.c.component == _COMPONENT)
        )
        version: int | None = result.scalar()
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                "sqlalchemy: migrate",
                f"the database is at schema version {version}, newer than this chronica-sqlalchemy "
                f"knows ({SCHEMA_VERSION}); upgrade chronica-sqlalchemy",
            )
        if version is None:
            created = tables if target == SCHEMA_VERSION else Tables.build(self.schema, target)
            yield _execute(CreateTable(created.chronica, if_not_exists=True))
            yield _execute(CreateTable(created.acta, if_not_exists=True))
            if target >= 2:
                yield _execute(CreateIndex(self._listing_index, if_not_exists=True))
            yield _execute(insert(tables.versions), {"component": _COMPONENT, "version": target})
        elif version < target:
            for step in range(version + 1, target + 1):
                yield from self._step(step)
            yield _execute(
                update(tables.versions)
                .where(tables.versions.c.component == _COMPONENT)
                .values(version=target)
            )
        yield COMMIT
        if version is None or version < target:
            where = f"schema {self.schema!r}" if self.schema is not None else "the default schema"
            if version is None:
                _log.info("created the tables at schema version %d in %s", target, where)
            else:
                _log.info("migrated the tables from schema version %d to %d in %s", version, target, where)

    def _step(self, version: int) -> Plan[Step, None]:
        """The migration step that brings tables at ``version - 1`` to ``version``.

        2. ``chronica.owner_digest`` and ``acta.batch_size`` (nullable: existing rows are live
           chronica and unbatched acta as they are) and the listing index. MariaDB/MySQL commits
           each DDL statement by itself, so there each says ``IF NOT EXISTS``: a step cut short
           is finished by the next migration. SQLite's and PostgreSQL's DDL is transactional.
        """
        if version != 2:
            raise StoreError("sqlalchemy: migrate", f"no migration step to schema version {version}")
        tables, preparer = self.tables, self.dialect.identifier_preparer
        guard = " IF NOT EXISTS" if self.dialect_name == "mysql" else ""
        for table, added in (
            (tables.chronica, tables.chronica.c.owner_digest),
            (tables.acta, tables.acta.c.batch_size),
        ):
            column = CreateColumn(added).compile(dialect=self.dialect)
            yield _execute(text(f"ALTER TABLE {preparer.format_table(table)} ADD COLUMN{guard} {column}"))
        yield _execute(CreateIndex(self._listing_index, if_not_exists=True))

    def check(self) -> Plan[Step, None]:
        """What a store opened without ``auto_migrate`` runs: refuse tables that are not its own.

        One query of the database's catalog and, when the version table is there, one of the
        version; nothing is written.

        Raises:
            StoreError: ``"sqlalchemy: open"`` when ``chronica`` or ``acta`` are there without
                this package's version table, or chronica-postgres's version table is there
                (see :meth:`_own_tables`), or the tables are at an older schema version than
                :data:`SCHEMA_VERSION` (they lack what this release reads and writes: migrate
                them first); any database error, translated.
        """
        return _translated("open", self._checked())

    def _checked(self) -> Plan[Step, None]:
        found = yield from self._own_tables("open")
        if self.tables.versions.name in found:
            versions = self.tables.versions
            result: CursorResult[Any] = yield _execute(
                select(versions.c.version).where(versions.c.component == _COMPONENT)
            )
            version = result.scalar()
            if version is not None and version < SCHEMA_VERSION:
                raise StoreError(
                    "sqlalchemy: open",
                    f"the database is at schema version {version}, older than this chronica-sqlalchemy "
                    f"needs ({SCHEMA_VERSION}); migrate it: run `chronica migrate --store URL` or open "
                    "the store with auto_migrate=True",
                )
        yield ROLLBACK

    def _own_tables(self, operation: str) -> Plan[Step, set[str]]:
        """Which of the store's tables exist, once they are known to be this package's own.

        The tables are someone else's when ``chronica`` or ``acta`` is there without
        ``chronica_schema`` (another application's, or chronica-postgres's), or when
        chronica-postgres's ``chronica_schema_version`` is there at all.

        Raises:
            StoreError: ``"sqlalchemy: <operation>"`` for someone else's tables, naming what was
                found and what to do; nothing is written.
        """
        tables = self.tables
        names = (tables.chronica.name, tables.acta.name, tables.versions.name, OTHER_BACKEND_VERSIONS)
        query = find_tables(self.dialect_name, self.schema, names)
        if query is None:  # a dialect whose catalog is not known here: nothing to look at
            return set()
        # The first step of a migration on SQLite: it begins the write transaction that serialises it.
        result: CursorResult[Any] = yield _execute(query, write=operation == "migrate")
        found = {str(name) for (name,) in result}
        data = sorted(found & {tables.chronica.name, tables.acta.name})
        if OTHER_BACKEND_VERSIONS in found or (data and tables.versions.name not in found):
            raise self._foreign(operation, sorted(found))
        return found

    def _foreign(self, operation: str, found: list[str]) -> StoreError:
        """The refusal of a database holding tables this package did not create."""
        postgres = OTHER_BACKEND_VERSIONS in found
        where = f"schema {self.schema!r}" if self.schema is not None else "the database"
        whose = (
            f"chronica-postgres's (its version table {OTHER_BACKEND_VERSIONS} is there)"
            if postgres
            else "another application's"
        )
        if self.dialect_name == "sqlite":
            elsewhere = "Use another database file"
        else:
            elsewhere = "Give another schema (the schema option) or another database"
        return StoreError(
            f"sqlalchemy: {operation}",
            f"{where} holds {', '.join(found)}: tables chronica-sqlalchemy did not create, they look "
            f"like {whose}; chronica-sqlalchemy uses only tables it created and has left these "
            f"untouched. {elsewhere}" + (", or open this one with chronica-postgres" if postgres else ""),
        )

    def _lock(self) -> Plan[Step, bool]:
        """Take the migration lock; return whether it must be released by :meth:`_unlock`."""
        if self.dialect_name == "postgresql":
            yield _execute(select(func.pg_advisory_xact_lock(self._lock_key)), write=True)
        elif self.dialect_name == "mysql":
            result: CursorResult[Any] = yield _execute(
                select(func.get_lock(self._lock_name(), _LOCK_TIMEOUT_SECONDS)), write=True
            )
            taken = result.scalar()
            if taken is None and self.schema is None:  # GET_LOCK(NULL, ...): DATABASE() is NULL
                raise StoreError(
                    "sqlalchemy: migrate",
                    "no database selected: name one in the URL (mariadb+pymysql://host/DATABASE) "
                    "or give the schema option",
                )
            if taken != 1:
                raise StoreError(
                    "sqlalchemy: migrate",
                    f"could not take the migration lock within {_LOCK_TIMEOUT_SECONDS} seconds",
                )
            return True
        return False

    def _unlock(self) -> Plan[Step, None]:
        yield _execute(select(func.release_lock(self._lock_name())))

    def _lock_name(self) -> Any:
        """A MariaDB/MySQL lock name (server-wide, at most 64 characters), one per database."""
        database = self.schema if self.schema is not None else func.database()
        return func.concat("chronica:", func.sha1(func.concat("chronica-sqlalchemy:", database)))

    def _migration_lock_key(self) -> int:
        """A signed 64-bit advisory lock key, one per schema (the database is implied)."""
        digest = hashlib.sha256(f"chronica-sqlalchemy:migrate:{self.schema or ''}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)
