"""The whole conformance suite on each selected dialect, in both flavours, in the session's database,
plain and through the encrypted face."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chronica_conformance import ConformanceSuite
from chronica_sqlalchemy import SQLAlchemyStore

from chronica_core.encrypted import encrypted_store
from chronica_core.encryption import MemoryKeys


class TestSQLAlchemyConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (one fresh database per dialect and session)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "follow", "native", "history", "retention")

    @pytest.fixture(autouse=True)
    def on_dialect(self, dialect: str) -> str:
        """Every case once per selected dialect (the suite asks for ``store`` only at run time)."""
        return dialect

    @pytest.fixture
    def store_to_close(self, database_url: str, store: SQLAlchemyStore) -> Iterator[SQLAlchemyStore]:
        """A store of its own on the session database (the shared ``store`` must stay open).

        It asks for ``store`` first, which migrates the session database: run alone, a closing
        case otherwise found no tables.
        """
        del store  # asked for only so that its migration has run
        own = SQLAlchemyStore.open(database_url, auto_migrate=False)
        try:
            yield own
        finally:
            own.close()


KEYS = MemoryKeys()


class TestEncryptedSQLAlchemyConformance(ConformanceSuite):
    """The same suite through the encrypted face (``open_store(url, encryption_keys=...)``)."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "follow", "native", "history", "retention")

    @pytest.fixture(autouse=True)
    def on_dialect(self, dialect: str) -> str:
        """Every case once per selected dialect."""
        return dialect

    @pytest.fixture
    def chronica_faults(self) -> Any:
        """Skips: the faults reach the driver under the face; TestSQLAlchemyConformance runs them."""
        pytest.skip("driver failures are the plain store's: TestSQLAlchemyConformance runs them")

    @pytest.fixture
    def store(self, store: SQLAlchemyStore) -> Any:
        """The session's store, content and native data sealed with per-owner keys."""
        return encrypted_store(store, KEYS)

    @pytest.fixture
    def async_store(self, async_store: Any) -> Any:
        """The session's asyncio store, encrypted likewise."""
        return encrypted_store(async_store, KEYS)

    @pytest.fixture
    def store_to_close(self, database_url: str, store: Any) -> Iterator[Any]:
        """An encrypted store of its own on the session database (migrated by ``store``)."""
        del store
        own = encrypted_store(SQLAlchemyStore.open(database_url, auto_migrate=False), KEYS)
        try:
            yield own
        finally:
            own.close()
