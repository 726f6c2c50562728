"""The blocking and the asyncio SQLAlchemy stores: thin executors of the plans in :mod:`.plans`.

All keep the store contract (``chronica_core.store``) on every dialect, checked by
``chronica-conformance``: acta ordered by a
per-chronicum ``seq`` the store assigns, "missing" told apart from "empty", the context window in
one query with the filters before the limit, idempotency through a unique constraint and a
read-back. Neither checks owners nor validates: that is ``Chronicarius``'s job. The operations
themselves are those of :class:`chronica_core.PlannedStore` and
:class:`chronica_core.AsyncPlannedStore`; each store only says how it runs a plan: on an
``Engine``'s connection, through SQLAlchemy's greenlet bridge on an ``AsyncEngine``, or on a
worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from abc import abstractmethod
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool, SingletonThreadPool
from sqlalchemy.util import greenlet_spawn

from chronica_core.errors import StoreError
from chronica_core.loops import PerLoop
from chronica_core.model import ActaQuery, Actum
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.plans import Plan
from chronica_core.redaction import masked_url, redact_error
from chronica_sqlalchemy.connections import watch_idle_connections
from chronica_sqlalchemy.engines import (
    EngineOptions,
    checked_content_limit,
    checked_schema,
    configure_sqlite,
    create_async_read_engine,
    create_async_store_engine,
    create_read_engine,
    create_store_engine,
    runs_on_worker_threads,
    url_and_options,
    url_text,
)
from chronica_sqlalchemy.follow import AsyncFollowing, SQLAlchemyFollowing, blocking_watcher_engine
from chronica_sqlalchemy.held_reads import HeldReads
from chronica_sqlalchemy.plans import Plans, execute_plan
from chronica_sqlalchemy.schema import Tables
from chronica_sqlalchemy.sqlite_writers import database_file, on_worker_thread

__all__ = [
    "AsyncSQLAlchemyStore",
    "AsyncThreadedSQLAlchemyStore",
    "SQLAlchemyStore",
    "open_async_sqlalchemy_store",
]

Result = TypeVar("Result")

_SQLITE_WORKERS = 2
"""Default worker threads of :class:`AsyncThreadedSQLAlchemyStore` on SQLite (see its ``workers``)."""

_DEFAULT_POOL_SIZE = 5
"""SQLAlchemy's default ``pool_size``: the threaded store's workers on a server pool of no limit."""

_log = logging.getLogger("chronica.sqlalchemy")


class _LoopEngines(NamedTuple):
    """The engines one event loop's operations use: the store's and, on MariaDB/MySQL, the reads'."""

    engine: AsyncEngine
    reads: AsyncEngine | None


def _async_engines(url: str, options: EngineOptions) -> _LoopEngines:
    """A new pair of engines for ``url``, as :meth:`AsyncSQLAlchemyStore.open` makes them."""
    engine = create_async_store_engine(url, options)
    try:
        return _LoopEngines(engine, create_async_read_engine(url, options))
    except BaseException:
        engine.sync_engine.dispose(close=False)  # nothing connected yet
        raise


class _Store:
    """What every store here shares: the engine's plans, and whether opening is yet to be done.

    Opening migrates the tables (``auto_migrate``) or checks they are this package's own
    (``Plans.check``). ``read_engine``: MariaDB/MySQL's engine in autocommit for the reads, when
    the store made one (see :func:`chronica_sqlalchemy.engines.reads_in_autocommit`).
    """

    def __init__(
        self,
        engine: Engine,
        schema: str | None,
        auto_migrate: bool,
        owns_engine: bool,
        max_content_bytes: object = None,
        read_engine: Engine | None = None,
    ) -> None:
        schema = checked_schema(schema, engine.dialect.name)
        limit = checked_content_limit(max_content_bytes, engine.dialect.name)
        self._secrets_of = url_text(engine.url)
        if engine.dialect.name == "sqlite":
            configure_sqlite(engine)
        watch_idle_connections(engine)
        reads = read_engine is not None
        self.plans = Plans(Tables.build(schema), engine.dialect, schema, limit, reads_in_autocommit=reads)
        self._auto_migrate = auto_migrate
        self._pending_open = True
        self._owns_engine = owns_engine
        _log.debug("opened a %s on %s (%s)", type(self).__name__, self._shown(), type(engine.pool).__name__)

    def _shown(self) -> str:
        """The store's URL as it may be shown: its password masked."""
        return masked_url(self._secrets_of)

    def _log_closed(self) -> None:
        _log.debug("closed the %s on %s", type(self).__name__, self._shown())


class SQLAlchemyStore(SQLAlchemyFollowing, PlannedStore, _Store):
    """A blocking, thread-safe, idempotent store on a SQLAlchemy ``Engine``.

    Args:
        engine: the engine to use (your own ``create_engine(...)``, say). A SQLite engine is
            given WAL mode, ``BEGIN IMMEDIATE`` for writes and a busy timeout (see
            :func:`chronica_sqlalchemy.engines.configure_sqlite`) unless it already has them.
            The store does not dispose an engine it was given.
        schema: the schema (database, on MariaDB/MySQL) holding the tables, created if missing;
            ``None`` for the connection's default. Not supported on SQLite.
        auto_migrate: create or upgrade the tables now (safe with many processes at once); with
            ``False`` only look (one query) that no tables it did not create are in the way.
        max_content_bytes: a lower limit on content than the database's own, in bytes of UTF-8
            (see :meth:`chronica_sqlalchemy.plans.Plans.content_limit`); ``None`` keeps the database's.

    Raises:
        StoreError: the database could not be reached or migrated; ``"sqlalchemy: migrate"``
            (``"sqlalchemy: open"`` without ``auto_migrate``) when it holds ``chronica`` or
            ``acta`` tables chronica-sqlalchemy did not create (another application's, or
            chronica-postgres's): they are left untouched, and the message names them and what to do.
        InvalidOption: ``schema`` was given for SQLite, or is empty, or ``max_content_bytes`` is
            not a whole number from 0 to the most the dialect could take (checked before anything
            is written).
    """

    plans: Plans
    backend_name = "sqlalchemy"

    engine: Engine
    """The engine the store writes (and, but on MariaDB/MySQL opened from a URL, reads) with. On a
    store opened from a ``postgresql://`` URL its connections are lent in autocommit, so
    ``engine.begin()`` is no transaction there: for work of your own in one, use
    ``engine.execution_options(isolation_level="READ COMMITTED")``."""

    read_engine: Engine | None
    """MariaDB/MySQL, opened from a URL: the engine in autocommit the reads use (``None``
    elsewhere, and on an engine you gave: that one serves every operation)."""

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
        _Store.__init__(self, engine, schema, auto_migrate, _owns_engine, max_content_bytes, _read_engine)
        self.engine = engine
        self.read_engine = _read_engine
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
                ``schema`` query parameter (``...?schema=app``) is the ``schema`` option, which
                wins over it when given too (on SQLite it is refused, as the option is).
            options: see :class:`chronica_sqlalchemy.engines.EngineOptions`.

        Raises:
            InvalidOption: an unknown option (the reason lists the known ones), a malformed or
                out-of-range value (the reason gives the bounds), an empty ``schema``, a ``schema``
                or ``operation_timeout`` on SQLite, or ``operation_timeout`` with a driver that
                cannot honour it; raised before any engine is created or anything written.
            StoreError: a URL SQLAlchemy cannot parse or use, or the database could not be
                reached or migrated.
            ModuleNotFoundError: the dialect's driver is not installed.
        """
        url, parsed = url_and_options(url, options)
        engine = create_store_engine(url, parsed)
        try:
            read_engine = create_read_engine(url, parsed)
        except BaseException:
            engine.dispose()
            raise
        try:
            return cls(engine, _owns_engine=True, _read_engine=read_engine, **parsed.store_arguments())
        except BaseException:
            engine.dispose()
            if read_engine is not None:
                read_engine.dispose()
            raise

    def migrate(self) -> None:
        """Create the tables, or bring them to the current schema version. Raises ``StoreError``."""
        self._run_if_open(self.plans.migrate())
        self._pending_open = False

    def close(self) -> None:
        """Dispose of the engine's connections (the read engine's too) if the store created them.

        Later operations raise ``StoreError("sqlalchemy: store", "the store is closed")``.
        """
        self._mark_closed()
        self._log_closed()
        self._close_watcher()
        if self._owns_engine:
            self.engine.dispose()
            if self.read_engine is not None:
                self.read_engine.dispose()

    def _run(self, plan: Plan[Any, Result]) -> Result:
        return execute_plan(self.engine, plan, self.read_engine)


class _AsyncStore(AsyncPlannedStore, _Store):
    """What both asyncio stores share: migrate before the first operation, then run each plan.

    A subclass says how a plan is performed without blocking the event loop (:meth:`_perform`).
    """

    plans: Plans
    backend_name = "sqlalchemy"

    @abstractmethod
    async def _perform(self, plan: Plan[Any, Result]) -> Result:
        """Run :func:`execute_plan` for ``plan`` on the store's blocking engine, off the event loop."""

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


class AsyncSQLAlchemyStore(AsyncFollowing, _AsyncStore):
    """The asyncio twin of :class:`SQLAlchemyStore`, on a SQLAlchemy ``AsyncEngine``.

    It runs the very same plans, through SQLAlchemy's greenlet bridge (the mechanism its
    ``AsyncConnection`` uses): the drivers are asyncio ones (asyncmy, psycopg's async API,
    aiosqlite), so waiting on the database never blocks the event loop. Constructing it does no
    I/O; it connects, and migrates when ``auto_migrate``, on first use.
    ``open_async_store(url)`` gives this store for MariaDB/MySQL, PostgreSQL and
    ``sqlite+aiosqlite://``; for other SQLite URLs it gives :class:`AsyncThreadedSQLAlchemyStore`.

    Opened from a URL (:meth:`open`), one store serves every event loop of the process, one after
    another (``asyncio.run()`` per request) and at once (a loop per thread): each loop gets an
    engine of its own on the loop's first operation, so that no
    pooled connection crosses loops (loops one after another take turns with :attr:`engine`,
    disposed of between them). A loop's engine is disposed of when that loop closes
    (``asyncio.run()`` and ``loop.shutdown_asyncgens()`` close it, in the loop), and every one at
    :meth:`close` (see :class:`chronica_core.loops.PerLoop` for a loop closed otherwise, or
    running in another thread). The tables are migrated (or checked) once per store. An engine
    given to the constructor is used as it is in every loop: its pool's connections belong to the
    loop that opened them, so give it a ``NullPool`` to use it from several loops, or give a URL.

    On SQLite, an operation runs to its end even when the task awaiting it is cancelled (the task
    stops waiting at once; a write may still land, so retry it with the same idempotency key):
    aiosqlite interrupted between ``BEGIN IMMEDIATE`` and ``COMMIT`` can keep SQLite's write
    lock until the process exits, locking out every other writer.

    Args:
        engine: the ``AsyncEngine`` to use (``create_async_engine(...)``); not disposed on close
            unless the store created it.
        schema: as for :class:`SQLAlchemyStore`.
        auto_migrate: create or upgrade the tables before the first operation (without it, the
            first operation first looks that no tables it did not create are in the way).
        max_content_bytes: as for :class:`SQLAlchemyStore`.

    Raises:
        InvalidOption: ``schema`` is empty, or given for SQLite, or ``max_content_bytes`` is out
            of range (other errors come from the operations).
    """

    read_engine: AsyncEngine | None
    """MariaDB/MySQL, opened from a URL: the engine in autocommit the reads use, beside
    :attr:`engine` (each other loop gets a pair of its own); ``None`` elsewhere."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        schema: str | None = None,
        auto_migrate: bool = True,
        max_content_bytes: int | None = None,
        _owns_engine: bool = False,
        _engine_per_loop: Callable[[], _LoopEngines] | None = None,
        _read_engine: AsyncEngine | None = None,
    ) -> None:
        reads = None if _read_engine is None else _read_engine.sync_engine
        _Store.__init__(
            self, engine.sync_engine, schema, auto_migrate, _owns_engine, max_content_bytes, reads
        )
        self.engine = engine
        self.read_engine = _read_engine
        self._runs_to_the_end = engine.dialect.name == "sqlite"
        self._running: set[asyncio.Future[Any]] = set()  # operations that run to their end
        self._engine_per_loop = _engine_per_loop
        self._engine_lent = False  # whether a loop uses self.engine now (under _lending)
        self._lending = threading.Lock()
        self._engines: PerLoop[_LoopEngines] = PerLoop(
            self._where, self._open_engine, self._close_engine, self._drop_engine
        )

    @classmethod
    def open(cls, url: str | URL, **options: Any) -> AsyncSQLAlchemyStore:
        """Open an asyncio store on ``url`` without connecting; see :meth:`SQLAlchemyStore.open`.

        SQLite URLs get ``aiosqlite`` here, whatever driver they name. Each event loop that uses
        the store gets its own engine, made from ``url`` and ``options`` like this one.

        Raises ``InvalidOption`` and ``StoreError`` (a bad URL) as :meth:`SQLAlchemyStore.open` does,
        before any engine is created; errors reaching the database come from the first operation.
        """
        url, parsed = url_and_options(url, options)
        engine, read_engine = _async_engines(url, parsed)
        return cls(
            engine,
            _owns_engine=True,
            _engine_per_loop=functools.partial(_async_engines, url, parsed),
            _read_engine=read_engine,
            **parsed.store_arguments(),
        )

    async def close(self) -> None:
        """Dispose of the engines' connections, one engine per event loop, if the store made them.

        On SQLite it first lets the operations still running finish (those whose tasks were
        cancelled included). Later operations raise
        ``StoreError("sqlalchemy: async store", "the store is closed")``. The running loop's
        engine is disposed of here, one of a loop running in another thread in that loop, and one
        of a loop that is not running (closed already, or idle) only drops its pool, its
        connections' sockets closed when Python frees them. Raises nothing.
        """
        self._mark_closed()
        self._log_closed()
        self._close_watcher()
        await self._engines.close()
        if self._owns_engine:
            await self.engine.dispose()  # disposed of by its last loop already, or never used
            if self.read_engine is not None:
                await self.read_engine.dispose()

    def _watcher_engine(self) -> Engine | None:
        """A blocking engine of the watcher's own on the store's URL (see :mod:`.follow`)."""
        return blocking_watcher_engine(self.engine.url)

    async def _open_engine(self) -> _LoopEngines:
        """The running loop's engines: the store's own when no other loop uses them, else new ones.

        The store's own engines (:attr:`engine`, and :attr:`read_engine` beside it) go to one
        loop at a time (disposed of between them, as SQLAlchemy asks of an engine used in several
        loops), so that loops one after another use them and their event listeners; a loop
        running meanwhile gets new ones from the URL and options. A given engine serves every loop.
        """
        own = _LoopEngines(self.engine, self.read_engine)
        if self._engine_per_loop is None:
            return own
        with self._lending:
            if not self._engine_lent:
                self._engine_lent = True
                return own
        return self._engine_per_loop()

    def _returned(self, engines: _LoopEngines) -> None:
        """``engines``' loop is done with them: the store's own may go to the next loop."""
        if engines.engine is self.engine:
            with self._lending:
                self._engine_lent = False

    async def _close_engine(self, engines: _LoopEngines) -> None:
        """In its own loop: let that loop's unfinished SQLite operations end, then dispose."""
        loop = asyncio.get_running_loop()
        while running := {future for future in self._running if future.get_loop() is loop}:
            await asyncio.wait(running)  # asyncio.wait: cancelling close leaves them running
        if self._owns_engine:
            await engines.engine.dispose()
            if engines.reads is not None:
                await engines.reads.dispose()
        self._returned(engines)

    def _drop_engine(self, engines: _LoopEngines) -> None:
        """Its loop is not running: drop the pools without closing their connections (no awaiting)."""
        if self._owns_engine:
            engines.engine.sync_engine.dispose(close=False)
            if engines.reads is not None:
                engines.reads.sync_engine.dispose(close=False)
        self._returned(engines)

    async def _perform(self, plan: Plan[Any, Result]) -> Result:
        try:
            engine, reads = await self._engines.get()
        except BaseException:
            plan.close()
            raise
        performing: Coroutine[Any, Any, Result] = greenlet_spawn(
            execute_plan, engine.sync_engine, plan, None if reads is None else reads.sync_engine
        )
        if not self._runs_to_the_end:
            return await performing
        running = asyncio.ensure_future(performing)
        self._running.add(running)
        running.add_done_callback(self._running.discard)
        return await asyncio.shield(running)


class AsyncThreadedSQLAlchemyStore(AsyncFollowing, _AsyncStore):
    """The asyncio store on a blocking ``Engine``: each operation runs whole on a worker thread.

    What ``open_async_store("sqlite:///...")`` gives. SQLite has no server to wait on, so every
    asyncio SQLite driver is a thread making the blocking calls; aiosqlite under SQLAlchemy's
    asyncio bridge crosses between the event loop and that thread about four times per statement.
    This store crosses once per operation: the blocking store's plan (the same statements, row
    conversion and errors) runs on one of ``workers`` threads of its own
    (``concurrent.futures.ThreadPoolExecutor``) while the event loop goes on. Its connections are
    the worker threads', so it serves every event loop of the process, one after another and at
    once.

    A task cancelled while its operation runs stops waiting, but the operation finishes on its
    thread (a write may still land; retry it with the same idempotency key).

    Args:
        engine: a blocking engine (SQLite is given :func:`configure_sqlite`); not disposed on
            close unless the store created it.
        schema: as for :class:`SQLAlchemyStore` (not on SQLite).
        auto_migrate: create or upgrade the tables before the first operation (without it, the
            first operation first looks that no tables it did not create are in the way).
        max_content_bytes: as for :class:`SQLAlchemyStore`.
        workers: how many operations may run at once. Default on SQLite: 2, or 1 for in-memory
            SQLite or a pool of one connection (a pool of size 0, "no limit", counts as 2).
            SQLite takes one writer at a time: two workers let a read go on while a write waits
            for the lock, and more only wait for that lock holding connections (more measured
            no faster: 40 tasks writing took 1.16–1.32× the time of 40 threads with 5 workers and
            1.04–1.38× with 2, on a noisy 2-CPU machine). Elsewhere: the engine pool's size (no
            limit: 5). Any pool but a ``QueuePool`` gets 1 by default, and a
            ``SingletonThreadPool`` (one connection a thread: SQLAlchemy's default for in-memory
            SQLite) only 1.

    Raises:
        InvalidOption: ``schema`` is empty, or given for SQLite, or ``max_content_bytes`` is out
            of range (other errors come from the operations).
        ValueError: ``workers`` is below 1, or above 1 on a ``SingletonThreadPool``.
    """

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
        _Store.__init__(self, engine, schema, auto_migrate, _owns_engine, max_content_bytes, _read_engine)
        self.engine = engine
        self.read_engine = _read_engine
        if workers is None:
            workers = _default_workers(engine)
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if workers > 1 and isinstance(engine.pool, SingletonThreadPool):
            raise ValueError(
                f"workers must be 1 on an engine whose pool gives each thread its own connection "
                f"(SingletonThreadPool: an in-memory SQLite database per thread), got {workers}"
            )
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="chronica-sqlalchemy", initializer=on_worker_thread
        )
        self._held_reads = HeldReads(engine) if _keeps_read_connections(engine, workers) else None

    @classmethod
    def open(cls, url: str | URL, **options: Any) -> AsyncThreadedSQLAlchemyStore:
        """Open the store on ``url`` with its blocking driver, without connecting.

        Raises ``InvalidOption`` and ``StoreError`` (a bad URL) as :meth:`SQLAlchemyStore.open`
        does; errors reaching the database come from the first operation.
        """
        url, parsed = url_and_options(url, options)
        engine = create_store_engine(url, parsed)
        try:
            read_engine = create_read_engine(url, parsed)
        except BaseException:
            engine.dispose()
            raise
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
        if self._held_reads is not None:
            self._held_reads.close()
        if self._owns_engine:
            self.engine.dispose()
            if self.read_engine is not None:
                self.read_engine.dispose()

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`chronica_core.Store.acta`; on SQLite, on its worker thread's kept connection.

        A context window SQLite's driver reads by itself runs on the connection the worker thread
        keeps for such reads (:mod:`chronica_sqlalchemy.held_reads`): the same plan, the same
        errors, one thread hop. Before the store has opened (migrated) and on other engines, it
        runs as every other operation.
        """
        held = self._held_reads
        if held is None or self._pending_open or not self.plans.reads_on_driver(query):
            return await super().acta(chronicum_id, query)
        plan = self.plans.acta(chronicum_id, query)
        self._check_open(plan)
        try:
            return await self._submit(held.run, plan)
        except BaseException as error:
            redact_error(error, self._secrets_of)
            raise

    async def _perform(self, plan: Plan[Any, Result]) -> Result:
        return await self._submit(functools.partial(execute_plan, self.engine, reads=self.read_engine), plan)

    async def _submit(self, run: Callable[[Plan[Any, Result]], Result], plan: Plan[Any, Result]) -> Result:
        """``run(plan)`` on a worker thread; ``StoreError`` (the plan closed) once the store is closed.

        The worker hands the outcome straight to an asyncio future of the running loop (see
        :func:`_answer`), not through the executor's own future chained to one.
        """
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Result] = loop.create_future()
        try:
            self._executor.submit(_answer, loop, answer, run, plan)
        except RuntimeError as error:  # the executor is shut down
            plan.close()
            raise StoreError(f"{self.backend_name}: async store", "the store is closed") from error
        return await answer


def _answer(
    loop: asyncio.AbstractEventLoop,
    answer: asyncio.Future[Result],
    run: Callable[[Plan[Any, Result]], Result],
    plan: Plan[Any, Result],
) -> None:
    """On a worker thread: ``run(plan)``, its result or error set on ``answer`` in ``loop``.

    An operation whose caller stopped waiting before it started (its task cancelled) is not run
    (its plan is closed); one already running finishes. Nothing is set once ``loop`` is closed.
    """
    if answer.cancelled():
        plan.close()
        return
    try:
        outcome = run(plan)
    except BaseException as error:  # noqa: BLE001 - handed to the awaiting task
        _settle(loop, answer, None, error)
        return
    _settle(loop, answer, outcome, None)


def _settle(
    loop: asyncio.AbstractEventLoop, answer: asyncio.Future[Any], outcome: Any, error: BaseException | None
) -> None:
    def settle() -> None:
        if answer.cancelled():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(outcome)

    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for the answer
        loop.call_soon_threadsafe(settle)


def _default_workers(engine: Engine) -> int:
    """The default ``workers`` of :class:`AsyncThreadedSQLAlchemyStore` on ``engine``."""
    if not isinstance(engine.pool, QueuePool):
        return 1
    size = engine.pool.size()  # 0: no limit
    if engine.dialect.name == "sqlite":
        return min(size, _SQLITE_WORKERS) if size else _SQLITE_WORKERS
    return size or _DEFAULT_POOL_SIZE


def _keeps_read_connections(engine: Engine, workers: int) -> bool:
    """Whether the threaded store's workers keep a connection each for reads (see :mod:`.held_reads`).

    On a SQLite file read by ``pysqlite``, when the engine's pool (a ``QueuePool``) leaves every
    worker a second connection for its writes: no limit (size 0), or at least twice ``workers``.
    """
    pool, dialect = engine.pool, engine.dialect
    if dialect.name != "sqlite" or dialect.driver != "pysqlite" or not isinstance(pool, QueuePool):
        return False
    if database_file(engine.url) is None:
        return False
    return pool.size() == 0 or pool.size() >= 2 * workers


def open_async_sqlalchemy_store(
    url: str | URL, **options: Any
) -> AsyncSQLAlchemyStore | AsyncThreadedSQLAlchemyStore:
    """Open the asyncio store ``open_async_store(url)`` gives for ``url``, without connecting.

    :class:`AsyncThreadedSQLAlchemyStore` on SQLite URLs that name no asyncio driver, else
    :class:`AsyncSQLAlchemyStore` (see :func:`chronica_sqlalchemy.engines.runs_on_worker_threads`).

    Raises ``InvalidOption`` and ``StoreError`` as :meth:`SQLAlchemyStore.open` does;
    ``ModuleNotFoundError`` when the driver is not installed.
    """
    if runs_on_worker_threads(url):
        return AsyncThreadedSQLAlchemyStore.open(url, **options)
    return AsyncSQLAlchemyStore.open(url, **options)
