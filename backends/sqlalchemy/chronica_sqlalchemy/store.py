"""The blocking and the asyncio stores: the operations of :class:`chronica_core.PlannedStore`.

Each store only says where a plan of :mod:`.plans` runs (:mod:`.executor`): on an ``Engine``'s
connection, on an ``AsyncEngine``'s through ``AsyncConnection.run_sync``, or on a worker thread.
Owners and validation are ``Chronicarius``'s job, not theirs.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool, SingletonThreadPool

from chronica_core.after_fork import renew_after_fork
from chronica_core.errors import StoreError
from chronica_core.loops import PerLoop
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.plans import Plan
from chronica_core.redaction import masked_url
from chronica_sqlalchemy import after_fork
from chronica_sqlalchemy.connections import watch_idle_connections
from chronica_sqlalchemy.engines import (
    blocking_watcher_engine,
    checked_content_limit,
    checked_schema,
    configure_sqlite,
    create_async_engines,
    create_engines,
    plan_connections,
    runs_on_worker_threads,
    url_and_options,
    url_text,
)
from chronica_sqlalchemy.executor import Connections, execute, execute_async
from chronica_sqlalchemy.follow import AsyncFollowing, SQLAlchemyFollowing
from chronica_sqlalchemy.plans import Plans
from chronica_sqlalchemy.schema import Tables
from chronica_sqlalchemy.shapes import AsyncShapedStore, ShapedStore

__all__ = [
    "AsyncSQLAlchemyStore",
    "AsyncThreadedSQLAlchemyStore",
    "SQLAlchemyStore",
    "open_async_sqlalchemy_store",
]

Result = TypeVar("Result")

_SQLITE_WORKERS = 2  # the threaded store's default on SQLite (see its ``workers``)
_DEFAULT_POOL_SIZE = 5  # SQLAlchemy's default pool_size: its default on a server pool of no limit

_log = logging.getLogger("chronica.sqlalchemy")


class _Store:
    """What every store here shares: the plans, and whether opening (migrating or checking) is due."""

    def __init__(
        self,
        engine: Engine,
        schema: str | None,
        auto_migrate: bool,
        owns_engine: bool,
        max_content_bytes: object,
        reads_in_autocommit: bool,
    ) -> None:
        schema = checked_schema(schema, engine.dialect.name)
        limit = checked_content_limit(max_content_bytes, engine.dialect.name)
        self._secrets_of = url_text(engine.url)
        if engine.dialect.name == "sqlite":
            configure_sqlite(engine)
        watch_idle_connections(engine)
        self.plans = Plans(Tables.build(schema), engine.dialect, schema, limit, reads_in_autocommit)
        self._auto_migrate = auto_migrate
        self._pending_open = True
        self._owns_engine = owns_engine
        renew_after_fork(self, after_fork.forget_parent)
        shown, pool = masked_url(self._secrets_of), type(engine.pool).__name__
        _log.debug("opened a %s on %s (%s)", type(self).__name__, shown, pool)

    def _log_closed(self) -> None:
        _log.debug("closed the %s on %s", type(self).__name__, masked_url(self._secrets_of))


def _dispose(engine: Engine, read_engine: Engine | None) -> None:
    engine.dispose()
    if read_engine is not None:
        read_engine.dispose()


class SQLAlchemyStore(ShapedStore, SQLAlchemyFollowing, PlannedStore, _Store):
    """A blocking, thread-safe, idempotent store on a SQLAlchemy ``Engine``.

    Args:
        engine: the engine to use (your own ``create_engine(...)``, say). A SQLite engine is
            given WAL mode, ``BEGIN IMMEDIATE`` for writes and a busy timeout (see
            :func:`chronica_sqlalchemy.engines.configure_sqlite`). Not disposed by the store.
        schema: the schema (database, on MariaDB/MySQL) holding the tables, created if missing;
            ``None`` for the connection's default. Not supported on SQLite.
        auto_migrate: create or upgrade the tables now (safe with many processes at once); with
            ``False`` only look (one query) that no tables it did not create are in the way.
        max_content_bytes: a lower limit on content than the database's own, in bytes of UTF-8;
            ``None`` keeps the database's.

    Raises:
        StoreError: the database could not be reached or migrated; ``"sqlalchemy: migrate"``
            (``"sqlalchemy: open"`` without ``auto_migrate``) when it holds ``chronica`` or
            ``acta`` tables chronica-sqlalchemy did not create: they are left untouched, and the
            message names them and what to do.
        InvalidOption: ``schema`` given for SQLite, or empty, or ``max_content_bytes`` not a whole
            number from 0 to the most the dialect could take (before anything is written).
    """

    plans: Plans
    backend_name = "sqlalchemy"

    engine: Engine
    """The engine the store writes (and, but on MariaDB/MySQL opened from a URL, reads) with. On a
    store opened from a ``postgresql+psycopg://`` URL its connections are in autocommit, so
    ``engine.begin()`` is no transaction there: for work of your own in one, use
    ``engine.execution_options(isolation_level="READ COMMITTED")``."""

    read_engine: Engine | None
    """MariaDB/MySQL, opened from a URL: the engine in autocommit the reads use (``None`` elsewhere)."""

    def __init__(
        self,
        engine: Engine,
        *,
        schema: str | None = None,
        auto_migrate: bool = True,
        max_content_bytes: int | None = None,
        _owns_engine: bool = False,
        _read_engine: Engine | None = None,
    ) -> None:
        reads = _read_engine is not None
        _Store.__init__(self, engine, schema, auto_migrate, _owns_engine, max_content_bytes, reads)
        self.engine, self.read_engine = engine, _read_engine
        self._connections = plan_connections(engine, _read_engine, made_here=_owns_engine)
        if auto_migrate:
            self.migrate()
        else:
            self._run_if_open(self.plans.check())
            self._pending_open = False

    @classmethod
    def open(cls, url: str | URL, **options: Any) -> SQLAlchemyStore:
        """Open a store on ``url`` (any URL SQLAlchemy parses; see :mod:`chronica_sqlalchemy.engines`).

        Args:
            url: e.g. ``sqlite:///chronica.db``, ``mariadb+pymysql://root@127.0.0.1/test``. A
                ``schema`` query parameter is the ``schema`` option (which wins when given too).
            options: see :class:`chronica_sqlalchemy.engines.EngineOptions`.

        Raises:
            InvalidOption: an unknown option (the reason lists the known ones), a malformed or
                out-of-range value, or one the dialect or driver cannot use; before any engine
                is created or anything written.
            StoreError: a URL SQLAlchemy cannot parse or use, or the database could not be
                reached or migrated.
            ModuleNotFoundError: the dialect's driver is not installed.
        """
        url, parsed = url_and_options(url, options)
        engine, read_engine = create_engines(url, parsed)
        try:
            return cls(engine, _owns_engine=True, _read_engine=read_engine, **parsed.store_arguments())
        except BaseException:
            _dispose(engine, read_engine)
            raise

    def migrate(self) -> None:
        """Create the tables, or bring them to the current schema version. Raises ``StoreError``."""
        self._run_if_open(self.plans.migrate())
        self._pending_open = False

    def close(self) -> None:
        """Dispose of the engines' connections if the store created them.

        Later operations raise ``StoreError("sqlalchemy: store", "the store is closed")``.
        """
        self._mark_closed()
        self._log_closed()
        self._close_watcher()
        if self._owns_engine:
            _dispose(self.engine, self.read_engine)

    def _run(self, plan: Plan[Any, Result]) -> Result:
        return execute(self._connections, plan)


class _AsyncStore(AsyncPlannedStore, _Store):
    """What both asyncio stores share: migrate (or check) before the first operation, then run each plan."""

    plans: Plans
    backend_name = "sqlalchemy"

    @abstractmethod
    async def _perform(self, plan: Plan[Any, Result]) -> Result:
        """Run ``plan`` without blocking the event loop."""

    async def migrate(self) -> None:
        """See :meth:`SQLAlchemyStore.migrate`; refused once closed (``StoreError``)."""
        self._check_open()
        await self._perform(self.plans.migrate())
        self._pending_open = False

    async def _run(self, plan: Plan[Any, Result]) -> Result:
        if self._pending_open:
            if self._auto_migrate:
                await self.migrate()
            else:
                await self._perform(self.plans.check())
                self._pending_open = False
        self._check_open(plan)  # closed while it waited for the migration?
        return await self._perform(plan)


class AsyncSQLAlchemyStore(AsyncShapedStore, AsyncFollowing, _AsyncStore):
    """The asyncio twin of :class:`SQLAlchemyStore`, on a SQLAlchemy ``AsyncEngine``.

    It runs the same plans through ``AsyncConnection.run_sync``, on the asyncio drivers (asyncmy,
    psycopg's async API, aiosqlite), so waiting on the database never blocks the event loop.
    Constructing it does no I/O; it connects, and migrates when ``auto_migrate``, on first use.
    ``open_async_store(url)`` gives this store for MariaDB/MySQL, PostgreSQL and
    ``sqlite+aiosqlite://``; for other SQLite URLs :class:`AsyncThreadedSQLAlchemyStore`.

    Opened from a URL, one store serves every event loop of the process: each loop gets engines
    of its own (loops one after another take turns with :attr:`engine`), disposed of when that
    loop closes, and every one at :meth:`close` (see :class:`chronica_core.loops.PerLoop`). An
    engine given to the constructor serves every loop: give it a ``NullPool`` then.

    On SQLite an operation runs to its end even when the task awaiting it is cancelled (the task
    stops waiting at once; a write may still land, so retry it with the same idempotency key):
    aiosqlite interrupted between ``BEGIN IMMEDIATE`` and ``COMMIT`` can keep the write lock.

    Args:
        engine: the ``AsyncEngine`` to use; not disposed on close unless the store created it.
        schema: as for :class:`SQLAlchemyStore`.
        auto_migrate: create or upgrade the tables before the first operation (without it, the
            first operation first looks that no tables it did not create are in the way).
        max_content_bytes: as for :class:`SQLAlchemyStore`.

    Raises:
        InvalidOption: ``schema`` empty or given for SQLite, or ``max_content_bytes`` out of range.
    """

    plans: Plans
    engine: AsyncEngine
    read_engine: AsyncEngine | None
    """MariaDB/MySQL, opened from a URL: the engine in autocommit the reads use; ``None`` elsewhere."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        schema: str | None = None,
        auto_migrate: bool = True,
        max_content_bytes: int | None = None,
        _owns_engine: bool = False,
        _engines_per_loop: Callable[[], tuple[AsyncEngine, AsyncEngine | None]] | None = None,
        _read_engine: AsyncEngine | None = None,
    ) -> None:
        reads = _read_engine is not None
        _Store.__init__(
            self, engine.sync_engine, schema, auto_migrate, _owns_engine, max_content_bytes, reads
        )
        self.engine, self.read_engine = engine, _read_engine
        self._runs_to_the_end = engine.dialect.name == "sqlite"
        self._running: set[asyncio.Future[Any]] = set()  # SQLite: operations that run to their end
        self._engines_per_loop = _engines_per_loop
        self._engine_lent = False  # whether a loop uses self.engine now (under _lending)
        self._lending = threading.Lock()
        self._loops: PerLoop[Connections[AsyncEngine]] = PerLoop(
            self._where, self._open_engine, self._close_engine, self._drop_engine
        )

    @classmethod
    def open(cls, url: str | URL, **options: Any) -> AsyncSQLAlchemyStore:
        """Open an asyncio store on ``url`` without connecting; see :meth:`SQLAlchemyStore.open`.

        SQLite URLs get ``aiosqlite`` here, whatever driver they name. Raises ``InvalidOption``
        and ``StoreError`` (a bad URL) before any engine is created; errors reaching the database
        come from the first operation.
        """
        url, parsed = url_and_options(url, options)
        engines = functools.partial(create_async_engines, url, parsed)
        engine, read_engine = engines()
        arguments = parsed.store_arguments()
        return cls(
            engine, _owns_engine=True, _engines_per_loop=engines, _read_engine=read_engine, **arguments
        )

    async def close(self) -> None:
        """Dispose of the engines' connections, one pair per event loop, if the store made them.

        On SQLite it first lets the operations still running finish. Later operations raise
        ``StoreError("sqlalchemy: async store", "the store is closed")``. Raises nothing.
        """
        self._mark_closed()
        self._log_closed()
        self._close_watcher()
        await self._loops.close()
        if self._owns_engine:
            await self.engine.dispose()  # disposed of by its last loop already, or never used
            if self.read_engine is not None:
                await self.read_engine.dispose()

    def _watcher_engine(self) -> Engine | None:
        """A blocking engine of the watcher's own on the store's URL (see :mod:`.follow`)."""
        return blocking_watcher_engine(self.engine.url)

    async def _open_engine(self) -> Connections[AsyncEngine]:
        """The running loop's engines: the store's own when no other loop uses them, else new ones."""
        engine, reads = self.engine, self.read_engine
        if self._engines_per_loop is not None:
            with self._lending:
                lent, self._engine_lent = self._engine_lent, True
            if lent:  # another loop uses the store's own
                engine, reads = self._engines_per_loop()
        return plan_connections(engine, reads, made_here=self._owns_engine)

    def _returned(self, connections: Connections[AsyncEngine]) -> None:
        if connections.engine is self.engine:
            with self._lending:
                self._engine_lent = False

    async def _close_engine(self, connections: Connections[AsyncEngine]) -> None:
        """In its own loop: let that loop's running SQLite operations end, then dispose."""
        loop = asyncio.get_running_loop()
        while running := {future for future in self._running if future.get_loop() is loop}:
            await asyncio.wait(running)  # asyncio.wait: cancelling close leaves them running
        if self._owns_engine:
            await connections.engine.dispose()
            if connections.reads is not None:
                await connections.reads.dispose()
        self._returned(connections)

    def _drop_engine(self, connections: Connections[AsyncEngine]) -> None:
        """Its loop is not running: drop the pools without closing their connections (no awaiting)."""
        if self._owns_engine:
            connections.engine.sync_engine.dispose(close=False)
            if connections.reads is not None:
                connections.reads.sync_engine.dispose(close=False)
        self._returned(connections)

    async def _perform(self, plan: Plan[Any, Result]) -> Result:
        try:
            connections = await self._loops.get()
        except BaseException:
            plan.close()
            raise
        if not self._runs_to_the_end:
            return await execute_async(connections, plan)
        # the store's own task, not its caller's: it ends with the operation, whoever waits
        running = asyncio.create_task(
            execute_async(connections, plan), name="chronica-shared-sqlite-operation"
        )
        self._running.add(running)
        running.add_done_callback(self._running.discard)
        running.add_done_callback(_retrieved)  # a cancelled caller never reads its outcome
        return await asyncio.shield(running)


def _retrieved(operation: asyncio.Future[Any]) -> None:
    """Mark the outcome of a store's own task as read, so asyncio reports no error nobody awaited.

    The caller that awaits the operation still gets its result or its error.
    """
    if not operation.cancelled():
        operation.exception()


class AsyncThreadedSQLAlchemyStore(AsyncShapedStore, AsyncFollowing, _AsyncStore):
    """The asyncio store on a blocking ``Engine``: each operation runs whole on a worker thread.

    What ``open_async_store("sqlite:///...")`` gives: SQLite has no server to wait on, so every
    asyncio SQLite driver is a thread making the blocking calls; here the blocking store's plan
    runs on one of ``workers`` threads (``loop.run_in_executor``), one hop per operation. Its
    connections are the worker threads', so it serves every event loop of the process. A task
    cancelled while its operation runs stops waiting, but the operation finishes on its thread
    (a write may still land: retry it with the same idempotency key); one cancelled before it
    started never runs.

    Args:
        engine: a blocking engine (SQLite is given :func:`configure_sqlite`); not disposed on
            close unless the store created it.
        schema: as for :class:`SQLAlchemyStore` (not on SQLite).
        auto_migrate: create or upgrade the tables before the first operation (without it, the
            first operation first looks that no tables it did not create are in the way).
        max_content_bytes: as for :class:`SQLAlchemyStore`.
        workers: how many operations may run at once. SQLite takes one writer at a time: two let
            a read go on while a write waits for the lock (the default there; 1 for in-memory
            SQLite or a pool of one connection). Elsewhere: the pool's size (no limit: 5). Any
            pool but a ``QueuePool`` gets 1 by default, and a ``SingletonThreadPool`` only 1.

    Raises:
        InvalidOption: ``schema`` empty or given for SQLite, or ``max_content_bytes`` out of range.
        ValueError: ``workers`` is below 1, or above 1 on a ``SingletonThreadPool``.
    """

    plans: Plans
    engine: Engine
    workers: int
    """How many operations may run at once (worker threads)."""

    def __init__(
        self,
        engine: Engine,
        *,
        schema: str | None = None,
        auto_migrate: bool = True,
        workers: int | None = None,
        max_content_bytes: int | None = None,
        _owns_engine: bool = False,
        _read_engine: Engine | None = None,
    ) -> None:
        reads = _read_engine is not None
        _Store.__init__(self, engine, schema, auto_migrate, _owns_engine, max_content_bytes, reads)
        self.engine, self.read_engine = engine, _read_engine
        self._connections = plan_connections(engine, _read_engine, made_here=_owns_engine)
        self.workers = _default_workers(engine) if workers is None else workers
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        if self.workers > 1 and isinstance(engine.pool, SingletonThreadPool):
            raise ValueError(
                f"workers must be 1 on an engine whose pool gives each thread its own connection "
                f"(SingletonThreadPool: an in-memory SQLite database per thread), got {self.workers}"
            )
        self._executor = ThreadPoolExecutor(
            max_workers=self.workers, thread_name_prefix="chronica-sqlalchemy"
        )

    @classmethod
    def open(cls, url: str | URL, **options: Any) -> AsyncThreadedSQLAlchemyStore:
        """Open the store on ``url`` with its blocking driver, without connecting.

        Raises as :meth:`SQLAlchemyStore.open` does; errors reaching the database come from the
        first operation.
        """
        url, parsed = url_and_options(url, options)
        engine, read_engine = create_engines(url, parsed)
        return cls(engine, _owns_engine=True, _read_engine=read_engine, **parsed.store_arguments())

    async def close(self) -> None:
        """Let the operations already submitted finish, then dispose of the engine if the store made it.

        It waits off the event loop; calls after it raise ``StoreError``.
        """
        self._mark_closed()
        self._log_closed()
        self._close_watcher()
        await asyncio.to_thread(self._close)

    def _watcher_engine(self) -> Engine | None:
        """The store's own engine: the watcher holds one of its pooled connections while it runs."""
        return self.engine

    def _close(self) -> None:
        self._executor.shutdown(wait=True)
        if self._owns_engine:
            _dispose(self.engine, self.read_engine)

    async def _perform(self, plan: Plan[Any, Result]) -> Result:
        try:
            running = asyncio.get_running_loop().run_in_executor(
                self._executor, execute, self._connections, plan
            )
        except RuntimeError as error:  # the executor is shut down
            plan.close()
            raise StoreError(f"{self.backend_name}: async store", "the store is closed") from error
        return await running


def _default_workers(engine: Engine) -> int:
    """The default ``workers`` of :class:`AsyncThreadedSQLAlchemyStore` on ``engine``."""
    if not isinstance(engine.pool, QueuePool):
        return 1
    size = engine.pool.size()  # 0: no limit
    if engine.dialect.name == "sqlite":
        return min(size, _SQLITE_WORKERS) if size else _SQLITE_WORKERS
    return size or _DEFAULT_POOL_SIZE


def open_async_sqlalchemy_store(
    url: str | URL, **options: Any
) -> AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore:
    """Open the asyncio store ``open_async_store(url)`` gives for ``url``, without connecting.

    :class:`AsyncThreadedSQLAlchemyStore` on SQLite URLs that name no asyncio driver, else
    :class:`AsyncSQLAlchemyStore`. Raises ``InvalidOption`` and ``StoreError`` as
    :meth:`SQLAlchemyStore.open` does; ``ModuleNotFoundError`` when the driver is not installed.
    """
    if runs_on_worker_threads(url):
        return AsyncThreadedSQLAlchemyStore.open(url, **options)
    return AsyncSQLAlchemyStore.open(url, **options)
