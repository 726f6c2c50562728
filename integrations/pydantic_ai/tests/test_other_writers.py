"""Every actum of a shared chronicum is read: a person's CLI message, other agents, old acta."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from chronica_pydantic_ai import NATIVE_FORMAT, ChronicaConversationStore, ChronicaHistory, message_text
from conftest import StoreTarget
from helpers import AGENT, OWNER, ToolLoop, history_on, run_on
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    AsyncStore,
    Chronicarius,
    MemoryStore,
    new_chronicum_id,
)
from chronica_core.cli import main as chronica
from chronica_core.readable import ForeignActa

FIVE = "Actually make it five people"


def prompts(messages: list[ModelMessage]) -> list[str]:
    """The text of every user prompt in ``messages``, in order."""
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def test_a_persons_cli_message_is_read_as_their_prompt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    history = ChronicaHistory(new_chronicum_id(), url, owner_id=OWNER, actor=AGENT)
    script = ToolLoop(calls=2)
    agent = script.agent()
    first = agent.run_sync("A quiet table for four in Kemang?")
    script.calls = 1
    second = agent.run_sync("Is it quiet?", message_history=first.all_messages())
    history.save_sync(first.new_messages())
    history.save_sync(second.new_messages())
    assert len(first.new_messages()) + len(second.new_messages()) == 10
    command = ["record", history.chronicum_id, "--owner", OWNER, "--kind", "message", "--actor-kind", "human"]
    command += ["--actor", OWNER, "--content", FIVE, "--store", url]
    assert chronica(command, out=io.StringIO()) == 0
    loaded = history.load_sync()
    assert len(loaded) == 11
    assert loaded[:10] == [*first.new_messages(), *second.new_messages()]
    assert isinstance(loaded[10], ModelRequest)
    assert [part.content for part in loaded[10].parts if isinstance(part, UserPromptPart)] == [FIVE]
    script.seen.clear()
    agent.run_sync(message_history=loaded)  # the person's message is the prompt of the next run
    assert prompts(script.seen[0])[-1] == FIVE
    assert history.load_sync(1) == [loaded[10]]
    history.close_sync()


def test_every_actum_of_other_writers_is_read(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        keeper = AsyncChronicarius(store)
        cid = history.chronicum_id
        first = await ToolLoop(calls=0).agent().run("one")
        await history.save(first.new_messages())
        others = [
            Actum(cid, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, FIVE),
            Actum(cid, ActumKind.MESSAGE, ActorKind.AGENT, "booking", "Booked Rumah Teduh for 19:00."),
            Actum(cid, ActumKind.MESSAGE, ActorKind.SYSTEM, "system", "The restaurant closes at 22:00."),
            Actum(cid, ActumKind.THOUGHT, ActorKind.AGENT, "booking", "Five fits the corner table."),
            Actum(cid, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "booking", 'reserve({"party": 5})'),
            Actum(cid, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "booking", "confirmed"),
            Actum(cid, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, '{"kind": "request"}'),
        ]
        for actum in others:
            await keeper.record_actum(OWNER, actum)
        loaded = await history.load()
        assert loaded[:2] == first.new_messages()
        shown = loaded[2:]
        assert len(shown) == 4  # thoughts and tool exchanges of others are left out by default
        assert all(isinstance(message, ModelRequest) for message in shown)
        assert prompts(shown) == [FIVE, "booking said: Booked Rumah Teduh for 19:00.", '{"kind": "request"}']
        system = shown[2].parts[0]
        assert isinstance(system, SystemPromptPart) and system.content == "The restaurant closes at 22:00."
        assert await history.load(2) == shown[2:]  # others' acta count towards last_n as messages
        everything = ChronicaHistory(
            cid, store, owner_id=OWNER, actor=AGENT, foreign=ForeignActa(thoughts=True, tool_exchanges=True)
        )
        assert prompts((await everything.load())[2:]) == [
            FIVE,
            "booking said: Booked Rumah Teduh for 19:00.",
            "booking thought: Five fits the corner table.",
            'booking called a tool: reserve({"party": 5})',
            "booking got a tool's answer: confirmed",
            '{"kind": "request"}',
        ]
        script = ToolLoop(calls=0)
        await script.agent().run("Confirm it.", message_history=loaded)  # pydantic-ai takes it

    run_on(store_target, body)


def test_what_is_written_is_readable_with_the_message_as_its_native_form() -> None:
    async def body() -> None:
        store = AsyncMemoryStore()
        history = history_on(store)
        result = await ToolLoop(calls=1).agent().run("A quiet table for four in Kemang?")
        extra: list[ModelMessage] = [
            ModelResponse(parts=[ThinkingPart("Nothing to say yet.")]),
            ModelRequest(parts=[SystemPromptPart("Be brief.")]),
            ModelResponse(parts=[]),
        ]
        stored = await history.save([*result.new_messages(), *extra])
        assert [actum.content for actum in stored] == [
            "A quiet table for four in Kemang?",  # the person's words, not the system prompt
            'find_table({"area":"Kemang","party":4})',
            "Rumah Teduh in Kemang for 4",
            "Rumah Teduh has a table.",
            "Nothing to say yet.",
            "Be brief.",
            "[response]",
        ]
        for actum, message in zip(stored, [*result.new_messages(), *extra], strict=True):
            assert actum.native is not None and actum.native.format == NATIVE_FORMAT
            assert ModelMessagesTypeAdapter.validate_json(f"[{actum.native.data}]") == [message]
            assert actum.content == message_text(message)
        assert await history.load() == [*result.new_messages(), *extra]

    asyncio.run(body())


def test_acta_of_the_old_integration_still_read_back_as_before() -> None:
    store = MemoryStore()
    history = history_on(store)
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("A quiet table?")]),
        ModelResponse(parts=[ToolCallPart("find_table", {"party": 4}, "c-1")]),
        ModelRequest(parts=[ToolReturnPart("find_table", "Rumah Teduh", "c-1")]),
        ModelResponse(parts=[TextPart("Rumah Teduh has one.")]),
    ]
    kinds = [ActumKind.MESSAGE, ActumKind.TOOL_REQUEST, ActumKind.TOOL_RESPONSE, ActumKind.MESSAGE]
    actors = [(ActorKind.HUMAN, OWNER)] + [(ActorKind.AGENT, AGENT)] * 3
    written = [ModelMessagesTypeAdapter.dump_json([message])[1:-1].decode() for message in messages]
    old = [
        Actum(history.chronicum_id, kind, actor_kind, actor, content)
        for content, kind, (actor_kind, actor) in zip(written, kinds, actors, strict=True)
    ]
    for actum in old:
        assert json.loads(actum.content)["kind"] in {"request", "response"}  # raw JSON, no native
    Chronicarius(store).record_acta(OWNER, old)
    assert history.load_sync() == messages
    assert history.load_sync(2) == [messages[3]]  # a window still never starts with a cut-off result


def test_the_readable_text_of_content_that_is_not_text() -> None:
    image = ImageUrl("https://example.invalid/table.png")
    picture = BinaryContent(b"\x89PNG", media_type="image/png")
    assert message_text(ModelRequest(parts=[UserPromptPart(["Is this the table?", image, picture])])) == (
        "Is this the table?\n[image-url]\n[binary]"
    )
    assert message_text(ModelResponse(parts=[FilePart(picture)])) == "[file]"
    assert message_text(ModelResponse(parts=[])) == "[response]"
    assert message_text(ModelRequest(parts=[])) == "[request]"


def test_a_tool_result_names_its_call_where_the_store_keeps_histories() -> None:
    async def body() -> None:
        store = AsyncMemoryStore()
        history = history_on(store)
        result = await ToolLoop(calls=2).agent().run("A quiet table?")
        stored = await history.save(result.new_messages())
        kinds = [actum.kind for actum in stored]
        assert kinds == [
            ActumKind.MESSAGE,
            ActumKind.TOOL_REQUEST,
            ActumKind.TOOL_RESPONSE,
            ActumKind.TOOL_REQUEST,
            ActumKind.TOOL_RESPONSE,
            ActumKind.MESSAGE,
        ]
        assert [actum.answers for actum in stored] == ["", "", stored[1].id, "", stored[3].id, ""]
        keeper = AsyncChronicarius(store)
        window = await keeper.get_acta(
            OWNER, history.chronicum_id, actum_kinds=[ActumKind.TOOL_RESPONSE], last_n=1
        )
        assert [actum.id for actum in window] == [stored[3].id, stored[4].id]  # the result with its call
        assert await history.load() == result.new_messages()

    asyncio.run(body())


def test_another_pydantic_ai_agents_acta_are_its_own_not_the_readers() -> None:
    """Two pydantic-ai agents (two actors) in one chronicum: each model reads the other's words attributed."""

    async def body() -> None:
        keeper = AsyncChronicarius(AsyncMemoryStore())
        cid = new_chronicum_id()
        search = ChronicaHistory(cid, keeper, owner_id=OWNER, actor="search")
        found = await ToolLoop(calls=1).agent().run("A quiet table in Kemang?")
        await search.save(found.new_messages())
        seen: list[list[ModelMessage]] = []

        def planner_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append(messages)
            return ModelResponse(parts=[TextPart("Planned: Friday at 7.")])

        planner = ChronicaHistory(cid, keeper, owner_id=OWNER, actor="planner")
        loaded = await planner.load()
        # the person's prompt is the person's; search's tool exchange is left out, its answer named
        assert [type(message) for message in loaded] == [ModelRequest, ModelRequest]
        assert prompts(loaded) == ["A quiet table in Kemang?", f"search said: {found.output}"]
        planned = await Agent(FunctionModel(planner_model)).run(message_history=loaded)
        assert planned.output == "Planned: Friday at 7."  # the planner's model answered, not search's
        assert len(seen) == 1
        await planner.save(planned.new_messages())
        conversations = ChronicaConversationStore(keeper, owner_id=OWNER, actor="planner")
        conversation = await conversations.load(cid)
        assert conversation is not None
        assert prompts(conversation.messages)[:2] == prompts(loaded)
        again = await search.load()  # search's own acta come back exactly; the planner's are named
        assert again[: len(found.new_messages())] == found.new_messages()
        assert prompts(again[len(found.new_messages()) :]) == ["planner said: Planned: Friday at 7."]

    asyncio.run(body())


def test_other_integrations_bookkeeping_never_reaches_the_model() -> None:
    """With every foreign act asked for: a saved conversation's record, a pop's tombstone and a
    state snapshot (system acta other integrations keep) are left out; agents' acta are shown."""

    async def body() -> None:
        keeper = AsyncChronicarius(AsyncMemoryStore())
        cid = new_chronicum_id()
        conversations = ChronicaConversationStore(keeper, owner_id=OWNER, actor="planner")
        conversation = await conversations.load(cid) or Conversation(conversation_id=cid)
        planned = await ToolLoop(calls=0, answer="Planned.").agent().run("Plan?", conversation=conversation)
        await conversations.save(planned)
        pop, state = "chronica-openai-agents:pop", "chronica-strands:state"
        bookkeeping = [
            Actum(cid, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, pop, '{"popped":"x","pop":"y"}'),
            Actum(cid, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, state, "state of agent n"),
            Actum(cid, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", 'find({"area": "Kemang"})'),
        ]
        for actum in bookkeeping:
            await keeper.record_actum(OWNER, actum)
        every = ForeignActa(thoughts=True, tool_exchanges=True)
        history = ChronicaHistory(cid, keeper, owner_id=OWNER, actor="booking", foreign=every)
        shown = prompts(await history.load())
        assert shown == ["Plan?", "planner said: Planned.", 'search called a tool: find({"area": "Kemang"})']

    asyncio.run(body())
