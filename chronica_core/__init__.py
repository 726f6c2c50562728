"""Chronica: one conversation shared by one person and many AI agents.

Apps talk to :class:`Chronicarius` (or :class:`AsyncChronicarius`) over a store opened with
:func:`open_store` (or :func:`open_async_store`).
"""

import logging

from chronica_core._version import __version__
from chronica_core.chronicarius import AsyncChronicarius, AsyncFollower, Chronicarius
from chronica_core.closable import Closable
from chronica_core.errors import (
    ActumNotFound,
    ActumTooLarge,
    BackendConflict,
    BackendUnavailable,
    CapabilityUnsupported,
    ChronicaError,
    ChronicumExists,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidChronicum,
    InvalidOption,
    InvalidOwnerID,
    InvalidQuery,
    StoreConflict,
    StoreError,
    UnknownBackend,
)
from chronica_core.history import ToolExchanges, View
from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.ids import new_actum_id, new_chronicum_id
from chronica_core.memory import MemoryStore
from chronica_core.memory_async import AsyncMemoryStore
from chronica_core.model import (
    MAX_ID_LENGTH,
    MAX_LAST_N,
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ChronicaPage,
    Chronicum,
    ForkPoint,
    Native,
    Span,
)
from chronica_core.planned import AsyncPlannedStore, PlannedStore, StorePlans
from chronica_core.registry import list_backends, open_async_store, open_store
from chronica_core.store import (
    AsyncBatchStore,
    AsyncErasableStore,
    AsyncFollowStore,
    AsyncHistoryStore,
    AsyncIdempotentStore,
    AsyncListingStore,
    AsyncNativeStore,
    AsyncStore,
    BatchStore,
    ErasableStore,
    FollowStore,
    HistoryStore,
    IdempotentStore,
    ListingPosition,
    ListingStore,
    NativeStore,
    Store,
)

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_LAST_N",
    "ActaQuery",
    "ActorKind",
    "Actum",
    "ActumKind",
    "ActumNotFound",
    "ActumTooLarge",
    "AsyncBatchStore",
    "AsyncChronicarius",
    "AsyncErasableStore",
    "AsyncFollowStore",
    "AsyncFollower",
    "AsyncHistoryStore",
    "AsyncIdempotentStore",
    "AsyncListingStore",
    "AsyncMemoryStore",
    "AsyncNativeStore",
    "AsyncPlannedStore",
    "AsyncStore",
    "Backend",
    "BackendConflict",
    "BackendUnavailable",
    "BatchStore",
    "CapabilityUnsupported",
    "ChronicaError",
    "ChronicaPage",
    "Chronicarius",
    "Chronicum",
    "ChronicumExists",
    "ChronicumNotFound",
    "Closable",
    "EmptyOwnerID",
    "ErasableStore",
    "FollowStore",
    "ForkPoint",
    "HistoryStore",
    "IdempotencyUnsupported",
    "IdempotentStore",
    "InvalidActum",
    "InvalidChronicum",
    "InvalidOption",
    "InvalidOwnerID",
    "InvalidQuery",
    "ListingPosition",
    "ListingStore",
    "MemoryStore",
    "Native",
    "NativeStore",
    "PlannedStore",
    "Span",
    "Store",
    "StoreConflict",
    "StoreError",
    "StorePlans",
    "ToolExchanges",
    "UnknownBackend",
    "View",
    "__version__",
    "hookimpl",
    "list_backends",
    "new_actum_id",
    "new_chronicum_id",
    "open_async_store",
    "open_store",
]

logging.getLogger("chronica").addHandler(logging.NullHandler())  # a library: the app configures logging
