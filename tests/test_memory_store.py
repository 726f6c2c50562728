"""The memory store: ``at`` keeps to the order whatever the clock does, and closing stops it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncMemoryStore,
    Chronicum,
    MemoryStore,
    StoreError,
    new_actum_id,
    new_chronicum_id,
)
from chronica_core import memory as memory_module


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


class _ClockAnHourBehind(datetime):
    """``datetime`` whose ``now`` is an hour behind (the system clock stepped back)."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return datetime.now(tz) - timedelta(hours=1)


def test_a_clock_stepping_back_never_moves_at_backwards(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    chronicum_id = new_chronicum_id()
    store.create(Chronicum(chronicum_id, "ardian", datetime.now().astimezone()))
    first = store.record(message(chronicum_id, "before the step"))
    monkeypatch.setattr(memory_module, "datetime", _ClockAnHourBehind)
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
