"""Results come from the rows the database returned: a row of another chronicum is a StoreError."""

from __future__ import annotations

import pytest
from chronica_conformance.harness import AsyncHarness, Harness, SyncHarness
from chronica_conformance.wrong_answers import check_rows_of_another_chronicum_are_refused
from chronica_sqlalchemy import SQLAlchemyStore, open_async_sqlalchemy_store


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_rows_of_another_chronicum_are_refused(
    shared_store: SQLAlchemyStore, database_url: str, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``shared_store`` migrated the database; the test's own store is redirected."""
    harness: Harness
    if flavour == "sync":
        harness = SyncHarness(SQLAlchemyStore.open(database_url, auto_migrate=False))
    else:
        harness = AsyncHarness(open_async_sqlalchemy_store(database_url, auto_migrate=False))
    try:
        check_rows_of_another_chronicum_are_refused(harness, monkeypatch)
    finally:
        if flavour == "sync":
            harness.close_store()
        harness.close()
