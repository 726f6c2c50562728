"""Chronica: one conversation shared by one person and many AI agents.

Apps talk to :class:`Chronicarius` (or :class:`AsyncChronicarius`) over a store opened with
:func:`open_store` (or :func:`open_async_store`).
"""

from chronica_core.chronicarius import AsyncChronicarius, Chronicarius
from chronica_core.closable import Closable
from chronica_core.errors import (
    ActumTooLarge,
    BackendConflict,
    BackendUnavailable,
    ChronicaError,
    ChronicumExists,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidOption,
    InvalidOwnerID,
    InvalidQuery,
    StoreError,
    UnknownBackend,
)
from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.ids import new_actum_id, new_chronicum_id
from chronica_core.memory import AsyncMemoryStore, MemoryStore
from chronica_core.model import MAX_ID_LENGTH, MAX_LAST_N, ActaQuery, ActorKind, Actum, ActumKind, Chronicum
from chronica_core.planned import AsyncPlannedStore, PlannedStore, StorePlans
from chronica_core.registry import list_backends, open_async_store, open_store
from chronica_core.store import AsyncIdempotentStore, AsyncStore, IdempotentStore, Store

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_LAST_N",
    "ActaQuery",
    "ActorKind",
    "Actum",
    "ActumKind",
    "ActumTooLarge",
    "AsyncChronicarius",
    "AsyncIdempotentStore",
    "AsyncMemoryStore",
    "AsyncPlannedStore",
    "AsyncStore",
    "Backend",
    "BackendConflict",
    "BackendUnavailable",
    "ChronicaError",
    "Chronicarius",
    "Chronicum",
    "ChronicumExists",
    "ChronicumNotFound",
    "Closable",
    "EmptyOwnerID",
    "IdempotencyUnsupported",
    "IdempotentStore",
    "InvalidActum",
    "InvalidOption",
    "InvalidOwnerID",
    "InvalidQuery",
    "MemoryStore",
    "PlannedStore",
    "Store",
    "StoreError",
    "StorePlans",
    "UnknownBackend",
    "hookimpl",
    "list_backends",
    "new_actum_id",
    "new_chronicum_id",
    "open_async_store",
    "open_store",
]
