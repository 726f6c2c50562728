"""ChronicaHistoryProvider under whole agent runs with a scripted chat client, and on its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_framework import Agent, Content, Message, tool
from chronica_agent_framework import NATIVE_FORMAT, PART_FORMAT, ChronicaHistoryProvider
from conftest import PlainStore, run_on_store
from scripted_client import ScriptedChatClient

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncStore,
    CapabilityUnsupported,
    ChronicumNotFound,
    new_chronicum_id,
)
from chronica_core.readable import ForeignActa

OWNER = "ardian"
AGENT = "concierge"


@tool
def free_tables(area: str) -> str:
    """The restaurants of ``area`` with a free table tonight."""
    return f"Rumah Teduh in {area}: free at 7"


def forms(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as their ``to_dict()`` forms, without the attribution the agent adds on load."""
    result = []
    for message in messages:
        form = message.to_dict()
        form.get("additional_properties", {}).pop("_attribution", None)
        if not form.get("additional_properties"):
            form.pop("additional_properties", None)
        result.append(form)
    return result


def provider_on(store: AsyncStore | AsyncChronicarius, **options: Any) -> ChronicaHistoryProvider:
    return ChronicaHistoryProvider(store, owner_id=OWNER, actor=options.pop("actor", AGENT), **options)


def booking_script() -> list[Message]:
    """Replies of a model that says something, calls the tool, then answers twice."""
    return [
        Message(
            "assistant",
            [
                Content.from_text("Let me look."),
                Content.from_function_call(
                    call_id="call-1", name="free_tables", arguments='{"area": "Kemang"}'
                ),
            ],
        ),
        Message("assistant", ["Rumah Teduh has a table at 7."]),
        Message("assistant", ["Booked for four."]),
    ]


def test_a_run_saves_its_messages_and_the_next_run_loads_them_back_equal() -> None:
    async def body(store: AsyncStore) -> None:
        provider = provider_on(store)
        client = ScriptedChatClient(booking_script())
        agent = Agent(client=client, name=AGENT, tools=[free_tables], context_providers=[provider])
        session = agent.create_session(session_id=new_chronicum_id())
        first = await agent.run("A quiet table for four in Kemang?", session=session)
        assert first.text.endswith("Rumah Teduh has a table at 7.")
        await agent.run("Book it.", session=session)

        # The second run's model call starts with the first run, as the agent saved it.
        saved = await provider.get_messages(session.session_id)
        assert [message.role for message in saved] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        assert forms(saved[:4]) == forms([Message.from_dict(form) for form in client.seen[2][:4]])
        assert saved[1].contents[0].text == "Let me look."
        assert saved[1].contents[1].call_id == "call-1"
        assert saved[2].contents[0].result == "Rumah Teduh in Kemang: free at 7"
        assert saved[5].text == "Booked for four."

        acta = await provider.chronicarius.get_acta(OWNER, session.session_id)
        assert [(actum.kind, actum.actor_kind, actum.actor, actum.content) for actum in acta] == [
            (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "A quiet table for four in Kemang?"),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT, "Let me look."),
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT, AGENT, 'free_tables({"area": "Kemang"})'),
            (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, AGENT, "Rumah Teduh in Kemang: free at 7"),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT, "Rumah Teduh has a table at 7."),
            (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Book it."),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT, "Booked for four."),
        ]
        formats = [NATIVE_FORMAT, NATIVE_FORMAT, PART_FORMAT] + [NATIVE_FORMAT] * 4
        assert [actum.native.format if actum.native else None for actum in acta] == formats
        assert acta[3].answers == acta[2].id
        assert all(actum.answers == "" for actum in acta[:3] + acta[4:])

    run_on_store(body)


def test_a_streamed_run_is_saved_as_a_run_is() -> None:
    async def body(store: AsyncStore) -> None:
        provider = provider_on(store)
        agent = Agent(
            client=ScriptedChatClient(booking_script()),
            name=AGENT,
            tools=[free_tables],
            context_providers=[provider],
        )
        session = agent.create_session(session_id=new_chronicum_id())
        async for _ in agent.run("A quiet table for four in Kemang?", session=session, stream=True):
            pass
        acta = await provider.chronicarius.get_acta(OWNER, session.session_id)
        assert [(actum.kind, actum.content) for actum in acta] == [
            (ActumKind.MESSAGE, "A quiet table for four in Kemang?"),
            (ActumKind.MESSAGE, "Let me look."),
            (ActumKind.TOOL_REQUEST, 'free_tables({"area": "Kemang"})'),
            (ActumKind.TOOL_RESPONSE, "Rumah Teduh in Kemang: free at 7"),
            (ActumKind.MESSAGE, "Rumah Teduh has a table at 7."),
        ]
        assert acta[3].answers == acta[2].id
        saved = await provider.get_messages(session.session_id)
        assert saved[1].contents[1].call_id == "call-1"

    run_on_store(body)


def test_messages_read_back_equal_whatever_they_hold() -> None:
    messages = [
        Message("system", ["Answer in Bahasa Indonesia."]),
        Message("user", ["Meja untuk empat, jam 7 — ya? 🍜 \x00 end"], message_id="m-1"),
        Message(
            "assistant",
            [
                Content.from_text_reasoning(text="The person wants a table."),
                Content.from_text("Sebentar."),
                Content.from_function_call(call_id="a", name="free_tables", arguments={"area": "Kemang"}),
                Content.from_function_call(call_id="b", name="free_tables", arguments={"area": "Senopati"}),
            ],
            author_name=AGENT,
            additional_properties={"score": 0.1 + 0.2},
        ),
        Message(
            "tool",
            [
                Content.from_function_result(call_id="a", result="Rumah Teduh: 7"),
                Content.from_function_result(call_id="b", result={"free": []}),
            ],
        ),
        Message("assistant", []),
        Message("assistant", [Content.from_text_reasoning(protected_data="opaque")]),
        Message("assistant", [Content.from_uri("https://example.invalid/menu.png", media_type="image/png")]),
    ]

    async def body(store: AsyncStore) -> None:
        provider = provider_on(store)
        session_id = new_chronicum_id()
        await provider.save_messages(session_id, messages)
        assert forms(await provider.get_messages(session_id)) == forms(messages)

        acta = await provider.chronicarius.get_acta(OWNER, session_id)
        assert [(actum.kind, actum.actor_kind, actum.actor, actum.content) for actum in acta] == [
            (ActumKind.MESSAGE, ActorKind.SYSTEM, "system", "Answer in Bahasa Indonesia."),
            (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Meja untuk empat, jam 7 — ya? 🍜 \x00 end"),
            (ActumKind.THOUGHT, ActorKind.AGENT, AGENT, "The person wants a table."),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT, "Sebentar."),
            (
                ActumKind.TOOL_REQUEST,
                ActorKind.AGENT,
                AGENT,
                'free_tables({"area": "Kemang"})\nfree_tables({"area": "Senopati"})',
            ),
            (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, AGENT, 'Rumah Teduh: 7\n{"free": []}'),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT, "[empty]"),
            (ActumKind.THOUGHT, ActorKind.AGENT, AGENT, "[text_reasoning]"),
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT, "https://example.invalid/menu.png"),
        ]
        assert acta[5].answers == acta[4].id

    run_on_store(body)


def test_other_writers_acta_are_read_from_their_content() -> None:
    async def body(store: AsyncStore) -> None:
        keeper = AsyncChronicarius(store)
        session_id = new_chronicum_id()
        written = [
            Actum(session_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "A table for four, from the CLI"),
            Actum(
                session_id, ActumKind.MESSAGE, ActorKind.SYSTEM, "system", "The person prefers quiet places."
            ),
            Actum(session_id, ActumKind.THOUGHT, ActorKind.AGENT, "search", "Kemang is closest."),
            Actum(session_id, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", '{"area": "Kemang"}'),
            Actum(session_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", "Rumah Teduh"),
            Actum(session_id, ActumKind.MESSAGE, ActorKind.AGENT, "search", "Rumah Teduh is free at 7."),
        ]
        for actum in written:
            await keeper.record_actum(OWNER, actum)

        default = await provider_on(keeper).get_messages(session_id)
        assert forms(default) == forms(
            [
                Message("user", ["A table for four, from the CLI"]),
                Message("system", ["The person prefers quiet places."]),
                Message("assistant", ["search said: Rumah Teduh is free at 7."], author_name="search"),
            ]
        )
        everything = await provider_on(
            keeper, foreign=ForeignActa(thoughts=True, tool_exchanges=True)
        ).get_messages(session_id)
        assert [(message.role, message.author_name, message.text) for message in everything] == [
            ("user", None, "A table for four, from the CLI"),
            ("system", None, "The person prefers quiet places."),
            ("assistant", "search", "search thought: Kemang is closest."),
            ("assistant", "search", 'search called a tool: {"area": "Kemang"}'),
            ("assistant", "search", "search got a tool's answer: Rumah Teduh"),
            ("assistant", "search", "search said: Rumah Teduh is free at 7."),
        ]

    run_on_store(body)


def test_two_agents_share_one_session() -> None:
    async def body(store: AsyncStore) -> None:
        keeper = AsyncChronicarius(store)
        session_id = new_chronicum_id()
        search_client = ScriptedChatClient(booking_script()[:2])
        search = Agent(
            client=search_client,
            name="search",
            tools=[free_tables],
            context_providers=[provider_on(keeper, actor="search")],
        )
        concierge_client = ScriptedChatClient([Message("assistant", ["I booked Rumah Teduh for four at 7."])])
        concierge = Agent(client=concierge_client, name=AGENT, context_providers=[provider_on(keeper)])

        await search.run(
            "Find a quiet table in Kemang.", session=search.create_session(session_id=session_id)
        )
        await concierge.run(
            "Book what search found.", session=concierge.create_session(session_id=session_id)
        )

        # The concierge saw the person's message, search's messages (named), not search's tool exchange.
        seen = [
            (form["role"], form.get("author_name"), form["contents"]) for form in concierge_client.seen[0]
        ]
        texts = [
            (role, author, [content.get("text") for content in contents]) for role, author, contents in seen
        ]
        assert texts == [
            ("user", None, ["Find a quiet table in Kemang."]),
            ("assistant", "search", ["search said: Let me look."]),
            ("assistant", "search", ["search said: Rumah Teduh has a table at 7."]),
            ("user", None, ["Book what search found."]),
        ]
        # And search, reading again, gets its own messages back whole and the concierge's named.
        again = await provider_on(keeper, actor="search").get_messages(session_id)
        assert [(message.role, message.author_name, message.text) for message in again] == [
            ("user", None, "Find a quiet table in Kemang."),
            ("assistant", "search", "Let me look."),
            ("tool", "search", ""),
            ("assistant", "search", "Rumah Teduh has a table at 7."),
            ("user", None, "Book what search found."),
            ("assistant", AGENT, "concierge said: I booked Rumah Teduh for four at 7."),
        ]
        assert again[1].contents[1].call_id == "call-1"  # its own message, whole

    run_on_store(body)


def test_a_window_reads_the_newest_acta_and_keeps_a_result_with_its_call() -> None:
    async def body(store: AsyncStore) -> None:
        provider = provider_on(store, last_n=2)
        session_id = new_chronicum_id()
        await provider.save_messages(
            session_id,
            [
                Message("user", ["old"]),
                Message(
                    "assistant", [Content.from_function_call(call_id="c", name="free_tables", arguments="{}")]
                ),
                Message("tool", [Content.from_function_result(call_id="c", result="Rumah Teduh")]),
                Message("assistant", ["Rumah Teduh."]),
            ],
        )
        window = await provider.get_messages(session_id)
        assert [message.role for message in window] == ["assistant", "tool", "assistant"]
        assert window[0].contents[0].call_id == "c"

        # A window starting inside a message: the later part stands alone.
        await provider.save_messages(
            session_id, [Message("assistant", ["Booked.", Content.from_text_reasoning(text="done")])]
        )
        tail = await provider_on(store, last_n=1).get_messages(session_id)
        assert forms(tail) == forms([Message("assistant", [Content.from_text_reasoning(text="done")])])

    run_on_store(body)


def test_the_owner_is_the_person() -> None:
    async def body(store: AsyncStore) -> None:
        session_id = new_chronicum_id()
        await provider_on(store).save_messages(session_id, [Message("user", ["mine"])])
        stranger = ChronicaHistoryProvider(store, owner_id="someone-else", actor=AGENT)
        assert await stranger.get_messages(session_id) == []
        with pytest.raises(ChronicumNotFound):
            await stranger.save_messages(session_id, [Message("user", ["theirs"])])
        assert [message.text for message in await provider_on(store).get_messages(session_id)] == ["mine"]
        assert await provider_on(store).get_messages(new_chronicum_id()) == []

    run_on_store(body)


def test_a_session_id_is_required() -> None:
    async def body(store: AsyncStore) -> None:
        provider = provider_on(store)
        with pytest.raises(ValueError, match="session_id"):
            await provider.get_messages(None)
        with pytest.raises(ValueError, match="session_id"):
            await provider.save_messages(None, [Message("user", ["hi"])])

    run_on_store(body)


def test_a_store_without_native_is_refused_and_nothing_is_written() -> None:
    async def body() -> None:
        store = PlainStore()
        provider = provider_on(store)
        with pytest.raises(CapabilityUnsupported, match="native") as caught:
            await provider.save_messages("s-1", [Message("user", ["hi"])])
        assert caught.value.capability == "native"
        with pytest.raises(CapabilityUnsupported, match="native"):
            await provider.get_messages("s-1")
        with pytest.raises(ChronicumNotFound):
            await AsyncChronicarius(store).get_acta(OWNER, "s-1")

    asyncio.run(body())


def test_a_provider_opened_from_a_url_closes_its_store() -> None:
    async def body() -> None:
        async with ChronicaHistoryProvider("memory://", owner_id=OWNER, actor=AGENT) as provider:
            session_id = new_chronicum_id()
            await provider.save_messages(session_id, [Message("user", ["hi"])])
            assert [message.text for message in await provider.get_messages(session_id)] == ["hi"]

    asyncio.run(body())
