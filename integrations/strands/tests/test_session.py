"""ChronicaSessionManager under whole Strands agent runs with a scripted model; the repository alone."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from chronica_strands import MESSAGE_FORMAT, PART_FORMAT, ChronicaSessionManager, ChronicaSessionRepository
from chronica_strands.repository import FIRST_WINDOW
from conftest import PlainStore
from scripted_model import ScriptedModel
from strands import Agent, tool
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.multiagent import GraphBuilder, Swarm
from strands.types.content import ContentBlock, Message
from strands.types.session import SessionMessage

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    CapabilityUnsupported,
    Chronicarius,
    ChronicumNotFound,
    Span,
    Store,
    new_chronicum_id,
)
from chronica_core.readable import ForeignActa

OWNER = "ardian"


class CountingChronicarius(Chronicarius):
    """A Chronicarius that remembers the ``last_n`` of every window read through it."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.windows: list[int] = []

    def get_acta(self, owner_id: str, chronicum_id: str, **options: Any) -> list[Actum]:
        self.windows.append(int(options.get("last_n", 0)))
        return super().get_acta(owner_id, chronicum_id, **options)


@tool
def free_tables(area: str) -> str:
    """The restaurants of an area with a free table tonight."""
    return f"Rumah Teduh in {area}: free at 7"


def text(words: str) -> Message:
    return {"role": "assistant", "content": [{"text": words}]}


def booking_script() -> list[Message]:
    """A model that says something and uses the tool, then answers twice."""
    use: ContentBlock = {
        "toolUse": {"name": "free_tables", "toolUseId": "use-1", "input": {"area": "Kemang"}}
    }
    return [
        {"role": "assistant", "content": [{"text": "Let me look."}, use]},
        text("Rumah Teduh at 7."),
        text("Booked."),
    ]


def agent_on(
    keeper: Chronicarius, session_id: str, agent_id: str, model: ScriptedModel, **options: Any
) -> Agent:
    manager = ChronicaSessionManager(session_id, keeper, owner_id=OWNER, foreign=options.pop("foreign", None))
    return Agent(
        model=model,
        tools=[free_tables],
        session_manager=manager,
        agent_id=agent_id,
        callback_handler=None,
        **options,
    )


def conversation(keeper: Chronicarius, session_id: str) -> list[tuple[ActumKind, ActorKind, str, str]]:
    """The chronicum's acta other than the state kept beside them."""
    return [
        (actum.kind, actum.actor_kind, actum.actor, actum.content)
        for actum in keeper.get_acta(OWNER, session_id)
        if actum.actor_kind is not ActorKind.SYSTEM
    ]


def test_an_agent_run_is_recorded_readable_and_restored_equal(store: Store) -> None:
    keeper = Chronicarius(store)
    session_id = new_chronicum_id()
    agent = agent_on(keeper, session_id, "search", ScriptedModel(booking_script()))
    agent("A quiet table in Kemang?")

    assert conversation(keeper, session_id) == [
        (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "A quiet table in Kemang?"),
        (ActumKind.MESSAGE, ActorKind.AGENT, "search", "Let me look."),
        (ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", 'free_tables({"area": "Kemang"})'),
        (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", "Rumah Teduh in Kemang: free at 7"),
        (ActumKind.MESSAGE, ActorKind.AGENT, "search", "Rumah Teduh at 7."),
    ]
    acta = [actum for actum in keeper.get_acta(OWNER, session_id) if actum.actor_kind is not ActorKind.SYSTEM]
    assert [actum.native.format if actum.native else None for actum in acta] == [
        MESSAGE_FORMAT,
        MESSAGE_FORMAT,
        PART_FORMAT,
        MESSAGE_FORMAT,
        MESSAGE_FORMAT,
    ]
    assert acta[3].answers == acta[2].id

    model = ScriptedModel([text("Booked for four.")])
    again = agent_on(keeper, session_id, "search", model)
    assert again.messages == agent.messages  # tracking ids and metadata included
    again("Book it.")
    assert [message["role"] for message in model.seen[0]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert model.seen[0][1]["content"][1]["toolUse"]["toolUseId"] == "use-1"


def test_every_kind_of_block_reads_back_equal(store: Store) -> None:
    repository = ChronicaSessionRepository(store, owner_id=OWNER)
    session_id = new_chronicum_id()
    messages: list[Message] = [
        {
            "role": "user",
            "content": [
                {"text": "Meja untuk empat — jam 7? 🍜 \x00"},
                {"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff"}}},
                {"document": {"format": "txt", "name": "menu", "source": {"bytes": b"nasi"}}},
                {"cachePoint": {"type": "default"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "Kemang is close.", "signature": "s"}}},
                {"toolUse": {"name": "free_tables", "toolUseId": "a", "input": {"area": "Kemang"}}},
                {"toolUse": {"name": "free_tables", "toolUseId": "b", "input": {"area": "Senopati"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "a", "status": "success", "content": [{"json": {"free": [7]}}]}},
                {"toolResult": {"toolUseId": "b", "status": "error", "content": [{"text": "closed"}]}},
                {"text": "Also, no peanuts."},
            ],
        },
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": [{"cachePoint": {"type": "default"}}]},
    ]
    for index, message in enumerate(messages):
        repository.create_message(session_id, "search", SessionMessage(copy.deepcopy(message), index))

    assert [entry.message for entry in repository.list_messages(session_id, "search")] == messages
    assert [entry.message_id for entry in repository.list_messages(session_id, "search")] == [0, 1, 2, 3, 4]
    acta = repository.chronicarius.get_acta(OWNER, session_id)
    assert [(actum.kind, actum.actor_kind, actum.actor, actum.content) for actum in acta] == [
        (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Meja untuk empat — jam 7? 🍜 \x00\n[document menu]"),
        (ActumKind.THOUGHT, ActorKind.AGENT, "search", "Kemang is close."),
        (
            ActumKind.TOOL_REQUEST,
            ActorKind.AGENT,
            "search",
            'free_tables({"area": "Kemang"})\nfree_tables({"area": "Senopati"})',
        ),
        (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", '{"free": [7]}\nerror: closed'),
        (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Also, no peanuts."),
        (ActumKind.MESSAGE, ActorKind.AGENT, "search", "[empty]"),
        (ActumKind.MESSAGE, ActorKind.AGENT, "search", "[cachePoint]"),
    ]
    assert acta[3].answers == acta[2].id


def test_other_writers_acta_are_read_from_their_content(store: Store) -> None:
    keeper = Chronicarius(store)
    session_id = new_chronicum_id()
    for actum in [
        Actum(session_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "A table for four, from the CLI"),
        Actum(session_id, ActumKind.MESSAGE, ActorKind.SYSTEM, "system", "The person likes quiet places."),
        Actum(session_id, ActumKind.THOUGHT, ActorKind.AGENT, "booking", "Kemang is closest."),
        Actum(session_id, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "booking", '{"area": "Kemang"}'),
        Actum(session_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "booking", "Rumah Teduh"),
        Actum(session_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Rumah Teduh is free at 7."),
    ]:
        keeper.record_actum(OWNER, actum)

    def texts(repository: ChronicaSessionRepository) -> list[tuple[str, str]]:
        return [
            (entry.message["role"], entry.message["content"][0]["text"])
            for entry in repository.list_messages(session_id, "search")
        ]

    assert texts(ChronicaSessionRepository(keeper, owner_id=OWNER)) == [
        ("user", "A table for four, from the CLI"),
        ("user", "system said: The person likes quiet places."),
        ("user", "booking said: Rumah Teduh is free at 7."),
    ]
    everything = ForeignActa(thoughts=True, tool_exchanges=True)
    assert texts(ChronicaSessionRepository(keeper, owner_id=OWNER, foreign=everything)) == [
        ("user", "A table for four, from the CLI"),
        ("user", "system said: The person likes quiet places."),
        ("user", "booking thought: Kemang is closest."),
        ("user", 'booking called a tool: {"area": "Kemang"}'),
        ("user", "booking got a tool's answer: Rumah Teduh"),
        ("user", "booking said: Rumah Teduh is free at 7."),
    ]


def test_two_agents_share_one_session(store: Store) -> None:
    keeper = Chronicarius(store)
    session_id = new_chronicum_id()
    person = Actum(session_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Dinner Friday?")
    first = keeper.record_actum(OWNER, person)
    search = agent_on(keeper, session_id, "search", ScriptedModel(booking_script()))
    assert search.messages == [  # joined the conversation
        {"role": "user", "content": [{"text": "Dinner Friday?"}], "tracking_id": str(uuid.UUID(first.id))}
    ]
    search("A quiet table in Kemang.")

    concierge_model = ScriptedModel([text("Booked Rumah Teduh for four at 7.")])
    concierge = agent_on(keeper, session_id, "concierge", concierge_model)
    concierge("Book what search found.")
    # The concierge saw the person, search's messages (named), not search's tool exchange.
    assert [(message["role"], message["content"][0]["text"]) for message in concierge_model.seen[0]] == [
        ("user", "Dinner Friday?"),
        ("user", "A quiet table in Kemang."),
        ("user", "search said: Let me look."),
        ("user", "search said: Rumah Teduh at 7."),
        ("user", "Book what search found."),
    ]
    # Search, back again, has its own turns whole and the concierge's named.
    returning = agent_on(keeper, session_id, "search", ScriptedModel([]))
    assert returning.messages[:5] == search.messages
    assert [(message["role"], message["content"][0].get("text")) for message in returning.messages[5:]] == [
        ("user", "Book what search found."),
        ("user", "concierge said: Booked Rumah Teduh for four at 7."),
    ]


def test_a_restore_reads_from_the_offset_back_not_the_whole_history(store: Store) -> None:
    keeper = CountingChronicarius(store)
    session_id = new_chronicum_id()
    filler = [
        Actum(session_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", f"note {n}") for n in range(900)
    ]
    for start in range(0, len(filler), 300):
        keeper.record_acta(OWNER, filler[start : start + 300])
    replies = [text(f"answer {n}") for n in range(20)]
    agent = agent_on(
        keeper,
        session_id,
        "search",
        ScriptedModel(replies),
        conversation_manager=SlidingWindowConversationManager(window_size=6, should_truncate_results=False),
    )
    for n in range(20):
        agent(f"question {n}")
    assert [message["content"][0]["text"] for message in agent.messages] == [
        "question 17", "answer 17", "question 18", "answer 18", "question 19", "answer 19",
    ]  # fmt: skip

    keeper.windows.clear()
    again = agent_on(
        keeper,
        session_id,
        "search",
        ScriptedModel([]),
        conversation_manager=SlidingWindowConversationManager(window_size=6, should_truncate_results=False),
    )
    assert again.messages == agent.messages
    assert max(keeper.windows) == FIRST_WINDOW  # never the 900 notes before


def test_a_redaction_is_read_back_and_the_first_version_stays_in_the_record(store: Store) -> None:
    repository = ChronicaSessionRepository(store, owner_id=OWNER)
    session_id = new_chronicum_id()
    original: Message = {"role": "user", "content": [{"text": "my card is 4111"}]}
    repository.create_message(session_id, "search", SessionMessage(original, 0))
    repository.create_message(session_id, "search", SessionMessage(text("Noted."), 1))
    redacted = SessionMessage(
        original, 0, redact_message={"role": "user", "content": [{"text": "[redacted]"}]}
    )
    repository.update_message(session_id, "search", redacted)

    assert [entry.to_message() for entry in repository.list_messages(session_id, "search")] == [
        {"role": "user", "content": [{"text": "[redacted]"}]},
        text("Noted."),
    ]
    found = repository.read_message(session_id, "search", 0)
    assert found is not None and found.to_message()["content"] == [{"text": "[redacted]"}]
    assert repository.read_message(session_id, "search", 7) is None
    assert repository.chronicarius.get_acta(OWNER, session_id)[0].content == "my card is 4111"


def test_list_messages_pages_by_offset_and_limit(store: Store) -> None:
    repository = ChronicaSessionRepository(store, owner_id=OWNER)
    session_id = new_chronicum_id()
    for index in range(5):
        repository.create_message(session_id, "search", SessionMessage(text(f"m{index}"), index))
    listed = repository.list_messages(session_id, "search", limit=2, offset=2)
    assert [(entry.message_id, entry.message["content"][0]["text"]) for entry in listed] == [
        (2, "m2"),
        (3, "m3"),
    ]
    assert repository.list_messages(session_id, "search", offset=9) == []
    seen_by_another = repository.list_messages(session_id, "nobody")
    assert [(entry.message_id, entry.message["content"]) for entry in seen_by_another] == [
        (n, [{"text": f"search said: m{n}"}]) for n in range(5)
    ]


def test_the_owner_is_the_person(store: Store) -> None:
    mine = ChronicaSessionRepository(store, owner_id=OWNER)
    session_id = new_chronicum_id()
    mine.create_message(session_id, "search", SessionMessage(text("mine"), 0))
    stranger = ChronicaSessionRepository(store, owner_id="someone-else")
    assert stranger.read_session(session_id) is None
    assert stranger.list_messages(session_id, "search") == []
    with pytest.raises(ChronicumNotFound):
        stranger.create_message(session_id, "search", SessionMessage(text("theirs"), 1))
    with pytest.raises(ChronicumNotFound):
        Agent(
            model=ScriptedModel([]),
            session_manager=ChronicaSessionManager(session_id, store, owner_id="someone-else"),
            callback_handler=None,
        )
    assert [entry.message for entry in mine.list_messages(session_id, "search")] == [text("mine")]


def test_a_store_without_native_is_refused_and_nothing_is_written() -> None:
    store = PlainStore()
    with pytest.raises(CapabilityUnsupported, match="native") as caught:
        ChronicaSessionManager("s-1", store, owner_id=OWNER)
    assert caught.value.capability == "native"
    repository = ChronicaSessionRepository(store, owner_id=OWNER)
    with pytest.raises(CapabilityUnsupported, match="native"):
        repository.create_message("s-1", "search", SessionMessage(text("hi"), 0))
    with pytest.raises(ChronicumNotFound):
        Chronicarius(store).get_acta(OWNER, "s-1")


def test_a_graph_keeps_its_state_in_the_session(store: Store) -> None:
    keeper = Chronicarius(store)
    session_id = new_chronicum_id()
    builder = GraphBuilder()
    builder.add_node(Agent(model=ScriptedModel([text("Kemang.")]), callback_handler=None), "search")
    builder.add_node(Agent(model=ScriptedModel([text("Booked.")]), callback_handler=None), "booking")
    builder.add_edge("search", "booking")
    builder.set_max_node_executions(4)
    builder.set_session_manager(ChronicaSessionManager(session_id, keeper, owner_id=OWNER))
    graph = builder.build()
    graph("Dinner for four")

    state = ChronicaSessionRepository(keeper, owner_id=OWNER).read_multi_agent(session_id, graph.id)
    assert state is not None
    assert state["status"] == "completed"
    assert sorted(state["completed_nodes"]) == ["booking", "search"]
    assert ChronicaSessionRepository(keeper, owner_id=OWNER).read_multi_agent(session_id, "other") is None


def test_a_swarm_keeps_its_state_in_the_session(store: Store) -> None:
    keeper = Chronicarius(store)
    session_id = new_chronicum_id()
    search = Agent(name="search", model=ScriptedModel([text("Kemang.")]), callback_handler=None)
    swarm = Swarm([search], session_manager=ChronicaSessionManager(session_id, keeper, owner_id=OWNER))
    swarm("Dinner for four")

    state = ChronicaSessionRepository(keeper, owner_id=OWNER).read_multi_agent(session_id, swarm.id)
    assert state is not None
    assert (state["status"], state["node_history"]) == ("completed", ["search"])


def test_a_manager_opened_from_a_url_closes_its_store() -> None:
    with ChronicaSessionManager(new_chronicum_id(), "memory://", owner_id=OWNER) as manager:
        agent = Agent(model=ScriptedModel([text("hi")]), session_manager=manager, callback_handler=None)
        agent("hello")
        assert [entry.message["content"][0]["text"] for entry in manager.repository.list_messages(
            manager.session_id, agent.agent_id
        )] == ["hello", "hi"]  # fmt: skip


def test_a_summary_ending_at_a_tool_use_leaves_its_result_with_the_use(store: Store) -> None:
    """A summary that covers a tool use but not its result: the restored agent keeps both."""
    keeper = Chronicarius(store)
    session_id = new_chronicum_id()
    agent_on(keeper, session_id, "booking", ScriptedModel(booking_script()))("A table in Kemang?")
    acta = keeper.get_acta(OWNER, session_id, view="as_written")
    use = next(actum for actum in acta if actum.kind is ActumKind.TOOL_REQUEST)
    summary = Actum(
        session_id,
        ActumKind.MESSAGE,
        ActorKind.SYSTEM,
        "summarizer",
        "Ardian asked for a table in Kemang.",
        summarizes=Span(acta[0].id, use.id),
    )
    keeper.record_actum(OWNER, summary)
    restored = agent_on(keeper, session_id, "booking", ScriptedModel([text("Booked.")]))
    assert [[next(iter(block)) for block in message["content"]] for message in restored.messages] == [
        ["text"],  # the summary
        ["toolUse"],  # the part of the message the summary covers that the result needs
        ["toolResult"],
        ["text"],
    ]
    said = restored.messages[0]["content"][0].get("text")
    assert said == "summarizer said: Ardian asked for a table in Kemang."
