"""What the session tests share: running a test body on a fresh store in its own event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from chronica_openai_agents import ChronicaSession
from conftest import StoreTarget

from chronica_core import AsyncChronicarius, AsyncStore, new_chronicum_id

OWNER = "ardian"
AGENT = "concierge"


def run_on(target: StoreTarget, body: Callable[[AsyncStore], Awaitable[None]]) -> None:
    """Open a store on ``target``, run ``body`` with it in a new event loop, and close it."""

    async def main() -> None:
        store = target.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def session_on(
    store: AsyncStore | AsyncChronicarius,
    session_id: str | None = None,
    *,
    owner_id: str = OWNER,
    **options: Any,
) -> ChronicaSession:
    """A session of ``owner_id`` on ``store``; a fresh id unless one is given."""
    return ChronicaSession(session_id or new_chronicum_id(), store, owner_id=owner_id, actor=AGENT, **options)
