"""The in-memory store: one process, for tests and development. Thread-safe, with every capability."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chronica_core.closable import Closable
from chronica_core.errors import ChronicumExists, ChronicumNotFound, InvalidOption
from chronica_core.limits import MAX_CONTENT_OPTION, check_content_size, content_limit_option
from chronica_core.model import ActaQuery, Actum, ActumKind, Chronicum
from chronica_core.store import (
    AsyncBatchStore,
    AsyncErasableStore,
    AsyncFollowStore,
    AsyncIdempotentStore,
    AsyncListingStore,
    BatchStore,
    ErasableStore,
    FollowStore,
    IdempotentStore,
    ListingPosition,
    ListingStore,
)

__all__ = ["AsyncMemoryStore", "MemoryStore"]


@dataclass(slots=True)
class _Entry:
    """One chronicum's state, guarded by its own lock."""

    chronicum: Chronicum
    acta: list[Actum] = field(default_factory=list)
    keyed: dict[str, list[Actum]] = field(default_factory=dict)
    """What each idempotency key's write stored: one actum, or a whole batch."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    erased: bool = False
    """Set, under ``lock``, when the chronicum is erased: a writer that found the entry before
    then answers ``ChronicumNotFound`` instead of writing into it."""
    positions: dict[str, int] = field(default_factory=dict)
    """Each actum's index in ``acta``, by id (for followers)."""
    of_kind: dict[ActumKind, list[Actum]] = field(default_factory=dict)
    """The acta of each actum kind, in order: a window of one kind is the tail of its list."""
    changed: threading.Condition = field(init=False)
    """Notified, under ``lock``, by every append and by the erasure: wakes blocking followers."""
    wakers: set[Callable[[], None]] = field(default_factory=set)
    """Called, under ``lock``, by every append and by the erasure: wake asyncio followers."""

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def wake(self) -> None:
        """Under ``lock``: wake every follower of the chronicum."""
        self.changed.notify_all()
        for waker in self.wakers:
            waker()

    def has_news(self, after: str | None) -> bool:
        """Under ``lock``: whether a follower at ``after`` has something to read (or to learn)."""
        return self.erased or (self.acta[-1].id if self.acta else None) != after


_WHERE = "memory: store"
_ASYNC_WHERE = "memory: async store"

_MEMORY_CEILING = sys.maxsize
"""The largest ``max_content_bytes`` the memory store takes (it has no limit of its own)."""


def _content_limit(options: dict[str, Any]) -> int | None:
    """Return the ``max_content_bytes`` option (``None``: no limit); refuse any other option."""
    unknown = sorted(set(options) - {MAX_CONTENT_OPTION})
    if unknown:
        raise InvalidOption(
            "memory", unknown[0], f"unknown option (the memory store takes only {MAX_CONTENT_OPTION})"
        )
    value = options.get(MAX_CONTENT_OPTION)
    return None if value is None else content_limit_option("memory", value, _MEMORY_CEILING)


def _matches(actum: Actum, query: ActaQuery) -> bool:
    return (query.actum_kinds is None or actum.kind in query.actum_kinds) and (
        query.actor_kinds is None or actum.actor_kind in query.actor_kinds
    )


def _listing_key(chronicum: Chronicum) -> ListingPosition:
    return chronicum.started_at, chronicum.id


class MemoryStore(IdempotentStore, BatchStore, ListingStore, ErasableStore, FollowStore, Closable):
    """Keeps everything in this process's memory; gone when the process ends.

    Each chronicum has its own lock, so writers to different chronica never wait for each other.
    Each owner's chronica are indexed by owner, so listing them never looks at other owners'.
    Followers wait on the chronicum's condition, woken by each write (no polling); asyncio
    followers are woken through their event loop's ``call_soon_threadsafe``.
    An erased chronicum's acta and fields are dropped; only its id and owner digest stay.
    Each chronicum's acta are also kept per actum kind, so a window of the newest ``last_n`` of one
    kind (or of every kind), the usual agent read, is a slice whatever the history; any other
    filter scans backwards from the newest actum and stops once it has ``last_n``.
    An actum's ``at`` is taken under that lock, the moment it gets its place, and is never earlier
    than the chronicum's ``last_actum_at`` (should the clock step back). After :meth:`close` every
    operation raises ``StoreError("memory: store", "the store is closed")``.

    Content has no size limit but the process's memory, unless ``max_content_bytes`` sets one:
    then larger content raises ``ActumTooLarge`` as a database store would at its own limit,
    which lets an app's tests cover that case without a server.

    Args:
        url: ``memory://`` (anything after the scheme is ignored).
        options: ``max_content_bytes`` only: the largest content accepted, in bytes of UTF-8
            (a whole number, or its digits as text; default no limit).

    Raises:
        InvalidOption: another option, or a ``max_content_bytes`` that is not a whole number
            from 0 to ``sys.maxsize``.
    """

    backend_name = "memory"

    def __init__(self, url: str = "memory://", **options: Any) -> None:
        self._content_limit = _content_limit(options)
        self._entries: dict[str, _Entry] = {}
        self._erased: dict[str, str] = {}  # chronicum id -> owner digest, for erased chronica
        self._owned: dict[str, dict[str, None]] = {}  # owner id -> its chronicum ids
        self._create_lock = threading.Lock()  # guards the three dicts' keys

    def create(self, chronicum: Chronicum) -> None:
        """Save ``chronicum``. Raises ``ChronicumExists`` if its id is taken (or erased)."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            if chronicum.id in self._entries or chronicum.id in self._erased:
                raise ChronicumExists(chronicum.id)
            self._add(chronicum)

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        """Return up to ``limit`` of the owner's chronica, newest first (see ``ListingStore``)."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            chronica = [
                self._entries[chronicum_id].chronicum for chronicum_id in self._owned.get(owner_id, ())
            ]
        chronica.sort(key=_listing_key, reverse=True)
        if after is not None:
            chronica = [chronicum for chronicum in chronica if _listing_key(chronicum) < after]
        return chronica[:limit]

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """Erase the chronicum, keeping its marker; return the acta erased. Raises ``ChronicumNotFound``."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            return self._erase(chronicum_id, owner_digest)

    def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """Erase every chronicum of ``owner_id``; return how many."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            owned = list(self._owned.get(owner_id, ()))
            for chronicum_id in owned:
                self._erase(chronicum_id, owner_digest)
        return len(owned)

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """Replace the marker of ``chronicum.id`` with ``chronicum`` if its digest is ``owner_digest``."""
        self._refuse_if_closed(None, _WHERE)
        with self._create_lock:
            if self._erased.get(chronicum.id) != owner_digest:
                return False
            del self._erased[chronicum.id]
            self._add(chronicum)
            return True

    def _add(self, chronicum: Chronicum) -> None:
        """Under ``_create_lock``: save a fresh chronicum and index it under its owner."""
        self._entries[chronicum.id] = _Entry(chronicum)
        self._owned.setdefault(chronicum.owner_id, {})[chronicum.id] = None

    def _erase(self, chronicum_id: str, owner_digest: str) -> int:
        """Under ``_create_lock``: drop the chronicum and its acta, leaving the marker."""
        entry = self._entries.pop(chronicum_id, None)
        if entry is None:
            raise ChronicumNotFound(chronicum_id)
        with entry.lock:
            erased = len(entry.acta)
            entry.erased = True
            entry.acta = []
            entry.keyed = {}
            entry.positions = {}
            entry.of_kind = {}
            entry.wake()
        owner_id = entry.chronicum.owner_id
        owned = self._owned[owner_id]
        del owned[chronicum_id]
        if not owned:
            del self._owned[owner_id]
        self._erased[chronicum_id] = owner_digest
        return erased

    def get(self, chronicum_id: str) -> Chronicum:
        """Return the chronicum. Raises ``ChronicumNotFound``."""
        return self._entry(chronicum_id).chronicum

    def max_content_bytes(self) -> int | None:
        """Return the ``max_content_bytes`` option (``None``: no limit); see :class:`MemoryStore`."""
        return self._content_limit

    def record(self, actum: Actum) -> Actum:
        """Append ``actum`` with ``at`` set to now (UTC).

        Raises ``ChronicumNotFound``, or ``ActumTooLarge`` above ``max_content_bytes``.
        """
        check_content_size(actum.content, self._content_limit)
        entry = self._entry(actum.chronicum_id)
        with entry.lock:
            self._check_live(entry)
            return self._append(entry, actum)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """Append ``actum`` unless ``key`` was used in its chronicum; then return the first one.

        Raises ``ChronicumNotFound``, or ``ActumTooLarge`` above ``max_content_bytes``.
        """
        check_content_size(actum.content, self._content_limit)
        entry = self._entry(actum.chronicum_id)
        with entry.lock:
            self._check_live(entry)
            stored = entry.keyed.get(key)
            if stored is None:
                stored = entry.keyed[key] = [self._append(entry, actum)]
            return stored[0]

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """Append ``acta`` (one chronicum's) together; see :class:`chronica_core.BatchStore`.

        Raises ``ChronicumNotFound``, or ``ActumTooLarge`` above ``max_content_bytes`` (nothing written).
        """
        for actum in acta:
            check_content_size(actum.content, self._content_limit)
        entry = self._entry(acta[0].chronicum_id)
        with entry.lock:
            self._check_live(entry)
            if key is not None and key in entry.keyed:
                return list(entry.keyed[key])
            stored = [self._append(entry, actum) for actum in acta]
            if key is not None:
                entry.keyed[key] = stored
            return list(stored)

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """Return the context window, oldest first. Raises ``ChronicumNotFound``."""
        entry = self._entry(chronicum_id)
        kinds, actor_kinds, wanted = query.actum_kinds, query.actor_kinds, query.last_n
        with entry.lock:
            self._check_live(entry)
            if wanted <= 0:
                return [actum for actum in entry.acta if _matches(actum, query)]
            if actor_kinds is None:  # the usual windows: a slice, whatever the history
                if kinds is None:
                    return entry.acta[-wanted:]
                if len(kinds) == 1:
                    return entry.of_kind.get(kinds[0], [])[-wanted:]
            window: list[Actum] = []
            for actum in reversed(entry.acta):  # newest first, stopping once it has `wanted`
                if (kinds is None or actum.kind in kinds) and (
                    actor_kinds is None or actum.actor_kind in actor_kinds
                ):
                    window.append(actum)
                    if len(window) == wanted:
                        break
        window.reverse()
        return window

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """Return up to ``limit`` acta recorded after ``after``; see ``FollowStore.acta_after``."""
        entry = self._entry(chronicum_id)
        with entry.lock:
            self._check_live(entry)
            if after is None:
                start = 0
            else:
                index = entry.positions.get(after)
                if index is None:
                    return None
                start = index + 1
            return entry.acta[start : start + max(limit, 1)]

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Block on the chronicum's condition until a write or an erasure; see ``FollowStore``."""
        try:
            entry = self._entry(chronicum_id)
        except ChronicumNotFound:
            return
        with entry.lock:
            entry.changed.wait_for(lambda: self._closed or entry.has_news(after), timeout)

    def _watch(self, chronicum_id: str, after: str | None, waker: Callable[[], None]) -> _Entry | None:
        """Register ``waker`` for the chronicum; ``None`` (nothing registered) when there is news already."""
        try:
            entry = self._entry(chronicum_id)
        except ChronicumNotFound:
            return None
        with entry.lock:
            if self._closed or entry.has_news(after):
                return None
            entry.wakers.add(waker)
            return entry

    @staticmethod
    def _unwatch(entry: _Entry, waker: Callable[[], None]) -> None:
        with entry.lock:
            entry.wakers.discard(waker)

    def close(self) -> None:
        """Refuse every later operation with ``StoreError`` (closing again is harmless).

        Every follower waiting in :meth:`wait_for_acta` (or an asyncio face's) is woken, and its
        next read raises ``StoreError("memory: store", "the store is closed")``.
        """
        self._mark_closed()
        with self._create_lock:
            entries = list(self._entries.values())
        for entry in entries:
            with entry.lock:
                entry.wake()

    def _entry(self, chronicum_id: str) -> _Entry:
        self._refuse_if_closed(None, _WHERE)
        try:
            return self._entries[chronicum_id]
        except KeyError:
            raise ChronicumNotFound(chronicum_id) from None

    @staticmethod
    def _check_live(entry: _Entry) -> None:
        """Under ``entry.lock``: refuse an entry erased since it was looked up."""
        if entry.erased:
            raise ChronicumNotFound(entry.chronicum.id)

    @staticmethod
    def _append(entry: _Entry, actum: Actum) -> Actum:
        """Append under ``entry.lock``: ``at`` is now, or the chronicum's last ``at`` if that is later."""
        at = datetime.now(UTC)
        last = entry.chronicum.last_actum_at
        if last is not None and last > at:
            at = last
        stored = Actum(
            actum.chronicum_id, actum.kind, actum.actor_kind, actum.actor, actum.content, actum.id, at
        )
        entry.positions[actum.id] = len(entry.acta)
        entry.acta.append(stored)
        of_kind = entry.of_kind.get(stored.kind)
        if of_kind is None:
            entry.of_kind[stored.kind] = [stored]
        else:
            of_kind.append(stored)
        chronicum = entry.chronicum
        entry.chronicum = Chronicum(chronicum.id, chronicum.owner_id, chronicum.started_at, at)
        entry.wake()
        return stored


class AsyncMemoryStore(
    AsyncIdempotentStore, AsyncBatchStore, AsyncListingStore, AsyncErasableStore, AsyncFollowStore, Closable
):
    """The asyncio face of :class:`MemoryStore`.

    Every operation is a few dictionary and list steps under a lock held only for those steps,
    so it runs on the event loop without blocking it for any noticeable time. After :meth:`close`
    every operation raises ``StoreError("memory: async store", "the store is closed")``.

    Args:
        url: ``memory://`` (anything after the scheme is ignored).
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
