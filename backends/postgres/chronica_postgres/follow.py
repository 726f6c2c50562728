"""Following on PostgreSQL: ``LISTEN``/``NOTIFY``, one listening connection shared by every follower.

Every append (``record``, ``record_idempotent``, ``record_many``) to a followed chronicum, and
every erasure, notifies the schema's channel (:func:`chronica_postgres.schema.follow_channel`)
with the chronicum id, from inside its own statement: the notification is delivered when, and
only if, the write commits. An append to a chronicum nobody follows notifies nobody (PostgreSQL
lets only one notifying transaction commit at a time, so a notification nobody awaits would cost
every writer). Before a follower reads the chronicum's newest actum and waits, its store marks the
chronicum followed in the ``chronica`` table (``followed_until``, committed) for
:data:`FOLLOWED_SECONDS`, unless it already is for :data:`RENEWED_BELOW_SECONDS` or more; a store
remembers, per chronicum, how long its last marking holds, and marks again only when less than
:data:`MAX_WAIT_SECONDS` and a margin are left (about every half minute while followed). See
:mod:`chronica_postgres.schema` for why no append is missed.

A store listens on one connection of its own, opened on the first wait (the blocking store: in a
daemon thread; the asyncio store: in one task per event loop, named ``chronica-shared-...``),
and wakes the followers of the chronicum a notification names. A follower registers before it
checks the chronicum's newest actum, so a write committed between its last read and its wait is
never missed. That check is a read: it takes a turn among the store's followers
(:func:`chronica_core.follow.follow_reads`), as their other reads do, so a crowd of followers
woken together uses a handful of the pool's connections. When the listening connection is lost,
every follower is woken (each reads again from its own position, so nothing is skipped), and the
listener reconnects after :data:`RECONNECT_PAUSE_SECONDS`; a wait also ends after
:data:`MAX_WAIT_SECONDS` at the latest, which bounds the delay for a notification lost with a
connection. A store opened on a pool whose connection string it cannot read (a callable
``conninfo``), or with ``notify=False`` (its writes notify nobody, so it expects no notification
either), does not listen: its followers read again every :data:`UNWATCHED_WAIT_SECONDS`.

The listener connects to the ``listen`` option's URL when it is given, as it is; else to the
store's own, and first asks whether a pooler answers there (:mod:`chronica_core.poolers`): a
``LISTEN`` through a transaction pooler hears nothing, so then it stops, wakes every follower, and
the store's followers read again every :data:`UNWATCHED_WAIT_SECONDS` from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Final, TypeVar

import psycopg
from psycopg import sql

from chronica_core import ActaQuery, Actum, ChronicumNotFound
from chronica_core.follow import follow_reads
from chronica_core.plans import Plan
from chronica_postgres.plans import Options, Plans
from chronica_postgres.poolers import found_pooler, found_pooler_async

__all__ = [
    "FOLLOWED_SECONDS",
    "MAX_WAIT_SECONDS",
    "RECONNECT_PAUSE_SECONDS",
    "RENEWED_BELOW_SECONDS",
    "AsyncListener",
    "Listener",
    "Markings",
]

MAX_WAIT_SECONDS: Final = 30.0
"""The longest one wait lasts before the follower reads again, notification or not."""

FOLLOWED_SECONDS: Final = 120.0
"""How far ahead, in seconds, a follower marks its chronicum followed (appends then notify)."""

RENEWED_BELOW_SECONDS: Final = 60.0
"""A follower renews the marking only when fewer seconds than this are left of it, so that the
followers of one chronicum write its row about once a minute, not on every wait."""

_MARKING_MARGIN_SECONDS: Final = 5.0
"""Marking left beyond :data:`MAX_WAIT_SECONDS` that a store wants before a wait, else it marks."""

_REMEMBERED_MOST: Final = 4096
"""How many chronica a store remembers the marking of before it forgets those that ran out."""

RECONNECT_PAUSE_SECONDS: Final = 0.5
"""How long the listener waits before it connects again after losing its connection."""

LISTENER_NAME: Final = "chronica-shared-postgres-listener"
"""The name of the listener's thread or task (the conformance suite's prefix for shared ones)."""

_NEWEST: Final = ActaQuery(last_n=1)

Result = TypeVar("Result")

_CREATING: Final = threading.Lock()
"""Held while a blocking store creates its listener, so that racing first waits make one."""

UNWATCHED_WAIT_SECONDS: Final = 0.25
"""How long a wait lasts on a store that does not listen (opened on a pool whose connection string
it cannot read, or with ``notify=False``): its followers read again that often, as a polled
store's do."""


def newest_actum_id(acta: list[Actum]) -> str | None:
    """The id of the newest actum of a ``last_n=1`` window (``None`` for an empty chronicum)."""
    return acta[-1].id if acta else None


def newest_plan(plans: Plans, chronicum_id: str) -> Plan[Any, list[Actum]]:
    """The plan reading the chronicum's newest actum (``ChronicumNotFound`` when missing)."""
    return plans.acta(chronicum_id, _NEWEST)


def _unwatched_seconds(timeout: float | None) -> float:
    """How long a follower of a store that does not listen waits before it reads again, in seconds."""
    return UNWATCHED_WAIT_SECONDS if timeout is None else max(0.0, min(timeout, UNWATCHED_WAIT_SECONDS))


def _unwatched_wait(timeout: float | None) -> None:
    """Block a blocking store's follower for :func:`_unwatched_seconds`: a polled store's pause."""
    time.sleep(_unwatched_seconds(timeout))


class Markings:
    """What one store knows of the chronica it marked followed: until when each marking holds.

    Times are of :func:`time.monotonic`, in seconds. A marking the store wrote, or found already
    holding :data:`RENEWED_BELOW_SECONDS` or more, holds at least that long after the statement
    was sent (the server's ``now()`` is later), whatever the server's clock says.
    """

    def __init__(self) -> None:
        self._holds_until: dict[str, float] = {}

    def needed(self, chronicum_id: str) -> bool:
        """Whether the chronicum must be marked again before a wait of up to :data:`MAX_WAIT_SECONDS`."""
        holds_until = self._holds_until.get(chronicum_id)
        wanted = MAX_WAIT_SECONDS + _MARKING_MARGIN_SECONDS
        return holds_until is None or holds_until - time.monotonic() < wanted

    def plan(self, plans: Plans, chronicum_id: str) -> tuple[float, Plan[Any, bool | None]]:
        """The moment the marking statement is sent (now) and the plan marking the chronicum."""
        return time.monotonic(), plans.follow(chronicum_id, FOLLOWED_SECONDS, RENEWED_BELOW_SECONDS)

    def marked(self, chronicum_id: str, sent_at: float) -> None:
        """Remember that the marking statement sent at ``sent_at`` found the chronicum and committed."""
        if len(self._holds_until) >= _REMEMBERED_MOST:
            now = time.monotonic()
            for expired in [key for key, until in self._holds_until.items() if until <= now]:
                self._holds_until.pop(expired, None)
        self._holds_until[chronicum_id] = sent_at + RENEWED_BELOW_SECONDS


def _listen_statement(channel: str) -> sql.Composed:
    return sql.SQL("LISTEN {}").format(sql.Identifier(channel))


class Listener:
    """The blocking store's listening connection, in a daemon thread started on the first watch.

    Args:
        conninfo: the libpq URL or connection string to connect with (empty: nothing to listen on).
        connect_arguments: keyword arguments for ``psycopg.connect`` (``connect_timeout``...).
        channel: the channel to listen on.
        trusted: listen on ``conninfo`` as it is (the ``listen`` option's); else first ask whether
            a pooler answers there, and listen only if none does.
    """

    def __init__(self, conninfo: str, connect_arguments: dict[str, Any], channel: str, trusted: bool) -> None:
        self._conninfo = conninfo
        self._connect_arguments = connect_arguments
        self._channel = channel
        self._trusted = trusted
        self._pooled = False
        self._lock = threading.Lock()
        self._waiters: dict[str, set[threading.Event]] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def listens(self) -> bool:
        """Whether notifications can wake the followers: a URL to listen on, and no pooler found there."""
        return bool(self._conninfo) and not self._pooled

    def watch(self, chronicum_id: str) -> threading.Event:
        """Return an event set by the next notification for ``chronicum_id`` (or a lost connection)."""
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(chronicum_id, set()).add(event)
            if self._thread is None and self._conninfo and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._listen, name=LISTENER_NAME, daemon=True)
                self._thread.start()
        return event

    def unwatch(self, chronicum_id: str, event: threading.Event) -> None:
        """Forget ``event`` (a wait ended)."""
        with self._lock:
            waiting = self._waiters.get(chronicum_id)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiters[chronicum_id]

    def close(self) -> None:
        """Stop listening: the thread closes its connection and ends within a second."""
        self._stopped.set()
        self._wake_all()

    def _wake(self, chronicum_id: str) -> None:
        with self._lock:
            for event in self._waiters.get(chronicum_id, ()):
                event.set()

    def _wake_all(self) -> None:
        with self._lock:
            for waiting in self._waiters.values():
                for event in waiting:
                    event.set()

    def _listen(self) -> None:
        while not self._stopped.is_set():
            try:
                with psycopg.connect(self._conninfo, **self._connect_arguments) as connection:
                    if not self._trusted and found_pooler(connection):
                        self._pooled = True
                        self._wake_all()  # the followers read again, from now on without waiting long
                        return
                    connection.execute(_listen_statement(self._channel))
                    self._wake_all()  # whatever was written while it was not listening
                    while not self._stopped.is_set():
                        for notification in connection.notifies(timeout=1.0):
                            self._wake(notification.payload)
            except psycopg.Error:
                self._wake_all()
                self._stopped.wait(RECONNECT_PAUSE_SECONDS)


class AsyncListener:
    """The asyncio store's listening connection in one event loop: a task started on the first watch.

    Args:
        conninfo: the libpq URL or connection string to connect with (empty: nothing to listen on).
        connect_arguments: keyword arguments for ``psycopg.AsyncConnection.connect``.
        channel: the channel to listen on.
        trusted: as for :class:`Listener`.
    """

    def __init__(self, conninfo: str, connect_arguments: dict[str, Any], channel: str, trusted: bool) -> None:
        self._conninfo = conninfo
        self._connect_arguments = connect_arguments
        self._channel = channel
        self._trusted = trusted
        self._pooled = False
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def listens(self) -> bool:
        """Whether notifications can wake the followers (see :attr:`Listener.listens`)."""
        return bool(self._conninfo) and not self._pooled

    def watch(self, chronicum_id: str) -> asyncio.Event:
        """Return an event set by the next notification for ``chronicum_id`` (or a lost connection)."""
        event = asyncio.Event()
        self._waiters.setdefault(chronicum_id, set()).add(event)
        if self._task is None and self._conninfo:
            self._task = asyncio.get_running_loop().create_task(self._listen(), name=LISTENER_NAME)
        return event

    def unwatch(self, chronicum_id: str, event: asyncio.Event) -> None:
        """Forget ``event`` (a wait ended or was cancelled)."""
        waiting = self._waiters.get(chronicum_id)
        if waiting is not None:
            waiting.discard(event)
            if not waiting:
                del self._waiters[chronicum_id]

    async def close(self) -> None:
        """Stop listening: cancel the task, which closes its connection (call it in its loop)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._wake_all()

    def drop(self) -> None:
        """Stop listening from outside the listener's loop: cancel its task there, without waiting."""
        task, self._task = self._task, None
        if task is not None:
            loop = task.get_loop()
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(task.cancel)

    def _wake(self, chronicum_id: str) -> None:
        for event in self._waiters.get(chronicum_id, ()):
            event.set()

    def _wake_all(self) -> None:
        for waiting in self._waiters.values():
            for event in waiting:
                event.set()

    async def _listen(self) -> None:
        while True:
            try:
                connection = await psycopg.AsyncConnection.connect(self._conninfo, **self._connect_arguments)
                async with connection:
                    if not self._trusted and await found_pooler_async(connection):
                        self._pooled = True
                        self._wake_all()  # the followers read again, from now on without waiting long
                        return
                    await connection.execute(_listen_statement(self._channel))
                    self._wake_all()  # whatever was written while it was not listening
                    async for notification in connection.notifies():
                        self._wake(notification.payload)
            except psycopg.Error:
                self._wake_all()
                await asyncio.sleep(RECONNECT_PAUSE_SECONDS)


class PostgresFollowing:
    """The ``follow`` capability of :class:`chronica_postgres.PostgresStore` (a mixin)."""

    plans: Plans
    options: Options
    _secrets_of: str
    _listener: Listener | None = None
    _markings: Markings

    if TYPE_CHECKING:  # PlannedStore's, which the store inherits after this mixin

        def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`chronica_core.FollowStore.acta_after`: one query, walking back from the newest."""
        return self._run_if_open(self.plans.acta_after(chronicum_id, after, limit))

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Wait for a notification naming the chronicum (see the module), after reading its newest actum.

        First the chronicum is marked followed (when this store's last marking would not outlast
        the wait), so that appends to it notify.

        With ``notify=False`` nothing is listened to: the wait lasts :data:`UNWATCHED_WAIT_SECONDS`
        (or ``timeout`` seconds when shorter), then the follower reads again.
        """
        if not self.options.notify:
            _unwatched_wait(timeout)
            return
        listener = self._follow_listener()
        event = listener.watch(chronicum_id)
        try:
            listens = listener.listens
            try:
                with follow_reads(self).turn():  # a turn among the followers' reads
                    if listens and self._markings.needed(chronicum_id):  # else nobody listens
                        sent_at, marking = self._markings.plan(self.plans, chronicum_id)
                        if self._run_if_open(marking) is not None:  # None: no such chronicum (yet)
                            self._markings.marked(chronicum_id, sent_at)
                    newest = self._run_if_open(newest_plan(self.plans, chronicum_id))
            except ChronicumNotFound:
                return
            if newest_actum_id(newest) != after:
                return
            longest = MAX_WAIT_SECONDS if listens else UNWATCHED_WAIT_SECONDS
            event.wait(longest if timeout is None else min(timeout, longest))
        finally:
            listener.unwatch(chronicum_id, event)

    def _follow_listener(self) -> Listener:
        with _CREATING:
            if self._listener is None:
                self._listener = Listener(
                    self.options.listen or self._secrets_of,
                    self.options.connect_arguments(),
                    self.plans.statements.channel,
                    trusted=self.options.listen is not None,
                )
            return self._listener

    def _close_listener(self) -> None:
        if self._listener is not None:
            self._listener.close()


class AsyncPostgresFollowing:
    """The ``follow`` capability of :class:`chronica_postgres.AsyncPostgresStore` (a mixin)."""

    plans: Plans
    options: Options
    _secrets_of: str
    _listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncListener] | None = None
    _markings: Markings

    if TYPE_CHECKING:  # AsyncPlannedStore's, which the store inherits after this mixin

        async def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

        def _check_open(self, plan: Plan[Any, Any] | None = None) -> None: ...

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`chronica_core.FollowStore.acta_after`."""
        return await self._run_if_open(self.plans.acta_after(chronicum_id, after, limit))

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`PostgresFollowing.wait_for_acta`; cancelling it leaves nothing of the follower's."""
        self._check_open()
        if not self.options.notify:
            await asyncio.sleep(_unwatched_seconds(timeout))
            return
        listener = self._follow_listener()
        event = listener.watch(chronicum_id)
        try:
            listens = listener.listens
            try:
                async with follow_reads(self).loop_turn():  # a turn among the followers' reads
                    if listens and self._markings.needed(chronicum_id):  # else nobody listens
                        sent_at, marking = self._markings.plan(self.plans, chronicum_id)
                        if await self._run_if_open(marking) is not None:  # None: no such chronicum (yet)
                            self._markings.marked(chronicum_id, sent_at)
                    newest = await self._run_if_open(newest_plan(self.plans, chronicum_id))
            except ChronicumNotFound:
                return
            if newest_actum_id(newest) != after:
                return
            longest = MAX_WAIT_SECONDS if listens else UNWATCHED_WAIT_SECONDS
            wait = longest if timeout is None else min(timeout, longest)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await event.wait()
        finally:
            listener.unwatch(chronicum_id, event)

    def _follow_listener(self) -> AsyncListener:
        if self._listeners is None:
            self._listeners = weakref.WeakKeyDictionary()
        loop = asyncio.get_running_loop()
        listener = self._listeners.get(loop)
        if listener is None:
            listener = self._listeners[loop] = AsyncListener(
                self.options.listen or self._secrets_of,
                self.options.connect_arguments(),
                self.plans.statements.channel,
                trusted=self.options.listen is not None,
            )
        return listener

    async def _close_listeners(self) -> None:
        """Stop every loop's listener: awaited in the running loop, dropped in the others."""
        listeners, self._listeners = self._listeners, None
        if not listeners:
            return
        running = asyncio.get_running_loop()
        for loop, listener in list(listeners.items()):
            if loop is running:
                await listener.close()
            else:
                listener.drop()
