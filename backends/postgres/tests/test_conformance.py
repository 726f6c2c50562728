"""The whole conformance suite against the real server, in both flavours, in the session's schema."""

from __future__ import annotations

from chronica_conformance import ConformanceSuite


class TestPostgresConformance(ConformanceSuite):
    """``store`` and ``async_store`` come from conftest.py (one fresh schema per session)."""

    declares_idempotent = True
