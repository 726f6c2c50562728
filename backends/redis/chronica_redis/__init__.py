"""Chronica on Redis and Valkey: :class:`RedisStore` and :class:`AsyncRedisStore` (redis-py).

Open one with ``chronica_core.open_store("redis://host:6379/0")``, or on a Redis Cluster with
``open_store("redis+cluster://host1:7000,host2:7000")`` (or ``open_async_store``).
"""

from chronica_redis.errors import WriteUnconfirmed
from chronica_redis.keys import DEFAULT_PREFIX
from chronica_redis.store import AsyncRedisStore, RedisStore
from chronica_redis.urls import CLIENT_OPTIONS, SCHEMES, STORE_OPTIONS

__all__ = [
    "CLIENT_OPTIONS",
    "DEFAULT_PREFIX",
    "SCHEMES",
    "STORE_OPTIONS",
    "AsyncRedisStore",
    "RedisStore",
    "WriteUnconfirmed",
]
