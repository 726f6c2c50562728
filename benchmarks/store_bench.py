"""One store URL measured: ``benchmarks.run``'s phases, filling a :class:`benchmarks.report.Report`.

History: per history size a chronicum is filled (through the baseline's loader, into the store's
own tables), then ``--runs`` times the last-20 read and the append are timed, the store (blocking
and asyncio) and every raw column in the same rounds, in a shuffled order. Then the many-writer
rows (``benchmarks/writers.py``), a batch against one append, and a listing as other owners'
chronica grow in number. The targets are judged at the end (``benchmarks/judge.py``).
"""

from __future__ import annotations

import asyncio
import functools
import platform
import random
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.acta import LAST_N, OWNER, fresh_id, history, messages_in, story_actum
from benchmarks.baselines import FLOOR, Baseline, load_baseline
from benchmarks.connections import MAX_CONNECTIONS, Budget
from benchmarks.judge import judge
from benchmarks.report import READ, RECORD, BatchRow, LatencyRow, ListingRow, Report, machine
from benchmarks.timing import Timing, new_seed, time_interleaved
from benchmarks.writers import ManyWriters, WritersSettings
from chronica_core import (
    ActumKind,
    AsyncChronicarius,
    AsyncStore,
    Chronicarius,
    Chronicum,
    Store,
    open_async_store,
    open_store,
)
from chronica_core.capabilities import BATCH, LISTING, store_capabilities
from chronica_core.hookspecs import Backend
from chronica_core.registry import registry

__all__ = ["CONCURRENT_ROUNDS", "PHASES", "RUNS", "Settings", "StoreBench"]

PHASES = ("history", "concurrent", "batch", "listing")
"""What a run can measure (``--phases``): latency per history size (and flatness), many writers,
a batch against one append, and listing against other owners' chronica."""

RUNS = 3
"""Timed runs of each phase by default (``--runs``): the targets are judged on their median."""

CONCURRENT_ROUNDS = 5
"""Rounds of the many-writer rows by default (each row once a round, reported as its median)."""

STORE = ""
"""Key of the store's (sync Chronicarius) column among the timed operations."""

ASYNC_STORE = "\x00async"
"""Key of the ``AsyncChronicarius`` column among the timed operations."""

ASYNC_RAW = "\x00async raw "
"""Prefix of an asyncio raw column's key (``ASYNC_RAW + name``) among the timed operations."""


@dataclass(slots=True)
class Settings:
    """What to run (from the command line)."""

    sizes: list[int]
    options: dict[str, str]
    repeat: int
    warmup: int
    writers: int = 40
    writes_per_writer: int = 50
    run_async: bool = True
    max_seconds: float = float("inf")
    phases: tuple[str, ...] = PHASES
    batch_size: int = 20
    others: tuple[int, ...] = (100, 100_000)
    owned: int = 20
    concurrent_rounds: int = CONCURRENT_ROUNDS
    runs: int = RUNS
    seed: int = field(default_factory=new_seed)
    max_connections: int = MAX_CONNECTIONS


@dataclass(frozen=True, slots=True)
class Filled:
    """The chronica filled to ``size`` acta for one history size.

    Attributes:
        size: the history size.
        chronicum_id: every sync column reads it; the store's appends go into it.
        async_chronicum_id: the asyncio store reads it (another chronicum only on memory://).
        append_ids: per raw column (and :data:`ASYNC_STORE`, ``ASYNC_RAW + name``), the chronicum
            its appends go into: a copy of the same size of its own, so no two writers share one
            (a store may cache a chronicum's newest position; a write behind its back would cost
            it a retry the steady state never pays).
    """

    size: int
    chronicum_id: str
    async_chronicum_id: str
    append_ids: dict[str, str] = field(default_factory=dict)


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
        self.rng = random.Random(settings.seed)
        self.budget = Budget(url, settings.max_connections)
        self.report = Report(
            store_url=url,
            backend=self.backend.name,
            options=dict(settings.options),
            sizes=list(settings.sizes),
            repeat=settings.repeat,
            python=f"{platform.python_implementation()} {platform.python_version()}",
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            machine=machine(),
            runs=settings.runs,
            seed=settings.seed,
            budget=self.budget.describe(),
        )
        self.store: Store | None = None
        self.chronicarius: Chronicarius | None = None
        self.async_store: AsyncStore | None = None
        self.async_chronicarius: AsyncChronicarius | None = None
        self.baseline: Baseline | None = None
        self.loader: Any = None
        self.columns: dict[str, Any] = {}
        self.async_columns: dict[str, Any] = {}

    def note(self, text: str) -> None:
        """Add a line to the report's notes and show it now (on stderr)."""
        self.report.notes.append(text)
        print(f"  note: {text}", file=sys.stderr, flush=True)

    def run(self) -> Report:
        """Run every measurement and return the report."""
        began = time.perf_counter()
        options = self.settings.options
        self.store = open_store(self.url, **options)
        self.chronicarius = Chronicarius(self.store)
        try:
            self._open_baseline()
            with asyncio.Runner() as runner:
                if self.settings.run_async and self.backend.open_async is not None:
                    self.async_store = runner.run(_open_async(self.url, options))
                    self.async_chronicarius = AsyncChronicarius(self.async_store)
                    if self.baseline is not None:
                        self.async_columns = {
                            name: self.baseline.open_async_column(name, self.url, options)
                            for name in self.baseline.async_columns
                        }
                elif self.settings.run_async:
                    self.note(f"backend {self.backend.name!r} has no asyncio store: no async rows")
                try:
                    self._phases(runner)
                finally:
                    for column in self.async_columns.values():
                        runner.run(column.close())
                    if self.async_store is not None:
                        runner.run(self.async_store.close())
        finally:
            for column in self.columns.values():
                column.close()
            if self.loader is not None:
                self.loader.close()
            self.store.close()
        self.report.targets = judge(self.report)
        self.report.seconds = round(time.perf_counter() - began, 3)
        return self.report

    def _phases(self, runner: asyncio.Runner) -> None:
        phases = self.settings.phases
        if "history" in phases:
            chronica = [self._filled(size, runner) for size in self.settings.sizes]
            for run in range(1, self.settings.runs + 1):
                self._measure_reads(chronica, runner, run)
                self._measure_appends(chronica, runner, run)
            self._flatness()
        if "concurrent" in phases:
            self._measure_concurrent(runner)
        if "batch" in phases:
            self._phase("batch", functools.partial(self._measure_batch, runner))
        if "listing" in phases:
            self._phase("listing", functools.partial(self._measure_listing, runner))

    def _open_baseline(self) -> None:
        try:
            self.baseline = load_baseline(self.backend.name)
        except (ImportError, AttributeError) as error:
            self.note(f"no raw baseline for {self.backend.name!r} ({error}); store numbers only")
            return
        self.report.floor = self.baseline.floor
        self.report.raw_columns = list(self.baseline.columns)
        self.loader = self.baseline.open_loader(self.url, self.settings.options)
        self.columns = {
            name: self.baseline.open_column(name, self.url, self.settings.options)
            for name in self.baseline.columns
        }

    # -- per history size ------------------------------------------------------------------

    def _fills_store(self) -> bool:
        return self.loader is not None and bool(self.loader.fills_store)

    def _filled(self, size: int, runner: asyncio.Runner) -> Filled:
        """Fill a chronicum of ``size`` acta, and a copy for each column that appends."""
        assert self.chronicarius is not None
        print(f"  history {size:,}: filling", file=sys.stderr, flush=True)
        fill_started = time.perf_counter()
        chronicum_id = self._load(size, "read")
        async_chronicum_id = chronicum_id
        if self.async_chronicarius is not None and not self._fills_store():
            async_chronicum_id = fresh_id(f"{size}-async")
            runner.run(_fill_async(self.async_chronicarius, async_chronicum_id, size))
        filled = Filled(size, chronicum_id, async_chronicum_id)
        appenders = list(self.columns)
        if self.async_chronicarius is not None:
            appenders += [ASYNC_STORE, *(ASYNC_RAW + name for name in self.async_columns)]
        for appender in appenders:
            if appender == ASYNC_STORE and not self._fills_store():
                filled.append_ids[appender] = async_chronicum_id
            else:
                filled.append_ids[appender] = self._load(size, "append", for_store=appender == ASYNC_STORE)
        if self.async_chronicarius is not None:  # the owner cache, warm before timing
            for chronicum in {async_chronicum_id, filled.append_ids[ASYNC_STORE]}:
                runner.run(self.async_chronicarius.get_acta(OWNER, chronicum, last_n=1))
        seconds = time.perf_counter() - fill_started
        print(f"  history {size:,}: filled {1 + len(appenders)} chronica in {seconds:.1f} s", file=sys.stderr)
        self._check_window(chronicum_id, size)
        return filled

    def _load(self, size: int, label: str, *, for_store: bool = True) -> str:
        """A new chronicum of ``size`` acta, through the loader; when the loader does not write the
        store's tables and ``for_store``, through ``record_actum`` too (a raw column's copy needs not)."""
        assert self.chronicarius is not None
        chronicum_id = fresh_id(f"{size}-{label}")
        acta = history(chronicum_id, size)
        if self.loader is not None:
            self.loader.prepare(chronicum_id, OWNER)
            self.loader.fill(chronicum_id, acta)
        if for_store and not self._fills_store():
            for actum in acta:
                self.chronicarius.record_actum(OWNER, actum)
        if for_store or self._fills_store():
            self.chronicarius.get_acta(OWNER, chronicum_id, last_n=1)  # warms the owner cache
        return chronicum_id

    def _check_window(self, chronicum_id: str, size: int) -> None:
        """Make sure the store and every column read the same number of messages before timing."""
        assert self.chronicarius is not None
        expected = min(LAST_N, messages_in(size))
        got = len(
            self.chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=[ActumKind.MESSAGE])
        )
        if got != expected:
            self.note(f"history {size}: the store's last-{LAST_N} window has {got} acta, expected {expected}")
        for name, column in self.columns.items():
            raw = len(column.last_messages(chronicum_id, LAST_N))
            if raw not in (expected, expected + 1):  # + 1: the store's own SQL adds the chronicum's row
                self.note(f"history {size}: column {name!r} read {raw} rows, expected {expected}")

    def _measure_reads(self, chronica: list[Filled], runner: asyncio.Runner, run: int) -> None:
        """Time the last-20 read on every filled chronicum, every size and column in the same rounds."""
        assert self.chronicarius is not None
        chronicarius, kinds = self.chronicarius, [ActumKind.MESSAGE]
        operations: dict[str, Callable[[int], object]] = {}
        async_operations: dict[str, Callable[[int], Awaitable[object]]] = {}
        for filled in chronica:
            operations[_key(filled.size, STORE)] = functools.partial(
                _store_read, chronicarius, filled.chronicum_id, kinds
            )
            for name, column in self.columns.items():
                operations[_key(filled.size, name)] = functools.partial(
                    _raw_read, column, filled.chronicum_id
                )
            if self.async_chronicarius is not None:
                async_operations[_key(filled.size, ASYNC_STORE)] = functools.partial(
                    _async_store_read, self.async_chronicarius, filled.async_chronicum_id, kinds
                )
                for name, async_column in self.async_columns.items():
                    async_operations[_key(filled.size, ASYNC_RAW + name)] = functools.partial(
                        _async_raw_read, async_column, filled.chronicum_id
                    )
        self._time_and_add_rows(READ, chronica, operations, async_operations, runner, run)

    def _measure_appends(self, chronica: list[Filled], runner: asyncio.Runner, run: int) -> None:
        """Time ``record_actum`` and each column's append into its own chronicum, in the same rounds."""
        assert self.chronicarius is not None
        rounds = self.settings.warmup + self.settings.repeat
        operations: dict[str, Callable[[int], object]] = {}
        async_operations: dict[str, Callable[[int], Awaitable[object]]] = {}
        for filled in chronica:
            store_acta = [story_actum(filled.chronicum_id, index) for index in range(rounds)]
            operations[_key(filled.size, STORE)] = _appender(self.chronicarius, store_acta)
            for name, column in self.columns.items():
                raw_acta = [
                    story_actum(filled.append_ids[name], index, with_id=True) for index in range(rounds)
                ]
                operations[_key(filled.size, name)] = _raw_appender(column, raw_acta)
            if self.async_chronicarius is not None:
                async_acta = [story_actum(filled.append_ids[ASYNC_STORE], index) for index in range(rounds)]
                async_operations[_key(filled.size, ASYNC_STORE)] = _async_appender(
                    self.async_chronicarius, async_acta
                )
                for name, async_column in self.async_columns.items():
                    chronicum_id = filled.append_ids[ASYNC_RAW + name]
                    raw_acta = [story_actum(chronicum_id, index, with_id=True) for index in range(rounds)]
                    async_operations[_key(filled.size, ASYNC_RAW + name)] = _async_raw_appender(
                        async_column, raw_acta
                    )
        self._time_and_add_rows(RECORD, chronica, operations, async_operations, runner, run)

    def _time(
        self,
        operations: dict[str, Callable[[int], object]],
        runner: asyncio.Runner,
        async_operations: dict[str, Callable[[int], Awaitable[object]]] | None = None,
    ) -> dict[str, Timing]:
        """Time ``operations`` in shuffled rounds (the run's seed), within ``--max-seconds``."""
        settings = self.settings
        return runner.run(
            time_interleaved(
                operations, settings.warmup, settings.repeat, async_operations, settings.max_seconds, self.rng
            )
        )

    def _time_and_add_rows(
        self,
        operation: str,
        chronica: list[Filled],
        operations: dict[str, Callable[[int], object]],
        async_operations: dict[str, Callable[[int], Awaitable[object]]],
        runner: asyncio.Runner,
        run: int,
    ) -> None:
        """Time every column of ``operation`` in the same rounds, then add its rows per history size."""
        print(f"  run {run}: timing {operation}", file=sys.stderr, flush=True)
        timings = self._time(operations, runner, async_operations)
        self._note_if_cut(operation, timings)
        for filled in chronica:
            self._add_rows(operation, filled.size, timings, run)

    def _note_if_cut(self, operation: str, timings: dict[str, Timing]) -> None:
        count = min(timing.count for timing in timings.values())
        if count < self.settings.repeat:
            self.note(
                f"{operation}: {count} timed calls per column, not {self.settings.repeat} (--max-seconds)"
            )

    def _add_rows(self, operation: str, size: int, all_timings: dict[str, Timing], run: int) -> None:
        """Add the sync row (store beside each column) and, if timed, the async row for ``size``."""
        prefix = _key(size, "")
        timings = {
            key[len(prefix) :]: timing for key, timing in all_timings.items() if key.startswith(prefix)
        }
        store = timings[STORE]
        raw = {
            name: timing for name, timing in timings.items() if name != STORE and not name.startswith("\x00")
        }
        ratio = {name: store.median_ns / timing.median_ns for name, timing in raw.items()}
        self.report.latency.append(LatencyRow(operation, "sync", size, run, store, raw, ratio))
        if ASYNC_STORE not in timings:
            return
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
        if FLOOR in async_raw and FLOOR in raw:
            async_ratio["driver"] = async_raw[FLOOR].median_ns / raw[FLOOR].median_ns
        self.report.latency.append(LatencyRow(operation, "async", size, run, timing, async_raw, async_ratio))

    def _flatness(self) -> None:
        """Per run, the last-20 median at the largest history over the smallest, store and columns."""
        sizes = sorted(self.settings.sizes)
        if len(sizes) < 2:
            return
        reads = {
            (row.run, row.flavour, row.history): row for row in self.report.latency if row.operation == READ
        }
        for run in range(1, self.settings.runs + 1):
            for flavour in ("sync", "async"):
                small, large = reads.get((run, flavour, sizes[0])), reads.get((run, flavour, sizes[-1]))
                if small is None or large is None:
                    continue
                flat = self.report.flat
                flat.setdefault(f"chronica {flavour}", []).append(
                    large.store.median_ns / small.store.median_ns
                )
                for name in large.raw:
                    if name in small.raw:
                        label = name if flavour == "sync" else f"{name} async"
                        flat.setdefault(label, []).append(
                            large.raw[name].median_ns / small.raw[name].median_ns
                        )

    # -- many writers ----------------------------------------------------------------------

    def _measure_concurrent(self, runner: asyncio.Runner) -> None:
        """The many-writer rows (``benchmarks/writers.py``)."""
        settings = self.settings
        writers = ManyWriters(
            WritersSettings(
                self.url,
                dict(settings.options),
                settings.writers,
                settings.writes_per_writer,
                max(2, min(settings.warmup, 10)),
                settings.concurrent_rounds,
                self.async_chronicarius is not None,
            ),
            self.baseline,
            self.loader,
            self.rng,
            self.budget,
            self.note,
        )
        self.report.concurrent = writers.measure(runner)

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
        """Time ``record_acta`` of a batch against ``record_actum`` of one, in the same rounds, each run.

        Each appends into a chronicum of its own, created (and its owner cached) before timing.
        """
        assert self.chronicarius is not None
        if not self._capable(BATCH, "batch"):
            return
        chronicarius, size = self.chronicarius, self.settings.batch_size
        rounds = self.settings.warmup + self.settings.repeat
        print(f"  batch of {size} against one append", file=sys.stderr, flush=True)
        for run in range(1, self.settings.runs + 1):
            single_id, batch_id = fresh_id("single"), fresh_id(f"batch-{size}")
            singles = [story_actum(single_id, index) for index in range(rounds + 1)]
            batches = [
                [story_actum(batch_id, number * size + index) for index in range(size)]
                for number in range(rounds + 1)
            ]
            chronicarius.record_actum(OWNER, singles[rounds])  # creates it: the rounds append
            chronicarius.record_acta(OWNER, batches[rounds])
            operations: dict[str, Callable[[int], object]] = {
                "single": functools.partial(_record_one, chronicarius, singles),
                "batch": functools.partial(_record_batch, chronicarius, batches),
            }
            timings = self._time(operations, runner)
            self._note_if_cut(f"record_acta of {size}", timings)
            single, batch = timings["single"], timings["batch"]
            self.report.batch.append(BatchRow(size, run, single, batch, batch.median_ns / single.median_ns))

    def _measure_listing(self, runner: asyncio.Runner) -> None:
        """Time the first page of one owner's chronica as other owners' chronica grow in number.

        The owner's chronica are made through ``record_actum``; the other owners' are bulk-loaded
        through the loader's ``fill_chronica`` (else ``Store.create`` for each), before each count
        is timed (``--runs`` times). The counts share the store's tables, so they run one after
        the other, not interleaved.
        """
        assert self.chronicarius is not None
        if not self._capable(LISTING, "listing"):
            return
        chronicarius, owned, limit = self.chronicarius, self.settings.owned, 50
        label = secrets.token_hex(4)
        owner = f"bench-lister-{label}"
        for index in range(owned):
            chronicarius.record_actum(owner, story_actum(fresh_id(f"listed-{index}"), index))
        loaded = 0
        medians: dict[int, list[float]] = {}
        for others in sorted(set(self.settings.others)):
            if others > loaded:
                self._load_other_owners(label, loaded, others)
                loaded = others
            page = chronicarius.list_chronica(owner, limit=limit)
            if len(page.chronica) != min(owned, limit) or any(one.owner_id != owner for one in page.chronica):
                self.note(f"listing with {others:,} others: the first page has {len(page.chronica)} chronica")
            print(f"  listing with {others:,} other owners' chronica: timing", file=sys.stderr, flush=True)
            for run in range(1, self.settings.runs + 1):
                timings = self._time(
                    {"list": lambda _: chronicarius.list_chronica(owner, limit=limit)}, runner
                )
                self._note_if_cut(f"list_chronica with {others:,} others", timings)
                self.report.listing.append(ListingRow(others, owned, limit, run, timings["list"]))
                medians.setdefault(run, []).append(timings["list"].median_ns)
        if len(set(self.settings.others)) >= 2:
            self.report.listing_flat = [values[-1] / values[0] for values in medians.values()]

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
        fill = getattr(self.loader, "fill_chronica", None) if self._fills_store() else None
        if fill is not None:
            fill(chronica)
        else:
            for chronicum in chronica:
                self.store.create(chronicum)
        seconds = time.perf_counter() - loading
        how = "the loader's fill_chronica" if fill is not None else "Store.create"
        print(f"  listing: loaded through {how} in {seconds:.1f} s", file=sys.stderr, flush=True)


def _key(size: int, name: str) -> str:
    """Name of a timed operation: its history size and its column."""
    return f"{size}\x1f{name}"


async def _fill_async(chronicarius: AsyncChronicarius, chronicum_id: str, size: int) -> None:
    """Fill ``chronicum_id`` with ``size`` story acta through the asyncio store (memory://)."""
    for index in range(size):
        await chronicarius.record_actum(OWNER, story_actum(chronicum_id, index))


async def _open_async(url: str, options: dict[str, str]) -> AsyncStore:
    """Open the asyncio store inside the run's event loop."""
    return open_async_store(url, **options)


def _store_read(chronicarius: Chronicarius, chronicum_id: str, kinds: list[ActumKind], _: int) -> object:
    return chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=kinds)


def _async_store_read(
    chronicarius: AsyncChronicarius, chronicum_id: str, kinds: list[ActumKind], _: int
) -> Awaitable[object]:
    return chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=kinds)


def _record_one(chronicarius: Chronicarius, acta: list[Any], number: int) -> object:
    return chronicarius.record_actum(OWNER, acta[number])


def _record_batch(chronicarius: Chronicarius, batches: list[list[Any]], number: int) -> object:
    return chronicarius.record_acta(OWNER, batches[number])


def _appender(chronicarius: Chronicarius, acta: list[Any]) -> Callable[[int], object]:
    return lambda number: chronicarius.record_actum(OWNER, acta[number])


def _async_appender(chronicarius: AsyncChronicarius, acta: list[Any]) -> Callable[[int], Awaitable[object]]:
    return lambda number: chronicarius.record_actum(OWNER, acta[number])


def _raw_read(column: Any, chronicum_id: str, _: int) -> object:
    return column.last_messages(chronicum_id, LAST_N)


def _async_raw_read(column: Any, chronicum_id: str, _: int) -> Awaitable[object]:
    result: Awaitable[object] = column.last_messages(chronicum_id, LAST_N)
    return result


def _raw_appender(column: Any, acta: list[Any]) -> Callable[[int], object]:
    return lambda number: column.append(acta[number])


def _async_raw_appender(column: Any, acta: list[Any]) -> Callable[[int], Awaitable[object]]:
    return lambda number: column.append(acta[number])
