"""Following: one watcher thread per store tells its followers what changed.

Every store has one watcher, shared by its followers on every thread and event loop: a daemon
thread started by the first wait, on one connection of its own, waking the followers when the
database may hold something new for them:

- PostgreSQL on psycopg: ``LISTEN``; every append and erasure notifies the store's channel from
  inside its own statement (see :mod:`chronica_sqlalchemy.dialects.postgresql`), delivered only
  if it commits. Nothing is read while followers are idle. A lost connection wakes every
  follower (each reads again from its position: no gap, no duplicate), and it listens again
  after :data:`RECONNECT_PAUSE_SECONDS`. It listens on the store's ``listen`` URL when it has
  one, as it is; else on the store's own, unless a pooler answers there (a ``LISTEN`` through a
  transaction pooler hears nothing; see :mod:`chronica_sqlalchemy.poolers`): then it reads
  positions, as below.
- SQLite: ``PRAGMA data_version`` every :data:`SQLITE_PROBE_SECONDS`; only when another
  connection committed are the followed chronica's newest positions read (``chronica`` only).
- MariaDB/MySQL (and PostgreSQL on other drivers): the followed chronica's newest positions, in
  one query every :data:`SERVER_PROBE_SECONDS`, however many followers.

The watcher stops once no follower waited for :data:`IDLE_STOP_SECONDS`, and starts again (waking
everyone once) on the next wait. The blocking stores watch on their own engine; the asyncio
store on an asyncio driver, on a pool-less blocking engine of its own. A woken follower reads
what came after its position (:func:`chronica_core.follow.acta_after_by_windows`); each wait
registers before it looks and ends after :data:`MAX_WAIT_SECONDS` at the latest, so no change is
missed. In-memory SQLite has nobody else to watch for: its waits last :data:`UNWATCHED_WAIT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Engine, Table, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import SingletonThreadPool

from chronica_core import ActaQuery, Actum, ChronicumNotFound
from chronica_core.follow import NEWEST, acta_after_by_windows, follow_reads, newest_actum_id
from chronica_core.plans import run_plan, run_plan_async
from chronica_sqlalchemy.engines import blocking_watcher_engine
from chronica_sqlalchemy.poolers import listen_url, pooler_found

__all__ = [
    "IDLE_STOP_SECONDS",
    "MAX_WAIT_SECONDS",
    "RECONNECT_PAUSE_SECONDS",
    "SERVER_PROBE_SECONDS",
    "SQLITE_PROBE_SECONDS",
    "UNWATCHED_WAIT_SECONDS",
    "WATCHER_NAME",
    "Watcher",
]

SQLITE_PROBE_SECONDS: Final = 0.02
"""How often the watcher asks SQLite's ``PRAGMA data_version``."""

SERVER_PROBE_SECONDS: Final = 0.05
"""How often the watcher reads the followed chronica's newest positions on a server it cannot listen to."""

LISTEN_CHECK_SECONDS: Final = 0.25
"""How long the listening watcher waits for a notification before it looks whether to stop."""

MAX_WAIT_SECONDS: Final = 30.0
"""The longest one wait lasts before the follower reads again, change or not."""

UNWATCHED_WAIT_SECONDS: Final = SQLITE_PROBE_SECONDS * 10
"""How long a wait lasts on a store that has no watcher (in-memory SQLite)."""

RECONNECT_PAUSE_SECONDS: Final = 0.5
"""How long the watcher waits before it connects again after a failure."""

IDLE_STOP_SECONDS: Final = 1.0
"""How long the watcher goes on without any follower waiting before it stops (its thread ends)."""

WATCHER_NAME: Final = "chronica-shared-sqlalchemy-watcher"
"""The name of the watcher's thread (the conformance suite's prefix for shared ones)."""

Waker = Callable[[], None]

_Seen = tuple[tuple[object, object], float]
"""What the watcher last saw of a chronicum: ``(last_seq, owner_digest)``, and when (monotonic seconds)."""

_CREATING: Final = threading.Lock()
"""Held while a store creates its watcher, so that racing first waits make one."""


def _listens(engine: Engine) -> bool:
    """Whether the watcher on ``engine`` listens (PostgreSQL on psycopg 3) rather than probes."""
    return engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg"


def _is_sqlite_memory(engine: Engine) -> bool:
    database = engine.url.database
    return engine.dialect.name == "sqlite" and (
        database in (None, "", ":memory:") or engine.url.query.get("mode") == "memory"
    )


class Watcher:
    """One store's watcher thread (see the module). Thread-safe.

    Args:
        engine: the blocking engine the watcher connects with; ``None`` for a store that has
            nothing to watch (its followers read again every :data:`UNWATCHED_WAIT_SECONDS`).
        chronica: the store's ``chronica`` table.
        channel: the channel to listen on, used on PostgreSQL with psycopg (see
            :func:`chronica_sqlalchemy.dialects.postgresql.follow_channel`).
        trusted: listen on ``engine`` as it is (the store's ``listen`` URL); else first ask
            whether a pooler answers there, and read positions instead if one does.
    """

    def __init__(self, engine: Engine | None, chronica: Table, channel: str, trusted: bool = False) -> None:
        self._engine = engine
        self._chronica = chronica
        self._channel = channel
        self._trusted = trusted
        # In-memory SQLite is one database a thread (SingletonThreadPool) or one connection shared
        # by turns: nobody else writes to it, and the watcher would take that one connection.
        self.usable = not (
            engine is None or isinstance(engine.pool, SingletonThreadPool) or _is_sqlite_memory(engine)
        )
        self._lock = threading.Lock()
        self._wakers: dict[str, set[Waker]] = {}
        self._idle_since = time.monotonic()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def running(self) -> bool:
        """Whether the watcher's thread runs now (it stops when no follower waits)."""
        with self._lock:
            return self._thread is not None

    def watch(self, chronicum_id: str, waker: Waker) -> None:
        """Call ``waker`` (from the watcher's thread) when the chronicum may have changed.

        Starts the watcher's thread when it does not run.
        """
        with self._lock:
            self._wakers.setdefault(chronicum_id, set()).add(waker)
            if self._thread is None and self.usable and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._watch, name=WATCHER_NAME, daemon=True)
                self._thread.start()

    def unwatch(self, chronicum_id: str, waker: Waker) -> None:
        """Forget ``waker`` (its wait ended)."""
        with self._lock:
            wakers = self._wakers.get(chronicum_id)
            if wakers is not None:
                wakers.discard(waker)
                if not wakers:
                    del self._wakers[chronicum_id]
            if not self._wakers:
                self._idle_since = time.monotonic()

    def close(self) -> None:
        """Stop for good: the thread gives its connection back and ends within one probe."""
        self._stopped.set()
        self._wake(None)

    def _wake(self, chronicum_ids: set[str] | None) -> None:
        with self._lock:
            chosen = [
                waker
                for chronicum_id, wakers in self._wakers.items()
                if chronicum_ids is None or chronicum_id in chronicum_ids
                for waker in wakers
            ]
        for waker in chosen:
            waker()

    def _ending(self) -> bool:
        """Whether the thread should end now: closed, or no follower for :data:`IDLE_STOP_SECONDS`.

        When it should, the watcher counts as stopped at once (the next wait starts a new thread).
        """
        with self._lock:
            idle = not self._wakers and time.monotonic() - self._idle_since >= IDLE_STOP_SECONDS
            if idle or self._stopped.is_set():
                self._thread = None
                return True
            return False

    def _paused(self, seconds: float) -> bool:
        """Wait ``seconds`` (less when closed meanwhile); return whether the thread should end."""
        self._stopped.wait(seconds)
        return self._ending()

    def _watch(self) -> None:
        """The thread: watch until :meth:`_ending`; after a failure, wake everyone and connect again."""
        engine = self._engine
        assert engine is not None  # a watcher without an engine never starts its thread
        failure = (SQLAlchemyError, engine.dialect.loaded_dbapi.Error)
        while True:
            try:
                if _listens(engine):
                    self._listen(engine)
                else:
                    with engine.connect() as connection:  # its first probe wakes every follower
                        self._probe(connection, sqlite=engine.dialect.name == "sqlite")
                return
            except failure:
                self._wake(None)
                if self._paused(RECONNECT_PAUSE_SECONDS):
                    return

    def _listen(self, engine: Engine) -> None:
        """``LISTEN`` on a connection of ``engine`` in autocommit, ended (never pooled again) when done.

        SQLAlchemy has no notifications: they are read with psycopg's ``Connection.notifies()``.
        """
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            try:
                listening: Any = connection.connection.driver_connection  # psycopg.Connection
                if not self._trusted and pooler_found(listening):
                    listening.prepare_threshold = None  # else psycopg would prepare the probe
                    self._probe(connection, sqlite=False)  # a LISTEN would hear nothing
                    return
                connection.exec_driver_sql(f'LISTEN "{self._channel}"')
                self._wake(None)  # whatever was written while it was not listening
                while not self._ending():
                    for notification in listening.notifies(timeout=LISTEN_CHECK_SECONDS):
                        self._wake({notification.payload})
            finally:
                connection.invalidate()  # LISTEN is not for the pool's other users

    def _probe(self, connection: Any, *, sqlite: bool) -> None:
        """Read the followed chronica's positions every probe; on SQLite only when ``data_version`` moved."""
        version: object = None
        seen: dict[str, _Seen] = {}
        while not self._paused(SQLITE_PROBE_SECONDS if sqlite else SERVER_PROBE_SECONDS):
            current = connection.exec_driver_sql("PRAGMA data_version").scalar() if sqlite else None
            if current != version or not sqlite:
                seen = self._wake_moved(connection, seen)
            connection.rollback()  # no read transaction between probes: the next sees every commit
            version = current

    def _wake_moved(self, connection: Any, seen: dict[str, _Seen]) -> dict[str, _Seen]:
        """Wake the followers of each chronicum whose position moved since ``seen``; return the positions.

        A chronicum not in ``seen`` (followed since the watcher started) counts as moved. One whose
        follower is between two waits (reading what woke it) keeps its last position for
        :data:`IDLE_STOP_SECONDS`, so that its next wait is not woken for nothing: a position
        read before a write differs from any read after it.
        """
        chronica = self._chronica
        with self._lock:
            followed = list(self._wakers)
        now = time.monotonic()
        kept = {chronicum_id: was for chronicum_id, was in seen.items() if now - was[1] < IDLE_STOP_SECONDS}
        if not followed:
            return kept
        rows = connection.execute(
            select(chronica.c.id, chronica.c.last_seq, chronica.c.owner_digest).where(
                chronica.c.id.in_(followed)
            )
        ).all()
        positions = {row[0]: (row[1], row[2]) for row in rows}
        moved = set()
        for chronicum_id in followed:
            position = positions.get(chronicum_id, (None, None))
            was = kept.get(chronicum_id)
            if was is None or was[0] != position:
                moved.add(chronicum_id)
            kept[chronicum_id] = (position, now)
        if moved:
            self._wake(moved)
        return kept


def _wait_seconds(watcher: Watcher, timeout: float | None) -> float:
    longest = MAX_WAIT_SECONDS if watcher.usable else UNWATCHED_WAIT_SECONDS
    return longest if timeout is None else min(timeout, longest)


class _Following:
    """The watcher of a store: made on its first follower's wait, with the engine the store says."""

    plans: Any
    engine: Engine | AsyncEngine
    _watcher: Watcher | None = None

    def _watcher_engine(self) -> Engine | None:
        """The blocking engine the watcher connects with (``None``: the store cannot be watched)."""
        raise NotImplementedError

    def _follow_watcher(self) -> Watcher:
        with _CREATING:
            if self._watcher is None:
                listen = listen_url(self.engine)
                engine = (
                    self._watcher_engine() if listen is None else blocking_watcher_engine(make_url(listen))
                )
                self._watcher = Watcher(
                    engine, self.plans.tables.chronica, self.plans.channel, trusted=listen is not None
                )
            return self._watcher

    def _close_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.close()


class SQLAlchemyFollowing(_Following):
    """The ``follow`` capability of :class:`chronica_sqlalchemy.SQLAlchemyStore` (a mixin)."""

    engine: Engine

    if TYPE_CHECKING:  # the store's own, which it inherits after this mixin

        def own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]: ...

    def _watcher_engine(self) -> Engine | None:
        """The store's own engine: the watcher holds one of its pooled connections while it runs."""
        return self.engine

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`chronica_core.FollowStore.acta_after`: the newest acta, as many as it takes."""

        def read(call: tuple[str, tuple[Any, ...]]) -> list[Actum]:
            return self.own_acta(*call[1])

        found = run_plan(acta_after_by_windows(chronicum_id, after), read)
        return None if found is None else found[: max(limit, 1)]

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Wait until the watcher sees the chronicum change (see the module), or ``timeout`` seconds."""
        watcher = self._follow_watcher()
        woken = threading.Event()
        watcher.watch(chronicum_id, woken.set)
        try:
            try:
                with follow_reads(self).turn():  # a turn among the followers' reads
                    newest = self.own_acta(chronicum_id, NEWEST)
            except ChronicumNotFound:
                return
            if newest_actum_id(newest) == after:
                woken.wait(_wait_seconds(watcher, timeout))
        finally:
            watcher.unwatch(chronicum_id, woken.set)


class AsyncFollowing(_Following):
    """The ``follow`` capability of both asyncio stores (a mixin); its watcher wakes each loop."""

    if TYPE_CHECKING:  # the store's own, which it inherits after this mixin

        async def own_acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]: ...

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`SQLAlchemyFollowing.acta_after`."""

        async def read(call: tuple[str, tuple[Any, ...]]) -> list[Actum]:
            return await self.own_acta(*call[1])

        found = await run_plan_async(acta_after_by_windows(chronicum_id, after), read)
        return None if found is None else found[: max(limit, 1)]

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`SQLAlchemyFollowing.wait_for_acta`; cancelling it leaves nothing of the follower's."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def waker() -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(woken.set)

        watcher = self._follow_watcher()
        watcher.watch(chronicum_id, waker)
        try:
            try:
                async with follow_reads(self).loop_turn():  # a turn among the followers' reads
                    newest = await self.own_acta(chronicum_id, NEWEST)
            except ChronicumNotFound:
                return
            if newest_actum_id(newest) == after:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_wait_seconds(watcher, timeout)):
                        await woken.wait()
        finally:
            watcher.unwatch(chronicum_id, waker)
