"""The PostgreSQL stores: blocking on ``psycopg_pool.ConnectionPool``, asyncio on the async pool.

Both only perform the operations of the plans in :mod:`chronica_postgres.plans`, where every
statement, its parameters, the row conversion and the error translation are written once; the
store operations themselves come from :class:`chronica_core.PlannedStore` and
:class:`chronica_core.AsyncPlannedStore`, which run those plans through each store's ``_run``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from chronica_core import StoreError
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.redaction import redact_error
from chronica_core.urls import split_query_options, split_schema
from chronica_postgres.connections import CONFIGURE_SQL, IdleConnections, idle_timeout_seconds
from chronica_postgres.follow import AsyncPostgresFollowing, PostgresFollowing
from chronica_postgres.plans import Operation, Options, Plans, Rows, Statement, Transaction, translate
from chronica_postgres.schema import Statements
from chronica_postgres.timeout import bounded, connection_wait, waiting

__all__ = ["AsyncPostgresStore", "PostgresStore", "migrate", "split_schema"]

Result = TypeVar("Result")

_URL_OPTIONS = ("schema", "connect_timeout")
"""Options a URL's query may carry (``?schema=app&connect_timeout=5``)."""


def _configured(url: str, pool: object, options: dict[str, Any]) -> tuple[str, Options, Plans]:
    """The URL for libpq, the options and the plans.

    ``schema`` and ``connect_timeout`` in the URL's query are read as those options (an option
    given explicitly wins) and taken out of the URL: the store passes libpq its own
    ``connect_timeout``, which would otherwise replace the URL's without a word.
    """
    if not url and pool is None:
        raise StoreError("postgres: open store", "give a postgresql:// URL or an open pool")
    url, in_url = split_query_options(url, _URL_OPTIONS)
    options = {**in_url, **options}
    parsed = Options.parse(options)
    return url, parsed, Plans(Statements(parsed.schema), parsed.max_content_bytes)


def _connection_text(url: str, pool: ConnectionPool | AsyncConnectionPool | None) -> str:
    """What the store connects with (its URL, else its pool's connection string): its secrets are redacted."""
    if url or pool is None:
        return url
    return pool.conninfo if isinstance(pool.conninfo, str) else ""  # a callable gives one each time


def _check_connection(url: str, options: Options) -> None:
    """Connect once, directly, and hang up, before opening a pool on ``url``.

    A refused connection, an unknown host or a malformed URL then fails at once (within
    ``connect_timeout`` for a host that does not answer) with the driver's message, instead of
    after the pool's ``pool_timeout`` of retries logged as warnings.

    Raises:
        StoreError: ``"postgres: open"`` with psycopg's message, raised from psycopg's error; libpq
            may quote the URL (or the malformed part of it), so the URL's secrets are redacted
            from both (see :func:`chronica_core.redaction.redact_error`).
    """
    try:
        psycopg.connect(url, **options.connect_arguments()).close()
    except psycopg.Error as error:
        redact_error(error, url)
        raise translate(error, "open", "") from error


async def _check_connection_async(url: str, options: Options) -> None:
    """:func:`_check_connection` for the asyncio store. Raises ``StoreError("postgres: open", ...)``."""
    try:
        connection = await psycopg.AsyncConnection.connect(url, **options.connect_arguments())
    except psycopg.Error as error:
        redact_error(error, url)
        raise translate(error, "open", "") from error
    await connection.close()


class PostgresStore(PostgresFollowing, PlannedStore):
    """A blocking, thread-safe, idempotent store in PostgreSQL.

    Every call borrows a pooled connection (autocommit) for one statement: ``record``,
    ``record_idempotent``, ``record_many``, ``acta``, ``get``, ``list_chronica`` and ``reopen``
    are each one round trip; ``erase`` is one transaction of two statements (``erase_owner``
    reads the owner's chronica, then erases each so).

    Args:
        url: a libpq URL, ``postgresql://user@host:5432/database`` (``postgres://`` works too),
            optionally with ``?schema=NAME`` (the ``schema`` option, for where only a URL can be
            given); may be empty when ``pool`` is given.
        pool: an existing pool to use instead of opening one; the store never closes it, and
            switches the connections it borrows to autocommit.
        options: see :class:`chronica_postgres.Options` (``schema``, ``auto_migrate``,
            ``min_size``, ``max_size``, ``connect_timeout``, ``pool_timeout``,
            ``max_content_bytes``, ``operation_timeout``); strings are accepted.

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
        self._owns_pool = pool is None
        self._idle = IdleConnections(self.options.check_idle_after)
        if pool is None:
            _check_connection(url, self.options)
            pool = ConnectionPool(url, open=True, configure=self._configure, **self.options.pool_arguments())
        self._pool = pool
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

    def close(self) -> None:
        """Close the pool the store opened (a pool given to it is left open).

        Later operations raise ``StoreError("postgres: store", "the store is closed")``.
        """
        self._mark_closed()
        self._close_listener()
        if self._owns_pool:
            self._pool.close()

    def _run(self, plan: Plan[Any, Result]) -> Result:
        return run_plan(plan, self._perform)

    def _configure(self, connection: psycopg.Connection[Any]) -> None:
        """Set up a new pooled connection: timestamps in UTC; note the server's idle timeout."""
        cursor = connection.execute(CONFIGURE_SQL)
        cursor.nextset()
        self._idle.opened(connection, idle_timeout_seconds(cursor.fetchone()))

    def _perform(self, operation: Operation) -> Rows:
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
                    return connection.execute(operation.sql, operation.params).fetchall()
                with connection.transaction():
                    for statement in operation.statements:
                        cursor = connection.execute(statement.sql, statement.params)
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


class AsyncPostgresStore(AsyncPostgresFollowing, AsyncPlannedStore):
    """The asyncio twin of :class:`PostgresStore`: the same statements, plans and errors.

    Constructing it does no I/O: the pool is opened (and the schema migrated, with
    ``auto_migrate``, or else checked to hold no tables chronica-postgres did not create) on first
    use, inside the event loop that uses it; use one store per loop. The first operation raises
    what opening raises for :class:`PostgresStore`.
    Before opening its own pool it connects once directly, so that the first call fails at once
    with ``StoreError("postgres: open", ...)`` (psycopg's message) when the server refuses, does
    not answer within ``connect_timeout``, or the URL is malformed.

    Args:
        url: a libpq URL (see :class:`PostgresStore`); may be empty when ``pool`` is given.
        pool: an existing ``AsyncConnectionPool`` to use (opened by the caller, never closed here).
        options: as for :class:`PostgresStore`.

    Raises:
        chronica_core.InvalidOption: an option is unknown, malformed or out of its range.
    """

    plans: Plans
    backend_name = "postgres"

    def __init__(self, url: str = "", *, pool: AsyncConnectionPool | None = None, **options: Any) -> None:
        self._url, self.options, self.plans = _configured(url, pool, options)
        self._secrets_of = _connection_text(self._url, pool)
        self._owns_pool = pool is None
        self._pool = pool
        self._idle = IdleConnections(self.options.check_idle_after)
        self._ready = False
        self._opening: asyncio.Lock | None = None

    async def migrate(self) -> int:
        """Create or upgrade the tables under an advisory lock; return the schema version.

        Raises ``StoreError`` (``"postgres: open"`` when the server cannot be reached; as every
        operation does, once closed or from another event loop).
        """
        self._check_usable()
        async with self._opening_lock():
            await self._open_pool()
        return await run_plan_async(self.plans.migrate(), self._perform)

    async def close(self) -> None:
        """Close the pool the store opened, if it opened one (a pool given to it is left open).

        Later operations raise ``StoreError("postgres: async store", "the store is closed")``.
        Called from another event loop than the one the store ran in (or after that loop
        closed), it raises nothing: the pool's tasks and connections belong to that loop and
        cannot be awaited here, so the store only drops the pool, and each connection's socket is
        closed when Python frees it (the server ends the session then).
        """
        self._mark_closed()
        await self._close_listeners()
        if self._owns_pool and self._pool is not None:
            pool, self._pool, self._ready = self._pool, None, False
            if not self._bound_to_another_loop():
                await pool.close()

    async def _run(self, plan: Plan[Any, Result]) -> Result:
        if not self._ready:
            await self._open()
        return await run_plan_async(plan, self._perform)

    async def _open(self) -> None:
        """Open the pool in the running loop and migrate, once, however many tasks arrive together."""
        async with self._opening_lock():
            if not self._ready:
                await self._open_pool()
                plan = self.plans.migrate() if self.options.auto_migrate else self.plans.check()
                await run_plan_async(plan, self._perform)
                self._ready = True

    def _opening_lock(self) -> asyncio.Lock:
        self._opening = self._opening or asyncio.Lock()
        return self._opening

    async def _open_pool(self) -> None:
        """Check the server with one direct connection, then open the pool (the caller holds the lock)."""
        if self._pool is None:
            await _check_connection_async(self._url, self.options)
            pool = AsyncConnectionPool(
                self._url, open=False, configure=self._configure, **self.options.pool_arguments()
            )
            self._pool = pool
            await pool.open()

    async def _perform(self, operation: Operation) -> Rows:
        pool = self._pool
        if pool is None:
            raise StoreError("postgres: async store", "the store is closed")
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
                    cursor = await connection.execute(operation.sql, operation.params)
                    return await cursor.fetchall()
                async with connection.transaction():
                    for statement in operation.statements:
                        cursor = await connection.execute(statement.sql, statement.params)
                    return await cursor.fetchall()
        finally:
            self._idle.returned(connection)
            await pool.putconn(connection)

    async def _configure(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """Set up a new pooled connection: timestamps in UTC; note the server's idle timeout."""
        cursor = await connection.execute(CONFIGURE_SQL)
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
