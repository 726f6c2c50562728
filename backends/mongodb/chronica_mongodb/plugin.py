"""Registers the MongoDB backend through the ``chronica`` entry-point group, like any plugin.

Kept light: pymongo is imported only when a store is opened, so a missing driver is reported
as ``BackendUnavailable`` (naming ``chronica-mongodb``) instead of hiding the backend.
"""

from __future__ import annotations

from typing import Any

from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.store import AsyncStore, Store

__all__ = ["chronica_backends", "open_async_store", "open_store"]


def open_store(url: str, **options: Any) -> Store:
    """Open a :class:`chronica_mongodb.MongoStore` for ``url``; options as its constructor's."""
    from chronica_mongodb.store import MongoStore

    return MongoStore(url, **options)


def open_async_store(url: str, **options: Any) -> AsyncStore:
    """Open a :class:`chronica_mongodb.AsyncMongoStore` for ``url``; options as its constructor's."""
    from chronica_mongodb.store import AsyncMongoStore

    return AsyncMongoStore(url, **options)


@hookimpl
def chronica_backends() -> list[Backend]:
    """Declare ``mongodb://`` and ``mongodb+srv://``: idempotent, with every capability, needs a server."""
    return [
        Backend(
            name="mongodb",
            schemes=("mongodb", "mongodb+srv"),
            idempotent=True,
            capabilities=("batch", "listing", "erasure", "follow", "native", "history", "retention"),
            open=open_store,
            open_async=open_async_store,
            install="chronica-mongodb",
            needs_server=True,
            follows="change streams on a replica set, else polling (chosen at connect)",
        )
    ]
