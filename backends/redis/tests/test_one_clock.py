"""One clock per store: with the host's clock an hour ahead of the server's (``TIME``), no chronicum
starts after its first actum."""

from __future__ import annotations

import pytest
from chronica_conformance.one_clock import check_one_clock, check_one_clock_async
from chronica_redis import AsyncRedisStore, RedisStore


def test_no_chronicum_starts_after_its_first_actum(
    store: RedisStore, async_store: AsyncRedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_one_clock(store, monkeypatch)
    check_one_clock_async(async_store, monkeypatch)
