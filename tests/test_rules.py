"""The Chronicarius rules R1–R10 (docs/contract.md) on the memory store; conformance checks the rest."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from chronica_core import (
    MAX_ID_LENGTH,
    MAX_LAST_N,
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidOwnerID,
    InvalidQuery,
    MemoryStore,
    Store,
)


def message(chronicum_id: str, content: str, actor: str = "ardian", human: bool = True) -> Actum:
    return Actum(
        chronicum_id,
        ActumKind.MESSAGE,
        ActorKind.HUMAN if human else ActorKind.AGENT,
        actor,
        content,
    )


class PlainStore(Store):
    """A store that is not idempotent: MemoryStore without record_idempotent."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.calls: list[str] = []

    def create(self, chronicum: Chronicum) -> None:
        self.calls.append("create")
        self.inner.create(chronicum)

    def record(self, actum: Actum) -> Actum:
        self.calls.append("record")
        return self.inner.record(actum)

    def acta(self, chronicum_id: str, query: ActaQuery) -> list[Actum]:
        self.calls.append("acta")
        return self.inner.acta(chronicum_id, query)

    def get(self, chronicum_id: str) -> Chronicum:
        self.calls.append("get")
        return self.inner.get(chronicum_id)

    def close(self) -> None:
        self.inner.close()


INVALID_ACTA: list[tuple[str, Actum, str]] = [
    ("empty chronicum id", Actum("", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi"), "chronicum_id"),
    ("empty actor", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "", "hi"), "actor"),
    ("unknown kind", Actum("c", "shout", ActorKind.HUMAN, "ardian", "hi"), "kind"),  # type: ignore[arg-type]
    ("unknown actor kind", Actum("c", ActumKind.MESSAGE, "robot", "ardian", "hi"), "actor_kind"),  # type: ignore[arg-type]
    ("empty message", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", ""), "content"),
    ("empty thought", Actum("c", ActumKind.THOUGHT, ActorKind.AGENT, "concierge", ""), "content"),
    ("content not a str", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", b"hi"), "content"),  # type: ignore[arg-type]
    ("lone surrogate", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "a\ud800b"), "content"),
    (
        "NUL in chronicum id",
        Actum("c\x00", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi"),
        "chronicum_id",
    ),
    ("actor not a str", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, 7, "hi"), "actor"),  # type: ignore[arg-type]
    (
        "chronicum id too long",
        Actum("c" * (MAX_ID_LENGTH + 1), ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi"),
        "chronicum_id",
    ),
    ("actor too long", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "a" * 256, "hi"), "actor"),
]


@pytest.mark.parametrize(("case", "actum", "field"), INVALID_ACTA, ids=[case for case, _, _ in INVALID_ACTA])
def test_invalid_actum_names_the_field_and_creates_nothing(
    chronicarius: Chronicarius, store: MemoryStore, case: str, actum: Actum, field: str
) -> None:
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_actum("ardian", actum)
    assert raised.value.field == field
    assert field in str(raised.value)
    with pytest.raises(ChronicumNotFound):
        store.get(actum.chronicum_id if isinstance(actum.chronicum_id, str) else "c")


def test_empty_idempotency_key_is_refused_before_anything(
    chronicarius: Chronicarius, store: MemoryStore
) -> None:
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_actum("ardian", message("c", "hi"), idempotency_key="")
    assert raised.value.field == "idempotency_key"
    with pytest.raises(ChronicumNotFound):
        store.get("c")


@pytest.mark.parametrize("owner", ["", None])
def test_empty_owner_fails_first_even_with_an_invalid_actum(chronicarius: Chronicarius, owner: Any) -> None:
    bad = Actum("", "shout", ActorKind.HUMAN, "", "")  # type: ignore[arg-type]
    with pytest.raises(EmptyOwnerID):
        chronicarius.record_actum(owner, bad)
    with pytest.raises(EmptyOwnerID):
        chronicarius.get_acta(owner, "c")
    with pytest.raises(EmptyOwnerID):
        chronicarius.get_chronicum(owner, "c")


@pytest.mark.parametrize("owner", [3, "a\x00b", "\udc80"])
def test_unusable_owner_is_invalid(chronicarius: Chronicarius, owner: Any) -> None:
    with pytest.raises(InvalidOwnerID):
        chronicarius.record_actum(owner, message("c", "hi"))


def test_kinds_given_as_strings_come_back_as_enums(chronicarius: Chronicarius) -> None:
    actum = Actum("c", "tool_request", "agent", "search", "")  # type: ignore[arg-type]
    stored = chronicarius.record_actum("ardian", actum)
    assert stored.kind is ActumKind.TOOL_REQUEST
    assert stored.actor_kind is ActorKind.AGENT
    assert stored.content == ""


def test_ids_are_fresh_and_replace_the_callers() -> None:
    chronicarius = Chronicarius(MemoryStore())
    first = chronicarius.record_actum(
        "ardian", Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "a", "x", id="mine")
    )
    second = chronicarius.record_actum("ardian", message("c", "y"))
    for stored in (first, second):
        assert re.fullmatch(r"[0-9a-f]{32}", stored.id)
    assert first.id != second.id


def test_record_sets_utc_at_and_moves_last_actum_at(chronicarius: Chronicarius) -> None:
    before = datetime.now(UTC)
    stored = chronicarius.record_actum("ardian", message("c", "hi"))
    assert stored.at is not None and stored.at.tzinfo is not None
    assert stored.at.utcoffset() is not None and stored.at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert before <= stored.at <= datetime.now(UTC)
    chronicum = chronicarius.get_chronicum("ardian", "c")
    assert chronicum.owner_id == "ardian"
    assert chronicum.last_actum_at == stored.at
    assert chronicum.started_at <= stored.at


def test_another_owners_chronicum_answers_like_a_missing_one(chronicarius: Chronicarius) -> None:
    chronicarius.record_actum("ardian", message("dinner-friday", "hi"))
    errors = []
    for call in (
        lambda: chronicarius.get_acta("rafa", "dinner-friday"),
        lambda: chronicarius.get_chronicum("rafa", "dinner-friday"),
        lambda: chronicarius.record_actum("rafa", message("dinner-friday", "mine now", actor="rafa")),
        lambda: chronicarius.get_acta("rafa", "no-such-chronicum"),
    ):
        with pytest.raises(ChronicumNotFound) as raised:
            call()
        errors.append(str(raised.value).replace("no-such-chronicum", "dinner-friday"))
    assert len(set(errors)) == 1
    assert [actum.content for actum in chronicarius.get_acta("ardian", "dinner-friday")] == ["hi"]


def test_correctness_does_not_depend_on_the_owner_cache(store: MemoryStore) -> None:
    writer = Chronicarius(store, owner_cache_size=0)
    other = Chronicarius(store, owner_cache_size=1)
    writer.record_actum("ardian", message("a", "1"))
    writer.record_actum("ardian", message("b", "2"))
    with pytest.raises(ChronicumNotFound):
        other.get_acta("rafa", "a")
    other.get_acta("ardian", "b")  # evicts "a" from a cache of one
    with pytest.raises(ChronicumNotFound):
        other.record_actum("rafa", message("a", "3", actor="rafa"))
    assert [actum.content for actum in writer.get_acta("ardian", "a")] == ["1"]


def test_steady_state_write_is_one_store_call() -> None:
    store = PlainStore()
    chronicarius = Chronicarius(store)
    chronicarius.record_actum("ardian", message("c", "first"))
    assert store.calls == ["get", "create", "record"]
    store.calls.clear()
    chronicarius.record_actum("ardian", message("c", "second"))
    chronicarius.get_acta("ardian", "c", last_n=1)
    assert store.calls == ["record", "acta"]


def test_key_on_a_store_that_cannot_honour_it_creates_nothing() -> None:
    store = PlainStore()
    with pytest.raises(IdempotencyUnsupported, match="PlainStore"):
        Chronicarius(store).record_actum("ardian", message("c", "hi"), idempotency_key="k")
    assert store.calls == []


def test_retry_with_a_key_returns_the_first_actum(chronicarius: Chronicarius) -> None:
    first = chronicarius.record_actum("ardian", message("c", "Booked."), idempotency_key="booking-reply-1")
    retry = chronicarius.record_actum("ardian", message("c", "Reworded."), idempotency_key="booking-reply-1")
    elsewhere = chronicarius.record_actum(
        "ardian", message("d", "Reworded."), idempotency_key="booking-reply-1"
    )
    assert retry == first
    assert elsewhere.id != first.id
    assert [actum.content for actum in chronicarius.get_acta("ardian", "c")] == ["Booked."]


def test_filters_apply_before_the_limit(chronicarius: Chronicarius) -> None:
    script = [
        (ActumKind.MESSAGE, "m1"),
        (ActumKind.MESSAGE, "m2"),
        (ActumKind.THOUGHT, "t1"),
        (ActumKind.TOOL_REQUEST, "r1"),
        (ActumKind.MESSAGE, "m3"),
        (ActumKind.TOOL_RESPONSE, "s1"),
        (ActumKind.MESSAGE, "m4"),
        (ActumKind.THOUGHT, "t2"),
    ]
    for kind, content in script:
        chronicarius.record_actum("ardian", Actum("c", kind, ActorKind.AGENT, "concierge", content))
    window = chronicarius.get_acta("ardian", "c", actum_kinds=["message"], last_n=3)
    assert [actum.content for actum in window] == ["m2", "m3", "m4"]
    assert [a.content for a in chronicarius.get_acta("ardian", "c", last_n=-5)] == [c for _, c in script]
    assert [a.content for a in chronicarius.get_acta("ardian", "c", actum_kinds=[], last_n=2)] == ["m4", "t2"]
    assert chronicarius.get_acta("ardian", "c", actor_kinds=[ActorKind.HUMAN]) == []


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"actum_kinds": ["shout"]}, "actum_kinds"),
        ({"actor_kinds": [3]}, "actor_kinds"),
        ({"last_n": "3"}, "last_n"),
    ],
)
def test_bad_query_names_the_argument(
    chronicarius: Chronicarius, arguments: dict[str, Any], field: str
) -> None:
    chronicarius.record_actum("ardian", message("c", "hi"))
    with pytest.raises(InvalidQuery) as raised:
        chronicarius.get_acta("ardian", "c", **arguments)
    assert raised.value.field == field


class RacingStore(MemoryStore):
    """Lets a rival's first write land between this writer's `get` and its `create` (deterministically)."""

    def __init__(self, rival_owner: str) -> None:
        super().__init__()
        self.rival_owner = rival_owner
        self.raced = False

    def create(self, chronicum: Chronicum) -> None:
        if not self.raced:
            self.raced = True
            super().create(Chronicum(chronicum.id, self.rival_owner, chronicum.started_at))
        super().create(chronicum)


@pytest.mark.parametrize(("rival", "lands"), [("ardian", True), ("rafa", False)])
def test_the_loser_of_a_first_write_race_rereads_the_owner(rival: str, lands: bool) -> None:
    store = RacingStore(rival)
    chronicarius = Chronicarius(store)
    if lands:
        stored = chronicarius.record_actum("ardian", message("c", "hi"))
        assert store.acta("c", ActaQuery()) == [stored]
    else:
        with pytest.raises(ChronicumNotFound):
            chronicarius.record_actum("ardian", message("c", "hi"))
        assert store.acta("c", ActaQuery()) == []
    assert store.get("c").owner_id == rival


def test_forty_threads_racing_first_writes_all_land(counting_ids: Callable[[], str]) -> None:
    chronicarius = Chronicarius(MemoryStore())
    barrier = threading.Barrier(40)

    def write(number: int) -> None:
        barrier.wait()
        chronicarius.record_actum("ardian", message("c", f"m{number}"))

    threads = [threading.Thread(target=write, args=(number,)) for number in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(actum.content for actum in chronicarius.get_acta("ardian", "c")) == sorted(
        f"m{number}" for number in range(40)
    )


def test_async_twin_keeps_the_same_rules(counting_ids: Callable[[], str]) -> None:
    async def scenario() -> tuple[list[Actum], list[Actum]]:
        chronicarius = AsyncChronicarius(AsyncMemoryStore(), id_factory=counting_ids)
        keyed = await asyncio.gather(
            *[
                chronicarius.record_actum("ardian", message("c", f"try {number}"), idempotency_key="k")
                for number in range(40)
            ]
        )
        with pytest.raises(ChronicumNotFound):
            await chronicarius.get_acta("rafa", "c")
        with pytest.raises(InvalidActum):
            await chronicarius.record_actum("ardian", message("c", ""))
        return keyed, await chronicarius.get_acta("ardian", "c")

    keyed, stored = asyncio.run(scenario())
    assert len(stored) == 1
    assert all(actum == stored[0] for actum in keyed)
    assert stored[0].id == f"{1:032x}"


def test_ids_of_the_longest_allowed_length_are_accepted(chronicarius: Chronicarius) -> None:
    longest = "é" * MAX_ID_LENGTH
    stored = chronicarius.record_actum(
        longest, Actum(longest, ActumKind.MESSAGE, ActorKind.HUMAN, longest, "hi"), idempotency_key=longest
    )
    assert chronicarius.get_acta(longest, longest) == [stored]


def test_too_long_owner_and_key_are_refused_and_a_too_long_id_is_not_found(
    chronicarius: Chronicarius, store: MemoryStore
) -> None:
    with pytest.raises(InvalidOwnerID, match="at most 255 characters"):
        chronicarius.record_actum("o" * 256, message("c", "hi"))
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_actum("ardian", message("c", "hi"), idempotency_key="k" * 256)
    assert raised.value.field == "idempotency_key"
    with pytest.raises(ChronicumNotFound):
        chronicarius.get_acta("ardian", "c" * 256)
    with pytest.raises(ChronicumNotFound):
        store.get("c")


@pytest.mark.parametrize("last_n", [MAX_LAST_N + 1, 2**63, 2**200])
def test_a_last_n_beyond_any_chronicum_keeps_everything(chronicarius: Chronicarius, last_n: int) -> None:
    for content in ("one", "two", "three"):
        chronicarius.record_actum("ardian", message("c", content))
    assert [actum.content for actum in chronicarius.get_acta("ardian", "c", last_n=last_n)] == [
        "one",
        "two",
        "three",
    ]
    assert [actum.content for actum in chronicarius.get_acta("ardian", "c", last_n=MAX_LAST_N)] == [
        "one",
        "two",
        "three",
    ]


def test_each_flavour_refuses_the_other_flavours_store() -> None:
    with pytest.raises(TypeError, match=r"Chronicarius needs a Store .*AsyncMemoryStore.*AsyncChronicarius"):
        Chronicarius(AsyncMemoryStore())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"AsyncChronicarius needs an AsyncStore .*MemoryStore"):
        AsyncChronicarius(MemoryStore())  # type: ignore[arg-type]
