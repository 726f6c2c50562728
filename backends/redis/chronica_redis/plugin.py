"""Registers the Redis backend through the ``chronica`` entry-point group, like any plugin.

Kept light: redis-py is imported only when a store is opened, so a missing driver is reported
as ``BackendUnavailable`` (naming ``chronica-redis``) instead of hiding the backend.
"""

from __future__ import annotations

from typing import Any

from chronica_core.capabilities import BATCH, ERASURE, FOLLOW, HISTORY, LISTING, NATIVE, RETENTION
from chronica_core.hookspecs import Backend, hookimpl
from chronica_core.store import AsyncStore, Store

__all__ = ["SCHEMES", "chronica_backends", "open_async_store", "open_store"]

SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")
"""One server (``redis``, ``rediss`` with TLS) or a Redis Cluster (``redis+cluster``, ``rediss+cluster``)."""


def open_store(url: str, **options: Any) -> Store:
    """Open a :class:`chronica_redis.RedisStore` for ``url``; options as its constructor's."""
    from chronica_redis.store import RedisStore

    return RedisStore(url, **options)


def open_async_store(url: str, **options: Any) -> AsyncStore:
    """Open a :class:`chronica_redis.AsyncRedisStore` for ``url``; it connects on first use."""
    from chronica_redis.store import AsyncRedisStore

    return AsyncRedisStore(url, **options)


@hookimpl
def chronica_backends() -> list[Backend]:
    """Declare the Redis backend: idempotent, with every capability, needs a server."""
    return [
        Backend(
            name="redis",
            schemes=SCHEMES,
            idempotent=True,
            capabilities=(BATCH, LISTING, ERASURE, FOLLOW, NATIVE, HISTORY, RETENTION),
            open=open_store,
            open_async=open_async_store,
            install="chronica-redis",
            needs_server=True,
            follows="pub/sub, one subscription per store",
        )
    ]
