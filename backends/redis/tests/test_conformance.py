"""The whole conformance suite on the session's server or cluster, both flavours."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chronica_conformance import ConformanceSuite
from chronica_redis import RedisStore
from conftest import store_options


class TestRedisConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (a fresh key prefix per test)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "follow", "native", "history", "retention")

    @pytest.fixture
    def store_to_close(self, redis_url: str, prefix: str) -> Iterator[RedisStore]:
        """Another store on the test's prefix, so that ``store`` can read what closing left."""
        with RedisStore(redis_url, prefix=prefix, **store_options()) as store:
            yield store
