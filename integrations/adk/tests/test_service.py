"""ADK's documented session-service behaviour, on every store target, and Chronica's additions."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from chronica_adk import STATE_ACTOR, ChronicaSessionService, InvalidSessionKey, SessionKey, event_of_actum
from chronica_adk.ids import STATE_SUFFIX
from conftest import StoreTarget
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from helpers import APP, USER, fresh_id, new_session, run_on, text_event
from pydantic import ValidationError

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    AsyncStore,
    ChronicumNotFound,
    InvalidActum,
)


def test_the_service_is_an_adk_session_service() -> None:
    assert isinstance(ChronicaSessionService(AsyncMemoryStore()), BaseSessionService)


def test_create_then_get_gives_the_session_and_its_state(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        before = time.time()
        created = await service.create_session(
            app_name=app,
            user_id=USER,
            session_id="dinner-friday",
            state={"party": 4, "user:name": "Ardian", "app:city": "Jakarta", "temp:scratch": 1},
        )
        assert (created.id, created.app_name, created.user_id, created.events) == (
            "dinner-friday",
            app,
            USER,
            [],
        )
        assert created.state == {"party": 4, "user:name": "Ardian", "app:city": "Jakarta"}
        assert before - 5 <= created.last_update_time <= time.time() + 5
        got = await service.get_session(app_name=app, user_id=USER, session_id="dinner-friday")
        assert got is not None
        assert got.state == created.state
        assert got.events == []
        assert got.last_update_time == created.last_update_time
        await service.delete_session(app_name=app, user_id=USER, session_id="dinner-friday")

    run_on(store_target, body)


def test_a_session_without_an_id_gets_a_fresh_one(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        first = await service.create_session(app_name=APP, user_id=USER)
        second = await service.create_session(app_name=APP, user_id=USER, session_id="")
        assert first.id != second.id
        assert len(first.id) == 36  # a UUID, as ADK makes them
        assert await service.get_session(app_name=APP, user_id=USER, session_id=second.id) is not None

    run_on(store_target, body)


def test_creating_an_existing_session_raises_already_exists(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session_id, app = fresh_id(), f"app-{fresh_id()}"
        await service.create_session(app_name=app, user_id=USER, session_id=session_id, state={"a": 1})
        with pytest.raises(AlreadyExistsError, match=session_id):
            await service.create_session(
                app_name=app, user_id=USER, session_id=session_id, state={"a": 2, "user:b": 3}
            )
        got = await service.get_session(app_name=app, user_id=USER, session_id=session_id)
        assert got is not None
        assert got.state == {"a": 1}  # the refused create changed nothing, user state included

    run_on(store_target, body)


def test_concurrent_creates_of_one_id_let_exactly_one_through(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session_id = fresh_id()
        results = await asyncio.gather(
            *(
                service.create_session(app_name=APP, user_id=USER, session_id=session_id, state={"n": n})
                for n in range(8)
            ),
            return_exceptions=True,
        )
        created = [result for result in results if isinstance(result, Session)]
        refused = [result for result in results if isinstance(result, AlreadyExistsError)]
        assert (len(created), len(refused)) == (1, 7)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
        assert got is not None
        assert got.state == created[0].state

    run_on(store_target, body)


def test_a_missing_session_is_none(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        assert await service.get_session(app_name=APP, user_id=USER, session_id=fresh_id()) is None

    run_on(store_target, body)


def test_apps_and_users_never_share_a_session(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session_id = fresh_id()
        # names holding the separator: a naive "app:user" join would make these the same
        keys = [("a:1", "b"), ("a", "1:b"), ("a", "b"), ("b", "a")]
        for n, (app, user) in enumerate(keys):
            created = await service.create_session(
                app_name=app, user_id=user, session_id=session_id, state={"n": n}
            )
            await service.append_event(created, text_event("user", f"hello from {n}"))
        for n, (app, user) in enumerate(keys):
            got = await service.get_session(app_name=app, user_id=user, session_id=session_id)
            assert got is not None
            assert got.state == {"n": n}
            assert [
                event.content.parts[0].text for event in got.events if event.content and event.content.parts
            ] == [f"hello from {n}"]
        chronica = {SessionKey(app, user, session_id).chronicum_id for app, user in keys}
        assert len(chronica) == len(keys)
        assert await service.get_session(app_name="a", user_id="c", session_id=session_id) is None

    run_on(store_target, body)


def rich_events() -> list[Event]:
    """Events with every kind of part and action, as a turn with a tool call has them."""
    question = text_event("user", "Find a quiet table for four in Kemang on Friday, 7pm. Ünïcödé ✓ \x00")
    thinking = Event(
        author="concierge",
        invocation_id="inv-1",
        content=types.Content(role="model", parts=[types.Part(text="Search first.", thought=True)]),
    )
    calling = Event(
        author="concierge",
        invocation_id="inv-1",
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-1", name="search", args={"area": "Kemang", "party": 4, "ratio": 0.1 + 0.2}
                    )
                )
            ],
        ),
    )
    answering = Event(
        author="concierge",
        invocation_id="inv-1",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1",
                        name="search",
                        response={"result": [{"name": "Rumah Teduh", "table": True}]},
                    )
                )
            ],
        ),
    )
    picture = Event(
        author="concierge",
        invocation_id="inv-1",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="Here is the room."),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=bytes(range(256)) * 64)),
            ],
        ),
        actions=EventActions(state_delta={"picked": "Rumah Teduh"}, artifact_delta={"room.png": 1}),
    )
    handing = Event(
        author="concierge",
        invocation_id="inv-1",
        actions=EventActions(transfer_to_agent="booking", escalate=True),
    )
    return [question, thinking, calling, answering, picture, handing]


def test_events_round_trip_exactly(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        events = rich_events()
        for event in events:
            await service.append_event(session, event)
        assert session.events == events
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.events == events
        assert [event.model_dump() for event in got.events] == [event.model_dump() for event in events]
        assert {key: value for key, value in got.state.items() if ":" not in key} == {"picked": "Rumah Teduh"}

    run_on(store_target, body)


def test_events_are_filed_by_kind_for_other_agents(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        for event in rich_events():
            await service.append_event(session, event)
        key = SessionKey(APP, USER, session.id)
        acta = await service.chronicarius.get_acta(
            key.owner, key.chronicum_id, actor_kinds=[ActorKind.HUMAN, ActorKind.AGENT]
        )
        assert [(actum.kind, actum.actor_kind, actum.actor) for actum in acta] == [
            (ActumKind.MESSAGE, ActorKind.HUMAN, USER),
            (ActumKind.THOUGHT, ActorKind.AGENT, "concierge"),
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT, "concierge"),
            (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "concierge"),
            (ActumKind.MESSAGE, ActorKind.AGENT, "concierge"),
            (ActumKind.THOUGHT, ActorKind.AGENT, "concierge"),
        ]
        messages = await service.chronicarius.get_acta(
            key.owner, key.chronicum_id, actum_kinds=[ActumKind.MESSAGE], last_n=2
        )
        authors = [read.author for actum in messages if (read := event_of_actum(actum)) is not None]
        assert authors == [
            "user",
            "concierge",
        ]
        assert (
            await service.chronicarius.get_acta(  # the state is kept apart from the events
                key.owner, key.chronicum_id, actor_kinds=[ActorKind.SYSTEM]
            )
            == []
        )
        snapshots = await service.chronicarius.get_acta(key.owner, key.state_id)
        assert {(actum.kind, actum.actor_kind, actum.actor) for actum in snapshots} == {
            (ActumKind.MESSAGE, ActorKind.SYSTEM, STATE_ACTOR)
        }
        assert len(snapshots) == 7  # the creation and one per event
        assert json.loads(snapshots[-1].content)["state"] == {"picked": "Rumah Teduh"}

    run_on(store_target, body)


def test_a_message_another_agent_wrote_through_chronica_is_the_users_context(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        await service.append_event(session, text_event("user", "Book it."))
        key = SessionKey(APP, USER, session.id)
        written = await service.chronicarius.record_acta(
            key.owner,
            [
                Actum(key.chronicum_id, ActumKind.THOUGHT, ActorKind.AGENT, "booking", "Check the calendar."),
                Actum(key.chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Booked for 7pm."),
            ],
        )
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert len(got.events) == 2  # another agent's thought is left out by default
        booked = got.events[-1]
        assert booked.author == "user"  # an author ADK's routing knows; the text says who wrote it
        assert booked.id == written[1].id
        assert booked.content is not None and booked.content.parts is not None
        assert (booked.content.role, booked.content.parts[0].text) == (
            "user",
            "booking said: Booked for 7pm.",
        )
        assert written[1].at is not None and booked.timestamp == written[1].at.timestamp()

    run_on(store_target, body)


def test_session_user_and_app_state_follow_adk_scopes(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        mine = await service.create_session(app_name=app, user_id="ardian", state={"user:lang": "id"})
        other_session = await service.create_session(app_name=app, user_id="ardian")
        other_user = await service.create_session(app_name=app, user_id="rafa")
        other_app = await service.create_session(app_name=f"{app}-2", user_id="ardian")
        delta = {"topic": "dinner", "user:diet": "vegetarian", "app:open": True, "temp:draft": "x"}
        event = text_event("concierge", "Noted.", state_delta=dict(delta))
        await service.append_event(mine, event)
        assert mine.state["temp:draft"] == "x"  # temp state reaches the session in memory...
        assert event.actions.state_delta == {"topic": "dinner", "user:diet": "vegetarian", "app:open": True}

        async def state_of(session: Session) -> dict[str, Any]:
            got = await service.get_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
            assert got is not None
            return got.state

        assert await state_of(mine) == {
            "topic": "dinner",
            "user:lang": "id",
            "user:diet": "vegetarian",
            "app:open": True,
        }
        assert await state_of(other_session) == {
            "user:lang": "id",
            "user:diet": "vegetarian",
            "app:open": True,
        }
        assert await state_of(other_user) == {"app:open": True}
        assert await state_of(other_app) == {}
        assert await service.get_user_state(app_name=app, user_id="ardian") == {
            "lang": "id",
            "diet": "vegetarian",
        }
        assert await service.get_user_state(app_name=app, user_id="nobody") == {}
        stored = await service.get_session(app_name=app, user_id="ardian", session_id=mine.id)
        assert stored is not None
        assert stored.events[0].actions.state_delta == event.actions.state_delta  # ...and is never written

    run_on(store_target, body)


def test_concurrent_user_state_updates_from_two_sessions_both_land(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        sessions = [await new_session(service) for _ in range(4)]
        await asyncio.gather(
            *(
                service.append_event(session, text_event("concierge", "ok", state_delta={f"user:k{n}": n}))
                for n, session in enumerate(sessions)
            )
        )
        state = await service.get_user_state(app_name=APP, user_id=USER)
        assert {key: state[key] for key in ("k0", "k1", "k2", "k3")} == {"k0": 0, "k1": 1, "k2": 2, "k3": 3}

    run_on(store_target, body)


class CountingStore(AsyncMemoryStore):
    """An in-memory store that keeps every context-window query it serves."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[ActaQuery] = []

    async def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        self.queries.append(query)
        return await super().acta(chronicum_id, query)


def timed_events(count: int) -> list[Event]:
    return [
        text_event("user" if n % 2 == 0 else "concierge", f"event {n}", timestamp=1000.0 + n)
        for n in range(count)
    ]


def test_num_recent_events_is_a_context_window_not_a_full_read() -> None:
    async def body() -> None:
        store = CountingStore()
        service = ChronicaSessionService(store)
        session = await new_session(service)
        events = timed_events(40)
        for event in events:
            await service.append_event(session, event)
        store.queries.clear()
        got = await service.get_session(
            app_name=APP, user_id=USER, session_id=session.id, config=GetSessionConfig(num_recent_events=5)
        )
        assert got is not None
        assert got.events == events[-5:]
        assert store.queries, "the service read nothing"
        assert all(0 < query.last_n <= 5 for query in store.queries)

    asyncio.run(body())


def test_after_timestamp_reads_back_only_as_far_as_it_needs() -> None:
    async def body() -> None:
        store = CountingStore()
        service = ChronicaSessionService(store)
        session = await new_session(service)
        events = timed_events(300)
        for event in events:
            await service.append_event(session, event)
        store.queries.clear()
        got = await service.get_session(
            app_name=APP, user_id=USER, session_id=session.id, config=GetSessionConfig(after_timestamp=1290.0)
        )
        assert got is not None
        assert got.events == events[290:]
        assert all(0 < query.last_n <= 32 for query in store.queries)

    asyncio.run(body())


def test_get_session_config_follows_adk(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        events = timed_events(50)
        for event in events:
            await service.append_event(session, event)

        async def read(**config: Any) -> list[Event]:
            got = await service.get_session(
                app_name=APP, user_id=USER, session_id=session.id, config=GetSessionConfig(**config)
            )
            assert got is not None
            return got.events

        assert await read() == events
        assert await read(num_recent_events=0) == []
        assert await read(num_recent_events=1) == events[-1:]
        assert await read(num_recent_events=50) == events
        assert await read(num_recent_events=500) == events
        assert await read(after_timestamp=1045.0) == events[45:]
        assert await read(after_timestamp=1045.5) == events[46:]
        assert await read(after_timestamp=999.0) == events
        assert await read(after_timestamp=2000.0) == []
        assert await read(after_timestamp=1010.0, num_recent_events=3) == events[-3:]
        assert await read(after_timestamp=1048.0, num_recent_events=10) == events[48:]
        with pytest.raises(ValidationError, match="num_recent_events"):
            GetSessionConfig(num_recent_events=-1)

    run_on(store_target, body)


def test_list_sessions_lists_the_users_sessions_without_events(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        first = await service.create_session(
            app_name=app, user_id="ardian", session_id="first", state={"n": 1}
        )
        second = await service.create_session(
            app_name=app, user_id="ardian", session_id="second", state={"user:lang": "id"}
        )
        await service.create_session(app_name=app, user_id="rafa", session_id="rafas")
        await service.create_session(app_name=f"{app}-2", user_id="ardian", session_id="elsewhere")
        await service.append_event(first, text_event("user", "hello", state_delta={"n": 2}))
        listed = (await service.list_sessions(app_name=app, user_id="ardian")).sessions
        assert [session.id for session in listed] == ["second", "first"]  # least recently updated first
        assert [session.events for session in listed] == [[], []]
        assert [session.state for session in listed] == [{"user:lang": "id"}, {"n": 2, "user:lang": "id"}]
        assert listed[1].last_update_time == first.last_update_time
        assert listed[0].last_update_time == second.last_update_time
        assert (await service.list_sessions(app_name=app, user_id="nobody")).sessions == []
        every = (await service.list_sessions(app_name=app)).sessions  # every user of the app
        assert [(session.user_id, session.id) for session in every] == [
            ("ardian", "second"),
            ("rafa", "rafas"),
            ("ardian", "first"),
        ]
        assert [session.state for session in every] == [{"user:lang": "id"}, {}, {"n": 2, "user:lang": "id"}]
        assert (await service.list_sessions(app_name=f"{app}-none")).sessions == []

    run_on(store_target, body)


def test_list_sessions_reads_no_events() -> None:
    async def body() -> None:
        store = CountingStore()
        service = ChronicaSessionService(store)
        sessions = [await new_session(service) for _ in range(3)]
        for session in sessions:
            for event in timed_events(10):
                await service.append_event(session, event)
        store.queries.clear()
        listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
        assert sorted(session.id for session in listed) == sorted(session.id for session in sessions)
        assert store.queries and all(query.last_n == 1 for query in store.queries)
        assert all(query.actor_kinds == (ActorKind.SYSTEM,) for query in store.queries)

    asyncio.run(body())


def test_delete_session_erases_it(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service, **{"user:kept": 1})
        await service.append_event(session, text_event("user", "secret plan"))
        await service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
        assert await service.get_session(app_name=APP, user_id=USER, session_id=session.id) is None
        listed = (await service.list_sessions(app_name=APP, user_id=USER)).sessions
        assert session.id not in [listed_session.id for listed_session in listed]
        await service.delete_session(app_name=APP, user_id=USER, session_id=session.id)  # again: nothing
        await service.delete_session(app_name=APP, user_id=USER, session_id=fresh_id())  # never there
        with pytest.raises(SessionNotFoundError):
            await service.append_event(session, text_event("user", "still there?"))
        again = await service.create_session(app_name=APP, user_id=USER, session_id=session.id)
        assert again.events == []
        assert again.state["user:kept"] == 1  # the user's state is not the session's
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and got.events == []

    run_on(store_target, body)


def test_appending_to_a_missing_session_raises_not_found(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        ghost = Session(id=fresh_id(), app_name=APP, user_id=USER)
        with pytest.raises(SessionNotFoundError):
            await service.append_event(ghost, text_event("user", "hello"))

    run_on(store_target, body)


def test_a_stale_session_is_refused(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        copy = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert copy is not None
        await service.append_event(session, text_event("user", "first"))
        with pytest.raises(StaleSessionError, match="reload the session"):
            await service.append_event(copy, text_event("user", "from a stale copy"))
        fresh = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert fresh is not None
        assert [
            event.content.parts[0].text for event in fresh.events if event.content and event.content.parts
        ] == ["first"]
        await service.append_event(fresh, text_event("user", "second"))
        with pytest.raises(StaleSessionError):
            await service.append_event(session, text_event("user", "after someone else"))

    run_on(store_target, body)


def test_concurrent_appends_from_one_revision_land_once(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        copies = [
            await service.get_session(app_name=APP, user_id=USER, session_id=session.id) for _ in range(6)
        ]
        results = await asyncio.gather(
            *(
                service.append_event(copy, text_event("user", f"writer {n}"))
                for n, copy in enumerate(copies)
                if copy
            ),
            return_exceptions=True,
        )
        landed = [result for result in results if isinstance(result, Event)]
        stale = [result for result in results if isinstance(result, StaleSessionError)]
        assert (len(landed), len(stale)) == (1, 5)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.events == landed

    run_on(store_target, body)


def test_a_session_built_by_hand_is_checked_by_time_and_newest_event(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        first = text_event("user", "first")
        await service.append_event(session, first)
        current = Session(id=session.id, app_name=APP, user_id=USER, events=[first], last_update_time=0.0)
        await service.append_event(current, text_event("user", "second"))  # its newest event is storage's
        behind = Session(id=session.id, app_name=APP, user_id=USER, events=[first], last_update_time=0.0)
        with pytest.raises(StaleSessionError):
            await service.append_event(behind, text_event("user", "third"))

    run_on(store_target, body)


def test_partial_events_and_redeliveries_are_not_written(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        partial = text_event("concierge", "Sun")
        partial.partial = True
        assert await service.append_event(session, partial) is partial
        event = text_event("concierge", "Sunny.")
        await service.append_event(session, event)
        await service.append_event(session, event.model_copy(deep=True))
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.events == [event]
        assert session.events == [event]

    run_on(store_target, body)


@pytest.mark.parametrize(
    ("app_name", "user_id", "session_id", "field"),
    [
        ("", USER, "s", "app_name"),
        (APP, "", "s", "user_id"),
        (APP, USER, "a\x00b", "session_id"),
        (APP, "\ud800", "s", "user_id"),
        (APP, USER, "s" * 250, "session_id"),
        ("a" * 260, USER, "s", "app_name"),
    ],
)
def test_names_chronica_cannot_hold_are_refused_naming_the_field(
    app_name: str, user_id: str, session_id: str, field: str
) -> None:
    async def body() -> None:
        service = ChronicaSessionService(AsyncMemoryStore())
        for call in (
            service.create_session(app_name=app_name, user_id=user_id, session_id=session_id),
            service.get_session(app_name=app_name, user_id=user_id, session_id=session_id),
            service.delete_session(app_name=app_name, user_id=user_id, session_id=session_id),
        ):
            with pytest.raises(InvalidSessionKey) as raised:
                await call
            assert raised.value.field == field

    asyncio.run(body())


def test_ids_fit_chronica_up_to_the_limit() -> None:
    longest = 255 - len("adk:3:app:4:user:") - 4 - len(":state")
    key = SessionKey("app", "user", "s" * longest)
    assert len(key.state_id) == 255  # the session's state chronicum, the longest of its ids
    with pytest.raises(InvalidSessionKey, match="255"):
        SessionKey("app", "user", "s" * (longest + 1))


def test_the_service_shares_a_keeper_and_leaves_what_it_was_given_open() -> None:
    async def body() -> None:
        store = AsyncMemoryStore()
        keeper = AsyncChronicarius(store)
        service = ChronicaSessionService(keeper)
        session = await new_session(service)
        await service.close()
        other = ChronicaSessionService(store)
        assert await other.get_session(app_name=APP, user_id=USER, session_id=session.id) is not None
        async with ChronicaSessionService("memory://") as owned:
            assert await owned.get_session(app_name=APP, user_id=USER, session_id=session.id) is None

    asyncio.run(body())


def test_state_values_json_cannot_hold_are_written_as_adks_database_service_writes_them(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        session = await service.create_session(
            app_name=app, user_id=USER, state={"tags": {"quiet"}, "hook": print}
        )
        assert session.state == {"tags": ["quiet"], "hook": repr(print)}
        delta = {"user:callback": print, "seen": {1}}
        await service.append_event(session, text_event("concierge", "Noted.", state_delta=delta))
        got = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.state == {
            "tags": ["quiet"],
            "hook": repr(print),
            "seen": [1],
            "user:callback": repr(print),
        }
        assert got.events[0].actions.state_delta == {"user:callback": repr(print), "seen": [1]}

    run_on(store_target, body)


def test_an_event_json_cannot_write_is_refused_naming_the_content(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        with pytest.raises(InvalidActum) as raised:
            await service.append_event(session, text_event("user", "lone \ud800 surrogate"))
        assert raised.value.field == "content"
        assert "JSON" in str(raised.value)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.events == []
        assert session.events == []

    run_on(store_target, body)


def test_another_writers_system_acta_do_not_hide_the_state(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        session = await service.create_session(app_name=app, user_id=USER, state={"party": 4})
        key = SessionKey(app, USER, session.id)
        for n in range(3):  # system acta of the same kind the snapshots have, by another actor
            await service.chronicarius.record_actum(
                key.owner, Actum(key.chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "audit", f"{n}")
            )
        got = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.state == {"party": 4}
        assert got.events == []
        await service.append_event(got, text_event("user", "hello", state_delta={"party": 5}))
        again = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert again is not None and again.state == {"party": 5}

    run_on(store_target, body)


def test_erasing_the_owner_erases_a_users_sessions_and_user_state(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        ardian, rafa = f"ardian-{fresh_id()}", f"rafa-{fresh_id()}"
        for user in (ardian, rafa):
            for _ in range(2):
                created = await service.create_session(app_name=app, user_id=user, state={"user:lang": user})
                await service.append_event(created, text_event("user", f"{user} was here"))
        erased = await service.chronicarius.erase_owner(ardian)
        assert erased == 5  # two sessions (events and state) and the user's state
        assert (await service.list_sessions(app_name=app, user_id=ardian)).sessions == []
        assert await service.get_user_state(app_name=app, user_id=ardian) == {}
        assert len((await service.list_sessions(app_name=app, user_id=rafa)).sessions) == 2
        assert await service.get_user_state(app_name=app, user_id=rafa) == {"lang": rafa}

    run_on(store_target, body)


def test_a_window_skips_other_frameworks_acta_and_still_returns_n_events(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await new_session(service)
        events = timed_events(4)
        for event in events:
            await service.append_event(session, event)
        key = SessionKey(APP, USER, session.id)
        for n in range(6):
            await service.chronicarius.record_actum(
                key.owner, Actum(key.chronicum_id, ActumKind.THOUGHT, ActorKind.AGENT, "planner", f"step {n}")
            )
        got = await service.get_session(
            app_name=APP, user_id=USER, session_id=session.id, config=GetSessionConfig(num_recent_events=3)
        )
        assert got is not None
        assert got.events == events[-3:]

    run_on(store_target, body)


class _CancelledAtTheEventsWrite(AsyncChronicarius):
    """A keeper whose first write of an event is cancelled (a turn cancelled mid-append)."""

    cancelled = False

    async def record_actum(
        self, owner_id: str, actum: Actum, *, idempotency_key: str | None = None, create: bool = True
    ) -> Actum:
        if actum.actor != STATE_ACTOR and not self.cancelled:
            self.cancelled = True
            raise asyncio.CancelledError
        return await super().record_actum(owner_id, actum, idempotency_key=idempotency_key, create=create)


def test_an_append_cancelled_after_its_state_landed_still_writes_its_event(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        keeper = _CancelledAtTheEventsWrite(store)
        service = ChronicaSessionService(keeper)
        app = f"app-{fresh_id()}"  # no user: or app: state of other tests in a kept store
        session = await service.create_session(app_name=app, user_id=USER)
        event = text_event("concierge", "Kemang at eight.", state_delta={"where": "Kemang"})
        with pytest.raises(asyncio.CancelledError):
            await service.append_event(session, event)
        assert keeper.cancelled
        got = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert got is not None
        assert got.state == {"where": "Kemang"}
        assert [(stored.id, stored.author) for stored in got.events] == [(event.id, "concierge")]

    run_on(store_target, body)


class _CancelledAtTheEventsErasure(AsyncChronicarius):
    """A keeper whose first erasure of a session's events is cancelled (a delete cancelled midway)."""

    cancelled = False

    async def erase_chronicum(self, owner_id: str, chronicum_id: str) -> int:
        if not chronicum_id.endswith(STATE_SUFFIX) and not self.cancelled:
            self.cancelled = True
            raise asyncio.CancelledError
        return await super().erase_chronicum(owner_id, chronicum_id)


def test_a_delete_cancelled_after_its_state_was_erased_still_erases_its_events(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        keeper = _CancelledAtTheEventsErasure(store)
        service = ChronicaSessionService(keeper)
        session = await new_session(service)
        await service.append_event(session, text_event("user", "secret plan"))
        with pytest.raises(asyncio.CancelledError):
            await service.delete_session(app_name=APP, user_id=USER, session_id=session.id)
        assert keeper.cancelled
        with pytest.raises(ChronicumNotFound):
            await keeper.get_acta(USER, SessionKey(APP, USER, session.id).chronicum_id)
        await service.create_session(app_name=APP, user_id=USER, session_id=session.id)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and got.events == []

    run_on(store_target, body)
