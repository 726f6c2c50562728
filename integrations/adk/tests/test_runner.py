"""Whole agent turns through ADK's ``Runner`` (``run_async`` and the synchronous ``run``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from chronica_adk import ChronicaSessionService, SessionKey
from conftest import StoreTarget
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from helpers import USER, fresh_id, run_on
from scripted_model import ScriptedLlm, call, say

from chronica_core import ActorKind, Actum, ActumKind, AsyncStore


def weather(city: str) -> str:
    """Tell the weather in ``city``."""
    return f"sunny in {city}"


def weather_agent(model: ScriptedLlm) -> LlmAgent:
    return LlmAgent(
        name="concierge",
        model=model,
        instruction="Answer briefly.",
        tools=[weather],
        output_key="last_answer",
    )


def script() -> list[list[types.Part]]:
    return [
        call("weather", {"city": "Tirana"}, "call-1"),
        say("Sunny in Tirana."),
        say("Sunny again tomorrow."),
    ]


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def contents_texts(contents: list[types.Content | None]) -> list[str]:
    """Each part's text, its function call's name or its function response's output."""
    shown: list[str] = []
    for content in contents:
        for part in (content.parts if content is not None else None) or []:
            if part.text is not None:
                shown.append(part.text)
            elif part.function_call is not None:
                shown.append(f"call {part.function_call.name}")
            elif part.function_response is not None and part.function_response.response is not None:
                shown.append(f"result {part.function_response.response.get('result')}")
    return shown


def texts(events: list[Event]) -> list[str]:
    """What the events say (see :func:`contents_texts`)."""
    return contents_texts([event.content for event in events])


TURN_ONE = ["What is the weather in Tirana?", "call weather", "result sunny in Tirana", "Sunny in Tirana."]
TURN_TWO = ["And tomorrow?", "Sunny again tomorrow."]


def request_texts(model: ScriptedLlm, call_number: int) -> list[str]:
    """The texts of what the model was shown in its ``call_number``-th call."""
    return contents_texts(list(model.requests[call_number].contents))


async def check_session(
    service: ChronicaSessionService, app: str, session_id: str, model: ScriptedLlm
) -> None:
    session = await service.get_session(app_name=app, user_id=USER, session_id=session_id)
    assert session is not None
    assert texts(session.events) == TURN_ONE + TURN_TWO
    assert [event.author for event in session.events] == [
        "user",
        "concierge",
        "concierge",
        "concierge",
        "user",
        "concierge",
    ]
    assert session.state["last_answer"] == "Sunny again tomorrow."
    assert request_texts(model, 2) == TURN_ONE + TURN_TWO[:1]  # turn two's model read turn one from the store
    assert model.script == []
    key = SessionKey(app, USER, session_id)
    acta = await service.chronicarius.get_acta(
        key.owner, key.chronicum_id, actor_kinds=[ActorKind.HUMAN, ActorKind.AGENT]
    )
    assert [(actum.kind, actum.actor_kind, actum.actor) for actum in acta] == [
        (ActumKind.MESSAGE, ActorKind.HUMAN, USER),
        (ActumKind.TOOL_REQUEST, ActorKind.AGENT, "concierge"),
        (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "concierge"),
        (ActumKind.MESSAGE, ActorKind.AGENT, "concierge"),
        (ActumKind.MESSAGE, ActorKind.HUMAN, USER),
        (ActumKind.MESSAGE, ActorKind.AGENT, "concierge"),
    ]


def test_two_run_async_turns(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app, model = f"app-{fresh_id()}", ScriptedLlm(script=script())
        runner = Runner(agent=weather_agent(model), app_name=app, session_service=service)
        session = await service.create_session(app_name=app, user_id=USER)
        for question in ("What is the weather in Tirana?", "And tomorrow?"):
            async for _ in runner.run_async(
                user_id=USER, session_id=session.id, new_message=user_says(question)
            ):
                pass
        await check_session(service, app, session.id, model)

    run_on(store_target, body)


def test_a_get_session_config_is_the_window_the_model_reads(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        model = ScriptedLlm(script=[say("one"), say("two"), say("three")])
        runner = Runner(agent=weather_agent(model), app_name=app, session_service=service)
        session = await service.create_session(app_name=app, user_id=USER)
        window = RunConfig(get_session_config=GetSessionConfig(num_recent_events=3))
        for question in ("first", "second", "third"):
            async for _ in runner.run_async(
                user_id=USER, session_id=session.id, new_message=user_says(question), run_config=window
            ):
                pass
        # the third call: the three newest stored events ("first" is left out) and the new question
        assert request_texts(model, 2) == ["one", "second", "two", "third"]

    run_on(store_target, body)


def run_sync_turns(service: ChronicaSessionService, app: str, model: ScriptedLlm) -> str:
    """Two turns through the synchronous ``Runner.run`` (ADK runs each in a thread with its own loop)."""
    import asyncio

    runner = Runner(
        agent=weather_agent(model), app_name=app, session_service=service, auto_create_session=True
    )
    session_id = fresh_id()
    for question in ("What is the weather in Tirana?", "And tomorrow?"):
        for _ in runner.run(user_id=USER, session_id=session_id, new_message=user_says(question)):
            pass

    async def check() -> None:
        await check_session(service, app, session_id, model)
        await service.close()

    asyncio.run(check())
    return session_id


def test_two_sync_run_turns(store_target: StoreTarget) -> None:
    """ADK's synchronous run uses a new thread and event loop per call: one service serves them all."""
    service = ChronicaSessionService(store_target.url, store_options=dict(store_target.options))
    run_sync_turns(service, f"app-{fresh_id()}", ScriptedLlm(script=script()))


def test_the_sync_run_needs_nothing_but_the_script(monkeypatch: Any) -> None:
    model = ScriptedLlm(script=[say("hello")])
    service = ChronicaSessionService("memory://")
    runner = Runner(
        agent=weather_agent(model), app_name="quiet", session_service=service, auto_create_session=True
    )
    events = list(runner.run(user_id=USER, session_id=fresh_id(), new_message=user_says("hi")))
    assert texts(events) == ["hello"]


def test_the_agent_reads_what_another_agent_wrote_through_chronica(
    store_target: StoreTarget, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app, model = f"app-{fresh_id()}", ScriptedLlm(script=[say("Searching."), say("Enjoy dinner.")])
        runner = Runner(agent=weather_agent(model), app_name=app, session_service=service)
        session = await service.create_session(app_name=app, user_id=USER)
        async for _ in runner.run_async(
            user_id=USER, session_id=session.id, new_message=user_says("A table?")
        ):
            pass
        key = SessionKey(app, USER, session.id)
        await service.chronicarius.record_actum(  # the booking agent, written with Chronica directly
            key.owner,
            Actum(
                key.chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Booked Rumah Teduh for 7pm."
            ),
        )
        async for _ in runner.run_async(
            user_id=USER, session_id=session.id, new_message=user_says("Thanks!")
        ):
            pass
        assert request_texts(model, 1) == [
            "A table?",
            "Searching.",
            "booking said: Booked Rumah Teduh for 7pm.",
            "Thanks!",
        ]
        stored = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert stored is not None
        assert [event.author for event in stored.events] == ["user", "concierge", "user", "user", "concierge"]

    with caplog.at_level(logging.WARNING):
        run_on(store_target, body)
    assert not [record for record in caplog.records if "unknown agent" in record.getMessage()]
