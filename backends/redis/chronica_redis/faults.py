"""The driver's faults for the conformance suite's driver-failure group (``chronica.driver_faults``).

Loaded only by the conformance suite (chronica-conformance), which the group needs: the suite
runs the group on ``redis://`` with :class:`RedisFaults`, as the backend's own tests do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from chronica_conformance import FailureKind, Injection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from chronica_redis.store import AsyncRedisStore, RedisStore

__all__ = ["RedisFaults", "redis_failure"]


def redis_failure(kind: FailureKind) -> Exception:
    """redis-py's own exception for ``kind``."""
    if kind == "connection_reset":
        return RedisConnectionError("Connection closed by server.")
    if kind == "server_gone":
        return RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    return RedisTimeoutError("Timeout reading from socket")


class RedisFaults:
    """Makes the operations a chronica-redis store performs fail (see ``DriverFaults``)."""

    @contextlib.contextmanager
    def inject(
        self,
        store: RedisStore | AsyncRedisStore,
        kind: FailureKind,
        *,
        after: int = 0,
        times: int | None = None,
    ) -> Iterator[Injection]:
        """Make ``store``'s driver fail while the context is open (see ``DriverFaults.inject``).

        ``times``: how many calls fail after the first ``after`` (``None``: every later one).
        """
        injection = Injection(kind, after, times)
        with pytest.MonkeyPatch.context() as patch:
            if isinstance(store, AsyncRedisStore):
                from chronica_redis.clients import AsyncClient

                original_async = AsyncClient.perform

                async def failing_async(client: AsyncClient, operation: Any) -> Any:
                    failing = injection.next_call()
                    if failing is not None:
                        raise injection.raised_now(redis_failure(failing))
                    return await original_async(client, operation)

                patch.setattr(AsyncClient, "perform", failing_async)
            else:
                perform = store._client.perform

                def failing(operation: Any) -> Any:
                    failing_kind = injection.next_call()
                    if failing_kind is not None:
                        raise injection.raised_now(redis_failure(failing_kind))
                    return perform(operation)

                patch.setattr(store._client, "perform", failing)
            yield injection
