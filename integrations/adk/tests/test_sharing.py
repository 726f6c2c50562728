"""One conversation shared with the person and other writers: the owner is the person, events read
as text, the state kept apart, and sessions an earlier release wrote (owner ``adk:<app>:<user>``,
state among the events, the event's JSON as content) still working."""

from __future__ import annotations

import json
from typing import Any

import pytest
from chronica_adk import NATIVE_FORMAT, STATE_ACTOR, ChronicaSessionService, SessionKey, event_actum
from conftest import StoreTarget
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event
from helpers import APP, USER, fresh_id, run_on, text_event
from test_service import rich_events

from chronica_core import ActorKind, Actum, ActumKind, AsyncStore
from chronica_core.capabilities import NATIVE, store_capabilities
from chronica_core.readable import ForeignActa


def test_the_owner_is_the_person(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        user = f"ardian-{fresh_id()}"
        session = await service.create_session(app_name=APP, user_id=user, state={"user:lang": "sq"})
        await service.append_event(session, text_event("user", "A table for four?"))
        key = SessionKey(APP, user, session.id)
        assert key.owner == user
        listed = {chronicum.id for chronicum in (await service.chronicarius.list_chronica(user)).chronica}
        assert listed == {key.chronicum_id, key.state_id, key.user_state_id}
        # the person, through the CLI or an app, writes into the same chronicum as themselves
        await service.chronicarius.record_actum(
            user, Actum(key.chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, user, "Make it five.")
        )
        got = await service.get_session(app_name=APP, user_id=user, session_id=session.id)
        assert got is not None
        assert [(e.author, e.content.parts[0].text) for e in got.events if e.content and e.content.parts] == [
            ("user", "A table for four?"),
            ("user", "Make it five."),
        ]
        assert await service.chronicarius.erase_owner(user) == 3
        assert await service.get_session(app_name=APP, user_id=user, session_id=session.id) is None

    run_on(store_target, body)


def test_events_read_as_text_and_keep_the_event_as_their_native_form(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await service.create_session(app_name=APP, user_id=USER, session_id=fresh_id())
        events = rich_events()
        for event in events:
            await service.append_event(session, event)
        key = SessionKey(APP, USER, session.id)
        acta = await service.chronicarius.get_acta(USER, key.chronicum_id)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and got.events == events
        if NATIVE not in store_capabilities(store):  # the event's JSON, as earlier releases wrote it
            assert [Event.model_validate_json(actum.content) for actum in acta] == events
            return
        assert [actum.native.format for actum in acta if actum.native is not None] == [NATIVE_FORMAT] * 6
        assert [actum.content for actum in acta] == [
            "Find a quiet table for four in Kemang on Friday, 7pm. Ünïcödé ✓ \x00",
            "Search first.",
            'search({"area": "Kemang", "party": 4, "ratio": 0.30000000000000004})',
            '{"result": [{"name": "Rumah Teduh", "table": true}]}',
            "Here is the room.\n[image/png]",
            "transfer to booking; escalate",
        ]

    run_on(store_target, body)


def test_other_writers_thoughts_and_tool_exchanges_on_request(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session_id = fresh_id()
        key = SessionKey(APP, USER, session_id)
        plain = ChronicaSessionService(store)
        everything = ChronicaSessionService(store, foreign=ForeignActa(thoughts=True, tool_exchanges=True))
        await plain.create_session(app_name=APP, user_id=USER, session_id=session_id)
        await plain.chronicarius.record_acta(
            USER,
            [
                Actum(key.chronicum_id, ActumKind.THOUGHT, ActorKind.AGENT, "booking", "Five fit at 8."),
                Actum(key.chronicum_id, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "booking", "book(5)"),
                Actum(key.chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "booking", "booked"),
                Actum(key.chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Booked."),
            ],
        )

        async def texts(service: ChronicaSessionService) -> list[Any]:
            got = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
            assert got is not None
            return [
                event.content.parts[0].text for event in got.events if event.content and event.content.parts
            ]

        assert await texts(plain) == ["booking said: Booked."]
        assert await texts(everything) == [
            "booking thought: Five fit at 8.",
            "booking called a tool: book(5)",
            "booking got a tool's answer: booked",
            "booking said: Booked.",
        ]

    run_on(store_target, body)


async def _write_as_an_earlier_release(store: AsyncStore, app: str, session_id: str) -> list[Event]:
    """A session as an earlier release wrote it: owner ``adk:<app>:<user>``, the events' JSON as
    content, a state snapshot (kind ``tool_response``) after each event in the same chronicum, and
    the user's state under that owner too."""
    service = ChronicaSessionService(store)
    key = SessionKey(app, USER, session_id)

    def snapshot(scope: str, state: dict[str, Any], event_id: str | None, chronicum_id: str) -> Actum:
        content: dict[str, Any] = {"chronica_adk": scope, "state": state, "write": fresh_id()}
        if event_id is not None:
            content["event"] = event_id
        return Actum(
            chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, STATE_ACTOR, json.dumps(content)
        )

    events = [text_event("user", "A table?"), text_event("concierge", "Rumah Teduh, 7pm.")]
    await service.chronicarius.record_actum(
        key.legacy_owner, snapshot("session", {"party": 4}, None, key.chronicum_id)
    )
    for event in events:
        await service.chronicarius.record_acta(
            key.legacy_owner,
            [
                event_actum(key.chronicum_id, event, USER, native=False),
                snapshot("session", {"party": 4}, event.id, key.chronicum_id),
            ],
        )
    await service.chronicarius.record_actum(
        key.legacy_owner, snapshot("user", {"lang": "sq"}, None, key.user_state_id)
    )
    return events


def test_sessions_an_earlier_release_wrote_keep_working(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app, session_id = f"app-{fresh_id()}", fresh_id()
        key = SessionKey(app, USER, session_id)
        events = await _write_as_an_earlier_release(store, app, session_id)
        got = await service.get_session(app_name=app, user_id=USER, session_id=session_id)
        assert got is not None
        assert got.events == events
        assert got.state == {"party": 4, "user:lang": "sq"}
        assert await service.get_user_state(app_name=app, user_id=USER) == {"lang": "sq"}
        listed = await service.list_sessions(app_name=app, user_id=USER)
        assert [session.id for session in listed.sessions] == [session_id]
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=app, user_id=USER, session_id=session_id)
        later = text_event("user", "Five, please.", state_delta={"party": 5, "user:lang": "en"})
        await service.append_event(got, later)
        again = await service.get_session(app_name=app, user_id=USER, session_id=session_id)
        assert again is not None
        assert again.events == [*events, later]
        assert again.state == {"party": 5, "user:lang": "en"}
        # still where it was: nothing moved to the new owner
        assert [
            c.id for c in (await service.chronicarius.list_chronica(key.legacy_owner)).chronica
        ] == sorted([key.chronicum_id, key.user_state_id])
        # a new session of the same user sits beside it, under the person
        fresh = await service.create_session(app_name=app, user_id=USER)
        assert {s.id for s in (await service.list_sessions(app_name=app, user_id=USER)).sessions} == {
            session_id,
            fresh.id,
        }
        await service.delete_session(app_name=app, user_id=USER, session_id=session_id)
        assert await service.get_session(app_name=app, user_id=USER, session_id=session_id) is None
        await service.delete_session(app_name=app, user_id=USER, session_id=fresh.id)
        assert await service.chronicarius.erase_owner(key.legacy_owner) == 1  # the user's state was left

    run_on(store_target, body)


def test_another_framework_s_json_written_without_a_native_form_reads_as_its_text(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await service.create_session(app_name=APP, user_id=USER, session_id=fresh_id())
        key = SessionKey(APP, USER, session.id)
        item = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Five, noted."}],
        }
        await service.chronicarius.record_actum(  # as an earlier chronica-openai-agents wrote it
            USER, Actum(key.chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "concierge", json.dumps(item))
        )
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None
        assert [e.content.parts[0].text for e in got.events if e.content and e.content.parts] == [
            "concierge said: Five, noted."
        ]

    run_on(store_target, body)


def test_last_update_time_is_the_newest_event_s_timestamp(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await service.create_session(app_name=APP, user_id=USER, session_id=fresh_id())
        later = session.last_update_time + 10
        await service.append_event(session, text_event("user", "Later.", timestamp=later))
        assert session.last_update_time == later
        got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert got is not None and got.last_update_time == later
        listed = await service.list_sessions(app_name=APP, user_id=USER)
        assert [s.last_update_time for s in listed.sessions if s.id == session.id] == [later]

    run_on(store_target, body)
