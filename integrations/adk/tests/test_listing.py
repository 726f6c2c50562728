"""Every user of an app: the chronicum ids that code a user, the walk over pages of the store,
and a store that cannot list every owner's chronica."""

from __future__ import annotations

import asyncio

import pytest
from chronica_adk import ChronicaSessionService, SessionKey, listing
from chronica_adk.listing import app_users, user_of

from chronica_core import Actum, AsyncMemoryStore, CapabilityUnsupported, Chronicum
from chronica_core.model import ActaQuery


@pytest.mark.parametrize(
    ("chronicum_id", "user"),
    [
        (SessionKey("hotel", "ardian", "s-1").chronicum_id, "ardian"),
        (SessionKey("hotel", "ardian", "s-1").state_id, "ardian"),
        (SessionKey("hotel", "a:b:c", "s-1").chronicum_id, "a:b:c"),
        (SessionKey("hotel", "ardian", "s-1").user_state_id, "ardian"),
        (SessionKey("hotel", "ardian", "s-1").app_state_id, None),  # the app's own state
        (SessionKey("hotels", "ardian", "s-1").chronicum_id, None),  # another app
        ("adk:5:hotel:9:ardian", None),  # a length longer than what follows
        ("adk:5:hotel:3:ardian", None),  # a length shorter than the part
        ("adk:5:hotel:06:ardian", None),  # a length written with a leading zero
        ("a plain chronicum", None),
    ],
)
def test_the_user_a_chronicum_id_codes(chronicum_id: str, user: str | None) -> None:
    assert user_of("hotel", chronicum_id) == user


def test_every_user_across_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "PAGE", 2)

    async def body() -> None:
        store = AsyncMemoryStore()
        service = ChronicaSessionService(store)
        sessions = [("rafa", "a"), ("ardian", "b"), ("rafa", "c"), ("zoe", "d"), ("ardian", "e")]
        for user, session_id in sessions:
            await service.create_session(app_name="hotel", user_id=user, session_id=session_id)
        await service.create_session(app_name="hostel", user_id="mallory", session_id="f")
        assert await app_users(store, "hotel") == ["ardian", "rafa", "zoe"]
        listed = (await service.list_sessions(app_name="hotel")).sessions
        assert sorted((session.user_id, session.id) for session in listed) == [
            ("ardian", "b"),
            ("ardian", "e"),
            ("rafa", "a"),
            ("rafa", "c"),
            ("zoe", "d"),
        ]

    asyncio.run(body())


class NoRetentionStore:
    """A memory store's base operations only: it cannot list every owner's chronica."""

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

    async def close(self) -> None:
        await self.inner.close()

    async def __aenter__(self) -> NoRetentionStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def test_a_store_that_cannot_list_every_owner_is_refused_clearly() -> None:
    async def body() -> None:
        service = ChronicaSessionService(NoRetentionStore())
        with pytest.raises(CapabilityUnsupported, match="list_sessions needs a user_id"):
            await service.list_sessions(app_name="hotel")

    asyncio.run(body())
