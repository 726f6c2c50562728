"""What a ChronicaSession shows of acta it did not write: a person's (the CLI), other agents',
other frameworks', and its own written before there was a native form."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

from agents import Agent, Runner
from chronica_openai_agents import ChronicaSession, item_of_actum
from conftest import StoreTarget
from helpers import AGENT, OWNER, run_on, session_on
from scripted_model import ScriptedModel, say
from test_runner import QUIET, first_turn_script, weather_agent

from chronica_core import ActorKind, Actum, ActumKind, AsyncChronicarius, AsyncStore, Native, new_chronicum_id
from chronica_core.capabilities import NATIVE, store_capabilities
from chronica_core.cli import main as chronica
from chronica_core.readable import ForeignActa


def test_a_message_a_person_records_through_the_cli_is_the_next_turn_s_user_message(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dinner.db'}"
    session_id = new_chronicum_id()
    model = ScriptedModel([[say("A table for four at 8.")], [say("Five at 8, booked.", "msg_2")]])
    agent = weather_agent(model)

    async def turn(text: str) -> str:
        async with ChronicaSession(session_id, url, owner_id=OWNER, actor=AGENT) as session:
            result = await Runner.run(agent, text, session=session, run_config=QUIET)
            return str(result.final_output)

    assert asyncio.run(turn("A quiet table for four on Friday?")) == "A table for four at 8."
    out = io.StringIO()
    code = chronica(
        [
            "record",
            session_id,
            "--store",
            url,
            "--owner",
            OWNER,
            "--kind",
            "message",
            "--actor-kind",
            "human",
            "--actor",
            OWNER,
            "--content",
            "Actually make it five people",
        ],
        out=out,
    )
    assert code == 0, out.getvalue()
    assert asyncio.run(turn("Please book it.")) == "Five at 8, booked."
    second_input = model.inputs[1]
    assert second_input[0] == {"role": "user", "content": "A quiet table for four on Friday?"}
    assert second_input[1]["content"][0]["text"] == "A table for four at 8."  # type: ignore[index,typeddict-item]
    assert second_input[2:] == [
        {"role": "user", "content": "Actually make it five people"},
        {"role": "user", "content": "Please book it."},
    ]
    listing = io.StringIO()
    assert chronica(["acta", session_id, "--store", url, "--owner", OWNER], out=listing) == 0
    assert "Actually make it five people" in listing.getvalue()


async def _record_other_writers(keeper: AsyncChronicarius, session_id: str, native: bool) -> None:
    """A person's message, another agent's message, thought and tool exchange, and (on a store
    that keeps native forms) a message another framework wrote with its own native form."""
    person = Actum(session_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Actually make it five people")
    await keeper.record_actum(OWNER, person)
    said = Actum(session_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Checking Il Gusto.")
    thought = Actum(session_id, ActumKind.THOUGHT, ActorKind.AGENT, "booking", "Five fit at 8.")
    request = Actum(session_id, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "booking", 'book({"people": 5})')
    response = Actum(session_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "booking", "booked")
    await keeper.record_acta(OWNER, [said, thought, request, response])
    if native:
        event = json.dumps({"author": "booking", "content": {"parts": [{"text": "Booked for five."}]}})
        framework = Actum(
            session_id,
            ActumKind.MESSAGE,
            ActorKind.AGENT,
            "booking",
            "Booked for five.",
            native=Native("google-adk.event", event),
        )
        await keeper.record_actum(OWNER, framework)


def test_other_writers_acta_read_as_messages(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        native = NATIVE in store_capabilities(store)
        await session.add_items([{"role": "user", "content": "A table for four?"}])
        await _record_other_writers(session.chronicarius, session.session_id, native)
        framework = [{"role": "assistant", "content": "booking said: Booked for five."}] if native else []
        expected: list[Any] = [
            {"role": "user", "content": "A table for four?"},
            {"role": "user", "content": "Actually make it five people"},
            {"role": "assistant", "content": "booking said: Checking Il Gusto."},
            *framework,
        ]
        assert await session.get_items() == expected
        assert await session.get_items(2) == expected[-2:]
        everything = session_on(
            store, session.session_id, foreign=ForeignActa(thoughts=True, tool_exchanges=True)
        )
        assert await everything.get_items() == [
            *expected[:3],
            {"role": "assistant", "content": "booking thought: Five fit at 8."},
            {"role": "assistant", "content": 'booking called a tool: book({"people": 5})'},
            {"role": "assistant", "content": "booking got a tool's answer: booked"},
            *framework,
        ]
        assert await session.pop_item() == expected[-1]  # another writer's message pops like an item
        assert await session.get_items() == expected[:-1]

    run_on(store_target, body)


def test_a_turn_after_other_writers_shows_their_messages_in_order(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        native = NATIVE in store_capabilities(store)
        model = ScriptedModel([[say("For four, noted.")], [say("Five it is.", "msg_2")]])
        agent = weather_agent(model)
        await Runner.run(agent, "A table for four?", session=session, run_config=QUIET)
        await _record_other_writers(session.chronicarius, session.session_id, native)
        result = await Runner.run(agent, "Confirm?", session=session, run_config=QUIET)
        assert result.final_output == "Five it is."
        seen = model.inputs[1]
        assert [item.get("role") for item in seen] == ["user", "assistant", "user", "assistant"] + (
            ["assistant"] if native else []
        ) + ["user"]
        assert seen[2:4] == [
            {"role": "user", "content": "Actually make it five people"},
            {"role": "assistant", "content": "booking said: Checking Il Gusto."},
        ]
        if native:  # what the person reads in `chronica acta`: text, never an item's JSON
            acta = await session.chronicarius.get_acta(OWNER, session.session_id)
            assert [a.content for a in acta if a.actor == AGENT] == ["For four, noted.", "Five it is."]

    run_on(store_target, body)


def test_items_written_before_there_was_a_native_form_read_back_as_they_were(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        old: list[Any] = [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hello"}],
            },
        ]
        kinds = [
            (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER),
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT, AGENT),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT),
        ]
        written = [
            Actum(session.session_id, kind, actor_kind, actor, json.dumps(item, separators=(",", ":")))
            for item, (kind, actor_kind, actor) in zip(old, kinds, strict=True)
        ]
        await session.chronicarius.record_acta(OWNER, written)
        new: Any = {"role": "user", "content": "and now?"}
        await session.add_items([new])
        assert await session.get_items() == [*old, new]
        assert item_of_actum(written[1]) == old[1]

    run_on(store_target, body)


def test_another_framework_s_json_written_without_a_native_form_reads_as_its_text(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        event = {"author": "booking", "content": {"role": "model", "parts": [{"text": "Booked for five."}]}}
        old = Actum(session.session_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", json.dumps(event))
        await session.chronicarius.record_actum(OWNER, old)  # as an earlier chronica-adk wrote it
        assert await session.get_items() == [
            {"role": "assistant", "content": "booking said: Booked for five."}
        ]

    run_on(store_target, body)


def test_another_agents_session_s_items_reach_the_model_as_that_agent_s(store_target: StoreTarget) -> None:
    """Two agents of this SDK, two actors, one chronicum: each model reads the other's words named."""

    async def body(store: AsyncStore) -> None:
        concierge = session_on(store)
        booking = ChronicaSession(concierge.session_id, store, owner_id=OWNER, actor="booking")
        first = ScriptedModel(first_turn_script())
        await Runner.run(weather_agent(first), "Weather in Tirana?", session=concierge, run_config=QUIET)
        model = ScriptedModel([[say("Booked for Friday.", "msg_b")]])
        booker = Agent(name="booking", instructions="Book.", model=model)
        await Runner.run(booker, "Book it.", session=booking, run_config=QUIET)
        # the concierge's thought and tool exchange are left out, its answer named
        assert model.inputs[0] == [
            {"role": "user", "content": "Weather in Tirana?"},
            {"role": "assistant", "content": "concierge said: Sunny in Tirana."},
            {"role": "user", "content": "Book it."},
        ]
        items = await concierge.get_items()  # its own items exactly, booking's named
        assert len(items) == 7
        assert items[5] == {"role": "user", "content": "Book it."}
        assert items[6] == {"role": "assistant", "content": "booking said: Booked for Friday."}

    run_on(store_target, body)
