"""SQLite writers of one process take turns here instead of sleeping in SQLite's busy handler.

SQLite lets one connection at a time write a database file. A connection that finds the write
lock taken waits in SQLite's busy handler, which sleeps and tries again (in steps of up to 100
ms) until ``busy_timeout`` runs out; a writer may sleep long after the lock was freed, and forty
threads writing at once sleep thousands of times. Within one process, the writers of one file
queue here instead: every write transaction (``BEGIN IMMEDIATE`` to ``COMMIT`` or ``ROLLBACK``,
from taking its connection to giving it back) holds that file's turn, and the next writer is
woken the moment it is given back. Other processes still meet this one through SQLite's own
locking and busy timeout.

- **Blocking** (the blocking store, and the asyncio store on worker threads): the turn is a
  ``threading.Lock`` per file, shared by every engine of the process on that file; a writer waits
  for it for at most the engine's ``busy_timeout``.
- **asyncio** (``sqlite+aiosqlite://``, whose plans run in SQLAlchemy's greenlet bridge on the
  event loop's thread): the writers of one event loop queue on an ``asyncio.Lock`` of that loop
  (made per loop, so the queue works on any loop, and on several at once); the first of them
  takes the file's lock, at once when it is free, else waiting on a worker thread while the loop
  goes on. A waiter whose task is cancelled leaves the queue, and a turn its worker thread took
  after the cancellation is given back at once: a cancelled writer never wedges the queue.
- **Hand-over** (blocking writers, with ``synchronous`` ``FULL`` or ``EXTRA``): a writer that gives
  back its turn while another blocking writer waits for it then lets go of the interpreter lock
  at once (``time.sleep(0)``), so the next writer, just woken, starts its transaction now instead
  of waiting while this thread goes on with its own Python work (its result, its next write) for
  up to the interpreter's switch interval. A write with those settings waits mostly for its
  ``fsync``; with 40 threads the hand-over raised writes/s by about 1.3x (the median of 12
  interleaved pairs of rounds, on a loaded 2-CPU machine and a shared disk). With nobody waiting
  none is made: the switch would only cost the writer time (50-80 µs a write, one writer alone on
  a quiet machine). Without a sync at each commit (``NORMAL``, ``OFF``) a turn is short and the
  extra switches cost more than they save (0.7x), so none is made. Nor is one made by a store's
  own worker threads (:func:`on_worker_thread`: the asyncio store on SQLite), whose next writer
  is the store's other worker while the event loop's thread waits for the interpreter too: 40
  tasks wrote 0.90-0.95x ``SQLiteSession``'s writes/s without it, 0.74-0.78x with it (a quiet
  2-CPU machine, a fast disk; there 40 blocking threads also did 7-10% better without it, where
  on the loaded machine above they did 1.3x better with it).
- **Timeout**: a writer that waited ``busy_timeout`` seconds in the queue gets the error SQLite
  gives when its own wait runs out, the driver's ``OperationalError("database is locked")``,
  which the store reports as ``StoreError("sqlalchemy: <operation>", "OperationalError: database
  is locked")``; nothing was written. A write that got its turn may then wait again, for another
  process's lock, under SQLite's busy timeout.

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
from sqlalchemy.util import await_only

__all__ = [
    "LOCKED_MESSAGE",
    "WriterQueue",
    "WriterTurn",
    "database_file",
    "on_worker_thread",
    "queue_writers",
    "take_turn",
    "writer_queue",
]

LOCKED_MESSAGE = "database is locked"
"""SQLite's message when a writer's wait for the lock runs out, and the queue's when its wait does."""

_guard = threading.Lock()
_queues: weakref.WeakValueDictionary[str, WriterQueue] = weakref.WeakValueDictionary()
_engines: weakref.WeakKeyDictionary[Engine, tuple[WriterQueue, float, bool]] = weakref.WeakKeyDictionary()
_workers = threading.local()
"""``no_hand_over`` set on a store's own worker threads (see :func:`on_worker_thread`)."""
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
    hand_over: bool = False
    """Let go of the interpreter lock once the turn is given back (blocking writers; see above)."""

    def give_back(self) -> None:
        """Free the file for the next writer of this process (no waiting, from any thread)."""
        if self.given_back:
            return
        self.given_back = True
        self.queue.lock.release()
        if self.loop_lock is not None:
            self.loop_lock.release()
        elif self.hand_over and self.queue.waiting:
            time.sleep(0)  # not a wait: the next writer gets the interpreter now


class WriterQueue:
    """The turns of one database file's writers in this process (one queue per file).

    Attributes:
        path: the file's absolute path.
        lock: held by the writer whose turn it is.
        waiting: how many threads wait in :meth:`take` for the turn now (a count, 0 or more).
    """

    __slots__ = ("__weakref__", "_count_guard", "_loop_locks", "lock", "path", "waiting")

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.waiting = 0
        self._count_guard = threading.Lock()
        self._loop_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def take(self, timeout: float) -> WriterTurn | None:
        """Wait up to ``timeout`` seconds for the turn, blocking the calling thread.

        Returns the turn, or ``None`` when the wait ran out.
        """
        if self.lock.acquire(blocking=False):
            return WriterTurn(self)
        with self._count_guard:
            self.waiting += 1
        try:
            taken = self.lock.acquire(timeout=timeout)
        finally:
            with self._count_guard:
                self.waiting -= 1
        return WriterTurn(self) if taken else None

    async def take_async(self, timeout: float) -> WriterTurn | None:
        """Wait up to ``timeout`` seconds for the turn without blocking the running event loop.

        The writers of one loop queue on that loop's ``asyncio.Lock``; the first takes the file's
        lock, waiting on a worker thread when another thread holds it. Returns the turn, or
        ``None`` when the wait ran out. Cancelled while waiting, it leaves the queue (a turn its
        worker thread takes afterwards is given back at once) and raises ``CancelledError``.
        """
        deadline = time.monotonic() + timeout
        loop_lock = self._loop_lock(asyncio.get_running_loop())
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

    def _loop_lock(self, loop: asyncio.AbstractEventLoop) -> asyncio.Lock:
        with _guard:
            loop_lock = self._loop_locks.get(loop)
            if loop_lock is None:
                loop_lock = self._loop_locks[loop] = asyncio.Lock()
            return loop_lock

    async def _wait_on_thread(self, deadline: float) -> bool:
        """Wait for the file's lock on a worker thread until ``deadline`` (monotonic seconds)."""
        waiting: Future[bool] = _waiters.submit(self._acquire_until, deadline)
        try:
            return await asyncio.wrap_future(waiting)
        except asyncio.CancelledError:
            waiting.add_done_callback(self._give_back_if_taken)
            raise

    def _acquire_until(self, deadline: float) -> bool:
        return self.lock.acquire(timeout=max(deadline - time.monotonic(), 0.0))

    def _give_back_if_taken(self, waiting: Future[bool]) -> None:
        """A cancelled waiter's thread took the lock after all: free it for the next writer."""
        if not waiting.cancelled() and waiting.exception() is None and waiting.result():
            self.lock.release()


def queue_writers(engine: Engine, busy_timeout: float, *, hand_over: bool = False) -> None:
    """Have the writers of ``engine`` (blocking, or an ``AsyncEngine.sync_engine``) take turns.

    They share the queue of the engine's database file with every other engine of the process on
    that file, and wait in it for at most ``busy_timeout`` seconds. With ``hand_over`` a blocking
    writer lets go of the interpreter lock as it gives back its turn to another blocking writer
    waiting for it, unless it runs on a store's worker thread (see the module's docstring; for
    engines that sync at each commit). Nothing is done for an in-memory database,
    nor for an engine that has a queue already (the first settings stay).
    """
    path = database_file(engine.url)
    if path is None:
        return
    with _guard:
        if engine in _engines:
            return
        queue = _queues.get(path)
        if queue is None:
            queue = _queues[path] = WriterQueue(path)
        _engines[engine] = (queue, busy_timeout, hand_over)


def writer_queue(engine: Engine) -> WriterQueue | None:
    """The queue the writers of ``engine`` take turns in, or ``None`` (not SQLite, or in memory)."""
    found = _engines.get(engine)
    return None if found is None else found[0]


def on_worker_thread() -> None:
    """Mark the calling thread as a store's own worker: its turns never hand the interpreter over.

    A ``ThreadPoolExecutor`` initializer (``initializer=on_worker_thread``) for the threads that
    run a store's operations on behalf of an event loop (see the module's docstring, Hand-over).
    """
    _workers.no_hand_over = True


def take_turn(engine: Engine) -> WriterTurn | None:
    """Take the writer's turn on ``engine``'s file, if it has a queue (``None`` when it has none).

    On an asyncio engine it must run inside SQLAlchemy's greenlet bridge (as the store's plans
    do): the wait is awaited there, so the event loop goes on.

    Raises:
        sqlalchemy.exc.OperationalError: the wait ran out (``busy_timeout``), wrapping the
            driver's ``OperationalError("database is locked")``, as SQLite's own wait would.
    """
    found = _engines.get(engine)
    if found is None:
        return None
    queue, timeout, hand_over = found
    if engine.dialect.is_async:
        turn = await_only(queue.take_async(timeout))
    else:
        turn = queue.take(timeout)
        if turn is not None:
            turn.hand_over = hand_over and not getattr(_workers, "no_hand_over", False)
    if turn is None:
        locked = engine.dialect.loaded_dbapi.OperationalError(LOCKED_MESSAGE)
        raise OperationalError("BEGIN IMMEDIATE", None, locked)
    return turn
