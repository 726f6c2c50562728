"""ChronicaConversationStore under pydantic-ai's ConversationStore behaviour, beside pydantic-ai's own.

Each behaviour test runs on pydantic-ai's reference ``InMemoryConversationStore`` and on
``ChronicaConversationStore`` over ``memory://`` and over a throw-away SQLite file through
chronica-sqlalchemy (stores with the history and native capabilities), with the same assertions:
whatever the reference does, the Chronica store does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path

import pytest
from chronica_pydantic_ai import ChronicaConversationStore, ChronicaHistory
from chronica_pydantic_ai.conversation_store import RECORD_ACTOR, UNSAVED
from helpers import AGENT, OWNER, ToolLoop
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, ConversationStore, InMemoryConversationStore
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, UserPromptPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import UsageLimits

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    CapabilityUnsupported,
    MemoryStore,
    StoreError,
    new_chronicum_id,
    open_async_store,
)

Body = Callable[[ConversationStore], Coroutine[None, None, None]]


@pytest.fixture(params=["pydantic-ai", "chronica", "chronica-sqlite"])
def on_each(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[Body], None]:
    """Run a test body on pydantic-ai's reference store and on the Chronica ones, each in its own loop."""

    async def on_chronica(body: Body, url: str) -> None:
        async with open_async_store(url) as opened:
            await body(ChronicaConversationStore(opened, owner_id=OWNER, actor=AGENT))

    def run(body: Body) -> None:
        if request.param == "chronica":
            asyncio.run(on_chronica(body, "memory://"))
        elif request.param == "chronica-sqlite":
            asyncio.run(on_chronica(body, f"sqlite:///{tmp_path / 'conversations.db'}"))
        else:
            asyncio.run(body(InMemoryConversationStore()))

    return run


def texts(messages: list[ModelMessage]) -> list[str]:
    """Every user prompt and model text of ``messages``, in order."""
    return [
        str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, (UserPromptPart, TextPart))
    ]


async def turn(store: ConversationStore, cid: str, prompt: str, answer: str = "ok") -> Conversation:
    """One run of a fresh agent continuing the stored conversation, saved; its conversation."""
    conversation = await store.load(cid) or Conversation(conversation_id=cid)
    result = await ToolLoop(calls=0, answer=answer).agent().run(prompt, conversation=conversation)
    await store.save(result, scope=OWNER)
    return result.conversation


def test_a_conversation_saved_turn_by_turn_loads_back(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        assert await store.load(cid) is None
        first = await turn(store, cid, "A quiet table for four?", "Rumah Teduh.")
        loaded = await store.load(cid)
        assert loaded is not None and loaded.messages == first.messages
        assert loaded.revision == first.revision and loaded.usage == first.usage
        result = await ToolLoop(calls=1).agent().run("Book it.", conversation=loaded)
        entries = await store.save(result)
        assert len(entries) == 4
        again = await store.load(cid)
        assert again is not None and again.messages == result.all_messages()
        assert texts(again.messages) == [
            "A quiet table for four?",
            "Rumah Teduh.",
            "Book it.",
            "Rumah Teduh has a table.",
        ]
        assert again.usage == result.conversation.usage
        window = await store.load(cid, limit=2)
        assert window is not None and window.messages == result.all_messages()[-2:]

    on_each(body)


def test_a_long_conversation_loads_whole_and_in_windows(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        agent = ToolLoop(calls=1).agent()
        for n in range(40):  # 160 messages: several pages of acta back from the head
            conversation = await store.load(cid, limit=4) or Conversation(conversation_id=cid)
            unlimited = UsageLimits(request_limit=None)  # the conversation's usage adds up
            await store.save(await agent.run(f"turn {n}", conversation=conversation, usage_limits=unlimited))
        whole = await store.load_entries(cid)
        assert whole is not None and len(whole) == 160
        assert [e.parent_id for e in whole] == [None, *(e.id for e in whole[:-1])]
        assert texts([e.message for e in whole])[-2:] == ["turn 39", "Rumah Teduh has a table."]
        for limit in (1, 63, 64, 65, 100, 159, 160, 500):
            window = await store.load_entries(cid, limit=limit)
            assert window == whole[-limit:], limit

    on_each(body)


def test_entries_are_what_save_returned(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        conversation = Conversation(conversation_id=cid)
        result = await ToolLoop(calls=1).agent().run("A table?", conversation=conversation)
        saved = await store.save(result)
        loaded = await store.load_entries(cid)
        assert loaded == saved
        assert [entry.parent_id for entry in saved] == [None, *(entry.id for entry in saved[:-1])]
        for entry in saved:
            assert await store.read_entry(entry.id) == entry
        assert await store.load_entries(cid, limit=1) == saved[-1:]

    on_each(body)


def test_a_save_from_a_stale_revision_conflicts_and_writes_nothing(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        await turn(store, cid, "Hello")
        one, two = await store.load(cid), await store.load(cid)
        assert one is not None and two is not None
        agent = ToolLoop(calls=0).agent()
        first, second = (
            await agent.run("from one", conversation=one),
            await agent.run("from two", conversation=two),
        )
        await store.save(first)
        with pytest.raises(ConversationConflict):
            await store.save(second)
        stored = await store.load(cid)
        assert stored is not None and stored.messages == first.all_messages()
        with pytest.raises(ConversationConflict):  # a fresh conversation under a stored id
            await store.save(Conversation(conversation_id=cid))

    on_each(body)


def test_racing_saves_from_one_revision_land_once(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        await turn(store, cid, "Hello")
        loaded = [await store.load(cid) for _ in range(4)]
        results = [
            await ToolLoop(calls=0).agent().run(f"racer {n}", conversation=c)
            for n, c in enumerate(loaded)
            if c
        ]
        outcomes = await asyncio.gather(*(store.save(r) for r in results), return_exceptions=True)
        assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
        assert all(isinstance(o, ConversationConflict) for o in outcomes if isinstance(o, BaseException))
        winner = results[next(i for i, o in enumerate(outcomes) if not isinstance(o, BaseException))]
        stored = await store.load(cid)
        assert stored is not None and stored.messages == winner.all_messages()

    on_each(body)


def test_branch_leaves_the_old_history_and_can_come_back(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        await turn(store, cid, "one", "1")
        full = await turn(store, cid, "two", "2")
        old = await store.load_entries(cid)
        assert old is not None
        branched = await store.branch(cid, at=2, expected_revision=full.revision)
        assert texts(branched.messages) == ["one", "1"]
        result = await ToolLoop(calls=0, answer="3").agent().run("three", conversation=branched)
        await store.save(result)
        stored = await store.load(cid)
        assert stored is not None and texts(stored.messages) == ["one", "1", "three", "3"]
        record = await store.read_record(cid)
        assert record is not None and record.branches == [old[-1].id]
        back = await store.branch(cid, from_entry=old[-1].id, expected_revision=stored.revision)
        assert texts(back.messages) == ["one", "1", "two", "2"]
        with pytest.raises(ConversationConflict):
            await store.branch(cid, at=0, expected_revision=stored.revision)
        after = await store.read_record(cid)
        assert after is not None and len(after.branches) == 1  # the "three" branch

    on_each(body)


def test_a_rewritten_history_branches_off_the_last_shared_message(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        await turn(store, cid, "one", "1")
        full = await turn(store, cid, "two", "2")
        edited = [*full.messages[:2], ModelRequest(parts=[UserPromptPart("TWO")])]
        rewritten = Conversation(conversation_id=cid, messages=edited, revision=full.revision)
        entries = await store.save(rewritten)
        assert len(entries) == 1
        stored = await store.load(cid)
        assert stored is not None and texts(stored.messages) == ["one", "1", "TWO"]
        record = await store.read_record(cid)
        assert record is not None and len(record.branches) == 1

    on_each(body)


def test_a_fork_shares_the_history_and_goes_its_own_way(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        cid, fid = new_chronicum_id(), new_chronicum_id()
        await turn(store, cid, "one", "1")
        await turn(store, cid, "two", "2")
        fork = await store.fork(cid, at=2, new_conversation_id=fid)
        assert texts(fork.messages) == ["one", "1"]
        result = await ToolLoop(calls=0, answer="f").agent().run("fork", conversation=fork)
        await store.save(result)
        forked, source = await store.load(fid), await store.load(cid)
        assert forked is not None and texts(forked.messages) == ["one", "1", "fork", "f"]
        assert source is not None and texts(source.messages) == ["one", "1", "two", "2"]
        record = await store.read_record(fid)
        assert record is not None and record.forked_from == cid
        with pytest.raises(ConversationConflict):
            await store.fork(cid, new_conversation_id=fid)
        whole = await store.fork(cid)
        assert whole.messages == source.messages and whole.usage == source.usage

    on_each(body)


def test_listing_scope_and_delete(on_each: Callable[[Body], None]) -> None:
    async def body(store: ConversationStore) -> None:
        first, second = new_chronicum_id(), new_chronicum_id()
        await turn(store, first, "first")
        await turn(store, second, "second")
        listed = await store.list_conversations(scope=OWNER)
        assert [record.conversation_id for record in listed] == [second, first]
        assert [r.conversation_id for r in await store.list_conversations(scope=OWNER, limit=1)] == [second]
        assert await store.list_conversations(scope="someone-else") == []
        assert await store.load(first, scope="someone-else") is None
        assert await store.load(first, scope=OWNER) is not None
        await store.delete(first, scope=OWNER)
        assert await store.load(first) is None
        assert [record.conversation_id for record in await store.list_conversations()] == [second]
        again = await turn(store, first, "afresh")
        assert texts(again.messages) == ["afresh", "ok"]

    on_each(body)


def test_usage_and_deferred_tool_requests_travel_with_the_conversation(
    on_each: Callable[[Body], None],
) -> None:
    agent = Agent(TestModel(), output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def book(party: int) -> str:
        """Book a table (the person approves it first)."""
        return f"booked for {party}"

    async def body(store: ConversationStore) -> None:
        cid = new_chronicum_id()
        paused = await agent.run("Book it.", conversation=Conversation(conversation_id=cid))
        assert isinstance(paused.output, DeferredToolRequests)
        await store.save(paused)
        loaded = await store.load(cid)
        assert loaded is not None
        assert loaded.deferred_tool_requests == paused.conversation.deferred_tool_requests
        assert loaded.usage == paused.conversation.usage and loaded.usage.requests == 1
        approved = DeferredToolResults(
            approvals={call.tool_call_id: True for call in paused.output.approvals}
        )
        done = await agent.run(conversation=loaded, deferred_tool_results=approved)
        await store.save(done)
        finished = await store.load(cid)
        assert finished is not None and finished.deferred_tool_requests is None
        assert finished.messages == done.all_messages() and finished.usage == done.conversation.usage

    on_each(body)


# What only the Chronica store does: the conversation is the person's shared chronicum.


def test_a_persons_message_recorded_between_turns_is_read_without_a_conflict() -> None:
    async def body() -> None:
        memory = AsyncMemoryStore()
        store = ChronicaConversationStore(memory, owner_id=OWNER, actor=AGENT)
        cid = new_chronicum_id()
        await turn(store, cid, "A quiet table for four?")
        loaded = await store.load(cid)
        assert loaded is not None
        person = Actum(cid, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Actually make it five people")
        await AsyncChronicarius(memory).record_actum(OWNER, person)
        result = await ToolLoop(calls=0, answer="ok").agent().run("Any time after 7?", conversation=loaded)
        await store.save(result)  # the person's message is no conflict: nothing was overwritten
        stored = await store.load(cid)
        assert stored is not None
        assert texts(stored.messages) == [
            "A quiet table for four?",
            "ok",
            "Actually make it five people",
            "Any time after 7?",
            "ok",
        ]
        script = ToolLoop(calls=0)
        await script.agent().run("And?", conversation=stored)  # the next run sees it
        assert "Actually make it five people" in texts(script.seen[0])

    asyncio.run(body())


def test_the_conversation_is_the_shared_chronicum() -> None:
    async def body() -> None:
        memory = AsyncMemoryStore()
        store = ChronicaConversationStore(memory, owner_id=OWNER, actor=AGENT)
        cid = new_chronicum_id()
        person = Actum(cid, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "Dinner for four tonight?")
        await AsyncChronicarius(memory).record_actum(OWNER, person)  # the person starts it (the CLI)
        loaded = await store.load(cid)
        assert loaded is not None and loaded.revision == UNSAVED
        assert texts(loaded.messages) == ["Dinner for four tonight?"]
        result = await ToolLoop(calls=0, answer="Rumah Teduh.").agent().run(conversation=loaded)
        await store.save(result)
        history = ChronicaHistory(cid, memory, owner_id=OWNER, actor="booking")
        # another agent reads the concierge's answer as the concierge's, named
        assert texts(await history.load()) == ["Dinner for four tonight?", "concierge said: Rumah Teduh."]
        acta = await AsyncChronicarius(memory).get_acta(OWNER, cid)
        records = [a for a in acta if a.actor == RECORD_ACTOR]
        assert [(a.kind, a.actor_kind) for a in records] == [(ActumKind.THOUGHT, ActorKind.SYSTEM)]
        assert [a.content for a in acta if a.kind is ActumKind.MESSAGE] == [
            "Dinner for four tonight?",
            "Rumah Teduh.",
        ]

    asyncio.run(body())


def test_another_owners_conversation_is_not_there() -> None:
    async def body() -> None:
        memory = AsyncMemoryStore()
        mine = ChronicaConversationStore(memory, owner_id=OWNER, actor=AGENT)
        theirs = ChronicaConversationStore(memory, owner_id="dritan", actor=AGENT)
        cid = new_chronicum_id()
        await turn(mine, cid, "mine")
        assert await theirs.load(cid) is None
        assert await theirs.list_conversations() == []
        with pytest.raises(ConversationConflict):
            await theirs.save(Conversation(conversation_id=cid))
        with pytest.raises(UserError):
            await mine.save(Conversation(conversation_id=new_chronicum_id()), scope="dritan")

    asyncio.run(body())


def test_a_store_without_the_history_capability_is_refused_clearly() -> None:
    class PlainMemory(AsyncMemoryStore):
        fork = None  # type: ignore[assignment]  # not the history capability any more

    async def body() -> None:
        store = ChronicaConversationStore(PlainMemory(), owner_id=OWNER, actor=AGENT)
        with pytest.raises(CapabilityUnsupported, match="history") as refused:
            await store.load(new_chronicum_id())
        assert refused.value.capability == "history"

    asyncio.run(body())
    with pytest.raises(TypeError):
        ChronicaConversationStore(MemoryStore(), owner_id=OWNER, actor=AGENT)  # type: ignore[arg-type]


def test_a_store_opened_from_a_url_stays_closed_after_close(tmp_path: Path) -> None:
    """After ``close()`` every call raises the closed store's StoreError; nothing is opened again."""

    async def body() -> None:
        conversations = ChronicaConversationStore(
            f"sqlite:///{tmp_path / 'closed.db'}", owner_id=OWNER, actor=AGENT
        )
        cid = new_chronicum_id()
        await turn(conversations, cid, "Dinner for four?")
        await conversations.close()
        with pytest.raises(StoreError, match="closed"):
            await conversations.load(cid)
        with pytest.raises(StoreError, match="closed"):
            await conversations.save(Conversation(conversation_id=new_chronicum_id()))
        await conversations.close()  # closing again does nothing

    asyncio.run(body())
