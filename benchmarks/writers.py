"""``benchmarks.run``'s many-writer rows: 40 threads or tasks appending at once, row by row.

Each row runs once a round, the rows of a round in a shuffled order, and reports its median over
the rounds. No row holds more server connections than its writers plus a few: a Chronica row
runs on a store opened for it and closed after it (its pool never grows past its writers), and
a raw row gives each writer a column of its own, opened in the writer and closed when it is
done. Before a row starts, :class:`benchmarks.connections.Budget` checks what this process holds
now plus what the row may add against ``--max-connections``, and refuses the row (a note says
so) when that would pass it; the connections held once the row's writers are warm are printed.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.acta import OWNER, fresh_id, story_actum
from benchmarks.baselines import Baseline
from benchmarks.connections import FEW, Budget, BudgetExceeded, held_connections
from benchmarks.report import SHARED_WRITERS, ConcurrentRow
from benchmarks.timing import AsyncWriter, Closer, Writer, run_tasks, run_threads, shuffled
from chronica_core import AsyncChronicarius, Chronicarius, open_async_store, open_store

__all__ = ["ManyWriters", "WritersSettings"]

Measure = Callable[[asyncio.Runner], tuple[float, int | None]]
"""One row's measurement in one round: its timed seconds and the connections held once warm."""


@dataclass(frozen=True, slots=True)
class WritersSettings:
    """What the many-writer rows run.

    Attributes:
        url: the store URL.
        options: the store's options (also given to the baseline).
        writers: threads or tasks a row.
        writes: timed writes a writer.
        warmup: untimed writes a writer first.
        rounds: rounds (each row once a round).
        with_async: whether the asyncio rows run (the backend has an asyncio store).
    """

    url: str
    options: dict[str, str]
    writers: int
    writes: int
    warmup: int
    rounds: int
    with_async: bool


def _nothing() -> None:
    """A closer for a writer that opened nothing."""


class ManyWriters:
    """Measures the many-writer rows of one store.

    Args:
        settings: what to run.
        baseline: the backend's raw baseline (``None``: Chronica's rows only).
        loader: the baseline's loader (creates the raw writers' chronica, from this thread).
        rng: draws each round's order of the rows.
        budget: the connection budget.
        note: adds a line to the report's notes.
    """

    def __init__(
        self,
        settings: WritersSettings,
        baseline: Baseline | None,
        loader: Any,
        rng: random.Random,
        budget: Budget,
        note: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.baseline = baseline
        self.loader = loader
        self.rng = rng
        self.budget = budget
        self.note = note

    def rows(self) -> dict[str, Measure]:
        """Every row's measurement, by row name."""
        rows: dict[str, Measure] = {"chronica threads": self._chronica_threads, SHARED_WRITERS: self._shared}
        if self.baseline is not None:
            for name in self.baseline.columns:
                rows[f"{name} threads"] = lambda runner, name=name: self._raw_threads(name)  # type: ignore[misc]
        if self.settings.with_async:
            rows["chronica async tasks"] = self._chronica_tasks
            if self.baseline is not None:
                for name in self.baseline.async_columns:
                    rows[f"{name} async tasks"] = lambda runner, name=name: self._raw_tasks(runner, name)  # type: ignore[misc]
        return rows

    def measure(self, runner: asyncio.Runner) -> list[ConcurrentRow]:
        """Run every row once a round, in a shuffled order each round; a row each, its median."""
        rows = self.rows()
        seconds: dict[str, list[float | None]] = {name: [] for name in rows}
        connections: dict[str, int | None] = dict.fromkeys(rows)
        writers = self.settings.writers
        for number in range(self.settings.rounds):
            print(
                f"  many writers: round {number + 1} of {self.settings.rounds}", file=sys.stderr, flush=True
            )
            for name in shuffled(list(rows), self.rng):
                taken, held = self._one(name, rows[name], runner)
                seconds[name].append(taken)
                if held is not None:
                    connections[name] = max(held, connections[name] or 0)
        total = writers * self.settings.writes
        result = []
        for name, values in seconds.items():
            done = [value for value in values if value is not None]
            median = statistics.median(done) if done else 0.0
            per_second = total / median if median else 0.0
            result.append(ConcurrentRow(name, writers, total, median, per_second, values, connections[name]))
        return result

    def _one(self, name: str, measure: Measure, runner: asyncio.Runner) -> tuple[float | None, int | None]:
        """One row in one round: refused past the budget, failed (a note), or its seconds."""
        writers = self.settings.writers
        try:
            before = self.budget.admit(name, writers)
        except BudgetExceeded as refusal:
            self.note(str(refusal))
            return None, None
        try:
            taken, held = measure(runner)
        except Exception as error:  # noqa: BLE001 - reported in the notes, the run goes on
            self.note(f"{writers} {name}: failed: {error}")
            return None, None
        if held is not None and before is not None and held - before > writers + FEW:
            self.note(
                f"{name}: held {held - before} connections more than before it,"
                f" past {writers} writers + {FEW}"
            )
        return taken, held

    def _held(self) -> int | None:
        return held_connections(self.settings.url)

    def _timed_threads(self, make: Callable[[int], tuple[Writer, Closer]]) -> tuple[float, int | None]:
        """:func:`run_threads` with this run's settings; its seconds and the connections held once warm."""
        settings = self.settings
        counted: list[int | None] = []
        taken = run_threads(
            settings.writers,
            make,
            settings.warmup,
            settings.writes,
            when_warm=lambda: counted.append(self._held()),
        )
        return taken, counted[0] if counted else None

    def _chronica_threads(self, runner: asyncio.Runner) -> tuple[float, int | None]:
        """Chronica's threads on a store of their own, timed on its second run (the first grows its pool)."""
        settings, label = self.settings, secrets.token_hex(3)
        with open_store(settings.url, **settings.options) as store:
            chronicarius = Chronicarius(store)

            def writer(run: str) -> Callable[[int], tuple[Writer, Closer]]:
                def make(index: int) -> tuple[Writer, Closer]:
                    chronicum_id = fresh_id(f"threads-{label}-{run}-{index}")
                    acta = [
                        story_actum(chronicum_id, number)
                        for number in range(settings.warmup + settings.writes)
                    ]
                    return (lambda number: chronicarius.record_actum(OWNER, acta[number])), _nothing

                return make

            run_threads(settings.writers, writer("untimed"), settings.warmup, settings.writes)
            return self._timed_threads(writer("timed"))

    def _shared(self, runner: asyncio.Runner) -> tuple[float, int | None]:
        """Every thread appending to one chronicum, on a store of their own."""
        settings = self.settings
        with open_store(settings.url, **settings.options) as store:
            chronicarius = Chronicarius(store)
            shared_id = fresh_id("shared")
            chronicarius.record_actum(OWNER, story_actum(shared_id, 0))  # created, its owner cached

            def make(index: int) -> tuple[Writer, Closer]:
                acta = [story_actum(shared_id, number) for number in range(settings.warmup + settings.writes)]
                return (lambda number: chronicarius.record_actum(OWNER, acta[number])), _nothing

            return self._timed_threads(make)

    def _writer_chronica(self, label: str) -> list[str]:
        """One chronicum a raw writer, created by the loader from this thread."""
        ids = [fresh_id(f"{label}-{index}") for index in range(self.settings.writers)]
        for chronicum_id in ids:
            self.loader.prepare(chronicum_id, OWNER)
        return ids

    def _raw_threads(self, name: str) -> tuple[float, int | None]:
        """Column ``name`` appending from many threads, each with a column (a connection) of its own."""
        assert self.baseline is not None
        settings, baseline = self.settings, self.baseline
        ids = self._writer_chronica(f"raw-threads-{secrets.token_hex(3)}")

        def make(index: int) -> tuple[Writer, Closer]:
            column = baseline.open_column(name, settings.url, settings.options)
            acta = [
                story_actum(ids[index], number, with_id=True)
                for number in range(settings.warmup + settings.writes)
            ]
            return (lambda number: column.append(acta[number])), column.close

        return self._timed_threads(make)

    def _chronica_tasks(self, runner: asyncio.Runner) -> tuple[float, int | None]:
        """Chronica's asyncio tasks on a store of their own, timed on its second run."""
        settings, label = self.settings, secrets.token_hex(3)
        store = runner.run(_open_async(settings.url, settings.options))
        chronicarius = AsyncChronicarius(store)

        def writer(run: str) -> Callable[[int], AsyncWriter]:
            def make(index: int) -> AsyncWriter:
                chronicum_id = fresh_id(f"tasks-{label}-{run}-{index}")
                acta = [
                    story_actum(chronicum_id, number) for number in range(settings.warmup + settings.writes)
                ]
                return lambda number: chronicarius.record_actum(OWNER, acta[number])

            return make

        try:
            runner.run(run_tasks(settings.writers, writer("untimed"), settings.warmup, settings.writes))
            taken = runner.run(run_tasks(settings.writers, writer("timed"), settings.warmup, settings.writes))
            held = self._held()
        finally:
            runner.run(store.close())
        return taken, held

    def _raw_tasks(self, runner: asyncio.Runner, name: str) -> tuple[float, int | None]:
        """Asyncio column ``name`` appending from many tasks, each with a column of its own."""
        assert self.baseline is not None
        settings, baseline = self.settings, self.baseline
        ids = self._writer_chronica(f"raw-tasks-{secrets.token_hex(3)}")
        columns = [baseline.open_async_column(name, settings.url, settings.options) for _ in ids]

        def make(index: int) -> AsyncWriter:
            column = columns[index]
            acta = [
                story_actum(ids[index], number, with_id=True)
                for number in range(settings.warmup + settings.writes)
            ]
            return lambda number: column.append(acta[number])

        try:
            taken = runner.run(run_tasks(settings.writers, make, settings.warmup, settings.writes))
            held = self._held()
        finally:
            for column in columns:
                runner.run(column.close())
        return taken, held


async def _open_async(url: str, options: dict[str, str]) -> Any:
    """Open the asyncio store inside the run's event loop."""
    return open_async_store(url, **options)
