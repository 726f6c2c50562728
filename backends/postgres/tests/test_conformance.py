"""The whole conformance suite against the real server, in both flavours, in the session's schema,
plain and through the encrypted face."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chronica_conformance import ConformanceSuite
from chronica_postgres import AsyncPostgresStore, PostgresStore
from conftest import TEST_POOL_SIZE

from chronica_core.encrypted import encrypted_store
from chronica_core.encryption import MemoryKeys


class TestPostgresConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (one fresh schema per session)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "native", "history", "retention")

    @pytest.fixture
    def store_to_close(self, postgres_url: str, schema: str) -> Iterator[PostgresStore]:
        """A store of its own on the session's schema (the shared ``store`` must stay open)."""
        with PostgresStore(postgres_url, schema=schema, max_size=TEST_POOL_SIZE) as store:
            yield store


KEYS = MemoryKeys()


class TestEncryptedPostgresConformance(ConformanceSuite):
    """The same suite through the encrypted face (``open_store(url, encryption_keys=...)``)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "native", "history", "retention")

    @pytest.fixture
    def chronica_faults(self) -> Any:
        """Skips: the faults reach the driver under the face; TestPostgresConformance runs them."""
        pytest.skip("driver failures are the plain store's: TestPostgresConformance runs them")

    @pytest.fixture
    def store(self, store: PostgresStore) -> Any:
        """The session's store, content and native data sealed with per-owner keys."""
        return encrypted_store(store, KEYS)

    @pytest.fixture
    def async_store(self, async_store: AsyncPostgresStore) -> Any:
        """The session's asyncio store, encrypted likewise."""
        return encrypted_store(async_store, KEYS)

    @pytest.fixture
    def store_to_close(self, postgres_url: str, schema: str) -> Iterator[Any]:
        """An encrypted store of its own on the session's schema."""
        store = encrypted_store(PostgresStore(postgres_url, schema=schema, max_size=TEST_POOL_SIZE), KEYS)
        yield store
        store.close()
