"""chronica_core.loops.PerLoop: a resource per event loop, closed with its loop and at close().

The resource here is a plain object recording where it was opened, closed or dropped, so each
case can say exactly what happened in which loop.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from dataclasses import dataclass, field

import pytest

from chronica_core import StoreError
from chronica_core.loops import PerLoop

THREAD_TIMEOUT_SECONDS = 60.0
"""How long a case waits for a thread's loop (a guard against a hang, not a measurement)."""


@dataclass(eq=False)
class Resource:
    """What a driver's pool stands for: opened in one loop, then closed in it or dropped."""

    opened_in: asyncio.AbstractEventLoop | None
    closed_in: list[asyncio.AbstractEventLoop | None] = field(default_factory=list)
    dropped: int = 0


class Resources:
    """A ``PerLoop`` of :class:`Resource` and every resource it opened."""

    def __init__(self, *, close_with_tasks: bool = False, opening_pause: float = 0.0) -> None:
        self.opened: list[Resource] = []
        self.opening_pause = opening_pause
        self.per_loop: PerLoop[Resource] = PerLoop(
            "test: async store", self.open, self.close, self.drop, close_with_tasks=close_with_tasks
        )

    async def open(self) -> Resource:
        await asyncio.sleep(self.opening_pause)  # lets other tasks arrive while it opens
        resource = Resource(asyncio.get_running_loop())
        self.opened.append(resource)
        return resource

    async def close(self, resource: Resource) -> None:
        await asyncio.sleep(0)  # awaiting works: the loop is still running
        resource.closed_in.append(asyncio.get_running_loop())
        resource.opened_in = None  # holds no loop once closed

    def drop(self, resource: Resource) -> None:
        resource.dropped += 1
        resource.opened_in = None


@pytest.mark.parametrize("close_with_tasks", [False, True], ids=["async-generator", "task"])
def test_each_asyncio_run_opens_its_own_and_closes_it_in_that_loop(close_with_tasks: bool) -> None:
    resources = Resources(close_with_tasks=close_with_tasks)
    loops: list[asyncio.AbstractEventLoop] = []

    async def use() -> None:
        loops.append(asyncio.get_running_loop())
        first = await resources.per_loop.get()
        assert await resources.per_loop.get() is first  # one per loop
        assert len(resources.per_loop) == 1

    for _ in range(3):
        asyncio.run(use())
        assert len(resources.per_loop) == 0  # closed when the loop closed
    assert len(resources.opened) == 3
    assert [resource.closed_in for resource in resources.opened] == [[loop] for loop in loops]
    assert [resource.dropped for resource in resources.opened] == [0, 0, 0]


def test_tasks_arriving_together_in_a_new_loop_open_one_resource() -> None:
    resources = Resources(opening_pause=0.01)

    async def together() -> set[int]:
        got = await asyncio.gather(*(resources.per_loop.get() for _ in range(50)))
        return {id(resource) for resource in got}

    assert len(asyncio.run(together())) == 1
    assert len(resources.opened) == 1


def test_loops_in_two_threads_at_once_get_one_each() -> None:
    resources = Resources(opening_pause=0.01)
    both = threading.Barrier(2, timeout=THREAD_TIMEOUT_SECONDS)
    seen: list[Resource] = []
    counts: list[int] = []

    def in_thread() -> None:
        async def body() -> None:
            seen.append(await resources.per_loop.get())
            await asyncio.to_thread(both.wait)  # both loops hold theirs now
            counts.append(len(resources.per_loop))
            await asyncio.to_thread(both.wait)  # neither closes before both counted

        asyncio.run(body())

    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT_SECONDS)
    assert len(seen) == 2 and seen[0] is not seen[1]
    assert counts == [2, 2]
    assert [len(resource.closed_in) for resource in seen] == [1, 1]
    assert len(resources.per_loop) == 0


def test_a_loop_closed_without_closing_its_generators_is_dropped_and_not_held() -> None:
    resources = Resources()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(resources.per_loop.get())
    loop.close()  # no shutdown_asyncgens: the resource cannot be awaited any more
    (resource,) = resources.opened
    assert resource.closed_in == [] and resource.dropped == 0
    gone = weakref.ref(loop)
    del loop
    asyncio.run(resources.per_loop.get())  # a new loop's first call drops the closed loop's
    assert resource.dropped == 1
    gc.collect()
    assert gone() is None, "the store keeps a closed loop alive"


def test_close_closes_a_running_loops_resource_and_an_idle_ones_each_in_its_own_loop() -> None:
    resources = Resources()
    idle = asyncio.new_event_loop()
    idle.run_until_complete(resources.per_loop.get())  # then not running: between two runs
    used, release = threading.Event(), threading.Event()
    running_loop: list[asyncio.AbstractEventLoop] = []

    def still_running() -> None:
        async def body() -> str:
            running_loop.append(asyncio.get_running_loop())
            await resources.per_loop.get()
            used.set()
            await asyncio.to_thread(release.wait, THREAD_TIMEOUT_SECONDS)
            try:
                await resources.per_loop.get()
            except StoreError as error:
                return str(error)
            return "no error"

        outcome.append(asyncio.run(body()))

    outcome: list[str] = []
    thread = threading.Thread(target=still_running)
    thread.start()
    assert used.wait(THREAD_TIMEOUT_SECONDS)
    asyncio.run(resources.per_loop.close())
    release.set()
    thread.join(THREAD_TIMEOUT_SECONDS)
    idle.close()
    in_idle, in_running = resources.opened
    assert in_idle.closed_in == [idle] and in_idle.dropped == 0  # the idle loop ran to close it
    assert in_running.closed_in == running_loop and in_running.dropped == 0  # in its own loop
    assert outcome == ["test: async store: the store is closed"]
    with pytest.raises(StoreError, match=r"^test: async store: the store is closed$"):
        asyncio.run(resources.per_loop.get())
    asyncio.run(resources.per_loop.close())  # again: nothing more to do
    assert [resource.closed_in for resource in resources.opened] == [[idle], running_loop]


def test_close_while_a_loop_opens_closes_the_fresh_resource() -> None:
    resources = Resources(opening_pause=0.05)

    async def scenario() -> None:
        opening = asyncio.create_task(resources.per_loop.get())
        await asyncio.sleep(0.01)  # it is opening now
        await resources.per_loop.close()
        with pytest.raises(StoreError, match=r"the store is closed$"):
            await opening

    asyncio.run(scenario())
    (resource,) = resources.opened
    assert len(resource.closed_in) == 1
