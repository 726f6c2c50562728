"""Following on MongoDB: one change stream per store where the server has them, else polling.

A change stream needs a replica set or a sharded cluster (a standalone server refuses
``$changeStream``). The first follower that waits starts the store's watcher, a daemon thread
named ``chronica-shared-mongodb-watcher`` with a blocking ``MongoClient`` of its own (the store's
own client for a blocking store given one). The thread asks the server ``hello`` once: a
``setName`` (a replica set member) or ``msg: "isdbgrid"`` (a ``mongos``) means change streams, and
the thread then watches the ``acta`` collection for inserts and deletes (a ``$match`` pipeline)
and wakes the followers of the chronicum an insert names, and every follower on a delete (an
erasure). Anything else means polling: the thread closes its client and ends, and each follower
checks its chronicum's newest actum every :data:`POLL_SECONDS`. Until the answer is known,
followers poll.

A follower registers with the watcher before it checks the chronicum's newest actum, and the
watcher wakes every follower whenever its change stream (re)opens, so a write committed before the
stream saw it is never missed. A lost change stream (pymongo resumes it once by itself) wakes every
follower, each of which reads again from its own position (no gap, no duplicate), and is opened
again after :data:`RECONNECT_PAUSE_SECONDS`. A wait also ends after :data:`MAX_WAIT_SECONDS` at the
latest. The asyncio store shares the same thread (one change stream per store, whatever the
number of event loops), which wakes a loop's followers through ``call_soon_threadsafe``; an
asyncio store given an ``AsyncMongoClient`` instead of a URL has no watcher and polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from pymongo import MongoClient
from pymongo.errors import PyMongoError

from chronica_core.errors import StoreError
from chronica_mongodb.core import ACTA

__all__ = [
    "CHANGE_STREAMS",
    "MAX_WAIT_SECONDS",
    "POLLING",
    "POLL_SECONDS",
    "RECONNECT_PAUSE_SECONDS",
    "UNDECIDED",
    "WATCHER_NAME",
    "Watcher",
    "offers_change_streams",
    "waker_for_running_loop",
]

POLL_SECONDS: Final = 0.25
"""How often a follower checks its chronicum's newest actum where there is no change stream."""

MAX_WAIT_SECONDS: Final = 30.0
"""The longest one wait lasts on a change stream before the follower reads again."""

RECONNECT_PAUSE_SECONDS: Final = 0.5
"""How long the watcher waits before it opens its change stream again after losing it."""

WATCHER_NAME: Final = "chronica-shared-mongodb-watcher"
"""The watcher thread's name (the conformance suite's prefix for threads shared by followers)."""

UNDECIDED: Final = "undecided"
CHANGE_STREAMS: Final = "change streams"
POLLING: Final = "polling"

CHANGES: Final[list[dict[str, Any]]] = [
    {"$match": {"operationType": {"$in": ["insert", "delete"]}}},
    {"$project": {"operationType": 1, "fullDocument.chronicum_id": 1}},
]
"""The change stream's pipeline: the ``acta`` collection's inserts (each naming its chronicum) and
deletes (an erasure), and of each only what the watcher reads (the ``_id`` is the resume token)."""

_AWAIT_MS: Final = 1000
"""How long one ``try_next`` waits on the server (so the thread sees ``close`` within a second)."""

_log = logging.getLogger("chronica.mongodb")


def offers_change_streams(hello: Mapping[str, Any]) -> bool:
    """Whether a server whose ``hello`` answer is ``hello`` serves change streams.

    ``True`` for a replica set member (``setName``) or a ``mongos`` (``msg: "isdbgrid"``);
    ``False`` for a standalone server (and for an emulator answering neither).
    """
    return isinstance(hello.get("setName"), str) or hello.get("msg") == "isdbgrid"


def waker_for_running_loop(event: asyncio.Event) -> Callable[[], None]:
    """A waker the watcher's thread can call to set ``event`` in the running event loop."""
    loop = asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(event.set)

    return wake


class Watcher:
    """One store's change stream (where the server has them), shared by all its followers.

    Args:
        client: returns the blocking ``MongoClient`` to watch with (``None``: no watcher can be
            opened, followers poll); called once, in the watcher's thread.
        database: the name of the store's database.
        owns_client: whether the watcher closes that client when it ends.
    """

    def __init__(
        self,
        client: Callable[[], MongoClient[dict[str, Any]]] | None,
        database: str,
        owns_client: bool,
    ) -> None:
        self._client = client
        self._database = database
        self._owns_client = owns_client
        self._lock = threading.Lock()
        self._wakers: dict[str, set[Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self.mechanism: str = UNDECIDED if client is not None else POLLING
        """:data:`CHANGE_STREAMS`, :data:`POLLING`, or :data:`UNDECIDED` until the server said."""
        self.streaming = False
        """Whether the change stream is open now (followers then wait for it, else they poll)."""

    def watch(self, chronicum_id: str, waker: Callable[[], None]) -> None:
        """Call ``waker`` on the next change to ``chronicum_id`` (or when the stream opens or is lost)."""
        with self._lock:
            self._wakers.setdefault(chronicum_id, set()).add(waker)
            if self._thread is None and self._client is not None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._run, name=WATCHER_NAME, daemon=True)
                self._thread.start()

    def unwatch(self, chronicum_id: str, waker: Callable[[], None]) -> None:
        """Forget ``waker`` (its wait ended)."""
        with self._lock:
            wakers = self._wakers.get(chronicum_id)
            if wakers is not None:
                wakers.discard(waker)
                if not wakers:
                    del self._wakers[chronicum_id]

    def close(self) -> None:
        """Stop watching: the thread closes its change stream (and its client) within a second."""
        self._stopped.set()
        self.wake_all()

    def wake(self, chronicum_id: str) -> None:
        """Wake the followers of ``chronicum_id``."""
        with self._lock:
            wakers = list(self._wakers.get(chronicum_id, ()))
        for waker in wakers:
            waker()

    def wake_all(self) -> None:
        """Wake every follower."""
        with self._lock:
            wakers = [waker for each in self._wakers.values() for waker in each]
        for waker in wakers:
            waker()

    def dispatch(self, change: Mapping[str, Any]) -> None:
        """Wake whom one change event concerns: an insert's chronicum, or everyone for a delete."""
        chronicum_id = (change.get("fullDocument") or {}).get("chronicum_id")
        if change.get("operationType") == "insert" and isinstance(chronicum_id, str):
            self.wake(chronicum_id)
        else:
            self.wake_all()

    def _run(self) -> None:
        assert self._client is not None
        client = None
        try:
            while not self._stopped.is_set():
                try:
                    if client is None:
                        client = self._client()
                    if self.mechanism == UNDECIDED:
                        hello = client.admin.command("hello")
                        self.mechanism = CHANGE_STREAMS if offers_change_streams(hello) else POLLING
                        _log.debug("followers use %s", self.mechanism)
                    if self.mechanism == POLLING:
                        return
                    self._stream(client)
                except (PyMongoError, StoreError) as error:  # StoreError: the client could not open
                    _log.debug("the change stream was lost (%s); opening it again", type(error).__name__)
                self.streaming = False
                self.wake_all()
                self._stopped.wait(RECONNECT_PAUSE_SECONDS)
        finally:
            self.streaming = False
            if client is not None and self._owns_client:
                client.close()
            self.wake_all()

    def _stream(self, client: MongoClient[dict[str, Any]]) -> None:
        acta = client.get_database(self._database)[ACTA]
        with acta.watch(CHANGES, max_await_time_ms=_AWAIT_MS) as stream:
            self.streaming = True
            self.wake_all()  # whatever was written before the stream saw it
            while not self._stopped.is_set() and stream.alive:
                change = stream.try_next()
                if change is not None:
                    self.dispatch(change)


def wait_seconds(watcher: Watcher, remaining: float | None) -> float:
    """How long a follower waits before it checks again: for the stream, or one poll."""
    longest = MAX_WAIT_SECONDS if watcher.streaming else POLL_SECONDS
    return longest if remaining is None else max(0.0, min(remaining, longest))


def deadline_of(timeout: float | None) -> float | None:
    """The monotonic time at which a wait of ``timeout`` seconds ends (``None``: never)."""
    return None if timeout is None else time.monotonic() + timeout


def remaining_until(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (``None``: no limit)."""
    return None if deadline is None else deadline - time.monotonic()
