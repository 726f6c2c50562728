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
- ``follow``: ``acta_after`` and ``wait_for_acta`` (:class:`chronica_core.FollowStore`); without
  it ``Chronicarius.follow`` still works, by polling the newest acta.
- ``native``: ``keeps_native`` (:class:`chronica_core.NativeStore`): acta keep a framework's own
  form beside their content.
- ``retention``: ``idle_chronica`` and ``erase_idle`` (:class:`chronica_core.RetentionStore`):
  erasing the chronica idle since a moment, through an index.
- ``history``: ``layout``, ``window``, ``locate``, ``fork`` and ``record_summary``
  (:class:`chronica_core.HistoryStore`): forks, summaries, tool exchanges, an actum read by its
  id and pages before an actum.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from typing import Final

from chronica_core.store import (
    AsyncBatchStore,
    AsyncErasableStore,
    AsyncFollowStore,
    AsyncHistoryStore,
    AsyncIdempotentStore,
    AsyncListingStore,
    AsyncNativeStore,
    AsyncRetentionStore,
    BatchStore,
    ErasableStore,
    FollowStore,
    HistoryStore,
    IdempotentStore,
    ListingStore,
    NativeStore,
    RetentionStore,
)

__all__ = [
    "ALL_CAPABILITIES",
    "BATCH",
    "ERASURE",
    "FOLLOW",
    "HISTORY",
    "IDEMPOTENCY",
    "LISTING",
    "NATIVE",
    "RETENTION",
    "store_capabilities",
]

IDEMPOTENCY: Final = "idempotency"
BATCH: Final = "batch"
LISTING: Final = "listing"
ERASURE: Final = "erasure"
FOLLOW: Final = "follow"
NATIVE: Final = "native"
HISTORY: Final = "history"
RETENTION: Final = "retention"

ALL_CAPABILITIES: Final = (IDEMPOTENCY, BATCH, LISTING, ERASURE, FOLLOW, NATIVE, HISTORY, RETENTION)
"""Every capability, in the order ``chronica backends`` shows them."""

_ARGUMENTS: Final = {
    IDEMPOTENCY: {"record_idempotent": 2},
    BATCH: {"record_many": 2},
    LISTING: {"list_chronica": 3},
    ERASURE: {"erase": 2, "erase_owner": 2, "reopen": 2},
    FOLLOW: {"acta_after": 3, "wait_for_acta": 3},
    NATIVE: {"keeps_native": 0},
    HISTORY: {"layout": 1, "window": 2, "locate": 2, "fork": 2, "record_summary": 5},
    RETENTION: {"idle_chronica": 4, "erase_idle": 3},
}
"""How many positional arguments each capability's methods take (after ``self``)."""

_PROTOCOLS: Final = {
    IDEMPOTENCY: (IdempotentStore, AsyncIdempotentStore),
    BATCH: (BatchStore, AsyncBatchStore),
    LISTING: (ListingStore, AsyncListingStore),
    ERASURE: (ErasableStore, AsyncErasableStore),
    FOLLOW: (FollowStore, AsyncFollowStore),
    NATIVE: (NativeStore, AsyncNativeStore),
    HISTORY: (HistoryStore, AsyncHistoryStore),
    RETENTION: (RetentionStore, AsyncRetentionStore),
}


def store_capabilities(store: object) -> frozenset[str]:
    """Return the names of the capabilities ``store`` (sync or asyncio) implements.

    A capability counts when the store has every method of its protocol (as ``isinstance``
    checks a runtime protocol) and each takes the protocol's arguments, so that an older store's
    own method that happens to share a name (a ``record_many(acta)`` of its own) is not taken
    for the capability; e.g. ``frozenset({"idempotency", "batch"})``.

    Found once per store object (reading signatures is slow next to a store call) and kept while
    the store lives; a store that cannot be weakly referenced is looked at on every call.
    """
    try:
        return _FOUND[store]
    except (KeyError, TypeError):  # not seen yet, or no weak reference possible
        pass
    found = frozenset(
        name
        for name, protocols in _PROTOCOLS.items()
        if isinstance(store, protocols)
        and all(_takes(getattr(store, method), count) for method, count in _ARGUMENTS[name].items())
    )
    with contextlib.suppress(TypeError):
        _FOUND[store] = found
    return found


_FOUND: weakref.WeakKeyDictionary[object, frozenset[str]] = weakref.WeakKeyDictionary()


def _takes(method: object, count: int) -> bool:
    """Whether ``method`` can be called with ``count`` positional arguments."""
    try:
        inspect.signature(method).bind(*range(count))  # type: ignore[arg-type]
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): trust the name
        return True
    return True
