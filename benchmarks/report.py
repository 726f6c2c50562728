"""What ``benchmarks.run`` measured for one store URL, and how it is printed.

Every timed phase is repeated ``--runs`` times and keeps each run's rows (``run`` 1, 2, ...):
the printed tables show the median over the runs, a ratio's spread beside it, and the targets
are judged on the median of the runs' values (``benchmarks/judge.py``). The many-writer rows
keep each round's seconds.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.acta import LAST_N
from benchmarks.targets import Verdict
from benchmarks.timing import Timing

__all__ = [
    "READ",
    "RECORD",
    "SHARED_WRITERS",
    "BatchRow",
    "ConcurrentRow",
    "LatencyRow",
    "ListingRow",
    "Report",
    "machine",
    "render",
]

RECORD = "record_actum"
"""The append operation's name in the latency rows."""

READ = f"get_acta last {LAST_N} messages"
"""The context window's name in the latency rows."""

SHARED_WRITERS = "chronica threads, one chronicum"
"""The many-writer row of every thread appending to one shared chronicum (the other rows each
write to a chronicum a writer): acta/s under commit-ordered visibility."""


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """One operation at one history size in one run.

    Attributes:
        operation: :data:`RECORD` or :data:`READ`.
        flavour: ``"sync"`` or ``"async"``.
        history: how many acta the chronicum held when the measurement started.
        run: which run (from 1).
        store: the Chronicarius call over the store.
        raw: per raw column, the column doing the same job (async rows: the asyncio columns).
        ratio: store median / column median per column; async rows add ``"sync"`` (async store /
            sync store, same run) and, with an asyncio floor, ``"driver"`` (asyncio floor /
            blocking floor: what the driver's own asyncio API costs).
    """

    operation: str
    flavour: str
    history: int
    run: int
    store: Timing
    raw: dict[str, Timing] = field(default_factory=dict)
    ratio: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConcurrentRow:
    """Many writers at once, each on its own chronicum (all on one in the :data:`SHARED_WRITERS` row).

    Attributes:
        writer: ``"chronica threads"``, ``"chronica async tasks"``, ``"<column> threads"``,
            ``"<column> async tasks"`` or :data:`SHARED_WRITERS`.
        writers: how many threads or tasks.
        writes: timed writes in total a round (all writers).
        seconds: the median over the rounds it ran of its wall-clock seconds.
        per_second: ``writes / seconds``.
        rounds: each round's seconds, ``None`` where it failed or was refused.
        connections: the most server connections this process held once the row's writers were
            warm, over its rounds (``None``: no server, or not counted).
    """

    writer: str
    writers: int
    writes: int
    seconds: float
    per_second: float
    rounds: list[float | None] = field(default_factory=list)
    connections: int | None = None


@dataclass(frozen=True, slots=True)
class BatchRow:
    """A batch against one append in one run, each into a chronicum of its own.

    Attributes:
        size: acta per batch.
        run: which run (from 1).
        single: ``Chronicarius.record_actum`` of one actum.
        batch: ``Chronicarius.record_acta`` of ``size`` acta.
        ratio: batch median / single median.
    """

    size: int
    run: int
    single: Timing
    batch: Timing
    ratio: float


@dataclass(frozen=True, slots=True)
class ListingRow:
    """The first page of one owner's chronica while other owners hold ``others`` chronica, one run.

    Attributes:
        others: chronica held by other owners when it was timed.
        owned: chronica the listed owner holds (all on the first page).
        limit: the page size asked for.
        run: which run (from 1).
        store: ``Chronicarius.list_chronica(owner, limit=limit)``.
    """

    others: int
    owned: int
    limit: int
    run: int
    store: Timing


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
    runs: int = 1
    seed: int = 0
    floor: str = ""
    budget: str = ""
    raw_columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    flat: dict[str, list[float]] = field(default_factory=dict)
    concurrent: list[ConcurrentRow] = field(default_factory=list)
    batch: list[BatchRow] = field(default_factory=list)
    listing: list[ListingRow] = field(default_factory=list)
    listing_flat: list[float] = field(default_factory=list)
    targets: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0


def machine() -> str:
    """CPU count and load average now: timings on a loaded machine are read with that in mind."""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{os.cpu_count()} CPUs, load average {load}"


def _micro(nanoseconds: float | None) -> str:
    if nanoseconds is None:
        return ""
    microseconds = nanoseconds / 1000
    return f"{microseconds:.2f}" if microseconds < 100 else f"{microseconds:.0f}"


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def _spread(values: Sequence[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else ""


def table(header: list[str], rows: list[list[str]], left: int = 3) -> str:
    """A plain-text table: the first ``left`` columns left-aligned, the others right-aligned."""
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(width) if column < left else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _latency_table(report: Report) -> str:
    """The latency rows, one line per operation, flavour and size: medians over the runs."""
    groups: dict[tuple[str, str, int], list[LatencyRow]] = {}
    for row in report.latency:
        groups.setdefault((row.operation, row.flavour, row.history), []).append(row)
    header = ["operation", "flavour", "history", "chronica", "p90", "cpu"]
    for name in report.raw_columns:
        header += [name, "cpu", "ratio"]
    header += ["floor spread", "async/sync", "driver async/sync"]
    floor = report.raw_columns[0] if report.raw_columns else None
    lines = []
    for (operation, flavour, size), rows in sorted(
        groups.items(), key=lambda item: (item[0][0] != RECORD, item[0][2], item[0][1] != "sync")
    ):
        cpu = [row.store.cpu_ns for row in rows if row.store.cpu_ns is not None]
        line = [
            operation,
            flavour,
            f"{size:,}",
            _micro(_median([row.store.median_ns for row in rows])),
            _micro(_median([row.store.p90_ns for row in rows])),
            _micro(_median(cpu)) if cpu else "",
        ]
        for name in report.raw_columns:
            timings = [row.raw[name] for row in rows if name in row.raw]
            if not timings:
                line += ["", "", ""]
                continue
            raw_cpu = [timing.cpu_ns for timing in timings if timing.cpu_ns is not None]
            ratios = [row.ratio[name] for row in rows if name in row.ratio]
            line += [
                _micro(_median([timing.median_ns for timing in timings])),
                _micro(_median(raw_cpu)) if raw_cpu else "",
                f"{_median(ratios):.2f}x",
            ]
        floor_ratios = [row.ratio[floor] for row in rows if floor is not None and floor in row.ratio]
        line.append(_spread(floor_ratios))
        for key in ("sync", "driver"):
            values = [row.ratio[key] for row in rows if key in row.ratio]
            line.append(f"{_median(values):.2f}x" if values else "")
        lines.append(line)
    return table(header, lines)


def _concurrent_table(report: Report) -> list[str]:
    out = [""]
    rows = [
        [
            row.writer,
            str(row.writers),
            f"{row.writes:,}",
            f"{row.seconds:.3f}" if row.seconds else "-",
            f"{row.per_second:,.0f}" if row.per_second else "-",
            _spread([seconds for seconds in row.rounds if seconds is not None]),
            f"{sum(seconds is not None for seconds in row.rounds)}/{len(row.rounds)}",
            "" if row.connections is None else str(row.connections),
        ]
        for row in report.concurrent
    ]
    header = ["writers (each on its own chronicum but one)", "count", "writes", "seconds", "writes/s"]
    header += ["round spread", "rounds", "connections"]
    out.append(table(header, rows, left=1))
    return out


def _capability_lines(report: Report) -> list[str]:
    """The batch and listing lines, when they were measured."""
    out: list[str] = []
    if report.batch:
        size = report.batch[0].size
        single = _median([row.single.median_ns for row in report.batch])
        batch = _median([row.batch.median_ns for row in report.batch])
        ratios = [row.ratio for row in report.batch]
        ratio = _median(ratios)
        out.append(
            f"\nbatch of {size} against one append: record_acta {_micro(batch)} us, record_actum"
            f" {_micro(single)} us; batch/single: {ratio:.2f}x {_spread(ratios)};"
            f" per actum {ratio / size:.2f}x"
        )
    if report.listing:
        first = report.listing[0]
        counts = sorted({row.others for row in report.listing})
        by_count = {
            others: _median([row.store.median_ns for row in report.listing if row.others == others])
            for others in counts
        }
        medians = ", ".join(f"{others:,} others {_micro(median)} us" for others, median in by_count.items())
        out.append(f"list_chronica limit {first.limit}, owner holds {first.owned}: {medians}")
        if report.listing_flat:
            flat = _median(report.listing_flat)
            out.append(
                f"listing {counts[-1]:,}/{counts[0]:,}: {flat:.2f}x {_spread(report.listing_flat)}"
                " (timed one count after the other)"
            )
    return out


def render(report: Report) -> str:
    """Return the report as readable text (latencies in microseconds)."""
    out: list[str] = []
    options = " ".join(f"{key}={value}" for key, value in report.options.items())
    out.append(f"== {report.store_url} {options}".rstrip() + f"  (backend {report.backend}, {report.python})")
    out.append(f"   {report.machine} at the start ({report.started_at})")
    out.append(
        f"   {report.runs} run(s) of {report.repeat} timed calls per column and size; columns in an order"
        f" shuffled each round, seed {report.seed} (--seed {report.seed} repeats it)"
    )
    if report.floor:
        out.append(f"   floor: {report.floor}")
    if report.budget:
        out.append(f"   {report.budget}")
    out.append("   times in microseconds (medians over the runs); cpu: client CPU per call (process_time)")
    if report.latency:
        out.append(_latency_table(report))
    if report.flat:
        sizes = sorted(report.sizes)
        flat = ", ".join(f"{name} {_median(values):.2f}x" for name, values in report.flat.items() if values)
        out.append(f"\nflat (last-{LAST_N} median at {sizes[-1]:,} / at {sizes[0]:,}): {flat}")
    if report.concurrent:
        out += _concurrent_table(report)
    out += _capability_lines(report)
    if report.targets:
        out.append("\ntargets (median of the runs, or of the rounds for writers; spread in brackets):")
        out += [f"  {verdict.line()}" for verdict in report.targets]
    out += [f"note: {note}" for note in report.notes]
    out.append(f"(run took {report.seconds:.1f} s)")
    return "\n".join(out)
