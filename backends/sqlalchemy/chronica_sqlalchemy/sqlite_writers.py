"""SQLite writers of one process take turns here instead of sleeping in SQLite's busy handler.

SQLite lets one connection at a time write a file. A connection that finds the write lock taken
waits in SQLite's busy handler, which sleeps and tries again until ``busy_timeout`` runs out, so
a writer may sleep long after the lock was freed. Within one process the writers of one file
queue here instead: a write plan holds the file's turn from taking its connection to giving it
back, and the next writer is woken the moment it is given back. Other processes still meet this
one through SQLite's own locking and busy timeout.

- **Blocking** (the blocking store, and the asyncio store's worker threads): the turn is a
  ``threading.Lock`` per file, shared by every engine of the process on that file.
- **asyncio** (``sqlite+aiosqlite://``): the writers of one event loop queue on an
  ``asyncio.Lock`` of that loop; the first of them takes the file's lock, waiting on a worker
  thread while the loop goes on. A waiter whose task is cancelled leaves the queue, and a turn
  its thread took after the cancellation is given back at once.
- **Timeout**: a writer that waited ``busy_timeout`` seconds gets the error SQLite gives when its
  own wait runs out, ``OperationalError("database is locked")``; nothing was written.

An in-memory database has no queue: its one pooled connection already makes writers take turns.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError

__all__ = [
    "LOCKED_MESSAGE",
    "WriterQueue",
    "WriterTurn",
    "database_file",
    "queue_writers",
    "take_turn",
    "take_turn_async",
    "writer_queue",
]

LOCKED_MESSAGE = "database is locked"
"""SQLite's message when a writer's wait for the lock runs out, and the queue's when its wait does."""

_guard = threading.Lock()
_queues: weakref.WeakValueDictionary[str, WriterQueue] = weakref.WeakValueDictionary()
_engines: weakref.WeakKeyDictionary[Engine, tuple[WriterQueue, float]] = weakref.WeakKeyDictionary()
_waiters = ThreadPoolExecutor(thread_name_prefix="chronica-sqlite-writers")
"""Threads on which the first asyncio writer of a loop waits for a file's lock held elsewhere."""


def database_file(url: URL) -> str | None:
    """The absolute path of the file ``url`` names, or ``None`` for an in-memory database.

    A URI filename (``?uri=true``, ``file:path?mode=...``) is read as its path; two URLs naming one
    file through different relative paths or symbolic links give the same path.
    """
    database = url.database
    if url.query.get("mode") == "memory" or database in (None, "", ":memory:"):
        return None
    if database.startswith("file:"):
        database = database[len("file:") :].partition("?")[0]
        if database in ("", ":memory:"):
            return None
    return os.path.realpath(database)


@dataclass(eq=False)
class WriterTurn:
    """A writer's turn on one file: give it back with :meth:`give_back` (once; later calls do nothing)."""

    queue: WriterQueue
    loop_lock: asyncio.Lock | None = None
    given_back: bool = False

    def give_back(self) -> None:
        """Free the file for the next writer of this process (no waiting, from any thread)."""
        if self.given_back:
            return
        self.given_back = True
        self.queue.lock.release()
        if self.loop_lock is not None:
            self.loop_lock.release()


class WriterQueue:
    """The turns of one database file's writers in this process.

    Attributes:
        path: the file's absolute path.
        lock: held by the writer whose turn it is.
    """

    __slots__ = ("__weakref__", "_loop_locks", "lock", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def take(self, timeout: float) -> WriterTurn | None:
        """Wait up to ``timeout`` seconds for the turn, blocking the thread; ``None`` if it ran out."""
        return WriterTurn(self) if self.lock.acquire(timeout=timeout) else None

    async def take_async(self, timeout: float) -> WriterTurn | None:
        """Wait up to ``timeout`` seconds for the turn without blocking the loop; ``None`` if it ran out.

        Cancelled while waiting, it leaves the queue and raises ``CancelledError``.
        """
        deadline = time.monotonic() + timeout
        with _guard:
            loop_lock = self._loop_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        try:
            async with asyncio.timeout(timeout):
                await loop_lock.acquire()
        except TimeoutError:
            return None
        try:
            if self.lock.acquire(blocking=False) or await self._wait_on_thread(deadline):
                return WriterTurn(self, loop_lock)
        except BaseException:
            loop_lock.release()
            raise
        loop_lock.release()
        return None

    async def _wait_on_thread(self, deadline: float) -> bool:
        """Wait for the file's lock on a worker thread until ``deadline`` (monotonic seconds)."""
        waiting: Future[bool] = _waiters.submit(
            self.lock.acquire, timeout=max(deadline - time.monotonic(), 0.0)
        )
        try:
            return await asyncio.wrap_future(waiting)
        except asyncio.CancelledError:
            waiting.add_done_callback(self._give_back_if_taken)
            raise

    def _give_back_if_taken(self, waiting: Future[bool]) -> None:
        """A cancelled waiter's thread took the lock after all: free it for the next writer."""
        if not waiting.cancelled() and waiting.exception() is None and waiting.result():
            self.lock.release()


def queue_writers(engine: Engine, busy_timeout: float) -> None:
    """Have the writers of ``engine`` (blocking, or an ``AsyncEngine.sync_engine``) take turns.

    They share the queue of the engine's file with every other engine of the process on it, and
    wait for at most ``busy_timeout`` seconds. Nothing is done for an in-memory database, nor
    for an engine that has a queue already (the first setting stays).
    """
    path = database_file(engine.url)
    if path is None:
        return
    with _guard:
        if engine not in _engines:
            queue = _queues.get(path)
            if queue is None:
                queue = _queues[path] = WriterQueue(path)
            _engines[engine] = (queue, busy_timeout)


def writer_queue(engine: Engine) -> WriterQueue | None:
    """The queue the writers of ``engine`` take turns in, or ``None`` (not SQLite, or in memory)."""
    found = _engines.get(engine)
    return None if found is None else found[0]


def take_turn(engine: Engine) -> WriterTurn | None:
    """Take the writer's turn on ``engine``'s file, blocking (``None``: the engine has no queue).

    Raises:
        sqlalchemy.exc.OperationalError: the wait ran out (``busy_timeout``): "database is locked".
    """
    found = _engines.get(engine)
    return None if found is None else _taken(engine, found[0].take(found[1]))


async def take_turn_async(engine: Engine) -> WriterTurn | None:
    """:func:`take_turn` for an ``AsyncEngine.sync_engine``, waiting without blocking the loop."""
    found = _engines.get(engine)
    return None if found is None else _taken(engine, await found[0].take_async(found[1]))


def _taken(engine: Engine, turn: WriterTurn | None) -> WriterTurn:
    """``turn``; when the wait for it ran out, what SQLite's own wait raises then, as SQLAlchemy wraps it."""
    if turn is None:
        raise OperationalError(
            "BEGIN IMMEDIATE", None, engine.dialect.loaded_dbapi.OperationalError(LOCKED_MESSAGE)
        )
    return turn
