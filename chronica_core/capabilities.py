"""The optional capabilities a store may offer beyond the base contract, and how to tell them.

A store written for the base :class:`chronica_core.Store` protocol keeps working; each capability
is a protocol it may also implement (its asyncio twin for an :class:`chronica_core.AsyncStore`).
``Chronicarius`` raises :class:`chronica_core.CapabilityUnsupported` before touching the store
when a call needs one the store lacks; the conformance suite runs a capability's cases only where
the store has it (and fails, instead of skipping, where the backend declares it); ``chronica
backends`` lists each backend's.

- ``idempotency``: ``record_idempotent`` (:class:`chronica_core.IdempotentStore`).
- ``batch``: ``record_many`` (:class:`chronica_core.BatchStore`).
- ``listing``: ``list_chronica`` (:class:`chronica_core.ListingStore`).
- ``erasure``: ``erase``, ``erase_owner`` and ``reopen`` (:class:`chronica_core.ErasableStore`).
"""

from __future__ import annotations

from typing import Final

from chronica_core.store import (
    AsyncBatchStore,
    AsyncErasableStore,
    AsyncIdempotentStore,
    AsyncListingStore,
    BatchStore,
    ErasableStore,
    IdempotentStore,
    ListingStore,
)

__all__ = ["ALL_CAPABILITIES", "BATCH", "ERASURE", "IDEMPOTENCY", "LISTING", "store_capabilities"]

IDEMPOTENCY: Final = "idempotency"
BATCH: Final = "batch"
LISTING: Final = "listing"
ERASURE: Final = "erasure"

ALL_CAPABILITIES: Final = (IDEMPOTENCY, BATCH, LISTING, ERASURE)
"""Every capability, in the order ``chronica backends`` shows them."""

_PROTOCOLS: Final = {
    IDEMPOTENCY: (IdempotentStore, AsyncIdempotentStore),
    BATCH: (BatchStore, AsyncBatchStore),
    LISTING: (ListingStore, AsyncListingStore),
    ERASURE: (ErasableStore, AsyncErasableStore),
}


def store_capabilities(store: object) -> frozenset[str]:
    """Return the names of the capabilities ``store`` (sync or asyncio) implements.

    A capability counts when the store has every method of its protocol (checked on the object,
    as ``isinstance`` checks a runtime protocol); e.g. ``frozenset({"idempotency", "batch"})``.
    """
    return frozenset(name for name, protocols in _PROTOCOLS.items() if isinstance(store, protocols))
