"""The Redis stores: :class:`RedisStore` (blocking) and :class:`AsyncRedisStore` (asyncio), on redis-py.

Both only perform what the plans of :mod:`chronica_redis.plans` yield; the operations are those of
:class:`chronica_core.PlannedStore` and :class:`chronica_core.AsyncPlannedStore`. Either opens on
one server (``redis://``, ``rediss://``) or a Redis Cluster (``redis+cluster://``); see
:mod:`chronica_redis.urls` for the URLs and options.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from typing import Any, Final, TypeVar

from redis.exceptions import RedisClusterException, RedisError

from chronica_core.errors import ChronicaError, ChronicumNotFound, StoreError
from chronica_core.follow import follow_reads
from chronica_core.loops import PerLoop
from chronica_core.model import Actum
from chronica_core.planned import AsyncPlannedStore, PlannedStore
from chronica_core.planned_shapes import AsyncPlannedShapes, PlannedShapes
from chronica_core.plans import Plan, run_plan, run_plan_async
from chronica_core.redaction import masked_url, redact_error
from chronica_core.store import (
    AsyncHistoryStore,
    AsyncNativeStore,
    AsyncRetentionStore,
    HistoryStore,
    NativeStore,
    RetentionStore,
)
from chronica_redis import durability
from chronica_redis.clients import AsyncClient, BlockingClient, blocking_client, open_async_client
from chronica_redis.follow import MAX_WAIT_SECONDS, Listener, Markings, waker_for_running_loop
from chronica_redis.history import HistoryPlans
from chronica_redis.migration import migrate
from chronica_redis.operations import Operation
from chronica_redis.urls import Settings, settings_of

__all__ = ["AsyncRedisStore", "RedisStore"]

Result = TypeVar("Result")

_log = logging.getLogger("chronica.redis")
_CREATING: Final = threading.Lock()
"""Held while a store makes its listener, so that racing first waits make one."""


def _plans(settings: Settings) -> HistoryPlans:
    return HistoryPlans(
        settings.prefix, settings.wait_replicas, settings.wait_timeout, settings.max_content_bytes
    )


def _wait_seconds(timeout: float | None) -> float:
    return MAX_WAIT_SECONDS if timeout is None else max(0.0, min(timeout, MAX_WAIT_SECONDS))


class _Following:
    """What both stores keep for their followers: the listener (made on the first wait) and marks."""

    _settings: Settings
    _closed: bool
    plans: HistoryPlans

    def _start_following(self) -> None:
        self._listener: Listener | None = None
        self._markings = Markings()

    def _follow_listener(self) -> Listener:
        with _CREATING:
            listener = self._listener
            if listener is None or listener.pid != os.getpid():  # none yet, or the parent's
                settings = self._settings
                listener = self._listener = Listener(lambda: blocking_client(settings), self.plans.channel)
            return listener

    def _closed_underneath(self, error: Exception, where: str) -> None:
        """Raise ``StoreError(where, "the store is closed")`` from ``error`` if the store closed meanwhile.

        redis-py tears down a connection closed in the middle of a command in ways of its own (an
        ``AttributeError`` from its reader, say): an operation that ``close`` overtook fails as
        every operation on a closed store does. Chronica's own errors pass unchanged.
        """
        if self._closed and not isinstance(error, ChronicaError):
            raise StoreError(where, "the store is closed") from error

    def _stop_following(self) -> None:
        if self._listener is not None and self._listener.pid == os.getpid():
            self._listener.close()


class RedisStore(_Following, PlannedShapes, PlannedStore, RetentionStore, NativeStore, HistoryStore):
    """A blocking, idempotent store on Redis or Valkey, one server or a cluster, with every capability.

    Thread-safe (redis-py pools connections); fork-safe (a child process opens connections of its
    own). Opening it reads every node's settings (see :mod:`chronica_redis.durability`).

    Args:
        url: ``redis://``, ``rediss://``, ``redis+cluster://`` or ``rediss+cluster://`` (see
            :mod:`chronica_redis.urls`).
        options: the store's options (``prefix``, ``wait_replicas``, ``wait_timeout``,
            ``accept_eviction_loss``, ``accept_restart_loss``, ``max_content_bytes``) and redis-py's
            connection options (:data:`chronica_redis.urls.CLIENT_OPTIONS`), as keywords.

    Raises:
        InvalidOption: an unknown option (the known ones are listed) or a malformed value,
            before anything connects.
        StoreError: ``redis: open: ...``: a URL that is not a Redis one, a server that cannot be
            reached, or one that loses acknowledged acta (eviction, nothing on disk) unless that
            risk is accepted.
    """

    plans: HistoryPlans
    backend_name = "redis"

    def __init__(self, url: str, **options: Any) -> None:
        self._settings = settings = settings_of(url, options)
        self._secrets_of = url
        self.plans = _plans(settings)
        self._start_following()
        client: BlockingClient | None = None
        try:
            client = BlockingClient(blocking_client(settings), settings)
            self.plans.server_content_limit = run_plan(durability.check(settings.durability), client.perform)
        except (RedisError, RedisClusterException, StoreError) as error:
            if client is not None:  # refused, or unreachable: its connections are closed
                client.close()
            redact_error(error, url)
            if isinstance(error, StoreError):
                raise
            raise StoreError("redis: open", str(error)) from error
        self._client = client
        _log.debug("opened a store on %s", masked_url(url))

    @property
    def client(self) -> Any:
        """The redis-py client (``redis.Redis`` or ``redis.cluster.RedisCluster``)."""
        return self._client.client

    def _run(self, plan: Plan[Any, Result]) -> Result:
        try:
            return run_plan(plan, self._client.perform)
        except Exception as error:
            self._closed_underneath(error, "redis: store")
            raise

    def migrate(self) -> None:
        """Bring chronica an earlier chronica-redis wrote up to date (see :mod:`chronica_redis.migration`).

        Safe to repeat, and while the store is in use; ``StoreError`` if the server fails.
        """
        self._run_if_open(migrate(self.plans))

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`chronica_core.FollowStore.acta_after`: one script, looking back from the newest."""
        return self._run_if_open(self.plans.acta_after(chronicum_id, after, limit))

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`chronica_core.FollowStore.wait_for_acta` (and :mod:`chronica_redis.follow`)."""
        self._refuse_if_closed(None, "redis: store")
        listener = self._follow_listener()
        woken = threading.Event()
        listener.watch(chronicum_id, woken.set)
        try:
            try:
                with follow_reads(self).turn():
                    mark, sent_at = self._markings.needed(chronicum_id), time.monotonic()
                    newest = self._run_if_open(self.plans.newest(chronicum_id, mark))
            except ChronicumNotFound:
                return
            if mark:
                self._markings.marked(chronicum_id, sent_at)
            if newest != after:
                return
            woken.wait(_wait_seconds(timeout))
        finally:
            listener.unwatch(chronicum_id, woken.set)

    def close(self) -> None:
        """Close the client and stop the listener; later operations raise ``StoreError``."""
        self._mark_closed()
        self._stop_following()
        self._client.close()
        _log.debug("closed the store on %s", masked_url(self._secrets_of))


class AsyncRedisStore(
    _Following,
    AsyncPlannedShapes,
    AsyncPlannedStore,
    AsyncRetentionStore,
    AsyncNativeStore,
    AsyncHistoryStore,
):
    """The asyncio twin of :class:`RedisStore`: the same plans, awaited on ``redis.asyncio``.

    Built without awaiting anything; it connects on its first operation, which also runs the
    durability check (once per store). One store serves every event loop of the process: each
    loop gets a client of its own on its first operation, closed when that loop closes and at
    :meth:`close` (see :class:`chronica_core.loops.PerLoop`). Its followers share one listener
    thread with a blocking client, whatever the number of loops. A child process forked after the
    store was used makes clients of its own.

    Args and errors are those of :class:`RedisStore`; the ones raised at open by the blocking
    store (an unreachable server, a durability refusal) are raised by the first operation.
    """

    plans: HistoryPlans
    backend_name = "redis"

    def __init__(self, url: str, **options: Any) -> None:
        self._settings = settings_of(url, options)
        self._secrets_of = url
        self.plans = _plans(self._settings)
        self._start_following()
        self._checked = False
        self._clients: PerLoop[AsyncClient] = PerLoop(self._where, self._open_client, _close, _drop)

    async def _open_client(self) -> AsyncClient:
        return open_async_client(self._settings)

    async def _run(self, plan: Plan[Any, Result]) -> Result:
        try:
            client = await self._clients.get()
        except BaseException:
            plan.close()
            raise
        if not self._checked:
            try:
                limit = await run_plan_async(durability.check(self._settings.durability), client.perform)
            except (RedisError, RedisClusterException) as error:
                plan.close()
                raise StoreError("redis: open", str(error)) from error
            except BaseException:
                plan.close()
                raise
            self.plans.server_content_limit = limit
            self._checked = True
        try:
            return await run_plan_async(plan, functools.partial(_perform, client))
        except Exception as error:
            self._closed_underneath(error, self._where)
            raise

    async def migrate(self) -> None:
        """See :meth:`RedisStore.migrate`."""
        await self._run_if_open(migrate(self.plans))

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`RedisStore.acta_after`."""
        return await self._run_if_open(self.plans.acta_after(chronicum_id, after, limit))

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """See :meth:`RedisStore.wait_for_acta`; cancelling it leaves nothing of the follower's."""
        self._check_open()
        listener = self._follow_listener()
        woken = asyncio.Event()
        waker = waker_for_running_loop(woken)
        listener.watch(chronicum_id, waker)
        try:
            try:
                async with follow_reads(self).loop_turn():
                    mark, sent_at = self._markings.needed(chronicum_id), time.monotonic()
                    newest = await self._run_if_open(self.plans.newest(chronicum_id, mark))
            except ChronicumNotFound:
                return
            if mark:
                self._markings.marked(chronicum_id, sent_at)
            if newest != after:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_wait_seconds(timeout)):
                    await woken.wait()
        finally:
            listener.unwatch(chronicum_id, waker)

    async def close(self) -> None:
        """Close every loop's client (see :class:`chronica_core.loops.PerLoop`) and stop the listener.

        Later operations raise ``StoreError("redis: async store", "the store is closed")``.
        """
        self._mark_closed()
        self._stop_following()
        await self._clients.close()
        _log.debug("closed the async store on %s", masked_url(self._secrets_of))


async def _perform(client: AsyncClient, operation: Operation) -> Any:
    """Perform ``operation``, then honour a cancellation the driver swallowed.

    On Python 3.11, ``asyncio.wait_for`` (which redis-py sends each command through when
    ``socket_timeout`` is set) returns its result, dropping the cancellation, when the task is
    cancelled just as the command completes; a follower cancelled at that moment polled for ever.
    The task still counts the request (``Task.cancelling()``), so it is raised here.
    """
    answer = await client.perform(operation)
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    return answer


async def _close(client: AsyncClient) -> None:
    await client.close()


def _drop(client: AsyncClient) -> None:
    """Its loop is not running: nothing can be awaited; the sockets close when they are freed."""
