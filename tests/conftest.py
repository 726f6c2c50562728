"""Shared fixtures for the project's own tests."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from chronica_core import Chronicarius, MemoryStore


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def counting_ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{next(counter):032x}"


@pytest.fixture
def chronicarius(store: MemoryStore, counting_ids: Callable[[], str]) -> Chronicarius:
    return Chronicarius(store, id_factory=counting_ids)
