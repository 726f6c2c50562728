"""Chronicarius.follow's own rules on the memory store: arguments, the blocking timeout, and
wake-ups without polling (counted calls, never timed)."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    Chronicarius,
    InvalidQuery,
    MemoryStore,
    StoreError,
)
from chronica_core.follow import FOLLOW_READS, FollowReads
from chronica_core.rules import MAX_FOLLOW_TIMEOUT

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


@pytest.mark.parametrize(
    "timeout", [math.nan, -1, -0.5, "5", True, False, 10**30, MAX_FOLLOW_TIMEOUT + 1, -math.inf, [1]]
)
def test_a_timeout_out_of_range_is_refused_by_the_call_naming_it(timeout: Any) -> None:
    """Found by trying: NaN hung for ever, inf and 10**30 overflowed, "5" failed in the generator."""
    store = CountingStore()
    chronicarius = Chronicarius(store)
    chronicarius.record_actum("ardian", _message("lunch", "hello"))
    with pytest.raises(InvalidQuery) as refused:
        chronicarius.follow("ardian", "lunch", timeout=timeout)
    assert refused.value.field == "timeout"
    assert repr(timeout) in str(refused.value)
    assert store.calls == []  # refused before anything was read or waited for


def test_a_timeout_of_zero_reads_once_and_ends_at_once_without_news() -> None:
    store = CountingStore()
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _message("lunch", "hello"))
    second = chronicarius.record_actum("ardian", _message("lunch", "again"))
    assert [actum.id for actum in chronicarius.follow("ardian", "lunch", after=first.id, timeout=0)] == [
        second.id
    ]
    assert list(chronicarius.follow("ardian", "lunch", timeout=0)) == []
    assert "wait_for_acta" not in store.calls


@pytest.mark.parametrize("timeout", [math.inf, MAX_FOLLOW_TIMEOUT, 1])
def test_an_infinite_or_long_timeout_waits_until_woken(timeout: float) -> None:
    """Found by trying: inf overflowed the memory store's wait instead of meaning no limit."""
    store = CountingStore()
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _message("lunch", "hello"))
    follower = chronicarius.follow("ardian", "lunch", after=first.id, timeout=timeout)
    got: list[str] = []
    errors: list[BaseException] = []

    def take() -> None:
        try:
            got.append(next(follower).content)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    assert store.waiting.wait(GUARD_SECONDS)
    chronicarius.record_actum("ardian", _message("lunch", "news"))
    thread.join(GUARD_SECONDS)
    follower.close()
    assert errors == []
    assert got == ["news"]


def test_closing_the_memory_store_ends_a_waiting_blocking_follower() -> None:
    """Found by trying: the follower kept waiting after ``close`` (for ever, with no timeout)."""
    store = CountingStore()
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _message("lunch", "hello"))
    follower = chronicarius.follow("ardian", "lunch", after=first.id)
    outcome: list[object] = []

    def take() -> None:
        try:
            outcome.append(next(follower))
        except StopIteration:
            outcome.append("ended without news")
        except StoreError as error:
            outcome.append(error)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    assert store.waiting.wait(GUARD_SECONDS)
    store.close()
    thread.join(GUARD_SECONDS)
    assert not thread.is_alive(), "the follower still waits after close"
    assert len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, StoreError), error
    assert (error.where, error.detail) == ("memory: store", "the store is closed")


class AsyncWaiting(AsyncMemoryStore):
    """The asyncio memory store, telling when a follower waits."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        super().__init__(store=store)
        self.waiting = asyncio.Event()

    async def wait_for_acta(self, chronicum_id: str, after: str | None, timeout: float | None) -> None:
        self.waiting.set()
        await super().wait_for_acta(chronicum_id, after, timeout)


@pytest.mark.parametrize("shared", [False, True], ids=["own-store", "shared-store"])
def test_closing_the_asyncio_memory_store_ends_a_waiting_follower(shared: bool) -> None:
    """Found by trying: ``async for`` kept waiting after ``await store.close()``."""

    async def follow() -> tuple[object, MemoryStore]:
        sync_store = MemoryStore()
        store = AsyncWaiting(sync_store if shared else None)
        chronicarius = AsyncChronicarius(store)
        first = await chronicarius.record_actum("ardian", _message("lunch", "hello"))

        async def take() -> object:
            try:
                async for actum in chronicarius.follow("ardian", "lunch", after=first.id):
                    return actum
            except StoreError as error:
                return error
            return "ended without news"

        task = asyncio.create_task(take())
        await asyncio.wait_for(store.waiting.wait(), GUARD_SECONDS)
        await store.close()
        try:
            return await asyncio.wait_for(task, GUARD_SECONDS), sync_store
        except TimeoutError:
            return "still waiting after close", sync_store

    outcome, sync_store = asyncio.run(follow())
    assert isinstance(outcome, StoreError), outcome
    assert (outcome.where, outcome.detail) == ("memory: async store", "the store is closed")
    if shared:  # the shared store is the caller's: still open, and nothing of the waiter is left
        assert [actum.content for actum in sync_store.acta("lunch", ActaQuery())] == ["hello"]
        assert sync_store._entries["lunch"].wakers == set()


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


# --- how many followers read at once --------------------------------------------------------------
# Each follower's read takes one of the store's turns (FOLLOW_READS of them), so a hundred followers
# woken together take a handful of the store's connections, not a hundred. The stores below hold
# every read until released and count how many are held at once.


class HeldReads(MemoryStore):
    """The memory store, holding each ``acta_after`` until released (or until more than the
    bound are held, so a store without the bound never waits) and counting how many are held."""

    def __init__(self) -> None:
        super().__init__()
        self.condition = threading.Condition()
        self.active = 0
        self.most = 0
        self.released = False

    def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        with self.condition:
            self.active += 1
            self.most = max(self.most, self.active)
            self.condition.notify_all()
            self.condition.wait_for(lambda: self.released or self.active > FOLLOW_READS, GUARD_SECONDS)
        try:
            return super().acta_after(chronicum_id, after, limit)
        finally:
            with self.condition:
                self.active -= 1
                self.condition.notify_all()


def test_blocking_followers_of_one_store_read_at_most_follow_reads_at_once() -> None:
    store = HeldReads()
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _message("lunch", "hello"))
    second = chronicarius.record_actum("ardian", _message("lunch", "a table for four?"))
    seen: list[list[str]] = []

    def follower() -> None:
        got = chronicarius.follow("ardian", "lunch", after=first.id, timeout=GUARD_SECONDS)
        seen.append([next(got).id])
        got.close()

    threads = [threading.Thread(target=follower) for _ in range(20)]
    for thread in threads:
        thread.start()
    with store.condition:
        assert store.condition.wait_for(lambda: store.active >= FOLLOW_READS, GUARD_SECONDS)
        store.condition.wait_for(lambda: store.active > FOLLOW_READS, 0.2)  # room for a fifth to enter
        held = store.active
        store.released = True
        store.condition.notify_all()
    for thread in threads:
        thread.join(GUARD_SECONDS)
    assert held == FOLLOW_READS
    assert store.most == FOLLOW_READS
    assert seen == [[second.id]] * 20


class HeldAsyncReads(AsyncMemoryStore):
    """The asyncio memory store, holding each ``acta_after`` until ``release`` is set, counting."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.active = 0
        self.most = 0

    async def acta_after(self, chronicum_id: str, after: str | None, limit: int) -> list[Actum] | None:
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            await self.release.wait()
            return await super().acta_after(chronicum_id, after, limit)
        finally:
            self.active -= 1


async def _settle() -> None:
    """Let every task run until it waits on something that is not the loop itself."""
    for _ in range(200):
        await asyncio.sleep(0)


def test_asyncio_followers_of_one_store_read_at_most_follow_reads_at_once_per_loop() -> None:
    async def scenario() -> None:
        store = HeldAsyncReads()
        chronicarius = AsyncChronicarius(store)
        first = await chronicarius.record_actum("ardian", _message("lunch", "hello"))
        second = await chronicarius.record_actum("ardian", _message("lunch", "a table for four?"))
        followers = [chronicarius.follow("ardian", "lunch", after=first.id) for _ in range(20)]
        for follower in followers:
            await follower.start()
        reads = [asyncio.create_task(anext(follower)) for follower in followers]
        await _settle()
        assert store.active == FOLLOW_READS
        store.release.set()
        assert [actum.id for actum in await asyncio.gather(*reads)] == [second.id] * 20
        assert store.most == FOLLOW_READS

    asyncio.run(scenario())


def test_cancelled_asyncio_followers_give_their_turns_back() -> None:
    async def scenario() -> None:
        store = HeldAsyncReads()
        chronicarius = AsyncChronicarius(store)
        first = await chronicarius.record_actum("ardian", _message("lunch", "hello"))
        followers = [chronicarius.follow("ardian", "lunch", after=first.id) for _ in range(10)]
        for follower in followers:
            await follower.start()
        reads = [asyncio.create_task(anext(follower)) for follower in followers]
        await _settle()
        assert store.active == FOLLOW_READS  # four reading, six waiting for a turn
        for read in reads:
            read.cancel()
        await asyncio.gather(*reads, return_exceptions=True)
        assert store.active == 0
        again = [chronicarius.follow("ardian", "lunch", after=first.id) for _ in range(FOLLOW_READS)]
        for follower in again:
            await follower.start()
        more = [asyncio.create_task(anext(follower)) for follower in again]
        await _settle()
        assert store.active == FOLLOW_READS  # every turn was given back
        for read in more:
            read.cancel()
        await asyncio.gather(*more, return_exceptions=True)

    asyncio.run(scenario())


def test_one_store_bounds_the_followers_of_one_event_loop_after_another() -> None:
    # an asyncio semaphore belongs to the loop that first waited on it: one shared by every loop
    # would refuse the second asyncio.run()'s followers ("bound to a different event loop")
    store = HeldAsyncReads()
    chronicarius = AsyncChronicarius(store)

    async def crowd() -> list[str]:
        store.release = asyncio.Event()
        first = await chronicarius.record_actum("ardian", _message("lunch", "hello"))
        second = await chronicarius.record_actum("ardian", _message("lunch", "a table for four?"))
        followers = [chronicarius.follow("ardian", "lunch", after=first.id) for _ in range(FOLLOW_READS + 2)]
        reads = [asyncio.create_task(anext(follower)) for follower in followers]
        await _settle()
        held = store.active
        store.release.set()
        got = [actum.id for actum in await asyncio.gather(*reads)]
        assert got == [second.id] * len(followers)
        return [str(held)]

    assert asyncio.run(crowd()) == [str(FOLLOW_READS)]
    assert asyncio.run(crowd()) == [str(FOLLOW_READS)]


def test_follow_reads_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="limit"):
        FollowReads(0)
