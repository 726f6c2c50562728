"""The asyncio face of the in-memory store: :class:`AsyncMemoryStore` over a :class:`MemoryStore`."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import Any

from chronica_core.closable import Closable
from chronica_core.errors import InvalidOption
from chronica_core.history import Layout, Located, Segment, WindowReads, WindowRows
from chronica_core.memory import MemoryStore
from chronica_core.model import ActaQuery, Actum, Chronicum
from chronica_core.store import (
    AsyncBatchStore,
    AsyncFollowStore,
    AsyncHistoryStore,
    AsyncIdempotentStore,
    AsyncListingStore,
    AsyncNativeStore,
    AsyncRetentionStore,
    ListingPosition,
)

__all__ = ["AsyncMemoryStore"]

_ASYNC_WHERE = "memory: async store"


class AsyncMemoryStore(
    AsyncIdempotentStore,
    AsyncBatchStore,
    AsyncListingStore,
    AsyncRetentionStore,
    AsyncFollowStore,
    AsyncNativeStore,
    AsyncHistoryStore,
    Closable,
):
    """The asyncio face of :class:`MemoryStore`.

    Every operation is a few dictionary and list steps under a lock held for microseconds, so
    it runs on the event loop without blocking it for any noticeable time. After :meth:`close`
    every operation raises ``StoreError("memory: async store", "the store is closed")``.

    Args:
        url: as for :class:`MemoryStore`.
        store: an existing :class:`MemoryStore` to share (a fresh one when ``None``).
        options: as for :class:`MemoryStore` (``max_content_bytes``), for the fresh one.

    Raises:
        InvalidOption: as for :class:`MemoryStore`, or options given together with ``store``.
    """

    backend_name = "memory"

    def __init__(self, url: str = "memory://", *, store: MemoryStore | None = None, **options: Any) -> None:
        if store is not None and options:
            raise InvalidOption("memory", sorted(options)[0], "give it to the shared store instead")
        self._owns_store = store is None
        self.sync_store = store if store is not None else MemoryStore(url, **options)
        self._wakers: set[Callable[[], None]] = set()
        """The wakers of this face's waiting followers: :meth:`close` calls them."""
        self._wakers_lock = threading.Lock()

    async def create(self, chronicum: Chronicum) -> None:
        """See :meth:`MemoryStore.create`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        self.sync_store.create(chronicum)

    async def get(self, chronicum_id: str) -> Chronicum:
        """See :meth:`MemoryStore.get`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.get(chronicum_id)

    async def max_content_bytes(self) -> int | None:
        """See :meth:`MemoryStore.max_content_bytes`."""
        return self.sync_store.max_content_bytes()

    async def record(self, actum: Actum) -> Actum:
        """See :meth:`MemoryStore.record`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.record(actum)

    async def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """See :meth:`MemoryStore.record_idempotent`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.record_idempotent(actum, key)

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """See :meth:`MemoryStore.acta`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.acta(chronicum_id, query)

    async def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """See :meth:`MemoryStore.record_many`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.record_many(acta, key)

    async def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> list[Chronicum]:
        """See :meth:`MemoryStore.list_chronica`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.list_chronica(owner_id, limit, after)

    async def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """See :meth:`MemoryStore.erase`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.erase(chronicum_id, owner_digest)

    async def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """See :meth:`MemoryStore.erase_owner`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.erase_owner(owner_id, owner_digest)

    async def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """See :meth:`MemoryStore.reopen`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.reopen(chronicum, owner_digest)

    async def withdraw(self, chronicum_id: str, owner_digest: str) -> bool:
        """See :meth:`MemoryStore.withdraw`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.withdraw(chronicum_id, owner_digest)

    async def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`MemoryStore.idle_chronica`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.idle_chronica(idle_before, owner_id, after, limit)

    async def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`MemoryStore.erase_idle`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.erase_idle(chronicum_id, idle_before, owner_digest)

    def keeps_native(self) -> bool:
        """See :meth:`MemoryStore.keeps_native`."""
        return True

    async def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`MemoryStore.layout`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.layout(chronicum_id)

    async def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`MemoryStore.window`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.window(chronicum_id, reads)

    async def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`MemoryStore.locate`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.locate(lineage, actum_ids)

    async def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`MemoryStore.fork`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        self.sync_store.fork(chronicum, lineage)

    async def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`MemoryStore.record_summary`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.record_summary(actum, first, last, version, key)

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """See :meth:`MemoryStore.acta_after`."""
        self._refuse_if_closed(None, _ASYNC_WHERE)
        return self.sync_store.acta_after(chronicum_id, after, limit)

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Wait, without blocking the loop, until a write or an erasure wakes it; see ``FollowStore``.

        The wake-up comes through the running loop's ``call_soon_threadsafe`` (writers may be
        other threads); closing the face or its store wakes it too. On return or cancellation
        the waiter is removed, leaving nothing behind.
        """
        self._refuse_if_closed(None, _ASYNC_WHERE)
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def waker() -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(woken.set)

        with self._wakers_lock:
            self._wakers.add(waker)
        try:
            if self._closed:  # closed since the check above: close may have missed this waker
                return
            entry = self.sync_store._watch(chronicum_id, after, waker)
            if entry is None:
                return
            try:
                async with asyncio.timeout(timeout):
                    await woken.wait()
            except TimeoutError:
                pass
            finally:
                self.sync_store._unwatch(entry, waker)
        finally:
            with self._wakers_lock:
                self._wakers.discard(waker)

    async def close(self) -> None:
        """Refuse every later call on this face (``StoreError``).

        A :class:`MemoryStore` given as ``store`` stays open: it is the caller's to close; one
        this face made itself is closed with it. Every follower waiting on this face is woken,
        and its next read raises ``StoreError("memory: async store", "the store is closed")``.
        """
        self._mark_closed()
        with self._wakers_lock:
            wakers = list(self._wakers)
        for waker in wakers:
            waker()
        if self._owns_store:
            self.sync_store.close()
