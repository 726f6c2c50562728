"""What the Strands tests share: a fresh store per test, and a store without ``native``.

The repository needs the ``native`` capability: the tests run on ``memory://``, which has it and
``history`` too (a tool result names its tool use). ``CHRONICA_TEST_STRANDS_URL`` names another
store URL with both to run them on instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pytest

from chronica_core import Actum, Chronicum, MemoryStore, Store, open_store
from chronica_core.model import ActaQuery

STORE_URL = os.environ.get("CHRONICA_TEST_STRANDS_URL") or "memory://"


@pytest.fixture
def store() -> Iterator[Store]:
    """A blocking store on ``STORE_URL``, closed after the test."""
    opened = open_store(STORE_URL)
    try:
        yield opened
    finally:
        opened.close()


class PlainStore:
    """A memory store's base operations and batches, and nothing more: no ``native`` capability."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def create(self, chronicum: Chronicum) -> None:
        self.inner.create(chronicum)

    def get(self, chronicum_id: str) -> Chronicum:
        return self.inner.get(chronicum_id)

    def record(self, actum: Actum) -> Actum:
        return self.inner.record(actum)

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        return self.inner.acta(chronicum_id, query)

    def record_idempotent(self, actum: Actum, key: str) -> Actum:
        return self.inner.record_idempotent(actum, key)

    def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        return self.inner.record_many(acta, key)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> PlainStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
