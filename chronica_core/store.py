"""What a store promises: the sync and async store protocols.

A store only saves and reads. It checks no owner, validates nothing and assigns no ids: those
rules live in :class:`chronica_core.Chronicarius`. Every method raises :class:`StoreError` (chained
to the driver's exception) for anything that is not one of the errors it documents.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from chronica_core.history import Layout, Located, Segment, WindowReads, WindowRows
from chronica_core.model import ActaQuery, Actum, Chronicum

__all__ = [
    "AsyncBatchStore",
    "AsyncErasableStore",
    "AsyncFollowStore",
    "AsyncHistoryStore",
    "AsyncIdempotentStore",
    "AsyncListingStore",
    "AsyncNativeStore",
    "AsyncRetentionStore",
    "AsyncStore",
    "BatchStore",
    "ErasableStore",
    "FollowStore",
    "HistoryStore",
    "IdempotentStore",
    "ListingPosition",
    "ListingStore",
    "NativeStore",
    "RetentionStore",
    "Store",
]

ListingPosition = tuple[datetime, str]
"""Where a listing page ends: the ``(started_at, id)`` of the last chronicum it held."""


@runtime_checkable
class Store(Protocol):
    """A blocking store. Subclass it to inherit context-manager support.

    Contract (checked by ``chronica-conformance``):

    - ``create(chronicum)`` saves a chronicum as given; raises ``ChronicumExists`` if the id is taken.
    - ``get(chronicum_id)`` returns it; raises ``ChronicumNotFound`` if it does not exist.
    - ``record(actum)`` appends an actum with its id as given, sets ``at`` (timezone-aware UTC),
      moves the chronicum's ``last_actum_at`` and returns the stored actum; raises
      ``ChronicumNotFound`` if the chronicum does not exist.
    - ``acta(chronicum_id, query)`` filters by kinds and actor kinds, keeps the newest
      ``query.last_n`` (all when ``<= 0``) and returns them oldest first, in write order; raises
      ``ChronicumNotFound`` for a missing chronicum (an existing one with no acta gives ``[]``).
    - ``close()`` releases connections; the store is not used afterwards.

    Optionally, ``max_content_bytes()`` returns the largest content ``record`` accepts, in bytes
    of UTF-8 (``None``: no limit), and ``record`` raises ``ActumTooLarge`` above it with nothing
    written. ``Chronicarius`` asks it before creating the chronicum of a first write, so a
    refused first write leaves no empty chronicum behind. Every Chronica store has it.
    """

    def create(self, chronicum: Chronicum) -> None:
        """Save ``chronicum``. Raises ``ChronicumExists`` if its id is taken."""
        ...

    def record(self, actum: Actum) -> Actum:
        """Append ``actum`` and return it with ``at`` set. Raises ``ChronicumNotFound``."""
        ...

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """Return the context window ``query`` describes, oldest first. Raises ``ChronicumNotFound``."""
        ...

    def get(self, chronicum_id: str) -> Chronicum:
        """Return the chronicum. Raises ``ChronicumNotFound``."""
        ...

    def close(self) -> None:
        """Release what the store holds (connections, files)."""
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@runtime_checkable
class IdempotentStore(Store, Protocol):
    """A store that can make a retried write land once."""

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """Record ``actum`` unless ``key`` was already used in its chronicum.

        Returns the newly stored actum, or the actum stored the first time ``key`` was used (the
        new one is discarded, even if its content differs). Any number of concurrent calls with one
        key store exactly one actum and all return it. Raises ``ChronicumNotFound``.
        """
        ...


@runtime_checkable
class BatchStore(Store, Protocol):
    """A store that appends several acta of one chronicum at once (the ``batch`` capability)."""

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """Append ``acta`` (at least one, all of one chronicum) atomically and consecutively.

        All land or none; no other write's actum falls between them; their ``at`` never decreases
        along the batch. Returns the stored acta, in the order given, each with ``at`` set.
        With a ``key``: if the key was already used in the chronicum (by a batch, or by
        ``record_idempotent``), nothing is written and the acta that write stored are returned
        (the whole list, their ids; one actum for a ``record_idempotent`` write). Any number of
        concurrent calls with one key store exactly one batch. ``record_idempotent`` given a key
        a batch used returns the first actum of that batch.

        Raises ``ChronicumNotFound`` (nothing written), or ``ActumTooLarge`` when any actum's
        content is over the store's limit (nothing written).
        """
        ...


@runtime_checkable
class ListingStore(Store, Protocol):
    """A store that lists an owner's chronica through an index (the ``listing`` capability)."""

    def list_chronica(self, owner_id: str, limit: int, after: ListingPosition | None) -> list[Chronicum]:
        """Return up to ``limit`` (1 to 1001) of ``owner_id``'s chronica, newest first.

        The order is ``started_at`` descending, ties by ``id`` descending (compared as code points,
        or bytes of UTF-8), starting just after the position ``after`` in that order (from the
        newest when ``None``).

        Erased chronica are never listed. Served by an index on the owner and that order, so its
        cost does not grow with other owners' chronica.
        """
        ...


@runtime_checkable
class ErasableStore(Store, Protocol):
    """A store that erases chronica for data protection (the ``erasure`` capability).

    Erasing removes a chronicum's acta, their idempotency keys and its own fields from the
    database (deleted, not hidden), keeping only a marker: the chronicum id and
    ``owner_digest`` (see :func:`chronica_core.erasure.owner_digest`), so that the id can never
    be claimed by another owner. A marker is not a chronicum: ``get``, ``acta``, ``record``,
    ``record_idempotent``, ``record_many`` and ``erase`` answer ``ChronicumNotFound`` for its id,
    ``list_chronica`` never returns it and ``create`` answers ``ChronicumExists``.

    Optionally, ``withdraw(chronicum_id, owner_digest) -> bool`` turns a chronicum that holds no
    acta into its marker, as ``erase`` would, decided atomically with writers: a chronicum that
    holds an actum (recorded by any writer, before or meanwhile) is kept as it is and ``False``
    returned, as it is for a missing id, a marker or a fork. A write racing with it lands wholly
    before it (and keeps the chronicum) or answers ``ChronicumNotFound`` with nothing written.
    Forks made of it while empty share none of its acta and stay. The id stays its owner's, like
    an erased one: the owner's next first write reopens it, fresh, and any other owner is
    refused, so ownership never changes. ``Chronicarius`` withdraws the chronicum a first write
    created when that write then failed with ``StoreError``, so a failed first write leaves no
    empty chronicum behind. Every Chronica store has it; without it the empty chronicum stays
    (and a warning is logged).
    """

    def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """Erase the chronicum, atomically, leaving its marker; return how many acta were erased.

        A write racing with it lands wholly before (then erased) or after (then ``ChronicumNotFound``).
        Raises ``ChronicumNotFound`` when there is no chronicum with that id (or only a marker).
        """
        ...

    def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """Erase every chronicum of ``owner_id`` as :meth:`erase` does; return how many were erased.

        Each chronicum is erased atomically; ``0`` when the owner has none.
        """
        ...

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """Replace the marker of ``chronicum.id`` with ``chronicum`` if its digest is ``owner_digest``.

        ``chronicum`` is saved as given, with no acta; returns whether it was.

        ``False`` when there is no marker for that id or its digest differs; nothing is changed then.
        """
        ...


@runtime_checkable
class RetentionStore(ErasableStore, Protocol):
    """A store that finds and erases idle chronica through an index (the ``retention`` capability).

    A chronicum's **last activity** is the later of its ``started_at`` (a fork's: when it was
    forked) and its ``last_actum_at``.
    """

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """Return up to ``limit`` (1 to 1001) live chronica whose last activity is before ``idle_before``.

        Oldest last activity first, ties by id (code points, or bytes of UTF-8), starting just
        after ``after`` = ``(last activity, id)`` (from the oldest when ``None``); every owner's,
        or ``owner_id``'s only. Served by an index on the last activity (and one on the owner and
        it), so its cost follows what it returns, not how many chronica the store holds.
        """
        ...

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """Erase the chronicum as ``erase`` does, if it and every fork of it are still idle.

        Decided atomically with writers: a chronicum written to meanwhile (or a fork of it) is kept
        whole and ``0`` returned. Returns how many chronica were erased (the chronicum and its
        forks). ``0`` too when the chronicum is missing or already erased.
        """
        ...


@runtime_checkable
class FollowStore(Store, Protocol):
    """A store that reads the acta after a given one and waits for new ones (the ``follow`` capability).

    ``Chronicarius.follow`` works on every store; on one with this capability it reads only what
    is new (one read per wake-up) and sleeps until the store wakes it, instead of polling the
    newest acta with :meth:`Store.acta`.
    """

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """Return up to ``limit`` (at least 1) acta recorded after the actum whose id is ``after``.

        The acta come in write order (the order of :meth:`Store.acta`), unfiltered, starting just
        after ``after`` (from the chronicum's first actum when ``after`` is ``None``). A reader
        never sees a later actum before an earlier one: what one call returns is followed, in the
        next call from its last id, by everything recorded after it, nothing skipped.

        Returns ``None`` when the chronicum holds no actum with the id ``after``, ``[]`` when
        nothing was recorded after it. Raises ``ChronicumNotFound`` for a missing (or erased)
        chronicum.
        """
        ...

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Block until the chronicum may hold acta after ``after``, or ``timeout`` seconds pass.

        Returns at once when its newest actum is not ``after`` (``None``: the chronicum is empty)
        or when the chronicum is missing or erased; otherwise when a write or an erasure may have
        changed that, or when ``timeout`` seconds (``None``: no limit) have passed. It may return
        early without a change: the caller reads again with :meth:`acta_after` either way.
        Leaves nothing behind (no thread, task or connection of its own) once it returns or is
        cancelled.
        """
        ...


@runtime_checkable
class NativeStore(Store, Protocol):
    """A store that keeps an actum's native form beside its content (the ``native`` capability).

    Every write keeps ``Actum.native`` as given and every read returns it. The store's content
    limit (``max_content_bytes``) then holds for content and native data together (see
    :func:`chronica_core.limits.actum_size`).
    """

    def keeps_native(self) -> bool:
        """Return ``True``: this store keeps ``Actum.native`` (the declaration of the capability)."""
        ...


@runtime_checkable
class HistoryStore(Store, Protocol):
    """A store of histories with a shape: forks, summaries, tool exchanges (the ``history`` capability).

    What windows hold is decided by the rules (:mod:`chronica_core.history`); the store keeps
    positions, lineages and summary ranges, and reads what it is asked. Besides these methods:

    - every actum gets a position, growing along its chronicum's write order; a fork's own acta
      get positions after the one it branched at;
    - ``record``, ``record_idempotent`` and ``record_many`` keep ``Actum.answers`` as given;
    - ``erase`` (with the ``erasure`` capability) also erases every fork whose lineage names the
      chronicum (forks of forks included), forks first, and counts their acta in what it returns;
    - ``get`` and ``list_chronica`` return a fork with its ``forked_from``;
    - ``acta``, ``acta_after`` and ``wait_for_acta`` concern the chronicum's own acta only, and
      ``acta`` raises :class:`chronica_core.history.StaleLayout` for a chronicum that has a
      summary or a tool response naming its request (the rules read such a chronicum with
      ``window``; a plain one, with ``acta``).
    """

    def layout(self, chronicum_id: str) -> Layout:
        """Return the chronicum with its lineage, every summary mark of its history and the version.

        Raises ``ChronicumNotFound`` for a missing (or erased) chronicum.
        """
        ...

    def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """Perform ``reads`` in one snapshot and return the rows with the chronicum's layout version.

        Raises ``ChronicumNotFound`` for a missing (or erased) chronicum, whatever the reads.
        """
        ...

    def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """Return the acta of ``lineage`` with these ids, by id; ids not found are left out."""
        ...

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """Save ``chronicum`` (a fork: ``forked_from`` set) with ``lineage``, its last segment its own.

        Atomic with erasure: raises ``ChronicumNotFound`` (nothing saved) when the source,
        ``chronicum.forked_from.chronicum_id``, is missing or erased; ``ChronicumExists`` when the
        id is taken (or an erasure marker).
        """
        ...

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """Append the summary ``actum``, standing for positions ``first`` to ``last``; return it stored.

        With a ``key`` already used in the chronicum, returns the actum that write stored and
        writes nothing. Otherwise raises :class:`chronica_core.history.StaleLayout` (nothing
        written) unless the chronicum's layout version is still ``version``; ``ChronicumNotFound``,
        ``ActumTooLarge`` as ``record`` does.
        """
        ...


@runtime_checkable
class AsyncStore(Protocol):
    """The asyncio twin of :class:`Store`: the same contract, every method a coroutine."""

    async def create(self, chronicum: Chronicum) -> None:
        """Save ``chronicum``. Raises ``ChronicumExists`` if its id is taken."""
        ...

    async def record(self, actum: Actum) -> Actum:
        """Append ``actum`` and return it with ``at`` set. Raises ``ChronicumNotFound``."""
        ...

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        """Return the context window ``query`` describes, oldest first. Raises ``ChronicumNotFound``."""
        ...

    async def get(self, chronicum_id: str) -> Chronicum:
        """Return the chronicum. Raises ``ChronicumNotFound``."""
        ...

    async def close(self) -> None:
        """Release what the store holds (connections, files)."""
        ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


@runtime_checkable
class AsyncIdempotentStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`IdempotentStore`."""

    async def record_idempotent(self, actum: Actum, key: str) -> Actum:
        """Same contract as :meth:`IdempotentStore.record_idempotent`."""
        ...


@runtime_checkable
class AsyncBatchStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`BatchStore`."""

    async def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        """Same contract as :meth:`BatchStore.record_many`."""
        ...


@runtime_checkable
class AsyncListingStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`ListingStore`."""

    async def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> list[Chronicum]:
        """Same contract as :meth:`ListingStore.list_chronica`."""
        ...


@runtime_checkable
class AsyncErasableStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`ErasableStore`."""

    async def erase(self, chronicum_id: str, owner_digest: str) -> int:
        """Same contract as :meth:`ErasableStore.erase`."""
        ...

    async def erase_owner(self, owner_id: str, owner_digest: str) -> int:
        """Same contract as :meth:`ErasableStore.erase_owner`."""
        ...

    async def reopen(self, chronicum: Chronicum, owner_digest: str) -> bool:
        """Same contract as :meth:`ErasableStore.reopen`."""
        ...


@runtime_checkable
class AsyncRetentionStore(AsyncErasableStore, Protocol):
    """The asyncio twin of :class:`RetentionStore`."""

    async def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """Same contract as :meth:`RetentionStore.idle_chronica`."""
        ...

    async def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """Same contract as :meth:`RetentionStore.erase_idle`."""
        ...


@runtime_checkable
class AsyncFollowStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`FollowStore`."""

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        """Same contract as :meth:`FollowStore.acta_after`."""
        ...

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        """Same contract as :meth:`FollowStore.wait_for_acta`; cancelling it leaves nothing behind."""
        ...


@runtime_checkable
class AsyncNativeStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`NativeStore`."""

    def keeps_native(self) -> bool:
        """Same contract as :meth:`NativeStore.keeps_native` (a plain method on both flavours)."""
        ...


@runtime_checkable
class AsyncHistoryStore(AsyncStore, Protocol):
    """The asyncio twin of :class:`HistoryStore`."""

    async def layout(self, chronicum_id: str) -> Layout:
        """Same contract as :meth:`HistoryStore.layout`."""
        ...

    async def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """Same contract as :meth:`HistoryStore.window`."""
        ...

    async def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """Same contract as :meth:`HistoryStore.locate`."""
        ...

    async def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """Same contract as :meth:`HistoryStore.fork`."""
        ...

    async def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """Same contract as :meth:`HistoryStore.record_summary`."""
        ...
