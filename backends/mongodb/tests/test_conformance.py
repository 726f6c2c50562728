"""The whole conformance suite against MongoDB (mongoeco, or CHRONICA_TEST_MONGODB_URL), both flavours."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chronica_conformance import ConformanceSuite
from chronica_mongodb import MongoStore


class TestMongoConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (a fresh database per test, dropped afterwards)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "native", "retention", "history")

    @pytest.fixture
    def store_to_close(self, mongodb_server_url: str, database: str) -> Iterator[MongoStore]:
        """Another store on the test's database, so that ``store`` can read what closing left."""
        with MongoStore(mongodb_server_url, database=database) as store:
            yield store
