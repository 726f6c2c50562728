"""Whole agent turns through ``Runner.run`` and ``Runner.run_sync`` with a ChronicaSession."""

from __future__ import annotations

import asyncio
import warnings
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
def default_loops() -> Iterator[list[asyncio.AbstractEventLoop]]:
    """The loops ``Runner.run_sync`` ran in (the test adds the thread's default loop after it: a
    later ``asyncio.run()`` unsets it), closed afterwards as ``asyncio.run()`` closes its own:
    tasks cancelled, async generators closed."""
    loops: list[asyncio.AbstractEventLoop] = []
    yield loops
    for loop in loops:
        if loop.is_closed():
            continue
        try:
            loop.run_until_complete(_shut_down(loop))
        finally:
            loop.close()
    asyncio.get_event_loop_policy().set_event_loop(None)


async def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the loop's other tasks and wait for them, then close its async generators."""
    pending = asyncio.all_tasks(loop) - {asyncio.current_task()}
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await loop.shutdown_asyncgens()


def run_sync_loop() -> asyncio.AbstractEventLoop:
    """The thread's default loop, which ``Runner.run_sync`` ran in and left open."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.get_event_loop_policy().get_event_loop()


def test_two_runner_run_sync_turns(
    store_target: StoreTarget, default_loops: list[asyncio.AbstractEventLoop]
) -> None:
    session = ChronicaSession(
        new_chronicum_id(), store_target.url, owner_id=OWNER, actor=AGENT, store_options=store_target.options
    )
    model = ScriptedModel(first_turn_script())
    agent = weather_agent(model)
    first = Runner.run_sync(agent, "What is the weather in Tirana?", session=session, run_config=QUIET)
    assert first.final_output == "Sunny in Tirana."
    second = Runner.run_sync(agent, "And tomorrow?", session=session, run_config=QUIET)
    assert second.final_output == "Sunny again tomorrow."
    default_loops.append(run_sync_loop())
    try:  # read back from loops of their own: the store serves them too
        check_turns(model, asyncio.run(session.get_items()))
        asyncio.run(session.clear_session())
        assert asyncio.run(session.get_items()) == []
    finally:
        asyncio.run(session.close())


def test_run_sync_and_run_share_one_session_opened_from_a_url(
    store_target: StoreTarget, default_loops: list[asyncio.AbstractEventLoop]
) -> None:
    """A turn through ``Runner.run_sync`` (the thread's default loop), the next through
    ``Runner.run`` in an ``asyncio.run()`` of its own, and a read in a third loop: one session,
    one store opened from its URL, no store per loop."""
    session = ChronicaSession(
        new_chronicum_id(), store_target.url, owner_id=OWNER, actor=AGENT, store_options=store_target.options
    )
    model = ScriptedModel(first_turn_script())
    agent = weather_agent(model)
    try:
        first = Runner.run_sync(agent, "What is the weather in Tirana?", session=session, run_config=QUIET)
        default_loops.append(run_sync_loop())
        assert first.final_output == "Sunny in Tirana."
        second = asyncio.run(Runner.run(agent, "And tomorrow?", session=session, run_config=QUIET))
        assert second.final_output == "Sunny again tomorrow."
        check_turns(model, asyncio.run(session.get_items()))
        assert model.script == []
    finally:
        asyncio.run(session.close())
