"""Timing: columns called in rounds, in an order shuffled each round, and many writers at once.

Every harness times its columns with :func:`time_interleaved`: each round calls every column
once, in an order drawn afresh from a seeded :class:`random.Random`, so no column always follows
the same neighbour (a heavy call leaves the next one a colder cache and a busier server) and a
load that drifts slows every column alike. The seed is printed by each harness and can be given
again (``--seed``) to repeat an order.
"""

from __future__ import annotations

import asyncio
import gc
import random
import secrets
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "MINIMUM_TIMED_ROUNDS",
    "AsyncWriter",
    "Closer",
    "Timing",
    "Writer",
    "new_seed",
    "quiet_collector",
    "run_tasks",
    "run_threads",
    "shuffled",
    "time_interleaved",
]

MINIMUM_TIMED_ROUNDS = 10
"""A time budget never cuts a measurement below this many timed rounds."""


@dataclass(frozen=True, slots=True)
class Timing:
    """Latency of one column: median and 90th percentile in nanoseconds over ``count`` calls.

    ``cpu_ns`` is the median client CPU of a call (``time.process_time`` before and after it:
    every thread of this process, so an asyncio store's worker threads count), or ``None``.
    """

    median_ns: float
    p90_ns: float
    count: int
    cpu_ns: float | None = None

    @classmethod
    def of(cls, samples: Sequence[int], cpu: Sequence[int] = ()) -> Timing:
        """Summarise ``samples`` (nanoseconds per call; at least one) and their ``cpu`` times."""
        cpu_ns = float(statistics.median(cpu)) if cpu else None
        if len(samples) == 1:
            return cls(float(samples[0]), float(samples[0]), 1, cpu_ns)
        p90 = statistics.quantiles(samples, n=10, method="inclusive")[8]
        return cls(float(statistics.median(samples)), float(p90), len(samples), cpu_ns)


def new_seed() -> int:
    """A fresh seed for the column order (printed, so that ``--seed`` can repeat it)."""
    return secrets.randbelow(2**31)


_Item = TypeVar("_Item")


def shuffled(items: Sequence[_Item], rng: random.Random) -> list[_Item]:
    """``items`` in an order drawn from ``rng`` (a new list)."""
    order = list(items)
    rng.shuffle(order)
    return order


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Collect garbage, then keep the cyclic collector off while timing (medians stay clean)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


Call = Callable[[int], object]
AsyncCall = Callable[[int], Awaitable[object]]


async def time_interleaved(
    operations: dict[str, Call],
    warmup: int,
    repeat: int,
    async_operations: dict[str, AsyncCall] | None = None,
    budget_seconds: float = float("inf"),
    rng: random.Random | None = None,
) -> dict[str, Timing]:
    """Time each operation ``repeat`` times after ``warmup`` untimed calls, interleaved.

    Each round calls every operation once, in an order ``rng`` shuffles anew for the round
    (``None``: a generator seeded at random). An operation gets its round number (below
    ``warmup + repeat``), to pick pre-built input. The ``async_operations`` are awaited inside
    their timed span; the sync ones run blocking on the event loop, which is idle meanwhile. The
    client CPU of each call is read around the timed span, not inside it, less what those
    readings cost by themselves.

    Bounded time: the warm-up ends early once it has used a tenth of ``budget_seconds`` (after one
    round), and the timed rounds end early once the whole budget is used (after
    :data:`MINIMUM_TIMED_ROUNDS`); each :class:`Timing` says how many calls it covers.

    Returns:
        Per operation name (of both dictionaries), its :class:`Timing` over the timed rounds.
    """
    order = rng if rng is not None else random.Random(new_seed())
    entries: list[tuple[str, Call | None, AsyncCall | None]] = [
        (name, operation, None) for name, operation in operations.items()
    ] + [(name, None, operation) for name, operation in (async_operations or {}).items()]
    samples: dict[str, list[int]] = {name: [] for name, _, _ in entries}
    cpu: dict[str, list[int]] = {name: [] for name, _, _ in entries}
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    reading = _clock_cost(clock, cpu_clock)
    began = time.perf_counter()
    timed_rounds = 0
    with quiet_collector():
        for round_number in range(warmup + repeat):
            spent = time.perf_counter() - began
            warming = round_number < warmup and not (round_number > 0 and spent > budget_seconds / 10)
            if not warming and timed_rounds >= min(repeat, MINIMUM_TIMED_ROUNDS) and spent > budget_seconds:
                break
            if not warming and timed_rounds == repeat:
                break
            for name, operation, async_operation in shuffled(entries, order):
                cpu_start = cpu_clock()
                if async_operation is None:
                    assert operation is not None
                    start = clock()
                    operation(round_number)
                    elapsed = clock() - start
                else:
                    start = clock()
                    await async_operation(round_number)
                    elapsed = clock() - start
                cpu_spent = max(0, cpu_clock() - cpu_start - reading)
                if not warming:
                    samples[name].append(elapsed)
                    cpu[name].append(cpu_spent)
            if not warming:
                timed_rounds += 1
    return {name: Timing.of(values, cpu[name]) for name, values in samples.items()}


def _clock_cost(clock: Callable[[], int], cpu_clock: Callable[[], int]) -> int:
    """The CPU the clock readings around a call cost by themselves (median of 101), to subtract."""
    costs = []
    for _ in range(101):
        cpu_start = cpu_clock()
        clock()
        clock()
        costs.append(cpu_clock() - cpu_start)
    return int(statistics.median(costs))


Writer = Callable[[int], object]
"""Performs write number ``n`` of one writer."""

Closer = Callable[[], object]
"""Releases what one writer opened; called in the writer's own thread (SQLite insists)."""

AsyncWriter = Callable[[int], Awaitable[object]]
"""Performs write number ``n`` of one asyncio writer."""


def _nothing() -> None:
    """A :data:`Closer` for writers that opened nothing."""


def run_threads(
    writers: int,
    make_writer: Callable[[int], tuple[Writer, Closer]],
    warmup: int,
    writes: int,
    when_warm: Callable[[], None] | None = None,
) -> float:
    """Start ``writers`` threads, each writing ``warmup`` then ``writes`` times; return timed seconds.

    ``make_writer(index)`` runs inside thread ``index`` before anything is timed (open a
    connection, build the acta) and returns the writer and its closer, which the same thread
    calls when done. The timed part starts when every thread has finished its warm-up writes (a
    barrier; ``when_warm`` runs once there, before the clock starts, e.g. to count connections);
    the result runs from the earliest thread's start to the latest thread's end, each taken by
    the thread itself (a main-thread clock could start late: with the GIL, the writers may run
    before the main thread wakes).

    Raises:
        RuntimeError: a writer failed (chained to its first exception).
    """
    barrier = threading.Barrier(writers, action=when_warm)
    failures: list[BaseException] = []
    spans: list[tuple[float, float]] = []

    def work(index: int) -> None:
        close: Closer = _nothing
        try:
            write, close = make_writer(index)
            for number in range(warmup):
                write(number)
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            failures.append(error)
            barrier.abort()
            _close_quietly(close, failures)
            return
        try:
            barrier.wait()
            start = time.perf_counter()
            for number in range(warmup, warmup + writes):
                write(number)
            spans.append((start, time.perf_counter()))
        except threading.BrokenBarrierError:
            pass
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            failures.append(error)
        _close_quietly(close, failures)

    threads = [threading.Thread(target=work, args=(index,), daemon=True) for index in range(writers)]
    with quiet_collector():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} writer thread(s) failed: {failures[0]!r}") from failures[0]
    return max(end for _, end in spans) - min(start for start, _ in spans)


def _close_quietly(close: Closer, failures: list[BaseException]) -> None:
    try:
        close()
    except Exception as error:  # noqa: BLE001 - reported by the main thread
        failures.append(error)


async def run_tasks(
    writers: int,
    make_writer: Callable[[int], AsyncWriter],
    warmup: int,
    writes: int,
) -> float:
    """The asyncio twin of :func:`run_threads`: ``writers`` concurrent tasks on one event loop.

    Raises:
        RuntimeError: a writer failed (chained to its first exception).
    """
    barrier = asyncio.Barrier(writers)
    failures: list[BaseException] = []
    spans: list[tuple[float, float]] = []

    async def work(index: int) -> None:
        try:
            write = make_writer(index)
            for number in range(warmup):
                await write(number)
        except Exception as error:  # noqa: BLE001 - reported by the main task
            failures.append(error)
            await barrier.abort()
            return
        try:
            await barrier.wait()
        except asyncio.BrokenBarrierError:
            return
        start = time.perf_counter()
        for number in range(warmup, warmup + writes):
            await write(number)
        spans.append((start, time.perf_counter()))

    with quiet_collector():
        outcomes = await asyncio.gather(*(work(index) for index in range(writers)), return_exceptions=True)
    failures += [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    if failures:
        raise RuntimeError(f"{len(failures)} writer task(s) failed: {failures[0]!r}") from failures[0]
    return max(end for _, end in spans) - min(start for start, _ in spans)
