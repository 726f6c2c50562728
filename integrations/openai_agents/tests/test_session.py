"""The Agents SDK's documented Session behaviour, on every store target, and Chronica's additions."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from agents import SessionSettings, TResponseInputItem
from agents.memory import Session
from chronica_openai_agents import POP_ACTOR, ChronicaSession, item_of_actum
from chronica_openai_agents.session import WINDOW_SLACK
from conftest import StoreTarget
from helpers import AGENT, OWNER, run_on, session_on

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    AsyncChronicarius,
    AsyncMemoryStore,
    AsyncStore,
    ChronicumNotFound,
    MemoryStore,
    Span,
    new_chronicum_id,
)
from chronica_core.capabilities import NATIVE, store_capabilities


def item(role: str, text: str) -> TResponseInputItem:
    return cast(TResponseInputItem, {"role": role, "content": text})


def numbered(count: int) -> list[TResponseInputItem]:
    return [item("user" if n % 2 == 0 else "assistant", f"item {n}") for n in range(count)]


def test_a_chronica_session_is_an_sdk_session() -> None:
    session = ChronicaSession("s-1", AsyncMemoryStore(), owner_id=OWNER, actor=AGENT)
    assert isinstance(session, Session)
    assert session.session_id == "s-1"
    assert session.session_settings == SessionSettings()


def test_a_new_session_is_empty(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        assert await session.get_items() == []
        assert await session.get_items(3) == []
        assert await session.pop_item() is None
        await session.clear_session()
        assert await session.get_items() == []

    run_on(store_target, body)


def test_items_read_back_in_order_and_limit_keeps_the_newest(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        items = numbered(7)
        await session.add_items(items[:3])
        await session.add_items(items[3:])
        assert await session.get_items() == items
        assert await session.get_items(None) == items
        assert await session.get_items(2) == items[-2:]
        assert await session.get_items(7) == items
        assert await session.get_items(100) == items

    run_on(store_target, body)


@pytest.mark.parametrize("limit", [0, -1, -100])
def test_a_limit_of_zero_or_less_means_no_items(store_target: StoreTarget, limit: int) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        await session.add_items(numbered(3))
        assert await session.get_items(limit) == []

    run_on(store_target, body)


def test_session_settings_limit_applies_when_no_limit_is_given(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store, session_settings=SessionSettings(limit=2))
        items = numbered(5)
        await session.add_items(items)
        assert await session.get_items() == items[-2:]
        assert await session.get_items(4) == items[-4:]
        assert await session.get_items(0) == []

    run_on(store_target, body)


def test_a_later_reader_with_another_session_object_sees_the_same_items(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        writer = session_on(store)
        items = numbered(4)
        await writer.add_items(items)
        reader = session_on(store, writer.session_id)
        assert await reader.get_items() == items

    run_on(store_target, body)


def test_add_items_of_an_empty_list_writes_nothing(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        await session.add_items([])
        with pytest.raises(ChronicumNotFound):
            await session.chronicarius.get_chronicum(OWNER, session.session_id)

    run_on(store_target, body)


def test_add_items_is_one_batch_and_an_unwritable_item_writes_nothing(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        first = numbered(2)
        await session.add_items(first)
        bad = [item("user", "fine"), cast(TResponseInputItem, {"role": "user", "content": object()})]
        with pytest.raises(TypeError):
            await session.add_items(bad)
        assert await session.get_items() == first
        acta = await session.chronicarius.get_acta(OWNER, session.session_id)
        assert len(acta) == 2

    run_on(store_target, body)


def test_too_large_an_item_writes_nothing_of_its_batch() -> None:
    async def body() -> None:
        store = AsyncMemoryStore(store=MemoryStore(max_content_bytes=1000))
        session = session_on(store)
        await session.add_items([item("user", "before")])
        with pytest.raises(ActumTooLarge):
            await session.add_items([item("user", "small"), item("assistant", "x" * 2000)])
        assert await session.get_items() == [item("user", "before")]

    asyncio.run(body())


def test_more_than_a_thousand_items_land_in_order() -> None:
    async def body() -> None:
        session = session_on(AsyncMemoryStore())
        items = numbered(2345)
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.get_items(3) == items[-3:]

    asyncio.run(body())


def test_pop_item_returns_the_newest_and_hides_it_from_every_later_reader(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        items = numbered(4)
        await session.add_items(items)
        assert await session.pop_item() == items[3]
        assert await session.get_items() == items[:3]
        other_reader = session_on(store, session.session_id)
        assert await other_reader.get_items() == items[:3]
        assert await other_reader.get_items(2) == items[1:3]
        assert await other_reader.pop_item() == items[2]
        assert await session.pop_item() == items[1]
        assert await session.pop_item() == items[0]
        assert await session.pop_item() is None
        assert await other_reader.get_items() == []
        again = numbered(2)
        await session.add_items(again)
        assert await other_reader.get_items() == again

    run_on(store_target, body)


def test_a_limit_counts_live_items_only_after_many_pops(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        items = numbered(60)
        await session.add_items(items)
        for expected in reversed(items[20:]):
            assert await session.pop_item() == expected
        assert await session.get_items(5) == items[15:20]
        assert await session.get_items() == items[:20]
        await session.add_items([item("user", "after the pops")])
        assert await session.get_items(2) == [items[19], item("user", "after the pops")]

    run_on(store_target, body)


def test_concurrent_pops_remove_different_items(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        items = numbered(12)
        await session.add_items(items)
        popped = await asyncio.gather(*(session_on(store, session.session_id).pop_item() for _ in range(8)))
        assert sorted(json.dumps(p) for p in popped) == sorted(json.dumps(i) for i in items[4:])
        assert await session.get_items() == items[:4]

    run_on(store_target, body)


class RacingChronicarius(AsyncChronicarius):
    """Holds the next ``held`` reads at a barrier, so that every pop reads the same newest item.

    It stands between the session and the store's keeper (whatever store operations a read
    becomes), so it holds each pop's read, never its write."""

    def __init__(self, store: AsyncStore, parties: int) -> None:
        super().__init__(store)
        self.barrier = asyncio.Barrier(parties)
        self.held = 0

    async def get_acta(self, owner_id: str, chronicum_id: str, **query: Any) -> Any:
        found = await super().get_acta(owner_id, chronicum_id, **query)
        if self.held > 0:
            self.held -= 1
            await self.barrier.wait()
        return found


@pytest.mark.parametrize("pops", [2, 5])
def test_pops_that_read_the_same_newest_item_each_remove_another(pops: int) -> None:
    async def body() -> None:
        session_id = new_chronicum_id()
        setup = MemoryStore()
        racing = RacingChronicarius(AsyncMemoryStore(store=setup), pops)
        items = numbered(6)
        await session_on(racing, session_id).add_items(items)
        racing.held = pops
        popped = await asyncio.gather(*(session_on(racing, session_id).pop_item() for _ in range(pops)))
        assert racing.held == 0  # every pop read before any wrote its tombstone
        assert sorted(json.dumps(p) for p in popped) == sorted(json.dumps(i) for i in items[-pops:])
        assert await session_on(racing, session_id).get_items() == items[:-pops]
        acta = setup.acta(session_id, ActaQuery())
        tombstones = [actum for actum in acta if actum.actor == POP_ACTOR]
        assert len(tombstones) == pops  # the losers' keyed writes stored nothing

    asyncio.run(body())


def test_clear_session_erases_every_item_and_the_id_starts_afresh(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        await session.add_items(numbered(3))
        await session.pop_item()
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        with pytest.raises(ChronicumNotFound):
            await session.chronicarius.get_acta(OWNER, session.session_id)
        await session.clear_session()  # clearing a cleared session is not an error
        fresh = [item("user", "a new start")]
        await session.add_items(fresh)
        assert await session.get_items() == fresh

    run_on(store_target, body)


class InterleavingChronicarius(AsyncChronicarius):
    """Runs ``between`` once, right after its next read: another caller's step landing between a
    pop's read of the newest item and the pop's tombstone, deterministically."""

    between: Callable[[], Awaitable[None]] | None = None

    async def get_acta(self, owner_id: str, chronicum_id: str, **query: Any) -> Any:
        found = await super().get_acta(owner_id, chronicum_id, **query)
        between, self.between = self.between, None
        if between is not None:
            await between()
        return found


def test_a_pop_racing_a_clear_writes_nothing_into_a_fresh_session(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        racing = InterleavingChronicarius(store)
        session = session_on(racing)
        await session.add_items(numbered(3))
        racing.between = session_on(store, session.session_id).clear_session
        assert await session.pop_item() is None  # the clear came first: nothing was left to pop
        assert racing.between is None
        assert await session.get_items() == []
        keeper = AsyncChronicarius(store)
        with pytest.raises(ChronicumNotFound):  # no fresh chronicum holding a tombstone
            await keeper.get_acta(OWNER, session.session_id)
        assert session.session_id not in [c.id for c in (await keeper.list_chronica(OWNER)).chronica]
        fresh = [item("user", "a new start")]
        await session.add_items(fresh)
        assert await session.get_items() == fresh
        assert [item_of_actum(actum) for actum in await keeper.get_acta(OWNER, session.session_id)] == fresh

    run_on(store_target, body)


def test_a_pop_racing_a_clear_and_a_new_item_hides_nothing_of_the_fresh_session(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        racing = InterleavingChronicarius(store)
        session = session_on(racing)
        items = numbered(3)
        await session.add_items(items)
        fresh = [item("user", "a new start")]
        other = session_on(store, session.session_id)

        async def clear_then_add() -> None:
            await other.clear_session()
            await other.add_items(fresh)

        racing.between = clear_then_add
        assert await session.pop_item() == items[-1]  # removed, by the clear, for every later reader
        assert await session.get_items() == fresh
        assert await other.get_items() == fresh
        assert await other.pop_item() == fresh[0]
        assert await other.get_items() == []

    run_on(store_target, body)


def test_another_owners_session_answers_like_a_missing_one(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        mine = session_on(store)
        items = numbered(3)
        await mine.add_items(items)
        theirs = session_on(store, mine.session_id, owner_id="rafa")
        missing = session_on(store, owner_id="rafa")
        for session in (theirs, missing):
            assert await session.get_items() == []
            assert await session.get_items(2) == []
            assert await session.pop_item() is None
            await session.clear_session()
        with pytest.raises(ChronicumNotFound):
            await theirs.add_items([item("user", "let me in")])
        assert await mine.get_items() == items

    run_on(store_target, body)


class CountingChronicarius(AsyncChronicarius):
    """Notes the ``last_n`` of every window it reads in ``reads``."""

    def __init__(self, store: AsyncMemoryStore, reads: list[int]) -> None:
        super().__init__(store)
        self.reads = reads

    async def get_acta(self, owner_id: str, chronicum_id: str, **query: Any) -> Any:
        self.reads.append(query.get("last_n", 0))
        return await super().get_acta(owner_id, chronicum_id, **query)


def test_get_items_with_a_limit_reads_a_window_not_the_whole_history() -> None:
    reads: list[int] = []

    async def body() -> None:
        session = session_on(CountingChronicarius(AsyncMemoryStore(), reads))
        items = numbered(500)
        await session.add_items(items)
        assert await session.get_items(10) == items[-10:]
        assert reads == [10 + WINDOW_SLACK]
        reads.clear()
        await session.pop_item()
        assert reads == [1 + WINDOW_SLACK]
        reads.clear()
        assert await session.get_items() == items[:-1]
        assert reads == [0]

    asyncio.run(body())


def test_a_window_after_a_turn_taken_back_is_read_once() -> None:
    reads: list[int] = []

    async def body() -> None:
        session = session_on(CountingChronicarius(AsyncMemoryStore(), reads))
        items = numbered(30)
        await session.add_items(items)
        assert await session.pop_item() == items[-1]  # the answer
        assert await session.pop_item() == items[-2]  # and the question it answered
        reads.clear()
        assert await session.get_items(10) == items[-12:-2]
        assert reads == [10 + WINDOW_SLACK]  # two popped items and two tombstones fit the slack
        reads.clear()
        assert await session.pop_item() == items[-3]  # a third pop: the window is read again, larger
        assert await session.get_items(10) == items[-13:-3]
        assert reads == [1 + WINDOW_SLACK, 10 + WINDOW_SLACK, 2 * (10 + WINDOW_SLACK)]

    asyncio.run(body())


def test_a_session_opened_from_a_url_closes_its_store() -> None:
    async def body() -> None:
        async with ChronicaSession(new_chronicum_id(), "memory://", owner_id=OWNER, actor=AGENT) as session:
            await session.add_items(numbered(2))
            assert await session.get_items() == numbered(2)
        with pytest.raises(Exception, match="closed"):
            await session.get_items()

    asyncio.run(body())


def test_a_session_over_a_given_store_leaves_it_open() -> None:
    async def body() -> None:
        store = AsyncMemoryStore()
        async with session_on(store) as session:
            await session.add_items(numbered(1))
        assert await session.get_items() == numbered(1)
        await store.close()

    asyncio.run(body())


def test_a_blocking_store_is_refused() -> None:
    with pytest.raises(TypeError, match="AsyncStore"):
        ChronicaSession("s", cast(Any, MemoryStore()), owner_id=OWNER, actor=AGENT)


MAPPED: list[tuple[dict[str, Any], ActumKind, ActorKind, str]] = [
    ({"role": "user", "content": "hi"}, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian-human"),
    (
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ActumKind.MESSAGE,
        ActorKind.HUMAN,
        "ardian-human",
    ),
    (
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}],
        },
        ActumKind.MESSAGE,
        ActorKind.AGENT,
        AGENT,
    ),
    ({"role": "system", "content": "be brief"}, ActumKind.MESSAGE, ActorKind.SYSTEM, "system"),
    ({"role": "developer", "content": "be brief"}, ActumKind.MESSAGE, ActorKind.SYSTEM, "developer"),
    (
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
        ActumKind.THOUGHT,
        ActorKind.AGENT,
        AGENT,
    ),
    (
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city":"Tirana"}'},
        ActumKind.TOOL_REQUEST,
        ActorKind.AGENT,
        AGENT,
    ),
    (
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ActumKind.TOOL_RESPONSE,
        ActorKind.AGENT,
        AGENT,
    ),
    (
        {"type": "computer_call", "call_id": "c2", "id": "cu_1", "action": {"type": "screenshot"}},
        ActumKind.TOOL_REQUEST,
        ActorKind.AGENT,
        AGENT,
    ),
    (
        {"type": "mcp_approval_request", "id": "a1", "name": "x", "arguments": "{}", "server_label": "s"},
        ActumKind.TOOL_REQUEST,
        ActorKind.AGENT,
        AGENT,
    ),
    (
        {"type": "mcp_approval_response", "approval_request_id": "a1", "approve": True},
        ActumKind.TOOL_RESPONSE,
        ActorKind.AGENT,
        AGENT,
    ),
    (
        {"type": "mcp_list_tools", "id": "l1", "server_label": "s", "tools": []},
        ActumKind.TOOL_RESPONSE,
        ActorKind.AGENT,
        AGENT,
    ),
    ({"type": "item_reference", "id": "msg_0"}, ActumKind.MESSAGE, ActorKind.AGENT, AGENT),
    ({"type": "compaction", "encrypted_content": "abc"}, ActumKind.MESSAGE, ActorKind.AGENT, AGENT),
    ({"type": "some_future_thing", "x": 1}, ActumKind.MESSAGE, ActorKind.AGENT, AGENT),
]


MAPPED_TEXTS = [
    "hi",
    "hi",
    "hello",
    "be brief",
    "be brief",
    "think",
    'weather({"city":"Tirana"})',
    "sunny",
    'computer_call({"type":"screenshot"})',
    "x({})",
    "approved",
    "tools of s: ",
    "[item_reference]",
    "[compaction]",
    "[some_future_thing]",
]
"""The readable content of each item of MAPPED."""


def test_the_item_mapping(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store, human_actor="ardian-human")
        items = [cast(TResponseInputItem, entry[0]) for entry in MAPPED]
        await session.add_items(items)
        acta = await session.chronicarius.get_acta(OWNER, session.session_id)
        assert [(a.kind, a.actor_kind, a.actor) for a in acta] == [entry[1:] for entry in MAPPED]
        if NATIVE in store_capabilities(store):  # readable text, the item in its native form
            assert [a.content for a in acta] == MAPPED_TEXTS
            assert [json.loads(a.native.data) for a in acta if a.native is not None] == items
        else:  # the item's JSON, as before there was a native form
            assert [json.loads(a.content) for a in acta] == items
        assert await session.get_items() == items

    run_on(store_target, body)


def test_an_item_dressed_as_a_tombstone_hides_nothing(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        await session.add_items(numbered(1))
        (first,) = await session.chronicarius.get_acta(OWNER, session.session_id)
        forged = {
            "type": "function_call_output",
            "call_id": "x",
            "popped": first.id,
            "pop": "n",
            "output": "",
        }
        await session.add_items([cast(TResponseInputItem, forged)])
        assert await session.get_items() == [*numbered(1), forged]

    run_on(store_target, body)


IMAGE = base64.b64encode(bytes(range(256)) * 8192).decode("ascii")  # 2 MiB of bytes, 2.7 MiB of text

TRICKY: list[dict[str, Any]] = [
    {"role": "user", "content": "Përshëndetje, ardian! 你好 👋🏽 \u0000 between NULs \u0000"},
    {"role": "user", "content": "\U0010ffff\ud7ff\ue000 \t\r\n\"\\/ '; DROP TABLE acta; --"},
    {"role": "user", "content": "lone surrogate \ud800 survives"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "what is in this picture?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}", "detail": "auto"},
        ],
    },
    {
        "type": "function_call_output",
        "call_id": "c-float",
        "output": "",
        "numbers": [0.1, 1e-300, 1.7976931348623157e308, -0.0, 5e-324, 2**70, -(2**63), 3.141592653589793],
        "nested": {"a": [None, True, False, {}, [], ""], "é": {"\u0000": "nul key"}},
    },
    {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "gAAAA" + "x" * 5000},
]


def test_tricky_items_read_back_equal(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        items = [cast(TResponseInputItem, entry) for entry in TRICKY]
        await session.add_items(items)
        read = await session.get_items()
        assert read == items
        floats = cast(dict[str, Any], read[4])["numbers"]
        assert [repr(x) for x in floats] == [repr(x) for x in TRICKY[4]["numbers"]]
        assert await session.pop_item() == items[-1]
        assert await session.get_items(2) == items[3:5]

    run_on(store_target, body)


def test_session_settings_default_to_the_sdks_and_take_a_dict() -> None:
    assert session_on(AsyncMemoryStore()).session_settings == SessionSettings()
    assert session_on(AsyncMemoryStore(), session_settings={"limit": 3}).session_settings == SessionSettings(
        limit=3
    )
    with pytest.raises(TypeError, match="limitt"):
        session_on(AsyncMemoryStore(), session_settings={"limitt": 3})


def test_a_tool_output_names_its_call_so_no_summary_orphans_it(store_target: StoreTarget) -> None:
    """A summary ending at a call, before its output: the model still gets the call with the output."""

    async def body(store: AsyncStore) -> None:
        session = session_on(store)
        call = cast(
            TResponseInputItem,
            {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
        )
        output = cast(
            TResponseInputItem, {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
        )
        answer = item("assistant", "Sunny.")
        await session.add_items([item("user", "Weather?"), call, output, answer])
        acta = await session.chronicarius.get_acta(OWNER, session.session_id)
        assert acta[2].answers == acta[1].id  # the output names its call
        summary = Actum(
            session.session_id,
            ActumKind.MESSAGE,
            ActorKind.SYSTEM,
            "summarizer",
            "Ardian asked for the weather.",
            summarizes=Span(acta[0].id, acta[1].id),
        )
        await session.chronicarius.record_actum(OWNER, summary)
        assert await session.get_items() == [
            {"role": "system", "content": "Ardian asked for the weather."},
            call,
            output,
            answer,
        ]

    run_on(store_target, body)
