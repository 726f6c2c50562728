"""The whole conformance suite against the real server, in both flavours, in the session's schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chronica_conformance import ConformanceSuite
from chronica_postgres import PostgresStore
from conftest import TEST_POOL_SIZE


class TestPostgresConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (one fresh schema per session)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "native", "history", "retention")

    @pytest.fixture
    def store_to_close(self, postgres_url: str, schema: str) -> Iterator[PostgresStore]:
        """A store of its own on the session's schema (the shared ``store`` must stay open)."""
        with PostgresStore(postgres_url, schema=schema, max_size=TEST_POOL_SIZE) as store:
            yield store
