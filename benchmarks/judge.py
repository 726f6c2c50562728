"""``benchmarks.run``'s targets: each row of ``targets.toml`` for the store's backend, judged.

Each measure yields one value a run (latency, batch, listing) or a round (many writers); the
verdict is on their median, with their spread (:class:`benchmarks.targets.Verdict`). A measure
the run did not take (its phase not chosen, its column missing) yields no verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from benchmarks.acta import LAST_N
from benchmarks.report import READ, RECORD, Report
from benchmarks.targets import Target, Verdict, targets_for

__all__ = ["judge"]


def _runs(report: Report) -> list[int]:
    return sorted({row.run for row in report.latency})


def _worst_ratio(report: Report, operation: str, column: str) -> list[float]:
    """Per run, the worst (highest) store/``column`` ratio of ``operation`` over the history sizes."""
    values = []
    for run in _runs(report):
        ratios = [
            row.ratio[column]
            for row in report.latency
            if row.run == run and row.flavour == "sync" and row.operation == operation and column in row.ratio
        ]
        if ratios:
            values.append(max(ratios))
    return values


def _at_largest(report: Report, operation: str) -> list[float]:
    """Per run, the store's median in microseconds at the largest history."""
    largest = max(report.sizes, default=0)
    return [
        row.store.median_ns / 1000
        for row in report.latency
        if row.flavour == "sync" and row.operation == operation and row.history == largest
    ]


def _throughput(report: Report, mine: str, theirs: str) -> list[float]:
    """Per round both ran, row ``mine``'s throughput over row ``theirs``'s (their seconds' ratio)."""
    rows = {row.writer: row for row in report.concurrent}
    if mine not in rows or theirs not in rows:
        return []
    return [
        other / own
        for own, other in zip(rows[mine].rounds, rows[theirs].rounds, strict=False)
        if own is not None and other is not None
    ]


def _async(report: Report, target: Target) -> tuple[list[float], float]:
    """Per run the worst async/sync ratio, and the limit: the target's, or ``or_driver_times``
    the driver's own asyncio/blocking ratio where that is higher (per operation and size the
    median over the runs, then the highest of those)."""
    values = []
    drivers: dict[tuple[str, int], list[float]] = {}
    for run in _runs(report):
        rows = [row for row in report.latency if row.run == run and row.flavour == "async"]
        if rows:
            values.append(max(row.ratio["sync"] for row in rows))
        for row in rows:
            if "driver" in row.ratio:
                drivers.setdefault((row.operation, row.history), []).append(row.ratio["driver"])
    limit = target.limit
    if target.or_driver_times is not None and drivers:
        driver = max(statistics.median(ratios) for ratios in drivers.values())
        limit = max(limit, target.or_driver_times * driver)
    return values, limit


def _judge_one(report: Report, target: Target) -> Verdict | None:
    measure, against = target.measure, target.against or "floor"
    limit: float | None = None
    computations: dict[str, Callable[[], tuple[list[float], str]]] = {
        "read": lambda: (_worst_ratio(report, READ, against), f"last-{LAST_N} read (worst size)"),
        "append": lambda: (_worst_ratio(report, RECORD, against), "append (worst size)"),
        "read_us": lambda: (_at_largest(report, READ), f"last-{LAST_N} read at {max(report.sizes):,} in us"),
        "append_us": lambda: (_at_largest(report, RECORD), f"append at {max(report.sizes):,} in us"),
        "flat": lambda: (report.flat.get("chronica sync", []), f"last-{LAST_N} largest/smallest history"),
        "threads": lambda: (
            _throughput(report, "chronica threads", f"{against} threads"),
            "40 threads' throughput",
        ),
        "tasks": lambda: (
            _throughput(report, "chronica async tasks", "chronica threads"),
            "40 tasks' throughput, to 40 threads'",
        ),
        "batch": lambda: (
            [row.ratio for row in report.batch],
            f"record_acta of {report.batch[0].size if report.batch else 0}, to record_actum",
        ),
        "listing": lambda: (report.listing_flat, "list_chronica first page, most/fewest others"),
    }
    if measure == "async":
        values, limit = _async(report, target)
        text = "asyncio/blocking per op (worst)"
    else:
        values, text = computations[measure]()
    if not values:
        return None
    if measure in ("read_us", "append_us"):
        return Verdict.judge(target, f"{text} <= {target.limit:g}", values)
    sign = "<=" if target.at_most is not None else ">="
    applied = target.limit if limit is None else limit
    column = f" {against}" if measure in ("read", "append", "threads") else ""
    over = "rounds" if measure in ("threads", "tasks") else "runs"
    return Verdict.judge(target, f"{text} {sign} {applied:.2f}x{column}", values, limit, over)


def judge(report: Report) -> list[Verdict]:
    """Every target of ``report``'s backend (and URL scheme) that the run measured, judged."""
    verdicts = []
    for target in targets_for("run", backend=report.backend):
        if not target.applies_to(report.store_url):
            continue
        verdict = _judge_one(report, target)
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts
