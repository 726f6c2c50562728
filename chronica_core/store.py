"""What a store promises: the sync and async store protocols.

A store only saves and reads. It checks no owner, validates nothing and assigns no ids: those
rules live in :class:`chronica_core.Chronicarius`. Every method raises :class:`StoreError` (chained
to the driver's exception) for anything that is not one of the errors it documents.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from chronica_core.model import ActaQuery, Actum, Chronicum

__all__ = ["AsyncIdempotentStore", "AsyncStore", "IdempotentStore", "Store"]


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
