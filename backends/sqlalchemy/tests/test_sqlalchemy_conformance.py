"""The whole conformance suite on each selected dialect, in both flavours, in the session's database."""

from __future__ import annotations

import pytest
from chronica_conformance import ConformanceSuite


class TestSQLAlchemyConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (one fresh database per dialect and session)."""

    declares_idempotent = True

    @pytest.fixture(autouse=True)
    def on_dialect(self, dialect: str) -> str:
        """Every case once per selected dialect (the suite asks for ``store`` only at run time)."""
        return dialect
