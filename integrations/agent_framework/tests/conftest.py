"""What the provider tests share: a fresh store per test body, and a store without ``native``.

The provider needs the ``native`` capability: the tests run on ``memory://``, which has it and
``history`` too (each tool result names its call). ``CHRONICA_TEST_AGENT_FRAMEWORK_URL`` names
another store URL with both to run them on instead.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence

from chronica_core import Actum, AsyncMemoryStore, AsyncStore, Chronicum, open_async_store
from chronica_core.model import ActaQuery

STORE_URL = os.environ.get("CHRONICA_TEST_AGENT_FRAMEWORK_URL") or "memory://"


def run_on_store(body: Callable[[AsyncStore], Awaitable[None]]) -> None:
    """Open a store on ``STORE_URL``, run ``body`` with it in a new event loop, and close it."""

    async def main() -> None:
        store = open_async_store(STORE_URL)
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


class PlainStore:
    """A memory store's base operations and batches, and nothing more: no ``native`` capability."""

    def __init__(self) -> None:
        self.inner = AsyncMemoryStore()

    async def create(self, chronicum: Chronicum) -> None:
        await self.inner.create(chronicum)

    async def get(self, chronicum_id: str) -> Chronicum:
        return await self.inner.get(chronicum_id)

    async def record(self, actum: Actum) -> Actum:
        return await self.inner.record(actum)

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        return await self.inner.acta(chronicum_id, query)

    async def record_idempotent(self, actum: Actum, key: str) -> Actum:
        return await self.inner.record_idempotent(actum, key)

    async def record_many(self, acta: Sequence[Actum], key: str | None) -> list[Actum]:
        return await self.inner.record_many(acta, key)

    async def close(self) -> None:
        await self.inner.close()

    async def __aenter__(self) -> PlainStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
