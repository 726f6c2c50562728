"""The benchmark harness: Chronica's stores beside their raw drivers, at growing history sizes.

Run ``python -m benchmarks.run --store URL [--sizes 100,10000,100000] [--option k=v ...]
[--repeat N] [--json FILE]``. For each store URL it prints, per history size, the median and p90
latency of ``Chronicarius.record_actum`` and of ``Chronicarius.get_acta(owner, id, last_n=20,
actum_kinds=[message])`` beside the backend's raw baseline (``benchmarks/baselines/<backend>.py``)
doing the same work, and their ratio; how flat the last-20 read stays from the smallest to the
largest history; the total throughput of 40 writer threads on distinct chronica, store against
raw; and, when the backend has an asyncio store, the async flavour of each operation (ratio to
sync) and 40 concurrent tasks against 40 threads. Where the store has the capabilities, it also
times a batch of 20 acta (``Chronicarius.record_acta``) against one ``record_actum``, and the first
page of an owner's ``list_chronica`` with 100 and with 100,000 chronica held by other owners.
``--phases`` picks what runs. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import platform
import secrets
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.baselines import AsyncBaseline, Baseline, load_baseline_class
from chronica_core import (
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncStore,
    Chronicarius,
    Chronicum,
    Store,
    new_actum_id,
    open_async_store,
    open_store,
)
from chronica_core.capabilities import BATCH, LISTING, store_capabilities
from chronica_core.hookspecs import Backend
from chronica_core.registry import registry
from chronica_core.story import DINNER_STORY

OWNER = "bench-owner"
"""The owner of every chronicum the harness writes."""

LAST_N = 20
"""How many messages the measured context window holds."""


FLAT_LIMIT = 1.5
"""A last-20 read counts as flat when its median at the largest history is at most this many
times its median at the smallest."""

BATCH_SIZE = 20
"""How many acta the timed ``record_acta`` batch holds (``--batch-size``)."""

BATCH_LIMIT = 3.0
"""A batch of :data:`BATCH_SIZE` acta meets its target when its median is at most this many times
one ``record_actum``'s (on memory, PostgreSQL through psycopg and SQLite through SQLAlchemy)."""

LIST_LIMIT = 50
"""The page size of the timed ``list_chronica``."""

LISTED = 20
"""How many chronica the listed owner holds (``--owned``); each other owner holds as many."""

OTHERS = (100, 100_000)
"""How many chronica other owners hold, per listing measurement (``--others``)."""

LISTING_FLAT_LIMIT = 1.3
"""Listing meets its target when its median with the most other owners' chronica is at most this
many times its median with the fewest."""

PEER_LIMIT = 1.3
"""chronica-sqlalchemy on PostgreSQL (``postgresql+psycopg://``) meets its target when its read
and append medians are at most this many times chronica-postgres's (``postgresql://``), measured
in the same run."""

PHASES = ("history", "concurrent", "batch", "listing")

SHARED_WRITERS = "chronica threads, one chronicum"
"""The concurrent row of every writer thread appending to one shared chronicum (the others each
write to a chronicum of their own): acta/s under commit-ordered visibility."""
"""What a run can measure (``--phases``): latency per history size (and flatness), many writers,
a batch against one append, and listing against other owners' chronica."""


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class Timing:
    """Latency of one operation: median and 90th percentile in nanoseconds over ``count`` calls."""

    median_ns: float
    p90_ns: float
    count: int

    @classmethod
    def of(cls, samples: Sequence[int]) -> Timing:
        """Summarise ``samples`` (nanoseconds per call; at least one)."""
        if len(samples) == 1:
            return cls(float(samples[0]), float(samples[0]), 1)
        p90 = statistics.quantiles(samples, n=10, method="inclusive")[8]
        return cls(float(statistics.median(samples)), float(p90), len(samples))


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """One operation at one history size.

    Attributes:
        operation: ``"record_actum"`` or ``"get_acta last 20 messages"``.
        flavour: ``"sync"`` or ``"async"``.
        history: how many acta the chronicum held when the measurement started.
        store: the Chronicarius call over the store.
        raw: per raw variant, the baseline doing the same work; on async rows, the variant's
            asyncio twin (its ``async_variants``), where it has one.
        ratio: store median / raw median per variant; async rows add ``"sync"`` (async store /
            sync store) and, with an asyncio raw variant, ``"driver"`` (the first such variant's
            async median / its sync median: what the driver's own asyncio API costs).
    """

    operation: str
    flavour: str
    history: int
    store: Timing
    raw: dict[str, Timing] = field(default_factory=dict)
    ratio: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConcurrentRow:
    """Many writers at once, each on its own chronicum (all on one in the :data:`SHARED_WRITERS` row).

    Attributes:
        writer: ``"chronica threads"``, ``"chronica async tasks"``, ``"<raw variant> threads"`` or
            :data:`SHARED_WRITERS`.
        writers: how many threads or tasks.
        writes: timed writes in total (all writers).
        seconds: wall-clock time from the common start until the last writer finished.
        per_second: ``writes / seconds``.
    """

    writer: str
    writers: int
    writes: int
    seconds: float
    per_second: float


@dataclass(frozen=True, slots=True)
class BatchRow:
    """A batch against one append, timed in the same rounds, each into a chronicum of its own.

    Attributes:
        size: acta per batch.
        single: ``Chronicarius.record_actum`` of one actum.
        batch: ``Chronicarius.record_acta`` of ``size`` acta.
        ratio: batch median / single median.
    """

    size: int
    single: Timing
    batch: Timing
    ratio: float


@dataclass(frozen=True, slots=True)
class ListingRow:
    """The first page of one owner's chronica while other owners hold ``others`` chronica.

    Attributes:
        others: chronica held by other owners when it was timed.
        owned: chronica the listed owner holds (all on the first page).
        limit: the page size asked for.
        store: ``Chronicarius.list_chronica(owner, limit=limit)``.
    """

    others: int
    owned: int
    limit: int
    store: Timing


@dataclass(frozen=True, slots=True)
class Verdict:
    """One performance target: what it says, the measured value and whether it holds."""

    target: str
    value: float
    holds: bool


@dataclass(slots=True)
class Report:
    """Everything measured for one store URL (the ``--json`` file holds a list of these)."""

    store_url: str
    backend: str
    options: dict[str, str]
    sizes: list[int]
    repeat: int
    python: str
    started_at: str
    machine: str = ""
    raw_variants: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    flat: dict[str, float] = field(default_factory=dict)
    concurrent: list[ConcurrentRow] = field(default_factory=list)
    batch: list[BatchRow] = field(default_factory=list)
    listing: list[ListingRow] = field(default_factory=list)
    listing_flat: float | None = None
    targets: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0


# --------------------------------------------------------------------------------------------
# Acta


def story_actum(chronicum_id: str, index: int, *, with_id: bool = False, at: datetime | None = None) -> Actum:
    """Return row ``index`` (cycled) of the dinner story as an actum of ``chronicum_id``.

    With ``with_id`` it gets a fresh id (what Chronicarius hands the store); ``at`` is kept as given.
    """
    row = DINNER_STORY[index % len(DINNER_STORY)]
    actum_id = new_actum_id() if with_id else ""
    return Actum(chronicum_id, row.kind, row.actor_kind, row.actor, row.content, id=actum_id, at=at)


def history(chronicum_id: str, size: int) -> list[Actum]:
    """Return ``size`` acta for a fill: the dinner story cycled, ids set, ``at`` one microsecond apart."""
    start = datetime.now(UTC) - timedelta(microseconds=size)
    return [
        story_actum(chronicum_id, index, with_id=True, at=start + timedelta(microseconds=index))
        for index in range(size)
    ]


def messages_in(size: int) -> int:
    """How many of the first ``size`` story acta are messages."""
    per_cycle = sum(1 for row in DINNER_STORY if row.kind is ActumKind.MESSAGE)
    full, rest = divmod(size, len(DINNER_STORY))
    return full * per_cycle + sum(1 for row in DINNER_STORY[:rest] if row.kind is ActumKind.MESSAGE)


def fresh_id(label: str) -> str:
    """Return a chronicum id no other run uses, e.g. ``bench-100000-3f9a1c2e``."""
    return f"bench-{label}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------------------------
# Timing


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


STORE = ""
"""Key of the store's (sync Chronicarius) operation among the timed operations."""

ASYNC_STORE = "\x00async"
"""Key of the ``AsyncChronicarius`` operation among the timed operations."""

ASYNC_RAW = "\x00async raw "
"""Prefix of an asyncio raw variant's key (``ASYNC_RAW + name``) among the timed operations."""


MINIMUM_TIMED_ROUNDS = 10
"""A time budget never cuts a measurement below this many timed rounds."""

CONCURRENT_ROUNDS = 5
"""Interleaved rounds of the many-writer rows by default. One round of 40 writers x 50 writes
lasts about half a second on PostgreSQL, and single rounds of the same row differ by up to 1.6x
on a quiet 2-CPU machine; each row reports its median."""


async def time_interleaved(
    operations: dict[str, Callable[[int], object]],
    warmup: int,
    repeat: int,
    async_operations: dict[str, Callable[[int], Awaitable[object]]] | None = None,
    budget_seconds: float = float("inf"),
) -> dict[str, Timing]:
    """Time each operation ``repeat`` times after ``warmup`` untimed calls, interleaved.

    Each round calls every operation once (the starting one rotating), so drift on a busy machine
    hits all columns alike. An operation gets its round number (below ``warmup + repeat``), to
    pick pre-built input. The ``async_operations`` (an async store's calls) are awaited inside
    their timed span; the sync ones run blocking on the event loop, which is idle meanwhile.

    Bounded time: the warm-up ends early once it has used a tenth of ``budget_seconds`` (after one
    round), and the timed rounds end early once the whole budget is used (after
    :data:`MINIMUM_TIMED_ROUNDS`); each :class:`Timing` says how many calls it covers.

    Returns:
        Per operation name (of both dictionaries), its :class:`Timing` over the timed rounds.
    """
    awaited = async_operations or {}
    entries: list[tuple[str, Callable[[int], object] | None, Callable[[int], Awaitable[object]] | None]] = [
        (name, operation, None) for name, operation in operations.items()
    ] + [(name, None, operation) for name, operation in awaited.items()]
    samples: dict[str, list[int]] = {name: [] for name, _, _ in entries}
    clock = time.perf_counter_ns
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
            shift = round_number % len(entries)
            for name, operation, async_operation in entries[shift:] + entries[:shift]:
                if async_operation is None:
                    assert operation is not None
                    start = clock()
                    operation(round_number)
                    elapsed = clock() - start
                else:
                    start = clock()
                    await async_operation(round_number)
                    elapsed = clock() - start
                if not warming:
                    samples[name].append(elapsed)
            if not warming:
                timed_rounds += 1
    return {name: Timing.of(values) for name, values in samples.items()}


Writer = Callable[[int], object]
"""Performs write number ``n`` of one writer."""

Closer = Callable[[], object]
"""Releases what one writer opened; called in the writer's own thread (SQLite insists)."""


def _nothing_to_close() -> None:
    """A :data:`Closer` for writers that opened nothing."""


def run_threads(
    writers: int, make_writer: Callable[[int], tuple[Writer, Closer]], warmup: int, writes: int
) -> float:
    """Start ``writers`` threads, each writing ``warmup`` then ``writes`` times; return timed seconds.

    ``make_writer(index)`` runs inside thread ``index`` before anything is timed (open a
    connection, create the chronicum, build the acta) and returns the writer and its closer, which
    the same thread calls when done. The timed part starts when every thread has
    finished its warm-up writes (a barrier); the result runs from the earliest thread's start to
    the latest thread's end, each taken by the thread itself (a main-thread clock could start late:
    with the GIL, the writers may run before the main thread wakes).

    Raises:
        RuntimeError: a writer failed (chained to its first exception).
    """
    barrier = threading.Barrier(writers)
    failures: list[BaseException] = []
    spans: list[tuple[float, float]] = []

    def work(index: int) -> None:
        close: Closer = _nothing_to_close
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


AsyncWriter = Callable[[int], Awaitable[object]]


async def run_tasks(
    writers: int, make_writer: Callable[[int], AsyncWriter], warmup: int, writes: int
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


# --------------------------------------------------------------------------------------------
# Raw baselines


class Baselines:
    """The raw baseline of one backend, opened with the store's URL and options.

    Args:
        baseline_class: the module's ``RawBaseline``.
        url: the store URL.
        options: the ``--option`` pairs.
    """

    def __init__(self, baseline_class: type[Any], url: str, options: dict[str, str]) -> None:
        self.baseline_class = baseline_class
        self.url = url
        self.options = options
        self.main: Any = baseline_class(url, **options)
        variants: dict[str, Baseline] | None = getattr(self.main, "variants", None)
        if variants:
            self.variants: dict[str, Baseline] = dict(variants)
        else:
            self.variants = {str(getattr(self.main, "name", "raw")): self.main}
        self.thread_safe = bool(getattr(self.main, "thread_safe", False))
        self.fills_store = bool(getattr(self.main, "fills_store", True))
        async_variants: dict[str, AsyncBaseline] | None = getattr(self.main, "async_variants", None)
        self.async_variants: dict[str, AsyncBaseline] = {
            name: variant for name, variant in (async_variants or {}).items() if name in self.variants
        }

    @property
    def loader(self) -> Baseline:
        """The baseline that prepares and fills chronica: the object itself, else its first variant."""
        if all(hasattr(self.main, method) for method in ("prepare", "fill")):
            loader: Baseline = self.main
            return loader
        return next(iter(self.variants.values()))

    def prepare_everywhere(
        self, chronicum_id: str, acta: Sequence[Actum] | None, variant: str | None = None
    ) -> None:
        """Create ``chronicum_id`` and fill it with ``acta`` (``None``: create only) for every variant.

        Once when the variants share the store's tables (``fills_store``), else in each variant.
        ``variant``: the only one that will write there (a writer thread's); created through it
        when it has a ``prepare`` of its own, so that the thread opens no other connection.
        """
        own = None if variant is None or acta else getattr(self.variants[variant], "prepare", None)
        if own is not None and self.fills_store:
            own(chronicum_id, OWNER)
            return
        targets = [self.loader] if self.fills_store else list(self.variants.values())
        for baseline in targets:
            baseline.prepare(chronicum_id, OWNER)
            if acta:
                baseline.fill(chronicum_id, acta)

    def fill_chronica(self, chronica: Sequence[Chronicum]) -> bool:
        """Bulk-load ``chronica`` through the baseline's ``fill_chronica``; whether it has one.

        Only when the baseline writes the store's own tables (``fills_store``).
        """
        fill: Callable[[Sequence[Chronicum]], object] | None = getattr(self.main, "fill_chronica", None)
        if fill is None or not self.fills_store:
            return False
        fill(chronica)
        return True

    def for_round(self) -> Baselines:
        """A fresh one with the same class, URL and options: its connections are its own."""
        return Baselines(self.baseline_class, self.url, self.options)

    def for_thread(self) -> Baselines:
        """This object when it is thread-safe, else a fresh one (with its own connections)."""
        return self if self.thread_safe else self.for_round()

    def close(self) -> None:
        """Close the baseline (which closes its variants), or each variant when it has no ``close``."""
        if hasattr(self.main, "close"):
            self.main.close()
            return
        for baseline in self.variants.values():
            baseline.close()

    def close_async_variants(self, runner: asyncio.Runner) -> None:
        """Close the asyncio twins in ``runner``'s loop, where they were opened."""
        for variant in self.async_variants.values():
            runner.run(variant.close())


# --------------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True, slots=True)
class Filled:
    """The chronica filled to ``size`` acta for one history size.

    Attributes:
        size: the history size.
        chronicum_id: every sync column reads it; the store's appends go into it.
        async_chronicum_id: the async store reads it (the same one when the baseline fills the
            store's tables).
        append_ids: per raw variant and for the async store (key :data:`ASYNC_STORE`), the
            chronicum its appends go into: a copy of the same size of its own, so no two writers
            share a chronicum (a store may cache a chronicum's newest position, and a write behind
            another writer's back would cost it a retry the steady state never pays).
    """

    size: int
    chronicum_id: str
    async_chronicum_id: str
    append_ids: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Settings:
    """What to run (from the command line)."""

    sizes: list[int]
    options: dict[str, str]
    repeat: int
    warmup: int
    writers: int
    writes_per_writer: int
    run_async: bool
    max_seconds: float = float("inf")
    phases: tuple[str, ...] = PHASES
    batch_size: int = BATCH_SIZE
    others: tuple[int, ...] = OTHERS
    owned: int = LISTED
    concurrent_rounds: int = CONCURRENT_ROUNDS
    """How many interleaved rounds of the many-writer rows (each row reports its median)."""


class StoreBench:
    """Measures one store URL and fills in a :class:`Report`.

    Args:
        url: the store URL.
        settings: what to run.
    """

    def __init__(self, url: str, settings: Settings) -> None:
        self.url = url
        self.settings = settings
        self.backend: Backend = registry().backend_for(url)
        self.report = Report(
            store_url=url,
            backend=self.backend.name,
            options=dict(settings.options),
            sizes=list(settings.sizes),
            repeat=settings.repeat,
            python=f"{platform.python_implementation()} {platform.python_version()}",
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            machine=_machine(),
        )
        self.store: Store | None = None
        self.chronicarius: Chronicarius | None = None
        self.async_store: AsyncStore | None = None
        self.async_chronicarius: AsyncChronicarius | None = None
        self.baselines: Baselines | None = None
        self._concurrent_seconds: dict[str, list[float]] = {}
        """Per many-writer row, its seconds in each round it did not fail."""

    def note(self, text: str) -> None:
        """Add a line to the report's notes and show it now (on stderr)."""
        self.report.notes.append(text)
        print(f"  note: {text}", file=sys.stderr, flush=True)

    def run(self) -> Report:
        """Run every measurement and return the report."""
        began = time.perf_counter()
        self.store = open_store(self.url, **self.settings.options)
        self.chronicarius = Chronicarius(self.store)
        try:
            self.baselines = self._open_baselines()
            if self.baselines is not None:
                self.report.raw_variants = list(self.baselines.variants)
            with asyncio.Runner() as runner:
                if self.settings.run_async and self.backend.open_async is not None:
                    self.async_store = open_async_store(self.url, **self.settings.options)
                    self.async_chronicarius = AsyncChronicarius(self.async_store)
                elif self.settings.run_async:
                    self.note(f"backend {self.backend.name!r} has no asyncio store: no async rows")
                try:
                    phases = self.settings.phases
                    if "history" in phases:
                        chronica = [self._filled(size, runner) for size in self.settings.sizes]
                        self._measure_reads(chronica, runner)
                        self._measure_appends(chronica, runner)
                    if "concurrent" in phases:
                        self._measure_concurrent(runner)
                    if "batch" in phases:
                        self._phase("batch", functools.partial(self._measure_batch, runner))
                    if "listing" in phases:
                        self._phase("listing", functools.partial(self._measure_listing, runner))
                finally:
                    if self.baselines is not None:
                        self.baselines.close_async_variants(runner)
                    if self.async_store is not None:
                        runner.run(self.async_store.close())
        finally:
            if self.baselines is not None:
                self.baselines.close()
            self.store.close()
        self._flatness()
        self.report.targets = judge(self.report)
        self.report.seconds = round(time.perf_counter() - began, 3)
        return self.report

    def _open_baselines(self) -> Baselines | None:
        try:
            baseline_class = load_baseline_class(self.backend.name)
        except (ImportError, AttributeError) as error:
            self.note(f"no raw baseline for {self.backend.name!r} ({error}); store numbers only")
            return None
        return Baselines(baseline_class, self.url, self.settings.options)

    # -- per history size ------------------------------------------------------------------

    def _filled(self, size: int, runner: asyncio.Runner) -> Filled:
        """Fill a fresh chronicum with ``size`` acta (and one for the async store if it cannot share)."""
        print(f"  history {size:,}: filling", file=sys.stderr, flush=True)
        chronicum_id = fresh_id(str(size))
        acta = history(chronicum_id, size)
        fill_started = time.perf_counter()
        self._fill(chronicum_id, acta)
        async_chronicum_id = chronicum_id
        if self.async_chronicarius is not None and not self._store_shares_fill():
            async_chronicum_id = fresh_id(f"{size}-async")
            runner.run(self._fill_async(async_chronicum_id, size))
        filled = Filled(size, chronicum_id, async_chronicum_id)
        writers = list(self.baselines.variants) if self.baselines is not None else []
        if self.async_chronicarius is not None:
            writers.append(ASYNC_STORE)
            writers += [ASYNC_RAW + name for name in self._async_variants()]
        for writer in writers:
            if self._store_shares_fill():
                filled.append_ids[writer] = self._filled_copy(size)
            else:
                filled.append_ids[writer] = async_chronicum_id if writer == ASYNC_STORE else chronicum_id
        if self.async_chronicarius is not None:  # the owner cache, warm before timing
            runner.run(self.async_chronicarius.get_acta(OWNER, filled.append_ids[ASYNC_STORE], last_n=1))
        copies = f" (and {len(writers)} copies to append to)" if self._store_shares_fill() and writers else ""
        seconds = time.perf_counter() - fill_started
        print(f"  history {size:,}: filled{copies} in {seconds:.1f} s", file=sys.stderr)
        self._check_window(chronicum_id, size)
        return filled

    def _filled_copy(self, size: int) -> str:
        """Load another chronicum of ``size`` acta through the baseline; return its id."""
        assert self.baselines is not None
        chronicum_id = fresh_id(f"{size}-append")
        self.baselines.loader.prepare(chronicum_id, OWNER)
        self.baselines.loader.fill(chronicum_id, history(chronicum_id, size))
        return chronicum_id

    def _async_variants(self) -> dict[str, AsyncBaseline]:
        """The baseline's asyncio variants, timed only beside an async store."""
        if self.baselines is None or self.async_chronicarius is None:
            return {}
        return self.baselines.async_variants

    def _store_shares_fill(self) -> bool:
        return self.baselines is not None and self.baselines.fills_store

    def _fill(self, chronicum_id: str, acta: list[Actum]) -> None:
        """Fill the store's chronicum (through the baseline when it shares the tables) and the raw ones."""
        assert self.chronicarius is not None
        if self.baselines is not None:
            self.baselines.prepare_everywhere(chronicum_id, acta)
        if not self._store_shares_fill():
            record = self.chronicarius.record_actum
            for actum in acta:
                record(OWNER, actum)
        self.chronicarius.get_acta(OWNER, chronicum_id, last_n=1)  # warms the owner cache

    async def _fill_async(self, chronicum_id: str, size: int) -> None:
        assert self.async_chronicarius is not None
        for index in range(size):
            await self.async_chronicarius.record_actum(OWNER, story_actum(chronicum_id, index))

    def _check_window(self, chronicum_id: str, size: int) -> None:
        """Make sure store and raw read the same number of messages before timing them."""
        assert self.chronicarius is not None
        expected = min(LAST_N, messages_in(size))
        got = len(
            self.chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=[ActumKind.MESSAGE])
        )
        if got != expected:
            self.note(f"history {size}: the store's last-{LAST_N} window has {got} acta, expected {expected}")
        if self.baselines is None:
            return
        for name, baseline in self.baselines.variants.items():
            raw = len(baseline.last_messages(chronicum_id, LAST_N))
            if raw not in (expected, expected + 1):  # + 1: a query may add a row for the chronicum itself
                self.note(
                    f"history {size}: raw {name!r} last_messages returned {raw} rows, expected {expected}"
                )

    def _measure_reads(self, chronica: list[Filled], runner: asyncio.Runner) -> None:
        """Time the last-20 read on every filled chronicum, every size and column in the same rounds.

        Interleaving the sizes keeps the flatness ratio honest when the machine's load drifts.
        """
        assert self.chronicarius is not None
        chronicarius = self.chronicarius
        message_only = [ActumKind.MESSAGE]
        operations: dict[str, Callable[[int], object]] = {}
        async_operations: dict[str, Callable[[int], Awaitable[object]]] = {}
        for filled in chronica:
            operations[_key(filled.size, STORE)] = functools.partial(
                _store_read, chronicarius, filled.chronicum_id, message_only
            )
            if self.baselines is not None:
                for name, baseline in self.baselines.variants.items():
                    operations[_key(filled.size, name)] = _raw_reader(baseline, filled.chronicum_id)
            if self.async_chronicarius is not None:
                async_operations[_key(filled.size, ASYNC_STORE)] = functools.partial(
                    _async_store_read, self.async_chronicarius, filled.async_chronicum_id, message_only
                )
                for name, variant in self._async_variants().items():
                    async_operations[_key(filled.size, ASYNC_RAW + name)] = _async_raw_reader(
                        variant, filled.chronicum_id
                    )
                # The owner cache, warm before timing:
                runner.run(self.async_chronicarius.get_acta(OWNER, filled.async_chronicum_id, last_n=1))
        self._time_and_add_rows(
            f"get_acta last {LAST_N} messages", chronica, operations, async_operations, runner
        )

    def _measure_appends(self, chronica: list[Filled], runner: asyncio.Runner) -> None:
        """Time ``record_actum`` and the raw append into every filled chronicum, in the same rounds."""
        assert self.chronicarius is not None
        rounds = self.settings.warmup + self.settings.repeat
        operations: dict[str, Callable[[int], object]] = {}
        async_operations: dict[str, Callable[[int], Awaitable[object]]] = {}
        for filled in chronica:
            store_acta = [story_actum(filled.chronicum_id, index) for index in range(rounds)]
            operations[_key(filled.size, STORE)] = _store_appender(self.chronicarius, store_acta)
            if self.baselines is not None:
                for name, baseline in self.baselines.variants.items():
                    chronicum_id = filled.append_ids[name]
                    raw_acta = [story_actum(chronicum_id, index, with_id=True) for index in range(rounds)]
                    operations[_key(filled.size, name)] = _raw_appender(baseline, raw_acta)
            if self.async_chronicarius is not None:
                chronicum_id = filled.append_ids[ASYNC_STORE]
                async_acta = [story_actum(chronicum_id, index) for index in range(rounds)]
                async_operations[_key(filled.size, ASYNC_STORE)] = _async_store_appender(
                    self.async_chronicarius, async_acta
                )
                for name, variant in self._async_variants().items():
                    chronicum_id = filled.append_ids[ASYNC_RAW + name]
                    raw_acta = [story_actum(chronicum_id, index, with_id=True) for index in range(rounds)]
                    async_operations[_key(filled.size, ASYNC_RAW + name)] = _async_raw_appender(
                        variant, raw_acta
                    )
        self._time_and_add_rows("record_actum", chronica, operations, async_operations, runner)

    def _time_and_add_rows(
        self,
        operation: str,
        chronica: list[Filled],
        operations: dict[str, Callable[[int], object]],
        async_operations: dict[str, Callable[[int], Awaitable[object]]],
        runner: asyncio.Runner,
    ) -> None:
        """Time every column of ``operation`` in the same rounds, then add its rows per history size."""
        timings = runner.run(
            time_interleaved(
                operations,
                self.settings.warmup,
                self.settings.repeat,
                async_operations,
                self.settings.max_seconds,
            )
        )
        self._note_if_cut(operation, timings)
        for filled in chronica:
            self._add_rows(operation, filled.size, timings)

    def _note_if_cut(self, operation: str, timings: dict[str, Timing]) -> None:
        count = min(timing.count for timing in timings.values())
        if count < self.settings.repeat:
            self.note(
                f"{operation}: {count} timed calls per column, not {self.settings.repeat} (--max-seconds)"
            )

    def _add_rows(self, operation: str, size: int, all_timings: dict[str, Timing]) -> None:
        """Add the sync row (store beside each raw variant) and, if timed, the async row for ``size``."""
        prefix = _key(size, "")
        timings = {
            key[len(prefix) :]: timing for key, timing in all_timings.items() if key.startswith(prefix)
        }
        store = timings[STORE]
        raw = {
            name: timing
            for name, timing in timings.items()
            if name != STORE and not name.startswith(ASYNC_STORE)  # ASYNC_RAW starts so too
        }
        ratio = {name: store.median_ns / timing.median_ns for name, timing in raw.items()}
        self.report.latency.append(LatencyRow(operation, "sync", size, store, raw, ratio))
        if ASYNC_STORE in timings:
            timing = timings[ASYNC_STORE]
            async_raw = {
                name[len(ASYNC_RAW) :]: raw_timing
                for name, raw_timing in timings.items()
                if name.startswith(ASYNC_RAW)
            }
            async_ratio = {
                name: timing.median_ns / raw_timing.median_ns for name, raw_timing in async_raw.items()
            }
            async_ratio["sync"] = timing.median_ns / store.median_ns
            if async_raw:
                first = next(iter(async_raw))
                async_ratio["driver"] = async_raw[first].median_ns / raw[first].median_ns
            self.report.latency.append(LatencyRow(operation, "async", size, timing, async_raw, async_ratio))

    def _flatness(self) -> None:
        """Last-20 median at the largest history over the smallest, for the store and each raw variant."""
        sizes = sorted(self.settings.sizes)
        if len(sizes) < 2:
            return
        reads = [row for row in self.report.latency if row.operation.startswith("get_acta")]
        for flavour in ("sync", "async"):
            by_size = {row.history: row for row in reads if row.flavour == flavour}
            if sizes[0] not in by_size or sizes[-1] not in by_size:
                continue
            small, large = by_size[sizes[0]], by_size[sizes[-1]]
            self.report.flat[f"chronica {flavour}"] = large.store.median_ns / small.store.median_ns
            for name in large.raw:
                if name in small.raw:
                    label = name if flavour == "sync" else f"{name} async"
                    self.report.flat[label] = large.raw[name].median_ns / small.raw[name].median_ns

    # -- capabilities: a batch, a listing --------------------------------------------------

    def _phase(self, name: str, measure: Callable[[], None]) -> None:
        """Run one capability phase; a failure becomes a note and the run goes on."""
        try:
            measure()
        except Exception as error:  # noqa: BLE001 - reported in the notes, the other phases still count
            self.note(f"{name}: failed: {type(error).__name__}: {error}")

    def _capable(self, capability: str, what: str) -> bool:
        """Whether the store has ``capability``; a note says what is skipped when it has not."""
        assert self.store is not None
        if capability in store_capabilities(self.store):
            return True
        self.note(f"the store has no {capability} capability: no {what} rows")
        return False

    def _measure_batch(self, runner: asyncio.Runner) -> None:
        """Time ``record_acta`` of a batch against ``record_actum`` of one, in the same rounds.

        Each appends into a chronicum of its own, created (and its owner cached) before timing.
        """
        assert self.chronicarius is not None
        if not self._capable(BATCH, "batch"):
            return
        chronicarius, size = self.chronicarius, self.settings.batch_size
        rounds = self.settings.warmup + self.settings.repeat
        print(f"  batch of {size} against one append", file=sys.stderr, flush=True)
        single_id, batch_id = fresh_id("single"), fresh_id(f"batch-{size}")
        singles = [story_actum(single_id, index) for index in range(rounds + 1)]
        batches = [
            [story_actum(batch_id, number * size + index) for index in range(size)]
            for number in range(rounds + 1)
        ]
        chronicarius.record_actum(OWNER, singles[rounds])  # creates it: the rounds append
        chronicarius.record_acta(OWNER, batches[rounds])
        operations: dict[str, Callable[[int], object]] = {
            "single": lambda number: chronicarius.record_actum(OWNER, singles[number]),
            "batch": lambda number: chronicarius.record_acta(OWNER, batches[number]),
        }
        timings = runner.run(
            time_interleaved(
                operations, self.settings.warmup, self.settings.repeat, None, self.settings.max_seconds
            )
        )
        self._note_if_cut(f"record_acta of {size}", timings)
        single, batch = timings["single"], timings["batch"]
        self.report.batch.append(BatchRow(size, single, batch, batch.median_ns / single.median_ns))

    def _measure_listing(self, runner: asyncio.Runner) -> None:
        """Time the first page of one owner's chronica as other owners' chronica grow in number.

        The owner's chronica are made through ``record_actum``; the other owners' are bulk-loaded
        through the baseline's ``fill_chronica`` (else ``Store.create`` for each), before each
        count is timed. The counts run one after the other in one store (they share its tables),
        so unlike the history sizes they are not interleaved.
        """
        assert self.chronicarius is not None and self.store is not None
        if not self._capable(LISTING, "listing"):
            return
        chronicarius, owned, limit = self.chronicarius, self.settings.owned, LIST_LIMIT
        label = secrets.token_hex(4)
        owner = f"bench-lister-{label}"
        for index in range(owned):
            chronicarius.record_actum(owner, story_actum(fresh_id(f"listed-{index}"), index))
        loaded = 0
        for others in sorted(set(self.settings.others)):
            if others > loaded:
                self._load_other_owners(label, loaded, others)
                loaded = others
            page = chronicarius.list_chronica(owner, limit=limit)
            if len(page.chronica) != min(owned, limit) or any(one.owner_id != owner for one in page.chronica):
                self.note(f"listing with {others:,} others: the first page has {len(page.chronica)} chronica")
            print(f"  listing with {others:,} other owners' chronica: timing", file=sys.stderr, flush=True)
            timings = runner.run(
                time_interleaved(
                    {"list": lambda _: chronicarius.list_chronica(owner, limit=limit)},
                    self.settings.warmup,
                    self.settings.repeat,
                    None,
                    self.settings.max_seconds,
                )
            )
            self._note_if_cut(f"list_chronica with {others:,} others", timings)
            self.report.listing.append(ListingRow(others, owned, limit, timings["list"]))
        rows = self.report.listing
        if len(rows) >= 2:
            self.report.listing_flat = rows[-1].store.median_ns / rows[0].store.median_ns

    def _load_other_owners(self, label: str, start: int, end: int) -> None:
        """Add other owners' chronica number ``start`` to ``end`` (each owner holds ``owned``)."""
        assert self.store is not None
        owned = self.settings.owned
        began = datetime.now(UTC) - timedelta(seconds=end)
        chronica = [
            Chronicum(
                f"bench-other-{label}-{number:07d}",
                f"bench-other-{label}-{number // owned}",
                began + timedelta(seconds=number),
            )
            for number in range(start, end)
        ]
        print(f"  listing: loading {len(chronica):,} other owners' chronica", file=sys.stderr, flush=True)
        loading = time.perf_counter()
        how = "the baseline's fill_chronica"
        if self.baselines is None or not self.baselines.fill_chronica(chronica):
            how = "Store.create"
            create = self.store.create
            for chronicum in chronica:
                create(chronicum)
        seconds = time.perf_counter() - loading
        print(f"  listing: loaded through {how} in {seconds:.1f} s", file=sys.stderr, flush=True)

    # -- many writers ----------------------------------------------------------------------

    def _measure_concurrent(self, runner: asyncio.Runner) -> None:
        """The many-writer rows, in ``concurrent_rounds`` interleaved rounds; each row is its median.

        A round runs every row once, one after another, so a load that drifts during the run
        slows Chronica's rows and the raw ones alike; a row's seconds are the median over the
        rounds it did not fail in (a failure is noted per round, the other rows still count).
        """
        self._concurrent_seconds.clear()
        rounds = self.settings.concurrent_rounds
        for number in range(rounds):
            print(f"  many writers: round {number + 1} of {rounds}", file=sys.stderr, flush=True)
            self._concurrent_round(runner)
        writers, total = self.settings.writers, self.settings.writers * self.settings.writes_per_writer
        for writer, seconds in self._concurrent_seconds.items():
            median = statistics.median(seconds)
            self.report.concurrent.append(ConcurrentRow(writer, writers, total, median, total / median))

    def _concurrent_round(self, runner: asyncio.Runner) -> None:
        """One round of the many-writer rows, one after another.

        Each chronica row runs on a store of its own, opened for it and closed after it, so the
        connections one row's pool grew to are handed back before the next row (a raw variant's
        40 connections) opens its own: on a shared server they never add up. The ``chronica
        threads`` and ``chronica async tasks`` rows are timed on their second run on that store:
        the first, untimed, grows its pool (psycopg_pool adds one connection at a time), as every
        raw thread or task opens its connection before the clock starts.
        """
        writers, writes = self.settings.writers, self.settings.writes_per_writer
        warmup = max(2, min(self.settings.warmup, 10))
        print(f"  {writers} writers x {writes} writes: threads", file=sys.stderr, flush=True)
        run_label = secrets.token_hex(3)
        with open_store(self.url, **self.settings.options) as store:
            chronicarius = Chronicarius(store)

            def store_writer(index: int) -> tuple[Writer, Closer]:
                chronicum_id = fresh_id(f"threads-{run_label}-{index}")
                acta = [story_actum(chronicum_id, number) for number in range(warmup + writes)]
                return (lambda number: chronicarius.record_actum(OWNER, acta[number])), _nothing_to_close

            self._concurrent(
                "chronica threads",
                lambda: run_threads(writers, store_writer, warmup, writes),
                after_an_untimed_run=True,
            )
        with open_store(self.url, **self.settings.options) as store:
            sharing = Chronicarius(store)
            shared_id = fresh_id(f"shared-{run_label}")

            def shared_writer(index: int) -> tuple[Writer, Closer]:
                acta = [story_actum(shared_id, number) for number in range(warmup + writes)]
                return (lambda number: sharing.record_actum(OWNER, acta[number])), _nothing_to_close

            sharing.record_actum(OWNER, story_actum(shared_id, 0))  # created, its owner cached
            self._concurrent(SHARED_WRITERS, lambda: run_threads(writers, shared_writer, warmup, writes))
        # The round's own baselines, closed after it: a pool of theirs must not outlive the round.
        baselines = None if self.baselines is None else self.baselines.for_round()
        try:
            self._many_writer_rows(runner, baselines, run_label, warmup)
        finally:
            if baselines is not None:
                baselines.close()
                baselines.close_async_variants(runner)

    def _many_writer_rows(
        self, runner: asyncio.Runner, baselines: Baselines | None, run_label: str, warmup: int
    ) -> None:
        """The raw threads rows, then the asyncio rows (Chronica's tasks, the raw tasks), of one round."""
        writers, writes = self.settings.writers, self.settings.writes_per_writer
        if baselines is not None:
            for name in baselines.variants:
                self._concurrent(
                    f"{name} threads",
                    functools.partial(self._raw_threads, baselines, name, run_label, warmup),
                )

        if self.async_chronicarius is not None:
            print(f"  {writers} writers x {writes} writes: async tasks", file=sys.stderr, flush=True)
            async_store = open_async_store(self.url, **self.settings.options)
            async_chronicarius = AsyncChronicarius(async_store)

            def task_writer(index: int) -> AsyncWriter:
                chronicum_id = fresh_id(f"tasks-{run_label}-{index}")
                acta = [story_actum(chronicum_id, number) for number in range(warmup + writes)]
                return lambda number: async_chronicarius.record_actum(OWNER, acta[number])

            try:
                self._concurrent(
                    "chronica async tasks",
                    lambda: runner.run(run_tasks(writers, task_writer, warmup, writes)),
                    after_an_untimed_run=True,
                )
            finally:
                runner.run(async_store.close())
            if baselines is not None:
                for name in baselines.async_variants:
                    self._concurrent(
                        f"{name} async tasks",
                        functools.partial(self._run_raw_tasks, runner, baselines, name, run_label, warmup),
                    )

    def _concurrent(
        self, writer: str, measure: Callable[[], float], *, after_an_untimed_run: bool = False
    ) -> None:
        """Keep the seconds ``measure()`` takes for row ``writer``, or a note when it fails.

        With ``after_an_untimed_run`` the seconds kept are those of a second ``measure()``: the
        first, on the same store, lets its pool grow to the writers.
        """
        try:
            if after_an_untimed_run:
                measure()
            seconds = measure()
        except Exception as error:  # noqa: BLE001 - reported in the notes, the run goes on
            self.note(f"{self.settings.writers} {writer}: failed: {error}")
            return
        self._concurrent_seconds.setdefault(writer, []).append(seconds)

    def _raw_threads(self, shared: Baselines, name: str, run_label: str, warmup: int) -> float:
        """Time raw variant ``name`` appending from many threads, each on its own chronicum.

        A baseline that is not thread-safe is opened (and closed) by each thread for itself.
        """
        writes = self.settings.writes_per_writer

        def raw_writer(index: int) -> tuple[Writer, Closer]:
            own = shared.for_thread()
            close: Closer = _nothing_to_close if own is shared else own.close
            try:
                chronicum_id = fresh_id(f"raw-threads-{run_label}-{index}")
                own.prepare_everywhere(chronicum_id, None, variant=name)
                baseline = own.variants[name]
                acta = [story_actum(chronicum_id, number, with_id=True) for number in range(warmup + writes)]
            except BaseException:
                close()
                raise
            return (lambda number: baseline.append(acta[number])), close

        return run_threads(self.settings.writers, raw_writer, warmup, writes)

    def _run_raw_tasks(
        self, runner: asyncio.Runner, shared: Baselines, name: str, run_label: str, warmup: int
    ) -> float:
        """:meth:`_raw_tasks` run in ``runner``'s loop; its timed seconds."""
        return runner.run(self._raw_tasks(shared, name, run_label, warmup))

    async def _raw_tasks(self, shared: Baselines, name: str, run_label: str, warmup: int) -> float:
        """Time raw variant ``name``'s asyncio twin appending from many tasks, each on its own chronicum.

        The floor under ``chronica async tasks``: the driver's asyncio API doing the same
        statements. A baseline that is not thread-safe is opened by each task for itself (its own
        connection, as each raw thread has); its blocking connection, needed only to create the
        chronicum, is closed before timing.
        """
        writes = self.settings.writes_per_writer
        own_baselines: list[Baselines] = []

        def raw_writer(index: int) -> AsyncWriter:
            own = shared.for_thread()
            if own is not shared:
                own_baselines.append(own)
            chronicum_id = fresh_id(f"raw-tasks-{run_label}-{index}")
            own.prepare_everywhere(chronicum_id, None)
            if own is not shared:
                own.close()  # the asyncio twin opens a connection of its own
            baseline = own.async_variants[name]
            acta = [story_actum(chronicum_id, number, with_id=True) for number in range(warmup + writes)]
            return lambda number: baseline.append(acta[number])

        try:
            return await run_tasks(self.settings.writers, raw_writer, warmup, writes)
        finally:
            for own in own_baselines:
                await own.async_variants[name].close()


def _key(size: int, name: str) -> str:
    """Name of a timed operation: its history size and its column."""
    return f"{size}\x1f{name}"


def _store_read(chronicarius: Chronicarius, chronicum_id: str, kinds: list[ActumKind], _: int) -> object:
    return chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=kinds)


def _async_store_read(
    chronicarius: AsyncChronicarius, chronicum_id: str, kinds: list[ActumKind], _: int
) -> Awaitable[object]:
    return chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=kinds)


def _store_appender(chronicarius: Chronicarius, acta: list[Actum]) -> Callable[[int], object]:
    return lambda number: chronicarius.record_actum(OWNER, acta[number])


def _async_store_appender(
    chronicarius: AsyncChronicarius, acta: list[Actum]
) -> Callable[[int], Awaitable[object]]:
    return lambda number: chronicarius.record_actum(OWNER, acta[number])


def _raw_reader(baseline: Baseline, chronicum_id: str) -> Callable[[int], object]:
    return lambda _: baseline.last_messages(chronicum_id, LAST_N)


def _raw_appender(baseline: Baseline, acta: list[Actum]) -> Callable[[int], object]:
    return lambda number: baseline.append(acta[number])


def _async_raw_reader(baseline: AsyncBaseline, chronicum_id: str) -> Callable[[int], Awaitable[object]]:
    return lambda _: baseline.last_messages(chronicum_id, LAST_N)


def _async_raw_appender(baseline: AsyncBaseline, acta: list[Actum]) -> Callable[[int], Awaitable[object]]:
    return lambda number: baseline.append(acta[number])


# --------------------------------------------------------------------------------------------
# Targets (the performance targets in benchmarks/README.md)


@dataclass(frozen=True, slots=True)
class Targets:
    """The ratio targets of one backend (``None``: no such target)."""

    append_ratio: float | None
    read_ratio: float | None
    append_us: float | None = None
    read_us: float | None = None
    threads_ratio: float | None = 0.8
    async_ratio: float | None = 1.2
    tasks_ratio: float | None = 0.8
    """40 asyncio tasks' throughput over 40 threads' (both on their own chronica, through Chronica):
    at 0.8 the tasks may take up to 1.25x the threads' time."""


TARGETS: dict[str, Targets] = {
    "memory": Targets(
        None, None, append_us=15.0, read_us=5.0, threads_ratio=None, async_ratio=None, tasks_ratio=None
    ),
    "postgres": Targets(1.2, 1.3),
    "sqlalchemy": Targets(1.2, 1.2),
    "mongodb": Targets(1.2, 1.3),
}
"""Per backend name; any other backend is held to PostgreSQL's ratios."""


def judge(report: Report) -> list[Verdict]:
    """Check ``report`` against its backend's targets; ratios use the first raw variant.

    Latency targets hold at every history size (the worst one is reported); the microsecond
    targets of ``memory://`` apply at the largest history.
    """
    targets = TARGETS.get(report.backend, TARGETS["postgres"])
    verdicts: list[Verdict] = []
    sync_rows = [row for row in report.latency if row.flavour == "sync"]
    largest = max(report.sizes) if report.sizes else 0
    for operation, ratio_limit, micro_limit in (
        ("record_actum", targets.append_ratio, targets.append_us),
        (f"get_acta last {LAST_N} messages", targets.read_ratio, targets.read_us),
    ):
        rows = [row for row in sync_rows if row.operation == operation]
        if micro_limit is not None:
            for row in rows:
                if row.history == largest:
                    value = row.store.median_ns / 1000
                    verdicts.append(
                        Verdict(
                            f"{operation} median at {largest:,} <= {micro_limit} us",
                            value,
                            value <= micro_limit,
                        )
                    )
        first = report.raw_variants[0] if report.raw_variants else None
        if ratio_limit is not None and first is not None and rows:
            worst = max(row.ratio[first] for row in rows if first in row.ratio)
            verdicts.append(
                Verdict(f"{operation} <= {ratio_limit}x {first} (worst size)", worst, worst <= ratio_limit)
            )
    if "chronica sync" in report.flat:
        value = report.flat["chronica sync"]
        verdicts.append(
            Verdict(
                f"last-{LAST_N} flat: largest/smallest history <= {FLAT_LIMIT}", value, value <= FLAT_LIMIT
            )
        )
    verdicts += _capability_verdicts(report)
    by_writer = {row.writer: row for row in report.concurrent}
    threads = by_writer.get("chronica threads")
    if targets.threads_ratio is not None and threads is not None and report.raw_variants:
        raw = by_writer.get(f"{report.raw_variants[0]} threads")
        if raw is not None:
            value = threads.per_second / raw.per_second
            verdicts.append(
                Verdict(
                    f"{threads.writers} threads >= {targets.threads_ratio}x raw throughput",
                    value,
                    value >= targets.threads_ratio,
                )
            )
    if targets.async_ratio is not None:
        async_rows = [row for row in report.latency if row.flavour == "async"]
        if async_rows:
            worst = max(row.ratio["sync"] for row in async_rows)
            verdicts.append(
                Verdict(
                    f"async <= {targets.async_ratio}x sync per op (worst)",
                    worst,
                    worst <= targets.async_ratio,
                )
            )
    tasks = by_writer.get("chronica async tasks")
    if targets.tasks_ratio is not None and tasks is not None and threads is not None:
        value = tasks.per_second / threads.per_second
        verdicts.append(
            Verdict(
                f"{tasks.writers} tasks >= {targets.tasks_ratio}x {threads.writers} threads' throughput",
                value,
                value >= targets.tasks_ratio,
            )
        )
    return verdicts


def judge_peers(reports: Sequence[Report]) -> list[Verdict]:
    """Compare chronica-sqlalchemy on PostgreSQL with chronica-postgres, both measured in this run.

    For each read and append, the worst, over the history sizes both measured, of the
    chronica-sqlalchemy median over chronica-postgres's (sync flavour; the first report of each).
    The two stores are timed one after the other, not in the same rounds: a load that drifts
    between them shows in the ratio. Each verdict is also added to the chronica-sqlalchemy
    report's targets. Returns them (none unless both stores were measured).
    """
    postgres = next((report for report in reports if report.backend == "postgres"), None)
    sqlalchemy = next(
        (
            report
            for report in reports
            if report.backend == "sqlalchemy" and report.store_url.lower().startswith("postgresql")
        ),
        None,
    )
    if postgres is None or sqlalchemy is None:
        return []
    peer_medians = {
        (row.operation, row.history): row.store.median_ns for row in postgres.latency if row.flavour == "sync"
    }
    verdicts: list[Verdict] = []
    for operation in ("record_actum", f"get_acta last {LAST_N} messages"):
        ratios = [
            row.store.median_ns / peer_medians[row.operation, row.history]
            for row in sqlalchemy.latency
            if row.flavour == "sync"
            and row.operation == operation
            and (row.operation, row.history) in peer_medians
        ]
        if ratios:
            worst = max(ratios)
            verdicts.append(
                Verdict(
                    f"{operation} <= {PEER_LIMIT}x chronica-postgres's (worst size)",
                    worst,
                    worst <= PEER_LIMIT,
                )
            )
    sqlalchemy.targets.extend(verdicts)
    return verdicts


def batch_target_applies(report: Report) -> bool:
    """Whether the batch target holds for ``report``'s store: PostgreSQL through psycopg, or SQLite.

    The target is about database stores, where one round trip and one commit dominate an append;
    the memory store has neither to amortise, so it prints its ratio with no target.
    """
    if report.backend == "postgres":
        return True
    return report.backend == "sqlalchemy" and report.store_url.lower().startswith("sqlite")


def _capability_verdicts(report: Report) -> list[Verdict]:
    verdicts: list[Verdict] = []
    if batch_target_applies(report):
        for row in report.batch:
            verdicts.append(
                Verdict(
                    f"record_acta of {row.size} <= {BATCH_LIMIT}x record_actum (median)",
                    row.ratio,
                    row.ratio <= BATCH_LIMIT,
                )
            )
    if report.listing_flat is not None:
        fewest, most = report.listing[0].others, report.listing[-1].others
        verdicts.append(
            Verdict(
                f"list_chronica first page: {most:,} / {fewest:,} other owners' chronica "
                f"<= {LISTING_FLAT_LIMIT}x",
                report.listing_flat,
                report.listing_flat <= LISTING_FLAT_LIMIT,
            )
        )
    return verdicts


# --------------------------------------------------------------------------------------------
# Output


def _machine() -> str:
    """CPU count and load average now: timings on a loaded machine are read with that in mind."""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{os.cpu_count()} CPUs, load average {load}"


def _micro(nanoseconds: float) -> str:
    microseconds = nanoseconds / 1000
    return f"{microseconds:.2f}" if microseconds < 100 else f"{microseconds:.0f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(width) if column < 3 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        )
        for line in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _driver_floors(report: Report) -> list[str]:
    """Each raw variant's asyncio tasks over its threads, in throughput: the driver's own asyncio floor."""
    by_writer = {row.writer: row for row in report.concurrent}
    floors = []
    for row in report.concurrent:
        name = row.writer.removesuffix(" async tasks")
        threads = by_writer.get(f"{name} threads")
        if name != row.writer and name != "chronica" and threads is not None:
            ratio = row.per_second / threads.per_second
            floors.append(f"driver floor {row.writer}/threads throughput {ratio:.2f}x")
    return floors


def render(report: Report) -> str:
    """Return the report as readable text tables (latencies in microseconds)."""
    out: list[str] = []
    options = " ".join(f"{key}={value}" for key, value in report.options.items())
    out.append(f"== {report.store_url} {options}".rstrip() + f"  (backend {report.backend}, {report.python})")
    out.append(f"   {report.machine} at the start ({report.started_at})")
    out.append(
        f"   {report.repeat} timed calls per operation and size after a warm-up; times in microseconds"
    )
    variants = report.raw_variants
    header = ["operation", "flavour", "history", "chronica med", "p90"]
    for name in variants:
        header += [f"{name} med", "p90", "ratio"]
    header += ["async/sync", "driver async/sync"]
    rows: list[list[str]] = []
    for row in sorted(
        report.latency, key=lambda row: (row.operation != "record_actum", row.history, row.flavour != "sync")
    ):
        line = [
            row.operation,
            row.flavour,
            f"{row.history:,}",
            _micro(row.store.median_ns),
            _micro(row.store.p90_ns),
        ]
        for name in variants:
            raw = row.raw.get(name)
            if raw is None:
                line += ["", "", ""]
            else:
                line += [_micro(raw.median_ns), _micro(raw.p90_ns), f"{row.ratio[name]:.2f}x"]
        line.append(f"{row.ratio['sync']:.2f}x" if "sync" in row.ratio else "")
        line.append(f"{row.ratio['driver']:.2f}x" if "driver" in row.ratio else "")
        rows.append(line)
    if rows:
        out.append(_table(header, rows))
    if report.flat:
        sizes = sorted(report.sizes)
        flat = ", ".join(f"{name} {value:.2f}x" for name, value in report.flat.items())
        out.append(f"\nflat (last-{LAST_N} median at {sizes[-1]:,} / at {sizes[0]:,}): {flat}")
    if report.concurrent:
        out.append("")
        concurrent_rows = [
            [row.writer, str(row.writers), f"{row.writes:,}", f"{row.seconds:.3f}", f"{row.per_second:,.0f}"]
            for row in report.concurrent
        ]
        out.append(
            _table(
                ["writers (each on its own chronicum but one)", "count", "writes", "seconds", "writes/s"],
                concurrent_rows,
            )
        )
        by_writer = {row.writer: row for row in report.concurrent}
        threads = by_writer.get("chronica threads")
        if threads is not None:
            ratios = [
                f"{threads.per_second / row.per_second:.2f}x {row.writer}"
                for row in report.concurrent
                if row.writer not in ("chronica threads", SHARED_WRITERS)
                and not row.writer.endswith(" tasks")
            ]
            tasks = by_writer.get("chronica async tasks")
            if tasks is not None:
                ratios.append(f"tasks/threads throughput {tasks.per_second / threads.per_second:.2f}x")
            ratios += _driver_floors(report)
            if ratios:
                out.append("store threads throughput: " + ", ".join(ratios))
    out += _render_capabilities(report)
    if report.targets:
        out.append("\ntargets:")
        for verdict in report.targets:
            out.append(f"  {'ok    ' if verdict.holds else 'MISSED'} {verdict.target}: {verdict.value:.2f}")
    for note in report.notes:
        out.append(f"note: {note}")
    out.append(f"(run took {report.seconds:.1f} s)")
    return "\n".join(out)


def _render_capabilities(report: Report) -> list[str]:
    """The batch and listing tables, when they were measured."""
    out: list[str] = []
    for row in report.batch:
        out.append("")
        rows = [
            ["record_actum", "1", _micro(row.single.median_ns), _micro(row.single.p90_ns)],
            ["record_acta", str(row.size), _micro(row.batch.median_ns), _micro(row.batch.p90_ns)],
        ]
        out.append(_table(["batch against one append", "acta", "median", "p90"], rows))
        target = "" if batch_target_applies(report) else " (no target for this backend)"
        per_actum = row.ratio / row.size
        out.append(f"batch/single: {row.ratio:.2f}x{target}; per actum {per_actum:.2f}x one append")
    if report.listing:
        out.append("")
        first = report.listing[0]
        heading = f"list_chronica limit {first.limit}, owner holds {first.owned}: other owners' chronica"
        rows = [
            [f"{row.others:,}", "", "", _micro(row.store.median_ns), _micro(row.store.p90_ns)]
            for row in report.listing
        ]
        out.append(_table([heading, "", "", "median", "p90"], rows))
        if report.listing_flat is not None:
            most, fewest = report.listing[-1].others, first.others
            out.append(
                f"listing {most:,}/{fewest:,}: {report.listing_flat:.2f}x (timed one count after the other)"
            )
    return out


# --------------------------------------------------------------------------------------------
# Command line


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated counts, got {text!r}") from None
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"expected positive counts, got {text!r}")
    return sizes


def _phases(text: str) -> tuple[str, ...]:
    phases = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [phase for phase in phases if phase not in PHASES]
    if not phases or unknown:
        raise argparse.ArgumentTypeError(f"--phases wants some of {','.join(PHASES)}, got {text!r}")
    return phases


def _option(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"--option wants key=value, got {text!r}")
    return key, value


def positive_integer(text: str) -> int:
    """An argparse type: ``text`` as an int of at least 1; ``ArgumentTypeError`` otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line (``argv`` without the program name; ``None`` reads ``sys.argv``)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Time Chronica stores beside their raw drivers (see benchmarks/README.md).",
    )
    parser.add_argument(
        "--store", action="append", required=True, metavar="URL", help="store URL (repeatable)"
    )
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=[100, 10_000, 100_000],
        help="history sizes (default 100,10000,100000)",
    )
    parser.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to open_store, open_async_store and RawBaseline (repeatable)",
    )
    parser.add_argument(
        "--repeat", type=positive_integer, default=500, help="timed calls per operation and size (500)"
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed calls first (default repeat/10, at least 20)"
    )
    parser.add_argument(
        "--writers", type=positive_integer, default=40, help="concurrent writer threads / tasks (40)"
    )
    parser.add_argument(
        "--writes", type=positive_integer, default=50, help="timed writes per concurrent writer (50)"
    )
    parser.add_argument(
        "--concurrent-rounds",
        type=positive_integer,
        default=CONCURRENT_ROUNDS,
        help=f"interleaved rounds of the many-writer rows; each row is its median ({CONCURRENT_ROUNDS})",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="time budget of each latency phase (reads, appends); cuts --repeat when exceeded (60)",
    )
    parser.add_argument("--no-async", action="store_true", help="skip the asyncio rows")
    parser.add_argument(
        "--phases",
        type=_phases,
        default=PHASES,
        help=f"what to measure, comma-separated (default all: {','.join(PHASES)})",
    )
    parser.add_argument(
        "--batch-size", type=positive_integer, default=BATCH_SIZE, help=f"acta per timed batch ({BATCH_SIZE})"
    )
    parser.add_argument(
        "--others",
        type=_sizes,
        default=list(OTHERS),
        help="chronica other owners hold, per listing measurement (default 100,100000)",
    )
    parser.add_argument(
        "--owned", type=positive_integer, default=LISTED, help=f"chronica the listed owner holds ({LISTED})"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; return the process exit code (0, or 1 when a store could not be measured)."""
    arguments = parse_arguments(argv)
    warmup = arguments.warmup if arguments.warmup is not None else max(20, arguments.repeat // 10)
    settings = Settings(
        sizes=arguments.sizes,
        options=dict(arguments.option),
        repeat=arguments.repeat,
        warmup=max(0, warmup),
        writers=arguments.writers,
        writes_per_writer=arguments.writes,
        run_async=not arguments.no_async,
        max_seconds=arguments.max_seconds,
        phases=arguments.phases,
        batch_size=arguments.batch_size,
        others=tuple(arguments.others),
        owned=arguments.owned,
        concurrent_rounds=arguments.concurrent_rounds,
    )
    reports: list[Report] = []
    status = 0
    for url in arguments.store:
        print(f"measuring {url}", file=sys.stderr, flush=True)
        try:
            report = StoreBench(url, settings).run()
        except Exception as error:  # noqa: BLE001 - one failing store must not hide the others
            print(f"{url}: failed: {type(error).__name__}: {error}", file=sys.stderr)
            status = 1
            continue
        reports.append(report)
        print(render(report), flush=True)
        print()
    peers = judge_peers(reports)
    if peers:
        print("chronica-sqlalchemy on PostgreSQL against chronica-postgres (timed one after the other):")
        for verdict in peers:
            print(f"  {'ok    ' if verdict.holds else 'MISSED'} {verdict.target}: {verdict.value:.2f}")
        print()
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as file:
            json.dump([asdict(report) for report in reports], file, indent=2)
            file.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
