"""The whole conformance suite against MongoDB (mongoeco, or CHRONICA_TEST_MONGODB_URL), both flavours."""

from __future__ import annotations

from chronica_conformance import ConformanceSuite


class TestMongoConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (a fresh database per test, dropped afterwards)."""

    declares_idempotent = True
