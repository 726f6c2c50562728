"""One clock per store: with the host's clock an hour ahead of the server's, no chronicum starts
after its first actum."""

from __future__ import annotations

import pytest
from chronica_conformance.one_clock import check_one_clock, check_one_clock_async
from chronica_postgres import AsyncPostgresStore, PostgresStore


def test_no_chronicum_starts_after_its_first_actum(
    store: PostgresStore, async_store: AsyncPostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_one_clock(store, monkeypatch)
    check_one_clock_async(async_store, monkeypatch)
