"""The PostgreSQL stores: blocking on ``psycopg_pool.ConnectionPool``, asyncio on the async pool.

Both only perform the operations of the plans in :mod:`chronica_postgres.plans`, where every
statement, its parameters, the row conversion and the error translation are written once; the
store operations themselves come from :class:`chronica_core.PlannedStore` and
:class:`chronica_core.AsyncPlannedStore`, which run those plans through each store's ``_run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from chronica_core import StoreError
from chronica_core.after_fork import renew_after_fork
from chronica_core.loops import PerLoop
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.poolers import LISTEN, PREPARED_STATEMENTS
from chronica_core.redaction import masked_url, redact_error
from chronica_core.urls import split_query_options, split_schema
from chronica_postgres import after_fork
from chronica_postgres.connections import (
    CONFIGURE_SQL,
    CONFIGURE_UNPREPARED_SQL,
    IdleConnections,
    idle_timeout_seconds,
)
from chronica_postgres.follow import AsyncPostgresFollowing, Markings, PostgresFollowing
from chronica_postgres.history import AsyncPostgresHistory, PostgresHistory
from chronica_postgres.kept_cursors import (
    PooledAsyncConnection,
    PooledConnection,
    run_statement,
    run_statement_async,
)
from chronica_postgres.plans import Operation, Options, Plans, Rows, Statement, Transaction, translate
from chronica_postgres.poolers import found_pooler, found_pooler_async
from chronica_postgres.retention import AsyncPostgresRetention, PostgresRetention
from chronica_postgres.schema import Statements
from chronica_postgres.timeout import bounded, connection_wait, waiting
from chronica_postgres.url_checks import check_query

__all__ = ["AsyncPostgresStore", "PostgresStore", "migrate", "split_schema"]

Result = TypeVar("Result")

_log = logging.getLogger("chronica.postgres")

_URL_OPTIONS = ("schema", "connect_timeout", PREPARED_STATEMENTS, LISTEN)
"""Options a URL's query may carry (``?schema=app&connect_timeout=5&prepared_statements=false``;
``listen`` percent-encoded)."""


def _configured(url: str, pool: object, options: dict[str, Any]) -> tuple[str, Options, Plans]:
    """The URL for libpq, the options and the plans.

    ``schema`` and ``connect_timeout`` in the URL's query are read as those options (an option
    given explicitly wins) and taken out of the URL: the store passes libpq its own
    ``connect_timeout``, which would otherwise replace the URL's without a word. The other query
    parameters go to libpq and are checked with it first (:func:`.url_checks.check_query`).
    """
    if not url and pool is None:
        raise StoreError("postgres: open store", "give a postgresql:// URL or an open pool")
    url, in_url = split_query_options(url, _URL_OPTIONS)
    options = {**in_url, **options}
    parsed = Options.parse(options)
    check_query(url)
    return url, parsed, Plans(Statements(parsed.schema, notify=parsed.notify), parsed.max_content_bytes)


def _connection_text(url: str, pool: ConnectionPool | AsyncConnectionPool | None) -> str:
    """What the store connects with (its URL, else its pool's connection string): its secrets are redacted."""
    if url or pool is None:
        return url
    return pool.conninfo if isinstance(pool.conninfo, str) else ""  # a callable gives one each time


def _check_connection(url: str, options: Options) -> Options:
    """Connect once, directly, and hang up, before opening a pool on ``url``; return the options for it.

    A refused connection, an unknown host or a malformed URL then fails at once (within
    ``connect_timeout`` for a host that does not answer) with the driver's message, instead of
    after the pool's ``pool_timeout`` of retries logged as warnings. With
    ``prepared_statements=auto`` it also asks whether a pooler answers (one round trip): the
    options returned say whether the pool's connections prepare statements
    (:meth:`Options.behind`).

    Raises:
        StoreError: ``"postgres: open"`` with psycopg's message, raised from psycopg's error; libpq
            may quote the URL (or the malformed part of it), so the URL's secrets are redacted
            from both (see :func:`chronica_core.redaction.redact_error`).
    """
    try:
        with psycopg.connect(url, **options.connect_arguments()) as connection:
            if options.prepared_statements is None:
                return options.behind(found_pooler(connection))
            return options
    except psycopg.Error as error:
        redact_error(error, url)
        raise translate(error, "open", "") from error


async def _check_connection_async(url: str, options: Options) -> Options:
    """:func:`_check_connection` for the asyncio store. Raises ``StoreError("postgres: open", ...)``."""
    try:
        async with await psycopg.AsyncConnection.connect(url, **options.connect_arguments()) as connection:
            if options.prepared_statements is None:
                return options.behind(await found_pooler_async(connection))
            return options
    except psycopg.Error as error:
        redact_error(error, url)
        raise translate(error, "open", "") from error


class PostgresStore(PostgresFollowing, PostgresRetention, PostgresHistory, PlannedStore):
    """A blocking, thread-safe, idempotent store in PostgreSQL.

    Every call borrows a pooled connection (autocommit) for one statement: ``record``,
    ``record_idempotent``, ``record_many``, ``acta``, ``get``, ``list_chronica``, ``reopen``,
    ``idle_chronica``, ``layout``, ``window``, ``locate``, ``fork`` and ``record_summary`` are each
    one round trip; ``erase`` and ``erase_idle`` are one transaction of two statements
    (``erase_owner`` reads the owner's chronica, then erases each so). It has every capability:
    idempotency, batch, listing, erasure, follow, native, history and retention.

    Args:
        url: a libpq URL, ``postgresql://user@host:5432/database`` (``postgres://`` works too),
            optionally with ``?schema=NAME`` (the ``schema`` option, for where only a URL can be
            given); may be empty when ``pool`` is given.
        pool: an existing pool to use instead of opening one; the store never closes it, and
            switches the connections it borrows to autocommit.
        options: see :class:`chronica_postgres.Options` (``schema``, ``auto_migrate``,
            ``min_size``, ``max_size``, ``max_idle``, ``connect_timeout``, ``pool_timeout``,
            ``max_content_bytes``, ``operation_timeout``, ``check_idle_after``, ``notify``);
            strings are accepted.

    Raises:
        chronica_core.InvalidOption: an option is unknown, malformed or out of its range.
        StoreError: ``"postgres: open"`` at once when the store opens its own pool and the server
            refuses the connection, does not answer within ``connect_timeout``, or the URL is
            malformed (psycopg's message, raised from its error); ``"postgres: migrate"`` when the
            migration fails (``auto_migrate``); ``"postgres: migrate"`` (``"postgres: open"``
            without ``auto_migrate``) when the schema holds ``chronica`` or ``acta`` tables that
            chronica-postgres did not create (another application's, or chronica-sqlalchemy's):
            they are left untouched, and the message names them and what to do.
    """

    plans: Plans
    backend_name = "postgres"

    def __init__(self, url: str = "", *, pool: ConnectionPool | None = None, **options: Any) -> None:
        url, self.options, self.plans = _configured(url, pool, options)
        self._secrets_of = _connection_text(url, pool)
        self._markings = Markings()
        self._owns_pool = pool is None
        self._idle = IdleConnections(self.options.check_idle_after)
        self._url = url
        if pool is None:
            self.options = _check_connection(url, self.options)
            pool = self._open_pool()
        self._pool = pool
        self._inherited_pool = False  # True in a process forked since: see chronica_postgres.after_fork
        self._opening_own_pool = threading.Lock()
        renew_after_fork(self, after_fork.forget_parent)
        try:
            if self.options.auto_migrate:
                self.migrate()
            else:
                self._run(self.plans.check())
        except BaseException:
            self.close()
            raise

    def migrate(self) -> int:
        """Create or upgrade the tables under an advisory lock; return the schema version.

        Safe to run from many processes at once. Raises ``StoreError``.
        """
        return self._run_if_open(self.plans.migrate())

    def keeps_native(self) -> bool:
        """Return ``True``: acta keep their native form (see :class:`chronica_core.NativeStore`)."""
        return True

    def close(self) -> None:
        """Close the pool the store opened (a pool given to it is left open).

        Later operations raise ``StoreError("postgres: store", "the store is closed")``.
        """
        self._mark_closed()
        self._close_listener()
        if self._owns_pool and not self._inherited_pool:  # the parent's is the parent's to close
            self._pool.close()
            _log.debug("closed the pool of the PostgresStore on %s", masked_url(self._secrets_of))

    def _run(self, plan: Plan[Any, Result]) -> Result:
        if self._inherited_pool:
            after_fork.own_pool(self)
        return run_plan(plan, self._perform)

    def _open_pool(self) -> ConnectionPool[Any]:
        """Open the store's own pool on its URL (the store's first, or a forked child's)."""
        pool = ConnectionPool(
            self._url,
            open=True,
            configure=self._configure,
            connection_class=PooledConnection,
            **self.options.pool_arguments(),
        )
        _log.debug(
            "opened a pool of %d to %d connections to %s", pool.min_size, pool.max_size, masked_url(self._url)
        )
        return pool

    def _configure(self, connection: psycopg.Connection[Any]) -> None:
        """Set up a new pooled connection (:data:`CONFIGURE_SQL`); note the server's idle timeout.

        One that prepares nothing gets :data:`CONFIGURE_UNPREPARED_SQL`.
        """
        cursor = connection.execute(
            CONFIGURE_SQL if self.options.prepared_statements else CONFIGURE_UNPREPARED_SQL
        )
        cursor.nextset()
        self._idle.opened(connection, idle_timeout_seconds(cursor.fetchone()))

    def _perform(self, operation: Operation) -> Rows:
        if type(operation) is Statement and self.options.operation_timeout is None:
            # The usual operation, without the two context managers only a timeout needs.
            connection = self._borrow(None)
            try:
                return run_statement(connection, operation)
            finally:
                self._idle.returned(connection)
                self._pool.putconn(connection)
        if not isinstance(operation, Statement | Transaction):  # DISCARD_BROKEN_CONNECTIONS, at best
            with contextlib.suppress(psycopg.Error):  # (a pool closed meanwhile): the plan's error stands
                self._pool.check()
            return []
        with waiting(self.options) as started:
            connection = self._borrow(connection_wait(self.options))
        try:
            if not connection.autocommit:  # a pool given by the caller
                connection.autocommit = True
            with bounded(self.options, started, connection):
                if isinstance(operation, Statement):
                    return run_statement(connection, operation)
                with connection.transaction():
                    for statement in operation.statements:
                        cursor = connection.execute(statement.sql, statement.params, binary=statement.binary)
                    return cursor.fetchall()
        finally:
            self._idle.returned(connection)
            self._pool.putconn(connection)

    def _borrow(self, timeout: float | None) -> psycopg.Connection[Any]:
        """A pooled connection that works: one idle too long (or closed by the server) is checked first.

        A dead one goes back to the pool, which drops it, and another is taken; after as many
        dead ones as the pool holds at most, the next is a new one, taken unchecked. ``timeout``
        bounds each wait for a connection (``None``: the pool's own). Raises what ``getconn``
        raises (``PoolTimeout``, ``PoolClosed``).
        """
        pool = self._pool
        for _ in range(pool.max_size):
            connection = pool.getconn(timeout)
            if not self._idle.stale(connection):
                return connection
            try:
                ConnectionPool.check_connection(connection)
            except psycopg.Error:
                pool.putconn(connection)
                continue
            except BaseException:
                pool.putconn(connection)
                raise
            return connection
        return pool.getconn(timeout)


class _CancelledConnectingFilter(logging.Filter):
    """Drop the pool's report of a connection attempt cancelled because its event loop shuts down.

    ``asyncio.run()`` cancels every task of its loop, the store's pool workers among them; a
    worker cancelled while it opens a connection logs "error connecting" with the
    ``CancelledError``, although nothing failed. Only the reports of chronica-postgres's own pools
    (named ``chronica-postgres <schema>``) with a ``CancelledError`` are dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        arguments = record.args
        return not (
            isinstance(arguments, tuple)
            and len(arguments) == 2
            and str(record.msg).startswith("error connecting in")
            and str(arguments[0]).startswith("chronica-postgres ")
            and isinstance(arguments[1], asyncio.CancelledError)
        )


logging.getLogger("psycopg.pool").addFilter(_CancelledConnectingFilter())


@dataclass(eq=False)
class _LoopPool:
    """One event loop's pool, and the connections it opened (closed here if the pool could not).

    Attributes:
        pool: the loop's pool (the caller's own pool when ``owned`` is false).
        owned: whether the store opened the pool (then it closes it).
        connections: every connection the pool opened, held weakly.
    """

    pool: AsyncConnectionPool
    owned: bool
    connections: weakref.WeakSet[psycopg.AsyncConnection[Any]] = field(default_factory=weakref.WeakSet)


async def _close_loop_pool(loop_pool: _LoopPool) -> None:
    """Close a pool the store opened, in its own loop, and whatever connection it left open.

    ``asyncio.run()`` cancels every task of the loop (the pool's workers among them) before it
    closes the loop's async generators; the pool's ``close`` then gives up waiting for its
    workers, with ``CancelledError``, before closing its idle connections: they are closed here.
    """
    if not loop_pool.owned:
        return
    try:
        await loop_pool.pool.close()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # this task was cancelled, not the workers
            _drop_loop_pool(loop_pool)
            raise
    for connection in list(loop_pool.connections):
        if not connection.closed:
            await connection.close()


def _drop_loop_pool(loop_pool: _LoopPool) -> None:
    """Close the sockets of a pool the store opened, without awaiting (its loop is not running).

    libpq ends each session at once (``PQfinish``); the pool's tasks stay with their loop.
    """
    if not loop_pool.owned:
        return
    for connection in list(loop_pool.connections):
        if not connection.closed:
            connection.pgconn.finish()


class AsyncPostgresStore(
    AsyncPostgresFollowing, AsyncPostgresRetention, AsyncPostgresHistory, AsyncPlannedStore
):
    """The asyncio twin of :class:`PostgresStore`: the same statements, plans and errors.

    One store serves every event loop of the process, one after another (``asyncio.run()`` per
    request, ``Runner.run_sync`` in an agent framework) and at once (a loop per thread): each loop
    gets its own pool, opened on the loop's first operation, inside it; no connection crosses
    loops. A loop's pool is closed when that loop closes (``asyncio.run()`` and
    ``loop.shutdown_asyncgens()`` close it, in the loop), and every pool at :meth:`close` (see
    :class:`chronica_core.loops.PerLoop` for a loop closed otherwise, or still running in another
    thread). The schema is migrated (``auto_migrate``), or else checked to hold no tables
    chronica-postgres did not create, once per store: by the first loop's first operation (two
    loops opening at the same moment may both migrate, which the advisory lock makes safe).

    Constructing it does no I/O; the first operation raises what opening raises for
    :class:`PostgresStore`. Before opening a pool it connects once directly, so that the first
    call in a loop fails at once with ``StoreError("postgres: open", ...)`` (psycopg's message)
    when the server refuses, does not answer within ``connect_timeout``, or the URL is malformed;
    the next call in that loop tries again.

    Args:
        url: a libpq URL (see :class:`PostgresStore`); may be empty when ``pool`` is given.
        pool: an existing ``AsyncConnectionPool`` to use (opened by the caller, never closed here).
            Its connections belong to the loop the caller opened it in: the store then serves that
            loop only (psycopg fails in another); give a URL to serve every loop.
        options: as for :class:`PostgresStore`.

    Raises:
        chronica_core.InvalidOption: an option is unknown, malformed or out of its range.
    """

    plans: Plans
    backend_name = "postgres"

    def __init__(self, url: str = "", *, pool: AsyncConnectionPool | None = None, **options: Any) -> None:
        self._url, self.options, self.plans = _configured(url, pool, options)
        self._secrets_of = _connection_text(self._url, pool)
        self._markings = Markings()
        self._given_pool = pool
        self._idle = IdleConnections(self.options.check_idle_after)
        self._ready = False
        # close_with_tasks: a pool worker cancelled while it connects goes on waiting for work,
        # which would hang asyncio.run()'s shutdown; closing the pool tells it to stop.
        self._pools: PerLoop[_LoopPool] = PerLoop(
            self._where, self._open_loop_pool, _close_loop_pool, _drop_loop_pool, close_with_tasks=True
        )
        renew_after_fork(self, after_fork.forget_parent_listeners)

    async def migrate(self) -> int:
        """Create or upgrade the tables under an advisory lock; return the schema version.

        Raises ``StoreError`` (``"postgres: open"`` when the server cannot be reached;
        ``"postgres: async store: the store is closed"`` once closed).
        """
        self._check_open()
        pool = (await self._pools.get()).pool
        return await run_plan_async(self.plans.migrate(), functools.partial(self._perform, pool))

    def keeps_native(self) -> bool:
        """Return ``True``: acta keep their native form (see :class:`chronica_core.AsyncNativeStore`)."""
        return True

    async def close(self) -> None:
        """Close every pool the store opened, one per event loop (a pool given to it is left open).

        Later operations raise ``StoreError("postgres: async store", "the store is closed")``.
        The running loop's pool is closed here; one of a loop running in another thread is closed
        in that loop; one of a loop that is not running (closed already, or idle) cannot be
        awaited, so its connections' sockets are closed without it (the server ends those
        sessions at once). Raises nothing.
        """
        self._mark_closed()
        _log.debug("closing the pools of the AsyncPostgresStore on %s", masked_url(self._secrets_of))
        await self._close_listeners()
        await self._pools.close()

    async def _run(self, plan: Plan[Any, Result]) -> Result:
        try:
            pool = (await self._pools.get()).pool
        except BaseException:
            plan.close()
            raise
        return await run_plan_async(plan, functools.partial(self._perform, pool))

    async def _open_loop_pool(self) -> _LoopPool:
        """Open the running loop's pool (and migrate or check the schema, once per store)."""
        if self._given_pool is not None:
            loop_pool = _LoopPool(self._given_pool, owned=False)
        else:
            self.options = await _check_connection_async(self._url, self.options)
            connections: weakref.WeakSet[psycopg.AsyncConnection[Any]] = weakref.WeakSet()
            pool: AsyncConnectionPool = AsyncConnectionPool(
                self._url,
                open=False,
                configure=functools.partial(self._configure, connections),
                connection_class=PooledAsyncConnection,
                **self.options.pool_arguments(),
            )
            loop_pool = _LoopPool(pool, owned=True, connections=connections)
            try:
                await pool.open(wait=True, timeout=self.options.pool_timeout)
            except BaseException:
                await _close_loop_pool(loop_pool)
                raise
            _log.debug(
                "opened a pool of %d to %d connections to %s",
                pool.min_size,
                pool.max_size,
                masked_url(self._url),
            )
        if not self._ready:
            plan = self.plans.migrate() if self.options.auto_migrate else self.plans.check()
            try:
                await run_plan_async(plan, functools.partial(self._perform, loop_pool.pool))
            except BaseException:
                await _close_loop_pool(loop_pool)
                raise
            self._ready = True
        return loop_pool

    async def _perform(self, pool: AsyncConnectionPool, operation: Operation) -> Rows:
        if type(operation) is Statement and self.options.operation_timeout is None:
            # The usual operation, without the two context managers only a timeout needs.
            connection = await self._borrow(pool, None)
            try:
                return await run_statement_async(connection, operation)
            finally:
                self._idle.returned(connection)
                await pool.putconn(connection)
        if not isinstance(operation, Statement | Transaction):  # DISCARD_BROKEN_CONNECTIONS, at best
            with contextlib.suppress(psycopg.Error):
                await pool.check()
            return []
        with waiting(self.options) as started:
            connection = await self._borrow(pool, connection_wait(self.options))
        try:
            if not connection.autocommit:  # a pool given by the caller
                await connection.set_autocommit(True)
            with bounded(self.options, started, connection):
                if isinstance(operation, Statement):
                    return await run_statement_async(connection, operation)
                async with connection.transaction():
                    for statement in operation.statements:
                        cursor = await connection.execute(
                            statement.sql, statement.params, binary=statement.binary
                        )
                    return await cursor.fetchall()
        finally:
            self._idle.returned(connection)
            await pool.putconn(connection)

    async def _configure(
        self,
        connections: weakref.WeakSet[psycopg.AsyncConnection[Any]],
        connection: psycopg.AsyncConnection[Any],
    ) -> None:
        """Set up a new pooled connection as :meth:`PostgresStore._configure` does.

        The connection joins ``connections``, those of its loop's pool.
        """
        connections.add(connection)
        settings = CONFIGURE_SQL if self.options.prepared_statements else CONFIGURE_UNPREPARED_SQL
        cursor = await connection.execute(settings)
        cursor.nextset()
        self._idle.opened(connection, idle_timeout_seconds(await cursor.fetchone()))

    async def _borrow(self, pool: AsyncConnectionPool, timeout: float | None) -> psycopg.AsyncConnection[Any]:
        """:meth:`PostgresStore._borrow` for the asyncio pool."""
        for _ in range(pool.max_size):
            connection = await pool.getconn(timeout)
            if not self._idle.stale(connection):
                return connection
            try:
                await AsyncConnectionPool.check_connection(connection)
            except psycopg.Error:
                await pool.putconn(connection)
                continue
            except BaseException:
                await pool.putconn(connection)
                raise
            return connection
        return await pool.getconn(timeout)


def migrate(url: str, **options: Any) -> int:
    """Create or upgrade the schema of the store at ``url`` (what ``chronica migrate`` runs).

    Args:
        url: a libpq URL.
        options: as for :class:`PostgresStore` (``schema`` above all; ``auto_migrate`` is ignored).

    Returns:
        The schema version now in place.

    Raises:
        chronica_core.InvalidOption: an option is unknown or malformed.
        StoreError: ``"postgres: open"``: the server could not be reached or the URL is malformed;
            ``"postgres: migrate"``: the migration failed.
    """
    options["auto_migrate"] = False
    with PostgresStore(url, **options) as store:
        return store.migrate()
