"""Results come from the rows the database returned: a row of another chronicum is a StoreError."""

from __future__ import annotations

import pytest
from chronica_conformance.harness import AsyncHarness, Harness, SyncHarness
from chronica_conformance.wrong_answers import check_rows_of_another_chronicum_are_refused
from chronica_postgres import AsyncPostgresStore, PostgresStore


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_rows_of_another_chronicum_are_refused(
    postgres_url: str, schema: str, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness: Harness
    if flavour == "sync":
        harness = SyncHarness(PostgresStore(postgres_url, schema=schema))
    else:
        harness = AsyncHarness(AsyncPostgresStore(postgres_url, schema=schema))
    try:
        check_rows_of_another_chronicum_are_refused(harness, monkeypatch)
    finally:
        if flavour == "sync":
            harness.close_store()
        harness.close()
