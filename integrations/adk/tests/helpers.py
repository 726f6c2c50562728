"""What the service tests share: a store per test in its own event loop, events to append."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from chronica_adk import ChronicaSessionService
from conftest import StoreTarget
from google.adk.events import Event, EventActions
from google.genai import types

from chronica_core import AsyncStore

APP = "concierge-app"
USER = "ardian"


def run_on(target: StoreTarget, body: Callable[[AsyncStore], Awaitable[None]]) -> None:
    """Open a store on ``target`` in a new event loop, run ``body`` with it, close it there."""

    async def main() -> None:
        store = target.open()
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


def fresh_id() -> str:
    return f"s-{uuid.uuid4().hex}"


def text_event(author: str, text: str, *, timestamp: float | None = None, **actions: Any) -> Event:
    """An event whose content is one text part, by ``author`` (``"user"`` for the person)."""
    event = Event(
        author=author,
        invocation_id="inv-1",
        content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
        actions=EventActions(**actions),
    )
    if timestamp is not None:
        event.timestamp = timestamp
    return event


async def new_session(service: ChronicaSessionService, **state: Any) -> Any:
    return await service.create_session(
        app_name=APP, user_id=USER, state=state or None, session_id=fresh_id()
    )
