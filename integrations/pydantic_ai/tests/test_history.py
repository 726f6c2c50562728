"""ChronicaHistory under whole pydantic-ai runs (FunctionModel, TestModel: no network), on every store."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from chronica_pydantic_ai import SYSTEM_ACTOR, ChronicaHistory, answers_a_call, window
from conftest import StoreTarget
from helpers import AGENT, OWNER, ToolLoop, as_json, dangling, history_on, pairs, round_tripped, run_on
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    BinaryContent,
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
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from chronica_core import (
    ActorKind,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    AsyncStore,
    Chronicarius,
    ChronicumNotFound,
    InvalidActum,
    InvalidQuery,
    MemoryStore,
    StoreError,
    new_chronicum_id,
)


def test_a_whole_run_saved_loads_back_equal(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        assert await history.load() == []
        result = await ToolLoop(calls=1).agent().run("A quiet table for four in Kemang?")
        stored = await history.save(result.new_messages())
        assert len(stored) == len(result.new_messages()) == 4
        loaded = await history.load()
        assert loaded == result.new_messages()
        assert as_json(loaded) == as_json(result.new_messages())
        assert loaded == round_tripped(result.new_messages())

    run_on(store_target, body)


def test_a_second_run_continues_from_the_loaded_history(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        script = ToolLoop(calls=1)
        agent = script.agent()
        first = await agent.run("A quiet table for four in Kemang?")
        await history.save(first.new_messages(), idempotency_key=first.run_id)
        script.seen.clear()
        second = await agent.run("Book it for 7pm.", message_history=await history.load())
        await history.save(second.new_messages(), idempotency_key=second.run_id)
        sent = script.seen[0]  # what the model was given on the second run's first request
        prompts = [p.content for m in sent for p in m.parts if isinstance(p, UserPromptPart)]
        assert prompts == ["A quiet table for four in Kemang?", "Book it for 7pm."]
        assert second.all_messages()[: len(first.new_messages())] == first.new_messages()
        assert await history.load() == [*first.new_messages(), *second.new_messages()]
        assert await history_on(store, history.chronicum_id).load() == second.all_messages()

    run_on(store_target, body)


def test_test_model_runs_round_trip_too(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        agent = Agent(TestModel(), system_prompt="Be brief.")

        @agent.tool_plain
        def find_table(area: str, party: int) -> str:
            """Find a table."""
            return f"{area}: {party}"

        history = history_on(store)
        result = await agent.run("Kemang, four, quiet.")
        await history.save(result.new_messages())
        again = await agent.run("And Friday?", message_history=await history.load())
        await history.save(again.new_messages())
        assert await history.load() == again.all_messages()

    run_on(store_target, body)


def test_the_mapping_of_messages_to_acta(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        result = await ToolLoop(calls=1).agent().run("A quiet table?")
        thought_only = ModelResponse(parts=[ThinkingPart("Nothing to say yet.")])
        system_only = ModelRequest(parts=[SystemPromptPart("Be brief.")])
        text_and_call = ModelResponse(parts=[TextPart("Let me look."), ToolCallPart("find_table", {}, "c-9")])
        stored = await history.save([*result.new_messages(), thought_only, system_only, text_and_call])
        assert [(a.kind, a.actor_kind, a.actor) for a in stored] == [
            (ActumKind.MESSAGE, ActorKind.HUMAN, OWNER),  # system prompt + user prompt
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT, AGENT),  # thinking + tool call
            (ActumKind.TOOL_RESPONSE, ActorKind.AGENT, AGENT),  # tool return
            (ActumKind.MESSAGE, ActorKind.AGENT, AGENT),  # text
            (ActumKind.THOUGHT, ActorKind.AGENT, AGENT),
            (ActumKind.MESSAGE, ActorKind.SYSTEM, SYSTEM_ACTOR),
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT, AGENT),
        ]
        keeper = AsyncChronicarius(store)
        messages = await keeper.get_acta(
            OWNER, history.chronicum_id, actum_kinds=[ActumKind.MESSAGE], last_n=2
        )
        assert [actum.id for actum in messages] == [stored[3].id, stored[5].id]

    run_on(store_target, body)


def test_a_human_actor_other_than_the_owner_writes_the_prompts() -> None:
    async def body() -> None:
        history = ChronicaHistory(
            new_chronicum_id(), AsyncMemoryStore(), owner_id=OWNER, actor=AGENT, human_actor="ardian-phone"
        )
        result = await ToolLoop(calls=0).agent().run("Hi")
        stored = await history.save(result.new_messages())
        assert [(a.actor_kind, a.actor) for a in stored] == [
            (ActorKind.HUMAN, "ardian-phone"),
            (ActorKind.AGENT, AGENT),
        ]

    asyncio.run(body())


def test_a_window_never_starts_with_a_tool_result_whose_call_it_cut_off(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        script = ToolLoop(calls=3)
        agent = script.agent()
        first = await agent.run("Find a table.")
        second = await agent.run("Another one.", message_history=first.all_messages())
        await history.save(first.new_messages())
        await history.save(second.new_messages())
        everything = second.all_messages()
        assert len(everything) == 16  # per run: prompt, 3 x (call, result), answer
        for last_n in range(1, len(everything) + 2):
            loaded = await history.load(last_n)
            assert len(loaded) <= last_n
            assert loaded == everything[len(everything) - len(loaded) :]  # a suffix of the history
            if loaded:
                assert not answers_a_call(loaded[0]), last_n
            assert all(found for _, found in pairs(loaded)), last_n
            assert dangling(loaded) == [], last_n
            expected = min(last_n, len(everything))
            if expected < len(everything) and answers_a_call(everything[-expected]):
                expected -= 1  # the result whose call lay before the window is left out
            assert len(loaded) == expected, last_n
            # pydantic-ai takes every window with a new prompt, and the model is sent all of it
            script.seen.clear()
            await agent.run("Once more.", message_history=loaded)
            assert script.seen[0][: len(loaded)] == loaded or _merged_equal(script.seen[0], loaded), last_n

    run_on(store_target, body)


def _merged_equal(sent: list[ModelMessage], loaded: list[ModelMessage]) -> bool:
    """Whether ``sent`` is ``loaded`` with the new prompt's request merged into its last request."""
    last = len(loaded) - 1
    kept_parts = list(sent[last].parts[: len(loaded[-1].parts)])
    return sent[:last] == loaded[:-1] and kept_parts == list(loaded[-1].parts)


def test_the_window_rule_on_its_own() -> None:
    prompt = ModelRequest(parts=[UserPromptPart("hi")])
    call = ModelResponse(parts=[ToolCallPart("t", {}, "c1")])
    result = ModelRequest(parts=[ToolReturnPart("t", "ok", "c1")])
    answer = ModelResponse(parts=[TextPart("done")])
    history: list[ModelMessage] = [prompt, call, result, answer]
    assert window(history, None) == history
    assert window(history, 0) == history
    assert window(history, -3) == history
    assert window(history, 4) == history
    assert window(history, 9) == history
    assert window(history, 3) == [call, result, answer]
    assert window(history, 2) == [answer]  # the result's call lay before the window
    assert window(history, 1) == [answer]
    # a history read from its middle: its first message may answer a call before it
    assert window(history[2:], 5, whole=False) == [answer]
    assert window(history[2:], 5, whole=True) == history[2:]  # kept as stored
    two_results = ModelRequest(parts=[ToolReturnPart("t", "again", "c2")])
    assert window([call, result, two_results, answer], 3) == [answer]


def test_load_reads_a_window_not_the_whole_history() -> None:
    reads: list[int] = []

    class CountingChronicarius(AsyncChronicarius):
        async def get_acta(self, owner_id: str, chronicum_id: str, **query: Any) -> Any:
            reads.append(query.get("last_n", 0))
            return await super().get_acta(owner_id, chronicum_id, **query)

    async def body() -> None:
        history = history_on(CountingChronicarius(AsyncMemoryStore()))
        agent = ToolLoop(calls=0).agent()
        messages: list[ModelMessage] = []
        for turn in range(250):
            result = await agent.run(f"turn {turn}", message_history=messages[-4:])
            await history.save(result.new_messages())
            messages.extend(result.new_messages())
        reads.clear()
        assert await history.load(5) == messages[-5:]
        assert reads == [6]  # one more than asked, to know whether the window was cut
        reads.clear()
        assert await history.load() == messages
        assert reads == [0]

    asyncio.run(body())


def test_tricky_content_round_trips_as_the_adapter_does(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        picture = bytes(range(256)) * 2048  # 512 KiB, every byte value
        image = BinaryContent(data=picture, media_type="image/png")
        large = "x" * (512 * 1024) + "\n" + "é" * 1024
        numbers = {"price": 0.1 + 0.2, "big": 1e308, "tiny": 5e-324, "n": 2**62}
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(["Rumah Teduh, Kemang: 4 👥 at 19:00 — ok? \x00", image])]),
            ModelResponse(
                parts=[
                    ThinkingPart("Ţhe 𝔱𝔞𝔟𝔩𝔢 \x00", signature="sig=="),
                    ToolCallPart("find_table", numbers, "c"),
                ]
            ),
            ModelRequest(parts=[ToolReturnPart("find_table", {"rows": [large]}, "c")]),
            ModelResponse(parts=[TextPart("中文, العربية, emoji 🍜, NUL \x00, tab\t, CRLF\r\n")]),
        ]
        await history.save(messages)
        loaded = await history.load()
        assert loaded == round_tripped(messages)
        assert as_json(loaded) == as_json(messages)
        loaded_call = cast(ToolCallPart, loaded[1].parts[1])
        assert loaded_call.args == numbers
        loaded_image = cast(list[Any], cast(UserPromptPart, loaded[0].parts[0]).content)[1]
        assert loaded_image.data == picture
        assert loaded[2] == messages[2] and loaded[3] == messages[3]

    run_on(store_target, body)


def test_a_message_pydantic_ai_cannot_write_is_refused(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        good = ModelRequest(parts=[UserPromptPart("fine")])
        surrogate = ModelResponse(parts=[TextPart("half a pair: \ud800")])
        with pytest.raises(InvalidActum) as raised:
            await history.save([good, surrogate])
        assert (raised.value.field, raised.value.index) == ("content", 1)
        assert "cannot write this response as JSON" in str(raised.value)
        with pytest.raises(InvalidActum) as raised:
            await history.save([good, cast(Any, {"kind": "request", "parts": []})])
        assert (raised.value.field, raised.value.index) == ("content", 1)
        assert "must be a ModelRequest or ModelResponse, not dict" in str(raised.value)
        with pytest.raises(ChronicumNotFound):  # not even the chronicum was created
            await AsyncChronicarius(store).get_chronicum(OWNER, history.chronicum_id)
        assert await history.save([]) == []
        with pytest.raises(ChronicumNotFound):
            await AsyncChronicarius(store).get_chronicum(OWNER, history.chronicum_id)

    run_on(store_target, body)


def test_a_keyed_save_retried_lands_once(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        result = await ToolLoop(calls=1).agent().run("Find a table.")
        first = await history.save(result.new_messages(), idempotency_key=result.run_id)
        again = await history_on(store, history.chronicum_id).save(
            result.new_messages(), idempotency_key=result.run_id
        )
        assert [actum.id for actum in again] == [actum.id for actum in first]
        assert await history.load() == result.new_messages()

    run_on(store_target, body)


def test_another_owners_chronicum_answers_like_a_missing_one(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        mine = history_on(store)
        result = await ToolLoop(calls=1).agent().run("Find a table.")
        await mine.save(result.new_messages())
        theirs = history_on(store, mine.chronicum_id, owner_id="rafa")
        missing = history_on(store, owner_id="rafa")
        for history in (theirs, missing):
            assert await history.load() == []
            assert await history.load(2) == []
        with pytest.raises(ChronicumNotFound):
            await theirs.save(result.new_messages())
        assert await mine.load() == result.new_messages()

    run_on(store_target, body)


def test_an_erased_conversation_loads_empty_and_starts_afresh(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        agent = ToolLoop(calls=0).agent()
        await history.save((await agent.run("one")).new_messages())
        await AsyncChronicarius(store).erase_chronicum(OWNER, history.chronicum_id)
        assert await history.load() == []
        fresh = (await agent.run("two")).new_messages()
        await history.save(fresh)
        assert await history.load() == fresh

    run_on(store_target, body)


def test_run_sync_with_the_blocking_methods(store_target: StoreTarget) -> None:
    store = store_target.open_blocking()
    try:
        history = history_on(store)
        agent = ToolLoop(calls=1).agent()
        first = agent.run_sync("Find a table.", message_history=history.load_sync())
        history.save_sync(first.new_messages(), idempotency_key=first.run_id)
        second = agent.run_sync("Book it.", message_history=history.load_sync(last_n=3))
        history.save_sync(second.new_messages(), idempotency_key=second.run_id)
        assert history.load_sync() == [*first.new_messages(), *second.new_messages()]
        assert history.load_sync(2) == second.new_messages()[-1:]  # the last result is cut off
        assert history_on(store, history.chronicum_id, owner_id="rafa").load_sync() == []
    finally:
        store.close()


def test_run_sync_with_a_history_opened_from_a_url(store_target: StoreTarget) -> None:
    history = ChronicaHistory(
        new_chronicum_id(), store_target.url, owner_id=OWNER, actor=AGENT, store_options=store_target.options
    )
    with history:
        agent = ToolLoop(calls=1).agent()
        first = agent.run_sync("Find a table.", message_history=history.load_sync(10))
        history.save_sync(first.new_messages())
        second = agent.run_sync("Book it.", message_history=history.load_sync(10))
        history.save_sync(second.new_messages())
        assert history.load_sync() == second.all_messages()


def test_a_history_opened_from_a_url_closes_what_it_opened() -> None:
    async def body() -> None:
        async with ChronicaHistory(new_chronicum_id(), "memory://", owner_id=OWNER, actor=AGENT) as history:
            result = await ToolLoop(calls=0).agent().run("hi")
            await history.save(result.new_messages())
            assert await history.load() == result.new_messages()
            opened = history._opened_async
            assert opened is not None
        with pytest.raises(StoreError, match="closed"):
            await opened.get(history.chronicum_id)
        with pytest.raises(StoreError, match="closed"):
            await history.load()

    asyncio.run(body())


def test_a_given_store_is_left_open_and_the_wrong_flavour_is_refused() -> None:
    async def body() -> None:
        store = AsyncMemoryStore()
        async with history_on(store) as history:
            await history.save((await ToolLoop(calls=0).agent().run("hi")).new_messages())
        assert len(await history.load()) == 2
        with pytest.raises(TypeError, match="use load and save"):
            history.load_sync()
        with pytest.raises(TypeError, match="use load and save"):
            history.save_sync([])
        await store.close()

    asyncio.run(body())
    blocking = history_on(Chronicarius(MemoryStore()))
    assert blocking.load_sync() == []
    with pytest.raises(TypeError, match="use load_sync and save_sync"):
        asyncio.run(blocking.load())
    with pytest.raises(TypeError, match="store must be a store URL"):
        ChronicaHistory("c", cast(Any, 42), owner_id=OWNER, actor=AGENT)


def test_one_history_serves_asyncio_runs_one_after_another(store_target: StoreTarget) -> None:
    history = ChronicaHistory(
        new_chronicum_id(), store_target.url, owner_id=OWNER, actor=AGENT, store_options=store_target.options
    )
    agent = ToolLoop(calls=1).agent()
    saved: list[ModelMessage] = []
    try:
        for prompt in ("Find a table.", "Book it.", "Thanks."):
            loaded = asyncio.run(history.load(10))  # each asyncio.run() is a new event loop
            result = agent.run_sync(prompt, message_history=loaded)  # and run_sync another one
            asyncio.run(history.save(result.new_messages()))
            saved.extend(result.new_messages())
        assert asyncio.run(history.load()) == saved
    finally:
        asyncio.run(history.close())


def test_a_bad_last_n_and_too_many_messages_are_refused() -> None:
    async def body() -> None:
        store = AsyncMemoryStore()
        history = history_on(store)
        for bad in ("5", 2.0, True):
            with pytest.raises(InvalidQuery) as raised:
                await history.load(cast(Any, bad))
            assert raised.value.field == "last_n"
        too_many = [ModelRequest(parts=[UserPromptPart(f"{n}")]) for n in range(1001)]
        with pytest.raises(InvalidActum) as refused:
            await history.save(too_many)
        assert refused.value.field == "acta"
        for not_a_list in (too_many[0], "hello", iter(too_many)):
            with pytest.raises(InvalidActum) as refused:
                await history.save(cast(Any, not_a_list))
            assert refused.value.field == "acta"
        assert await history.load() == []
        assert len(await history.save(too_many[:1000])) == 1000
        assert await history.load(3) == too_many[997:1000]

    asyncio.run(body())


def test_concurrent_saves_each_land_whole_and_consecutive(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        history = history_on(store)
        runs = [await ToolLoop(calls=2).agent().run(f"request {n}") for n in range(4)]
        await asyncio.gather(*(history_on(store, history.chronicum_id).save(r.new_messages()) for r in runs))
        loaded = await history.load()
        assert len(loaded) == sum(len(r.new_messages()) for r in runs) == 24
        starts = [loaded.index(r.new_messages()[0]) for r in runs]
        for run, start in zip(runs, starts, strict=True):
            assert loaded[start : start + 6] == run.new_messages()  # no other run's message between

    run_on(store_target, body)


def test_two_agents_share_one_conversation(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        chronicum_id = new_chronicum_id()
        concierge = ChronicaHistory(chronicum_id, store, owner_id=OWNER, actor="concierge")
        booking = ChronicaHistory(chronicum_id, store, owner_id=OWNER, actor="booking")
        first = await ToolLoop(calls=1, answer="Rumah Teduh.").agent().run("Find a table.")
        await concierge.save(first.new_messages())
        second = (
            await ToolLoop(calls=0, answer="Booked.")
            .agent()
            .run("Book it.", message_history=await booking.load())
        )
        await booking.save(second.new_messages())
        # each reads its own messages and the person's exactly, the other agent's named
        ask, booked = second.new_messages()
        assert (await concierge.load())[:-1] == [*first.new_messages(), ask]
        said = (await concierge.load())[-1]
        assert isinstance(said, ModelRequest) and len(said.parts) == 1
        assert [p.content for p in said.parts if isinstance(p, UserPromptPart)] == ["booking said: Booked."]
        loaded = await booking.load()
        assert loaded[2:] == [ask, booked]  # concierge's tool exchange left out
        answer = loaded[1]
        assert isinstance(answer, ModelRequest) and len(answer.parts) == 1
        assert [p.content for p in answer.parts if isinstance(p, UserPromptPart)] == [
            "concierge said: Rumah Teduh."
        ]
        acta = await AsyncChronicarius(store).get_acta(OWNER, chronicum_id, actor_kinds=[ActorKind.AGENT])
        assert [actum.actor for actum in acta] == ["concierge"] * 3 + ["booking"]

    run_on(store_target, body)


def test_a_tool_retry_is_a_tool_result_for_the_window(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        script = ToolLoop(calls=2)
        agent = Agent(FunctionModel(script.respond), system_prompt="Find tables.")
        tries: list[int] = []

        @agent.tool_plain
        def find_table(area: str, party: int) -> str:
            """Find a quiet table; asks the model to retry the first call."""
            tries.append(party)
            if len(tries) == 1:
                raise ModelRetry("no tables for that party; ask again")
            return f"Rumah Teduh in {area} for {party}"

        history = history_on(store)
        result = await agent.run("Find a table.")
        await history.save(result.new_messages())
        everything = result.new_messages()
        retry_request = everything[2]  # the answer to the first call: a retry, not a return
        assert answers_a_call(retry_request)
        assert "no tables for that party" in ModelMessagesTypeAdapter.dump_json([retry_request]).decode()
        for last_n in range(1, len(everything) + 1):
            loaded = await history.load(last_n)
            assert loaded == everything[len(everything) - len(loaded) :]
            if len(loaded) < len(everything):
                assert not answers_a_call(loaded[0]), last_n
            await agent.run("Once more.", message_history=loaded)  # pydantic-ai takes every window

    run_on(store_target, body)
