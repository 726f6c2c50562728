"""Following on chronica-sqlalchemy: one watcher thread per store tells followers what changed.

The watcher holds one connection of the store's engine, started on the first wait, and wakes
the followers when the database may hold something new for them:

- SQLite: it asks ``PRAGMA data_version`` every :data:`SQLITE_PROBE_SECONDS`; the number changes
  when another connection (this process's or another's) commits, and only then does it read the
  newest positions (``last_seq``) of the followed chronica, in one query of the ``chronica``
  table, to wake the followers of those that moved. An idle follower therefore causes no read
  of the ``acta`` table, only that pragma on the watcher's connection.
- MariaDB/MySQL and PostgreSQL: it reads the newest position (``last_seq``) of every followed
  chronicum in one query every :data:`SERVER_PROBE_SECONDS`, and wakes the followers of each
  one that moved (or was erased): one query per store, however many followers.

A woken follower reads what came after its position with the base ``acta`` window
(:func:`chronica_core.follow.acta_after_by_windows`): its newest 100 acta, more only when more
came. Each wait registers before it checks the chronicum's newest actum, and ends after
:data:`MAX_WAIT_SECONDS` at the latest, so no change is missed. Only the stores on a blocking
engine (:class:`chronica_sqlalchemy.SQLAlchemyStore`, and SQLite's asyncio store on worker
threads) have the capability; the asyncio stores on asyncio drivers follow by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Engine, Table, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import SingletonThreadPool

from chronica_core import ActaQuery, Actum, ChronicumNotFound
from chronica_core.follow import NEWEST, acta_after_by_windows, newest_actum_id
from chronica_core.plans import run_plan, run_plan_async

__all__ = ["MAX_WAIT_SECONDS", "SERVER_PROBE_SECONDS", "SQLITE_PROBE_SECONDS", "Watcher"]

SQLITE_PROBE_SECONDS: Final = 0.02
"""How often the watcher asks SQLite's ``PRAGMA data_version``."""

SERVER_PROBE_SECONDS: Final = 0.05
"""How often the watcher reads the followed chronica's newest positions on a database server."""

MAX_WAIT_SECONDS: Final = 30.0
"""The longest one wait lasts before the follower reads again, change or not."""

RECONNECT_PAUSE_SECONDS: Final = 0.5
"""How long the watcher waits before it connects again after a failure."""

WATCHER_NAME: Final = "chronica-shared-sqlalchemy-watcher"

Waker = Callable[[], None]

_CREATING: Final = threading.Lock()
"""Held while a store creates its watcher, so that racing first waits make one."""


class Watcher:
    """One store's watcher thread (see the module). Thread-safe.

    Args:
        engine: the store's blocking engine.
        chronica: the store's ``chronica`` table.
    """

    def __init__(self, engine: Engine, chronica: Table) -> None:
        self._engine = engine
        self._chronica = chronica
        self._sqlite = engine.dialect.name == "sqlite"
        # In-memory SQLite on a SingletonThreadPool is one database a thread: nothing to watch.
        self.usable = not isinstance(engine.pool, SingletonThreadPool)
        self._lock = threading.Lock()
        self._wakers: dict[str, set[Waker]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def watch(self, chronicum_id: str, waker: Waker) -> None:
        """Call ``waker`` (from the watcher's thread) when the chronicum may have changed."""
        with self._lock:
            self._wakers.setdefault(chronicum_id, set()).add(waker)
            if self._thread is None and not self._stopped.is_set():
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

    def close(self) -> None:
        """Stop: the thread gives its connection back and ends within one probe."""
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

    def _watch(self) -> None:
        while not self._stopped.is_set():
            try:
                with self._engine.connect() as connection:
                    self._wake(None)  # whatever changed before the first probe
                    if self._sqlite:
                        self._probe_sqlite(connection)
                    else:
                        self._probe_positions(connection)
            except SQLAlchemyError:
                self._wake(None)
                self._stopped.wait(RECONNECT_PAUSE_SECONDS)

    def _probe_sqlite(self, connection: Any) -> None:
        """Ask ``data_version``; only when it changed, read the followed chronica's positions."""
        version = None
        seen: dict[str, tuple[object, object]] = {}
        while not self._stopped.wait(SQLITE_PROBE_SECONDS):
            current = connection.exec_driver_sql("PRAGMA data_version").scalar()
            if current != version:
                seen = self._wake_moved(connection, seen)
            connection.rollback()  # hold no read transaction between probes
            version = current

    def _probe_positions(self, connection: Any) -> None:
        seen: dict[str, tuple[object, object]] = {}
        while not self._stopped.wait(SERVER_PROBE_SECONDS):
            seen = self._wake_moved(connection, seen)
            connection.rollback()  # the next probe sees every commit made since

    def _wake_moved(
        self, connection: Any, seen: dict[str, tuple[object, object]]
    ) -> dict[str, tuple[object, object]]:
        """Wake the followers of each chronicum whose position moved since ``seen``; return the positions.

        A chronicum not in ``seen`` (followed since the last probe) counts as moved.
        """
        chronica = self._chronica
        with self._lock:
            followed = list(self._wakers)
        if not followed:
            return {}
        rows = connection.execute(
            select(chronica.c.id, chronica.c.last_seq, chronica.c.owner_digest).where(
                chronica.c.id.in_(followed)
            )
        ).all()
        now = {row[0]: (row[1], row[2]) for row in rows}
        moved = {
            chronicum_id
            for chronicum_id in followed
            if chronicum_id not in seen or now.get(chronicum_id, (None, None)) != seen[chronicum_id]
        }
        if moved:
            self._wake(moved)
        return {chronicum_id: now.get(chronicum_id, (None, None)) for chronicum_id in followed}


class SQLAlchemyFollowing:
    """The ``follow`` capability of :class:`chronica_sqlalchemy.SQLAlchemyStore` (a mixin)."""

    engine: Engine
    plans: Any
    _watcher: Watcher | None = None

    if TYPE_CHECKING:  # the store's own, which it inherits after this mixin

        def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]: ...

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`chronica_core.FollowStore.acta_after`: the newest acta, as many as it takes."""

        def read(call: tuple[str, tuple[Any, ...]]) -> list[Actum]:
            return self.acta(*call[1])

        found = run_plan(acta_after_by_windows(chronicum_id, after), read)
        return None if found is None else found[: max(limit, 1)]

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Wait until the watcher sees the chronicum change (see the module), or ``timeout`` seconds."""
        wait = MAX_WAIT_SECONDS if timeout is None else min(timeout, MAX_WAIT_SECONDS)
        watcher = self._follow_watcher()
        woken = threading.Event()
        waker = woken.set
        watcher.watch(chronicum_id, waker)
        try:
            try:
                newest = self.acta(chronicum_id, NEWEST)
            except ChronicumNotFound:
                return
            if newest_actum_id(newest) != after:
                return
            woken.wait(wait if watcher.usable else min(wait, SQLITE_PROBE_SECONDS * 10))
        finally:
            watcher.unwatch(chronicum_id, waker)

    def _follow_watcher(self) -> Watcher:
        with _CREATING:
            if self._watcher is None:
                self._watcher = Watcher(self.engine, self.plans.tables.chronica)
            return self._watcher

    def _close_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.close()


class AsyncThreadedFollowing:
    """The ``follow`` capability of :class:`chronica_sqlalchemy.AsyncThreadedSQLAlchemyStore` (a mixin)."""

    engine: Engine
    plans: Any
    _watcher: Watcher | None = None

    if TYPE_CHECKING:  # the store's own, which it inherits after this mixin

        async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]: ...

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`SQLAlchemyFollowing.acta_after`."""

        async def read(call: tuple[str, tuple[Any, ...]]) -> list[Actum]:
            return await self.acta(*call[1])

        found = await run_plan_async(acta_after_by_windows(chronicum_id, after), read)
        return None if found is None else found[: max(limit, 1)]

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`SQLAlchemyFollowing.wait_for_acta`; the watcher wakes the loop thread-safely."""
        wait = MAX_WAIT_SECONDS if timeout is None else min(timeout, MAX_WAIT_SECONDS)
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def waker() -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(woken.set)

        with _CREATING:
            if self._watcher is None:
                self._watcher = Watcher(self.engine, self.plans.tables.chronica)
            watcher = self._watcher
        watcher.watch(chronicum_id, waker)
        try:
            try:
                newest = await self.acta(chronicum_id, NEWEST)
            except ChronicumNotFound:
                return
            if newest_actum_id(newest) != after:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait if watcher.usable else min(wait, SQLITE_PROBE_SECONDS * 10)):
                    await woken.wait()
        finally:
            watcher.unwatch(chronicum_id, waker)

    def _close_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
