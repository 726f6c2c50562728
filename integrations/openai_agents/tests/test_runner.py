"""Whole agent turns through ``Runner.run`` and ``Runner.run_sync`` with a ChronicaSession."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, function_tool
from chronica_openai_agents import ChronicaSession
from conftest import StoreTarget
from helpers import AGENT, OWNER, run_on, session_on
from scripted_model import ScriptedModel, call, say, think

from chronica_core import ActorKind, ActumKind, AsyncStore, new_chronicum_id

QUIET = RunConfig(tracing_disabled=True)


@function_tool
def weather(city: str) -> str:
    """Tell the weather in ``city``."""
    return f"sunny in {city}"


def weather_agent(model: ScriptedModel) -> Agent[Any]:
    return Agent(name="concierge", instructions="Answer briefly.", model=model, tools=[weather])


def first_turn_script() -> list[Any]:
    return [
        [think("Look it up first."), call("weather", {"city": "Tirana"}, "call_1")],
        [say("Sunny in Tirana.")],
        [say("Sunny again tomorrow.", "msg_2")],
    ]


TURN_ONE_KINDS = [
    (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER),
    (ActumKind.THOUGHT, ActorKind.AGENT, AGENT),
    (ActumKind.TOOL_REQUEST, ActorKind.AGENT, AGENT),
    (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, AGENT),
    (ActumKind.MESSAGE, ActorKind.AGENT, AGENT),
]


def check_turns(model: ScriptedModel, items: list[Any]) -> None:
    """Two turns landed in the session and the second one's model saw the first."""
    assert [item.get("type", "message") for item in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    assert items[0]["content"] == "What is the weather in Tirana?"
    assert items[3]["call_id"] == "call_1"
    assert items[3]["output"] == "sunny in Tirana"
    assert items[4]["content"][0]["text"] == "Sunny in Tirana."
    assert items[5] == {"role": "user", "content": "And tomorrow?"}
    assert items[6]["content"][0]["text"] == "Sunny again tomorrow."
    assert model.inputs[2] == items[:6]  # turn two's model call read turn one from the session


def test_two_runner_run_turns(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        model = ScriptedModel(first_turn_script())
        agent = weather_agent(model)
        first = await Runner.run(agent, "What is the weather in Tirana?", session=session, run_config=QUIET)
        assert first.final_output == "Sunny in Tirana."
        acta = await session.chronicarius.get_acta(OWNER, session.session_id)
        assert [(a.kind, a.actor_kind, a.actor) for a in acta] == TURN_ONE_KINDS
        second = await Runner.run(agent, "And tomorrow?", session=session, run_config=QUIET)
        assert second.final_output == "Sunny again tomorrow."
        check_turns(model, await session.get_items())
        assert model.script == []

    run_on(store_target, body)


def test_a_session_limit_is_the_window_the_model_reads(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store, session_settings=SessionSettings(limit=2))
        model = ScriptedModel([[say("one")], [say("two", "msg_2")], [say("three", "msg_3")]])
        agent = weather_agent(model)
        for question in ("first", "second", "third"):
            await Runner.run(agent, question, session=session, run_config=QUIET)
        everything = await session.get_items(100)
        assert [item.get("content") for item in everything[::2]] == ["first", "second", "third"]
        assert await session.get_items() == everything[-2:]
        assert model.inputs[2] == everything[2:5]  # the last two items, then the new question

    run_on(store_target, body)


@pytest.fixture
def default_loop() -> Iterator[None]:
    """``Runner.run_sync`` runs in the thread's default event loop; close it afterwards."""
    yield
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:
        return
    loop.close()
    policy.set_event_loop(None)


def test_two_runner_run_sync_turns(store_target: StoreTarget, default_loop: None) -> None:
    session = ChronicaSession(
        new_chronicum_id(), store_target.url, owner_id=OWNER, actor=AGENT, store_options=store_target.options
    )
    model = ScriptedModel(first_turn_script())
    agent = weather_agent(model)
    first = Runner.run_sync(agent, "What is the weather in Tirana?", session=session, run_config=QUIET)
    assert first.final_output == "Sunny in Tirana."
    second = Runner.run_sync(agent, "And tomorrow?", session=session, run_config=QUIET)
    assert second.final_output == "Sunny again tomorrow."
    loop = asyncio.get_event_loop_policy().get_event_loop()  # the loop run_sync used, and the store
    try:
        check_turns(model, loop.run_until_complete(session.get_items()))
        loop.run_until_complete(session.clear_session())
    finally:
        loop.run_until_complete(session.close())
