"""The rules of the native and history capabilities: what only ``Chronicarius`` decides.

Validation of ``native``, ``answers`` and ``summarizes`` before any store call, the
capability checks on a store without them (nothing created), the arguments of the history
calls, and layouts a Chronicarius remembered from before an erasure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest
from test_rules import PlainStore, message

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ActumNotFound,
    AsyncChronicarius,
    AsyncMemoryStore,
    CapabilityUnsupported,
    Chronicarius,
    ChronicumNotFound,
    InvalidActum,
    InvalidQuery,
    MemoryStore,
    Native,
    Span,
)


class CallsStore(MemoryStore):
    """The memory store, counting the calls a Chronicarius makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> object:
        value = super().__getattribute__(name)
        if callable(value) and not name.startswith("_") and name != "calls":
            super().__getattribute__("calls").append(name)
        return value


def response(chronicum_id: str, answers: str) -> Actum:
    return replace(
        Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "tool", "42"), answers=answers
    )


INVALID_LINKS: list[tuple[str, Actum, str]] = [
    ("native not a Native", replace(message("c", "hi"), native={"format": "x"}), "native"),  # type: ignore[arg-type]
    ("empty native format", replace(message("c", "hi"), native=Native("", "{}")), "native.format"),
    ("NUL in native format", replace(message("c", "hi"), native=Native("a\x00b", "{}")), "native.format"),
    ("long native format", replace(message("c", "hi"), native=Native("f" * 256, "{}")), "native.format"),
    ("native data not a str", replace(message("c", "hi"), native=Native("x", b"{}")), "native.data"),  # type: ignore[arg-type]
    ("lone surrogate in data", replace(message("c", "hi"), native=Native("x", "a\ud800")), "native.data"),
    ("answers on a message", replace(message("c", "hi"), answers="q"), "answers"),
    ("answers not a str", response("c", 42), "answers"),  # type: ignore[arg-type]
    ("answers None", response("c", None), "answers"),  # type: ignore[arg-type]
    ("answers 0", response("c", 0), "answers"),  # type: ignore[arg-type]
    ("NUL in answers", response("c", "q\x00"), "answers"),
    ("summarizes not a Span", replace(message("c", "hi"), summarizes=("a", "b")), "summarizes"),  # type: ignore[arg-type]
    ("empty first", replace(message("c", "hi"), summarizes=Span("", "b")), "summarizes.first"),
    ("NUL in last", replace(message("c", "hi"), summarizes=Span("a", "b\x00")), "summarizes.last"),
    (
        "a thought summarizing",
        Actum("c", ActumKind.THOUGHT, ActorKind.AGENT, "a", "t", summarizes=Span("a", "b")),
        "summarizes",
    ),
]


@pytest.mark.parametrize(
    ("case", "actum", "field"), INVALID_LINKS, ids=[case for case, _, _ in INVALID_LINKS]
)
def test_invalid_links_name_the_field_before_any_store_call(case: str, actum: Actum, field: str) -> None:
    store = CallsStore()
    keeper = Chronicarius(store)
    store.calls.clear()
    with pytest.raises(InvalidActum) as refused:
        keeper.record_actum("ardian", actum)
    assert refused.value.field == field
    with pytest.raises(InvalidActum) as in_a_batch:
        keeper.record_acta("ardian", [message("c", "first"), actum])
    assert (in_a_batch.value.field, in_a_batch.value.index) == (field, 1)
    assert store.calls == []


def test_a_summary_in_a_batch_is_refused_before_any_store_call() -> None:
    store = CallsStore()
    keeper = Chronicarius(store)
    first = keeper.record_actum("ardian", message("c", "hi"))
    store.calls.clear()
    summary = replace(message("c", "in short"), summarizes=Span(first.id, first.id))
    with pytest.raises(InvalidActum) as refused:
        keeper.record_acta("ardian", [message("c", "more"), summary])
    assert (refused.value.field, refused.value.index) == ("summarizes", 1)
    assert store.calls == []


def request(chronicum_id: str, given_id: str) -> Actum:
    return Actum(chronicum_id, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "search", "{}", id=given_id)


BAD_GIVEN_IDS: list[tuple[str, list[Actum], tuple[str, int]]] = [
    (
        "two requests given one id",
        [request("c", "call-1"), request("c", "call-1"), response("c", "call-1")],
        ("id", 1),
    ),
    (
        "two messages given one id",
        [replace(message("c", "a"), id="m"), replace(message("c", "b"), id="m")],
        ("id", 1),
    ),
    ("a response naming a later request", [response("c", "call-1"), request("c", "call-1")], ("answers", 0)),
    ("a response naming itself", [replace(response("c", "r"), id="r")], ("answers", 0)),
    (
        "a response naming a message of the batch",
        [replace(message("c", "hi"), id="m"), response("c", "m")],
        ("answers", 1),
    ),
    (
        "a response naming a response of the batch",
        [request("c", "call-1"), replace(response("c", "call-1"), id="r"), response("c", "r")],
        ("answers", 2),
    ),
]


@pytest.mark.parametrize(
    ("case", "batch", "refusal"), BAD_GIVEN_IDS, ids=[case for case, _, _ in BAD_GIVEN_IDS]
)
def test_a_batch_with_given_ids_that_name_nothing_clear_is_refused_before_any_store_call(
    case: str, batch: list[Actum], refusal: tuple[str, int]
) -> None:
    store = CallsStore()
    keeper = Chronicarius(store)
    keeper.record_actum("ardian", message("c", "before"))
    store.calls.clear()
    with pytest.raises(InvalidActum) as refused:
        keeper.record_acta("ardian", batch)
    assert (refused.value.field, refused.value.index) == refusal, str(refused.value)
    assert store.calls == []
    assert [actum.content for actum in keeper.get_acta("ardian", "c")] == ["before"]

    async def in_asyncio() -> tuple[str, int | None]:
        async_keeper = AsyncChronicarius(AsyncMemoryStore())
        with pytest.raises(InvalidActum) as refused:
            await async_keeper.record_acta("ardian", batch)
        with pytest.raises(ChronicumNotFound):
            await async_keeper.get_acta("ardian", "c")
        return refused.value.field, refused.value.index

    assert asyncio.run(in_asyncio()) == refusal


def test_a_repeated_given_id_names_both_indexes() -> None:
    keeper = Chronicarius(MemoryStore())
    with pytest.raises(InvalidActum, match=r"'call-1' is given to the actum at index 0 too") as refused:
        keeper.record_acta("ardian", [request("c", "call-1"), request("c", "call-1")])
    assert (refused.value.field, refused.value.index) == ("id", 1)


def test_a_batch_s_response_names_an_earlier_request_by_its_given_id() -> None:
    keeper = Chronicarius(MemoryStore())
    stored = keeper.record_acta(
        "ardian",
        [request("c", "call-1"), request("c", "call-2"), response("c", "call-2"), response("c", "call-1")],
    )
    assert [actum.answers for actum in stored] == ["", "", stored[1].id, stored[0].id]


def test_a_plain_store_refuses_native_and_history_and_creates_nothing() -> None:
    store = PlainStore()
    keeper = Chronicarius(store)
    kept = keeper.record_actum("ardian", message("c", "kept"))
    store.calls.clear()
    refusals: list[tuple[str, Callable[[], object]]] = [
        (
            "native",
            lambda: keeper.record_actum("ardian", replace(message("new", "hi"), native=Native("x", "{}"))),
        ),
        (
            "native",
            lambda: keeper.record_actum("ardian", replace(message("c", "hi"), native=Native("x", ""))),
        ),
        ("history", lambda: keeper.record_actum("ardian", response("new", kept.id))),
        ("history", lambda: keeper.record_actum("ardian", response("c", kept.id))),
        (
            "history",
            lambda: keeper.record_actum(
                "ardian", replace(message("c", "s"), summarizes=Span(kept.id, kept.id))
            ),
        ),
        ("history", lambda: keeper.fork_chronicum("ardian", "c")),
        ("history", lambda: keeper.get_actum("ardian", "c", kept.id)),
        ("history", lambda: keeper.get_acta("ardian", "c", before=kept.id)),
    ]
    for capability, call in refusals:
        with pytest.raises(CapabilityUnsupported) as refused:
            call()
        assert refused.value.capability == capability
    assert store.calls == []
    with pytest.raises(ChronicumNotFound):
        store.get("new")
    assert keeper.get_acta("ardian", "c") == [kept]
    assert keeper.get_acta("ardian", "c", newest_first=True) == [kept]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"fork_id": ""}, "fork_id"),
        ({"fork_id": "a\x00b"}, "fork_id"),
        ({"fork_id": "f" * 256}, "fork_id"),
        ({"fork_id": 7}, "fork_id"),
        ({"at": 42}, "at"),
    ],
)
def test_fork_arguments_are_checked_before_any_store_call(arguments: dict[str, object], field: str) -> None:
    store = CallsStore()
    keeper = Chronicarius(store)
    keeper.record_actum("ardian", message("c", "hi"))
    store.calls.clear()
    with pytest.raises(InvalidQuery) as refused:
        keeper.fork_chronicum("ardian", "c", **arguments)  # type: ignore[arg-type]
    assert refused.value.field == field
    assert store.calls == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"view": "folded"}, "view"),
        ({"tool_exchanges": "paired"}, "tool_exchanges"),
        ({"newest_first": 1}, "newest_first"),
        ({"before": ""}, "before"),
        ({"before": 5}, "before"),
    ],
)
def test_window_shape_arguments_name_the_field(arguments: dict[str, object], field: str) -> None:
    keeper = Chronicarius(MemoryStore())
    keeper.record_actum("ardian", message("c", "hi"))
    with pytest.raises(InvalidQuery) as refused:
        keeper.get_acta("ardian", "c", **arguments)  # type: ignore[arg-type]
    assert refused.value.field == field


def test_history_calls_on_a_missing_or_foreign_chronicum_answer_not_found() -> None:
    keeper = Chronicarius(MemoryStore())
    kept = keeper.record_actum("ardian", message("c", "hi"))
    for owner_id, chronicum_id in (("bunga", "c"), ("ardian", "missing"), ("ardian", "")):
        with pytest.raises(ChronicumNotFound):
            keeper.get_actum(owner_id, chronicum_id, kept.id)
        with pytest.raises(ChronicumNotFound):
            keeper.fork_chronicum(owner_id, chronicum_id)
        with pytest.raises(ChronicumNotFound):
            keeper.get_acta(owner_id, chronicum_id, before=kept.id)
    with pytest.raises(ActumNotFound):
        keeper.get_actum("ardian", "c", "missing")


def test_a_layout_remembered_from_before_an_erasure_is_read_again() -> None:
    """Chronicarii that knew a fork read its id, erased with its source and written afresh, as it is now."""
    store = MemoryStore()
    eraser = Chronicarius(store)
    first = eraser.record_actum("ardian", message("source", "first"))
    eraser.fork_chronicum("ardian", "source", fork_id="fork")
    writer, finder, reader = Chronicarius(store), Chronicarius(store), Chronicarius(store)
    for knows in (writer, finder, reader):
        assert knows.get_acta("ardian", "fork") == [first]  # each remembers "fork" as a fork
    eraser.erase_chronicum("ardian", "source")
    with pytest.raises(ChronicumNotFound):
        finder.get_actum("ardian", "fork", first.id)
    call = eraser.record_actum("ardian", Actum("fork", ActumKind.TOOL_REQUEST, ActorKind.AGENT, "a", "q"))
    answer = writer.record_actum("ardian", response("fork", call.id))
    assert finder.get_actum("ardian", "fork", call.id) == call
    assert reader.get_acta("ardian", "fork") == [call, answer]
    assert reader.get_chronicum("ardian", "fork").forked_from is None


def test_a_keyed_summary_retried_after_a_wider_one_landed_returns_its_first_write() -> None:
    """Rule R8 for summaries: the retry's range now lies inside the wider summary's, yet it lands once."""
    chronicarius = Chronicarius(MemoryStore())
    said = [chronicarius.record_actum("ardian", message("long", f"m{n}")) for n in range(4)]
    summary = replace(message("long", "the first two"), summarizes=Span(said[0].id, said[1].id))
    first = chronicarius.record_actum("ardian", summary, idempotency_key="summary-1")
    wider = replace(message("long", "all four"), summarizes=Span(first.id, said[3].id))
    chronicarius.record_actum("ardian", wider)
    retried = chronicarius.record_actum("ardian", summary, idempotency_key="summary-1")
    assert retried == first
    with pytest.raises(InvalidActum) as refused:  # without its key, the same range is refused
        chronicarius.record_actum("ardian", summary)
    assert refused.value.field == "summarizes"
    assert [actum.content for actum in chronicarius.get_acta("ardian", "long")] == ["all four"]


def test_a_chronicum_with_a_tool_exchange_is_read_with_one_window_call() -> None:
    """Once ``acta`` answered ``StaleLayout`` for a linked tool response, reads go straight to ``window``."""
    store = CallsStore()
    chronicarius = Chronicarius(store)
    call = chronicarius.record_actum(
        "ardian", Actum("paired", ActumKind.TOOL_REQUEST, ActorKind.AGENT, "a", "q")
    )
    answer = chronicarius.record_actum("ardian", response("paired", call.id))
    assert chronicarius.get_acta("ardian", "paired", last_n=1) == [call, answer]
    store.calls.clear()
    for _ in range(3):
        assert chronicarius.get_acta("ardian", "paired", last_n=1) == [call, answer]
    assert [call for call in store.calls if call != "locate"] == ["window"] * 3  # its window locates
