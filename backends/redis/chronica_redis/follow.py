"""Following on Redis: pub/sub, one subscription per store shared by every follower.

An append to a followed chronicum, and its erasure, publishes the chronicum id on the store's
channel (``<prefix>:follow``) from inside its script: only a chronicum whose followed key exists
(:mod:`chronica_redis.keys`) publishes, so appends nobody follows cost nothing more. A follower
sets that key (for :data:`~chronica_redis.plans.FOLLOWED_SECONDS`, renewed when less than half
is left) in the script that reads the chronicum's newest actum before it waits.

A store subscribes once, on its first follower's wait, in a daemon thread named
``chronica-shared-redis-listener`` with a blocking client of its own (one connection; on a
cluster, plain ``PUBLISH`` reaches every node, so any node will do); the thread wakes the
followers, threads and event loops alike, of the chronicum a message names. A follower registers
before it reads the newest actum, and the thread wakes every follower each time its subscription
(re)starts, so a write published before the subscription is never missed. A lost connection
wakes every follower (each reads again from its own position: no gap, no duplicate) and the
thread subscribes again after :data:`RECONNECT_PAUSE_SECONDS`; a wait also ends after
:data:`MAX_WAIT_SECONDS` at the latest. A process forked after the thread started makes a
listener of its own in the child (a thread does not survive a fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from redis.exceptions import RedisClusterException, RedisError

from chronica_redis.plans import FOLLOWED_SECONDS

__all__ = [
    "LISTENER_NAME",
    "MAX_WAIT_SECONDS",
    "RECONNECT_PAUSE_SECONDS",
    "Listener",
    "Markings",
    "waker_for_running_loop",
]

MAX_WAIT_SECONDS: Final = 30.0
"""The longest one wait lasts before the follower reads again, message or not."""

RECONNECT_PAUSE_SECONDS: Final = 0.5
"""How long the listener waits before it subscribes again after losing its connection."""

LISTENER_NAME: Final = "chronica-shared-redis-listener"
"""The listener thread's name (the conformance suite's prefix for what followers share)."""

_READ_SECONDS: Final = 1.0
"""How long one read of the subscription waits (so the thread sees ``close`` within a second)."""


def waker_for_running_loop(event: asyncio.Event) -> Callable[[], None]:
    """A waker the listener's thread can call to set ``event`` in the running event loop."""
    loop = asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(event.set)

    return wake


class Listener:
    """One store's subscription to its follow channel, in a daemon thread started on the first watch.

    Args:
        open_client: makes the blocking redis-py client the thread subscribes with (its own).
        channel: the channel appends publish on.
    """

    def __init__(self, open_client: Callable[[], Any], channel: str) -> None:
        self.pid = os.getpid()
        self._open_client = open_client
        self._channel = channel
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def watch(self, chronicum_id: str, wake: Callable[[], None]) -> None:
        """Call ``wake`` at the next message naming ``chronicum_id`` (or when the connection is lost)."""
        with self._lock:
            self._waiters.setdefault(chronicum_id, set()).add(wake)
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._listen, name=LISTENER_NAME, daemon=True)
                self._thread.start()

    def unwatch(self, chronicum_id: str, wake: Callable[[], None]) -> None:
        """Forget ``wake`` (its wait ended)."""
        with self._lock:
            waiting = self._waiters.get(chronicum_id)
            if waiting is not None:
                waiting.discard(wake)
                if not waiting:
                    del self._waiters[chronicum_id]

    def close(self) -> None:
        """Stop: every follower is woken; the thread closes its connection within a second."""
        self._stopped.set()
        self._wake_all()

    def _wake(self, chronicum_id: str) -> None:
        with self._lock:
            wakers = list(self._waiters.get(chronicum_id, ()))
        for wake in wakers:
            wake()

    def _wake_all(self) -> None:
        with self._lock:
            wakers = [wake for waiting in self._waiters.values() for wake in waiting]
        for wake in wakers:
            wake()

    def _listen(self) -> None:
        while not self._stopped.is_set():
            client = None
            try:
                client = self._open_client()
                with client.pubsub() as subscription:
                    subscription.subscribe(self._channel)
                    while not self._stopped.is_set():
                        message = subscription.get_message(timeout=_READ_SECONDS)
                        if message is None:
                            continue
                        if message["type"] == "subscribe":
                            self._wake_all()  # whatever was published before the subscription
                        elif message["type"] == "message":
                            self._wake(message["data"])
            except (RedisError, RedisClusterException, OSError):
                self._wake_all()
                self._stopped.wait(RECONNECT_PAUSE_SECONDS)
            finally:
                if client is not None:
                    with contextlib.suppress(RedisError, RedisClusterException, OSError):
                        client.close()


class Markings:
    """When a store last marked each chronicum followed, so that it marks again only when needed."""

    _REMEMBERED_MOST: Final = 4096

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def needed(self, chronicum_id: str) -> bool:
        """Whether the mark may run out before a wait of up to :data:`MAX_WAIT_SECONDS` ends."""
        with self._lock:
            until = self._until.get(chronicum_id)
        return until is None or until - time.monotonic() < FOLLOWED_SECONDS / 2

    def marked(self, chronicum_id: str, sent_at: float) -> None:
        """Remember that a mark sent at ``sent_at`` (``time.monotonic()``) holds for its full length."""
        with self._lock:
            if len(self._until) >= self._REMEMBERED_MOST:
                now = time.monotonic()
                for expired in [key for key, until in self._until.items() if until <= now]:
                    del self._until[expired]
            self._until[chronicum_id] = sent_at + FOLLOWED_SECONDS

    def forget(self) -> None:
        """Forget every mark (the chronica may have been erased and the marks with them)."""
        with self._lock:
            self._until.clear()
