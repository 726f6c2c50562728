"""Forking an ADK session: both its chronica (events and state) forked, nothing copied."""

from __future__ import annotations

import asyncio

import pytest
from chronica_adk import ChronicaSessionService, SessionKey
from chronica_adk.ids import STATE_SUFFIX
from conftest import StoreTarget
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.runners import Runner
from helpers import USER, fresh_id, run_on, text_event
from scripted_model import ScriptedLlm, say
from test_runner import request_texts, user_says, weather_agent

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ActumNotFound,
    AsyncChronicarius,
    AsyncStore,
    Chronicum,
    ChronicumNotFound,
)

APP = f"fork-{fresh_id()}"
"""This module's app: no other module's user-scoped state (``user:...``) in its sessions."""


def said(session: object) -> list[str]:
    events = getattr(session, "events", [])
    return [event.content.parts[0].text for event in events if event.content and event.content.parts]


async def _story(service: ChronicaSessionService) -> tuple[str, list[str]]:
    """A session of three events, each setting ``step``, with another agent's message after the second."""
    session = await service.create_session(
        app_name=APP, user_id=USER, state={"step": 0}, session_id=fresh_id()
    )
    ids = []
    for step, text in enumerate(["Dinner?", "Kemang or Senopati?"], start=1):
        event = text_event("user" if step == 1 else "concierge", text, state_delta={"step": step})
        ids.append((await service.append_event(session, event)).id)
    key = SessionKey(APP, USER, session.id)
    booking = await service.chronicarius.record_actum(
        USER, Actum(key.chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Both are free.")
    )
    ids.append(booking.id)
    got = await service.get_session(app_name=APP, user_id=USER, session_id=session.id)
    assert got is not None
    await service.append_event(got, text_event("user", "Kemang.", state_delta={"step": 3}))
    return session.id, ids


def test_a_fork_at_the_newest_event_is_a_session_going_on_on_its_own(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        source_id, _ = await _story(service)
        fork_id = fresh_id()
        fork = await service.fork_session(
            app_name=APP, user_id=USER, session_id=source_id, new_session_id=fork_id
        )
        source = await service.get_session(app_name=APP, user_id=USER, session_id=source_id)
        assert source is not None
        assert (
            fork.id == fork_id and fork.events == source.events and fork.state == source.state == {"step": 3}
        )
        assert said(fork) == ["Dinner?", "Kemang or Senopati?", "booking said: Both are free.", "Kemang."]
        await service.append_event(
            fork, text_event("concierge", "Rumah Teduh at 7?", state_delta={"step": 4})
        )
        await service.append_event(source, text_event("concierge", "Senopati then?", state_delta={"step": 9}))
        fork_now = await service.get_session(app_name=APP, user_id=USER, session_id=fork_id)
        source_now = await service.get_session(app_name=APP, user_id=USER, session_id=source_id)
        assert fork_now is not None and source_now is not None
        assert said(fork_now)[-2:] == ["Kemang.", "Rumah Teduh at 7?"] and fork_now.state == {"step": 4}
        assert said(source_now)[-2:] == ["Kemang.", "Senopati then?"] and source_now.state == {"step": 9}
        listed = await service.list_sessions(app_name=APP, user_id=USER)
        assert {fork_id, source_id} <= {session.id for session in listed.sessions}

    run_on(store_target, body)


def test_a_fork_at_an_earlier_event_has_the_state_after_it(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        source_id, ids = await _story(service)
        at_second = await service.fork_session(
            app_name=APP, user_id=USER, session_id=source_id, at_event_id=ids[1]
        )
        assert said(at_second) == ["Dinner?", "Kemang or Senopati?"] and at_second.state == {"step": 2}
        # at another writer's actum: its events up to it, the state of the newest ADK event before it
        at_booking = await service.fork_session(
            app_name=APP, user_id=USER, session_id=source_id, at_event_id=ids[2]
        )
        assert said(at_booking) == ["Dinner?", "Kemang or Senopati?", "booking said: Both are free."]
        assert at_booking.state == {"step": 2}
        at_first = await service.fork_session(
            app_name=APP, user_id=USER, session_id=source_id, at_event_id=ids[0]
        )
        assert said(at_first) == ["Dinner?"] and at_first.state == {"step": 1}
        await service.append_event(at_first, text_event("concierge", "Where?", state_delta={"where": "?"}))
        again = await service.get_session(app_name=APP, user_id=USER, session_id=at_first.id)
        assert again is not None and said(again) == ["Dinner?", "Where?"]
        assert again.state == {"step": 1, "where": "?"}
        source = await service.get_session(app_name=APP, user_id=USER, session_id=source_id)
        assert source is not None and len(source.events) == 4 and source.state == {"step": 3}

    run_on(store_target, body)


def test_a_runner_turn_on_a_fork_reads_the_shared_history(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app, model = f"app-{fresh_id()}", ScriptedLlm(script=[say("Kemang."), say("Senopati."), say("Sure.")])
        runner = Runner(agent=weather_agent(model), app_name=app, session_service=service)
        session = await service.create_session(app_name=app, user_id=USER)
        for question in ("Where?", "Another place?"):
            async for _ in runner.run_async(
                user_id=USER, session_id=session.id, new_message=user_says(question)
            ):
                pass
        first = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert first is not None
        fork = await service.fork_session(
            app_name=app, user_id=USER, session_id=session.id, at_event_id=first.events[1].id
        )
        assert fork.state == {"last_answer": "Kemang."}
        async for _ in runner.run_async(user_id=USER, session_id=fork.id, new_message=user_says("Sure?")):
            pass
        assert request_texts(model, 2) == ["Where?", "Kemang.", "Sure?"]

    run_on(store_target, body)


def test_forks_refused_and_a_bare_chronicum_fork(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        source_id, _ = await _story(service)
        unknown_at, bare_id = fresh_id(), fresh_id()
        taken = await service.create_session(app_name=APP, user_id=USER, session_id=fresh_id())
        with pytest.raises(AlreadyExistsError):
            await service.fork_session(
                app_name=APP, user_id=USER, session_id=source_id, new_session_id=taken.id
            )
        with pytest.raises(SessionNotFoundError):
            await service.fork_session(app_name=APP, user_id=USER, session_id=fresh_id())
        with pytest.raises(ActumNotFound):
            await service.fork_session(
                app_name=APP,
                user_id=USER,
                session_id=source_id,
                new_session_id=unknown_at,
                at_event_id="nope",
            )
        assert await service.get_session(app_name=APP, user_id=USER, session_id=unknown_at) is None
        # Chronica's fork of the events alone is no session; the service's fork is one
        bare = SessionKey(APP, USER, bare_id)
        await service.chronicarius.fork_chronicum(
            USER, SessionKey(APP, USER, source_id).chronicum_id, fork_id=bare.chronicum_id
        )
        assert await service.get_session(app_name=APP, user_id=USER, session_id=bare_id) is None
        with pytest.raises(AlreadyExistsError):
            await service.fork_session(
                app_name=APP, user_id=USER, session_id=source_id, new_session_id=bare_id
            )
        fork = await service.fork_session(app_name=APP, user_id=USER, session_id=source_id)
        # deleting the source deletes its forks (Chronica's erasure of shared acta)
        await service.delete_session(app_name=APP, user_id=USER, session_id=source_id)
        assert await service.get_session(app_name=APP, user_id=USER, session_id=fork.id) is None

    run_on(store_target, body)


class _CancelledAtTheStateFork(AsyncChronicarius):
    """A keeper whose first fork of a state chronicum is cancelled (a fork_session cancelled midway)."""

    cancelled = False

    async def fork_chronicum(
        self, owner_id: str, chronicum_id: str, *, at: str | None = None, fork_id: str | None = None
    ) -> Chronicum:
        if chronicum_id.endswith(STATE_SUFFIX) and not self.cancelled:
            self.cancelled = True
            raise asyncio.CancelledError
        return await super().fork_chronicum(owner_id, chronicum_id, at=at, fork_id=fork_id)


def test_a_fork_cancelled_between_its_two_forks_leaves_no_history_under_its_id(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        keeper = _CancelledAtTheStateFork(store)
        service = ChronicaSessionService(keeper)
        source_id, _ = await _story(service)
        fork_id = fresh_id()
        with pytest.raises(asyncio.CancelledError):
            await service.fork_session(
                app_name=APP, user_id=USER, session_id=source_id, new_session_id=fork_id
            )
        assert keeper.cancelled
        with pytest.raises(ChronicumNotFound):  # no events' fork left without its state
            await keeper.get_acta(USER, SessionKey(APP, USER, fork_id).chronicum_id)
        # a session created under the id later starts empty, without the source's history
        created = await service.create_session(app_name=APP, user_id=USER, session_id=fork_id)
        got = await service.get_session(app_name=APP, user_id=USER, session_id=created.id)
        assert got is not None and got.events == []
        fork = await service.fork_session(app_name=APP, user_id=USER, session_id=source_id)
        assert said(fork) == ["Dinner?", "Kemang or Senopati?", "booking said: Both are free.", "Kemang."]
        assert fork.state == {"step": 3}

    run_on(store_target, body)
