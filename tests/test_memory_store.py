"""The memory store: ``at`` keeps to the order whatever the clock does, and closing stops it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncMemoryStore,
    Chronicum,
    MemoryStore,
    StoreError,
    clock,
    new_actum_id,
    new_chronicum_id,
)


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


def _an_hour_behind() -> datetime:
    """The host's clock an hour behind (the clock stepped back)."""
    return datetime.now(UTC) - timedelta(hours=1)


def test_a_clock_stepping_back_never_moves_at_backwards(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    chronicum_id = new_chronicum_id()
    store.create(Chronicum(chronicum_id, "ardian", datetime.now().astimezone()))
    first = store.record(message(chronicum_id, "before the step"))
    monkeypatch.setattr(clock, "now", _an_hour_behind)
    second = store.record(message(chronicum_id, "after the step"))
    assert second.at == first.at
    assert [actum.at for actum in store.acta(chronicum_id, ActaQuery())] == [first.at, first.at]
    assert store.get(chronicum_id).last_actum_at == first.at


def test_an_async_face_closes_alone_and_leaves_a_shared_store_open() -> None:
    shared = MemoryStore()
    chronicum_id = new_chronicum_id()
    face = AsyncMemoryStore(store=shared)

    async def scenario() -> None:
        await face.create(Chronicum(chronicum_id, "ardian", datetime.now().astimezone()))
        await face.close()
        with pytest.raises(StoreError, match="memory: async store: the store is closed"):
            await face.record(message(chronicum_id, "after close"))

    asyncio.run(scenario())
    assert shared.acta(chronicum_id, ActaQuery()) == []
    shared.close()
    with pytest.raises(StoreError, match="memory: store: the store is closed"):
        shared.get(chronicum_id)


_KIND_LIST = list(ActumKind)
_ACTOR_KIND_LIST = list(ActorKind)


@given(
    kinds=st.lists(st.sampled_from(_KIND_LIST), max_size=40),
    wanted=st.sets(st.sampled_from(_KIND_LIST), max_size=2),
    actors=st.sets(st.sampled_from(_ACTOR_KIND_LIST), max_size=1),
    last_n=st.integers(min_value=-1, max_value=45),
    erase_after=st.none() | st.integers(min_value=0, max_value=40),
)
def test_every_window_is_the_filtered_history_cut_to_last_n(
    kinds: list[ActumKind],
    wanted: set[ActumKind],
    actors: set[ActorKind],
    last_n: int,
    erase_after: int | None,
) -> None:
    """The per-kind lists behind one-kind windows answer as a scan of the whole history would.

    Also after an erasure and a reopening part-way (the lists start afresh with the chronicum).
    """
    store = MemoryStore()
    chronicum_id = new_chronicum_id()
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    written: list[Actum] = []
    for index, kind in enumerate(kinds):
        if index == erase_after:
            store.erase(chronicum_id, "digest")
            assert store.reopen(Chronicum(chronicum_id, "ardian", datetime.now(UTC)), "digest")
            written = []
        actor_kind = _ACTOR_KIND_LIST[index % len(_ACTOR_KIND_LIST)]
        written.append(
            store.record(Actum(chronicum_id, kind, actor_kind, "ardian", f"{index}", new_actum_id()))
        )
    query = ActaQuery(
        actum_kinds=tuple(sorted(wanted)) or None, actor_kinds=tuple(sorted(actors)) or None, last_n=last_n
    )
    matching = [
        actum
        for actum in written
        if (not wanted or actum.kind in wanted) and (not actors or actum.actor_kind in actors)
    ]
    expected = matching[-last_n:] if last_n > 0 else matching
    assert [actum.id for actum in store.acta(chronicum_id, query)] == [actum.id for actum in expected]
