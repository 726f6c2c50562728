"""Results come from the documents the server returned: another chronicum's is a StoreError.

A write is not checked: ``insert_one`` sends no document back, and asking for one would cost a
round trip per write.
"""

from __future__ import annotations

import pytest
from chronica_conformance.harness import AsyncHarness, Harness, SyncHarness
from chronica_conformance.wrong_answers import check_rows_of_another_chronicum_are_refused
from chronica_mongodb import AsyncMongoStore, MongoStore


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_documents_of_another_chronicum_are_refused(
    mongodb_server_url: str, database: str, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness: Harness
    if flavour == "sync":
        harness = SyncHarness(MongoStore(mongodb_server_url, database=database))
    else:
        harness = AsyncHarness(AsyncMongoStore(mongodb_server_url, database=database))
    try:
        check_rows_of_another_chronicum_are_refused(harness, monkeypatch, writes_answer=False)
    finally:
        if flavour == "sync":
            harness.close_store()
        harness.close()
