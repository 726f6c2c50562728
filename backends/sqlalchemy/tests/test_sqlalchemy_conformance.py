"""The whole conformance suite on each selected dialect, in both flavours, in the session's database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chronica_conformance import ConformanceSuite
from chronica_sqlalchemy import SQLAlchemyStore


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
