"""Chronicarius.follow's own rules on the memory store: arguments, the blocking timeout, and
wake-ups without polling (counted calls, never timed)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    Chronicarius,
    InvalidQuery,
    MemoryStore,
)

GUARD_SECONDS = 30.0


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


class CountingStore(MemoryStore):
    """The memory store, counting the follow capability's calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.waiting = threading.Event()

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        self.calls.append("acta_after")
        return super().acta_after(chronicum_id, after, limit)

    def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        self.calls.append("wait_for_acta")
        self.waiting.set()
        super().wait_for_acta(chronicum_id, after, timeout)


@pytest.mark.parametrize("interval", [0, -1, 3601, "0.5", True, None])
def test_a_poll_interval_out_of_range_is_refused_naming_it(interval: Any) -> None:
    chronicarius = Chronicarius(MemoryStore())
    chronicarius.record_actum("ardian", _message("lunch", "hello"))
    with pytest.raises(InvalidQuery) as refused:
        chronicarius.follow("ardian", "lunch", poll_interval=interval)
    assert refused.value.field == "poll_interval"


def test_the_blocking_generator_ends_after_its_timeout_without_news() -> None:
    chronicarius = Chronicarius(MemoryStore())
    chronicarius.record_actum("ardian", _message("lunch", "hello"))
    assert list(chronicarius.follow("ardian", "lunch", timeout=0.05)) == []


def test_a_memory_follower_waits_once_until_woken_never_polling() -> None:
    store = CountingStore()
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _message("lunch", "hello"))
    follower = chronicarius.follow("ardian", "lunch", after=first.id, timeout=GUARD_SECONDS)
    got: list[str] = []
    thread = threading.Thread(target=lambda: got.append(next(follower).content), daemon=True)
    thread.start()
    assert store.waiting.wait(GUARD_SECONDS)
    idle = list(store.calls)
    chronicarius.record_actum("ardian", _message("lunch", "news"))
    thread.join(GUARD_SECONDS)
    follower.close()
    assert idle == ["acta_after", "wait_for_acta"]  # one read, then one wait until the write
    assert got == ["news"]
    assert store.calls == ["acta_after", "wait_for_acta", "acta_after"]


class WakesAtOnce(AsyncMemoryStore):
    """An asyncio store whose wait never waits: every wake-up brings nothing new."""

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        return None


def test_an_asyncio_follower_never_spins_on_a_store_that_wakes_at_once() -> None:
    """Found by trying: such a store once kept the follower from ever yielding to its loop."""
    outcome: list[str] = []

    async def follow() -> None:
        store = WakesAtOnce()
        chronicarius = AsyncChronicarius(store)
        first = await chronicarius.record_actum("ardian", _message("lunch", "hello"))
        follower = chronicarius.follow("ardian", "lunch", after=first.id, poll_interval=0.01)
        try:
            await asyncio.wait_for(anext(follower), 0.2)
        except TimeoutError:
            outcome.append("timed out, as nothing came")

    thread = threading.Thread(target=asyncio.run, args=(follow(),), daemon=True)
    thread.start()
    thread.join(GUARD_SECONDS)
    assert not thread.is_alive(), "the follower spun without yielding to its event loop"
    assert outcome == ["timed out, as nothing came"]
