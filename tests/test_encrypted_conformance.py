"""The whole conformance suite on an encrypted memory store, in both flavours."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from chronica_conformance import ConformanceSuite

from chronica_core import AsyncMemoryStore, MemoryStore
from chronica_core.encrypted import encrypted_store
from chronica_core.encryption import MemoryKeys

KEYS = MemoryKeys()


class TestEncryptedMemoryConformance(ConformanceSuite):
    """Every capability of the memory store, through the encrypted face."""

    declares_idempotent = True
    declares_capabilities = ("batch", "listing", "erasure", "follow", "native", "history", "retention")

    @pytest.fixture
    def store(self) -> Any:
        return encrypted_store(MemoryStore(), KEYS)

    @pytest.fixture
    def store_to_close(self) -> Iterator[Any]:
        store = encrypted_store(MemoryStore(), KEYS)
        yield store
        store.close()

    @pytest.fixture
    def async_store(self) -> Any:
        return encrypted_store(AsyncMemoryStore(), KEYS)
