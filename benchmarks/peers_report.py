"""What ``benchmarks.peers`` measured for one peer, how it is printed, and its targets.

The targets are the ``peers`` rows of ``benchmarks/targets.toml`` for the peer: a latency
target is judged at every history size (one line a size), a writers target on the median of the
rounds' ratios, with their spread.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.targets import Verdict, targets_for
from benchmarks.timing import Timing

# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """One operation at one history size: Chronica (blocking and asyncio) beside the peer.

    Attributes:
        peer: the peer's key.
        operation: ``"last 20"`` or ``"append"``.
        history: items in the session when timing started.
        chronica: ``Chronicarius`` (blocking store).
        chronica_async: ``AsyncChronicarius``, when the backend has an asyncio store.
        peer_timing: the peer's own call.
    """

    peer: str
    operation: str
    history: int
    chronica: Timing
    chronica_async: Timing | None
    peer_timing: Timing

    @property
    def ratio(self) -> float:
        """Chronica (blocking) median / the peer's median."""
        return self.chronica.median_ns / self.peer_timing.median_ns

    @property
    def async_ratio(self) -> float | None:
        """Chronica (asyncio) median / the peer's median, when timed."""
        if self.chronica_async is None:
            return None
        return self.chronica_async.median_ns / self.peer_timing.median_ns


@dataclass(frozen=True, slots=True)
class WritersRow:
    """Many writers at once: acta (items) per second, the median over the rounds.

    Attributes:
        peer: the peer's key.
        shared: all writers on one session (else one session each).
        writer: ``"chronica threads"``, ``"chronica tasks"``, ``"peer threads"`` or ``"peer tasks"``.
        writers: how many threads or tasks.
        per_second: median over the rounds that finished of writes / seconds (0.0: none did).
        rounds: each finished round's writes per second.
        failures: why each other round failed (a writer's first error).
    """

    peer: str
    shared: bool
    writer: str
    writers: int
    per_second: float
    rounds: list[float]
    failures: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PeerReport:
    """Everything measured for one peer (``--json`` writes a list of these)."""

    peer: str
    title: str
    database: str
    chronica_url: str
    last_twenty: str
    asynchronous: bool
    machine: str
    started_at: str
    latency: list[LatencyRow] = field(default_factory=list)
    writers: list[WritersRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """This report as plain JSON values, with every ratio computed."""
        document = asdict(self)
        for row, encoded in zip(self.latency, document["latency"], strict=True):
            encoded["ratio"] = row.ratio
            encoded["async_ratio"] = row.async_ratio
        return document


def machine() -> str:
    """CPU count and load average now: timings on a loaded machine are read with that in mind."""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"{os.cpu_count()} CPUs, load average {load}"


def milliseconds(nanoseconds: float) -> str:
    """``nanoseconds`` as milliseconds, 3 significant digits or more."""
    value = nanoseconds / 1e6
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table, columns padded to their widest cell."""
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    )


_LATENCY = {
    "read": ("last 20", False),
    "read_async": ("last 20", True),
    "append": ("append", False),
    "append_async": ("append", True),
}
"""Per latency measure of a ``peers`` target: the operation and whether it is the asyncio ratio."""

_WRITERS = {"threads": "chronica threads", "tasks": "chronica tasks"}
"""Per writers measure of a ``peers`` target: Chronica's row (against the peer's own writers)."""


def verdicts(reports: Sequence[PeerReport]) -> list[Verdict]:
    """The ``peers`` targets of each report's peer that the run measured, judged.

    A latency target is judged at each history size (its one value there); a writers target on
    the median of the rounds' ratios of Chronica's row to the peer's (one sessions each).
    """
    found = []
    for report in reports:
        for target in targets_for("peers", peer=report.peer):
            sign = "<=" if target.at_most is not None else ">="
            limit = f"{sign} {target.limit:g}x {report.peer}"
            if target.measure in _LATENCY:
                operation, asynchronous = _LATENCY[target.measure]
                for row in report.latency:
                    ratio = row.async_ratio if asynchronous else row.ratio
                    if row.operation != operation or ratio is None:
                        continue
                    flavour = " (asyncio)" if asynchronous else ""
                    text = f"{operation}{flavour} at {row.history:,} {limit}"
                    found.append(Verdict.judge(target, text, [ratio]))
                continue
            writer = _WRITERS[target.measure]
            ours = [row for row in report.writers if row.writer == writer and not row.shared and row.rounds]
            theirs = [
                row
                for row in report.writers
                if row.writer.startswith("peer") and not row.shared and row.rounds
            ]
            if ours and theirs:
                ratios = [own / other for own, other in zip(ours[0].rounds, theirs[0].rounds, strict=False)]
                text = f"{ours[0].writers} {writer} {limit}'s {theirs[0].writer}"
                found.append(Verdict.judge(target, text, ratios, over="rounds"))
    return found


def _rate(row: WritersRow) -> str:
    """Writes per second, with how many rounds failed (a writer's error ends its round)."""
    if not row.failures:
        return f"{row.per_second:,.0f}"
    rounds = len(row.rounds) + len(row.failures)
    if not row.rounds:
        return f"failed ({len(row.failures)} of {rounds} rounds)"
    return f"{row.per_second:,.0f} ({len(row.failures)} of {rounds} rounds failed)"


def format_reports(reports: Sequence[PeerReport]) -> str:
    """The latency and writers tables of every report, as printed at the end of a run."""
    latency = [
        [
            report.peer,
            row.operation,
            f"{row.history:,}",
            milliseconds(row.chronica.median_ns),
            "-" if row.chronica_async is None else milliseconds(row.chronica_async.median_ns),
            milliseconds(row.peer_timing.median_ns),
            f"{row.ratio:.2f}",
            "-" if row.async_ratio is None else f"{row.async_ratio:.2f}",
            str(min(row.chronica.count, row.peer_timing.count)),
        ]
        for report in reports
        for row in report.latency
    ]
    writers = []
    for report in reports:
        for shared in (False, True):
            rows = [row for row in report.writers if row.shared is shared]
            peer_rows = [row for row in rows if row.writer.startswith("peer")]
            if not peer_rows:
                continue
            peer_row = peer_rows[0]
            for row in rows:
                if row.writer.startswith("peer"):
                    continue
                writers.append(
                    [
                        report.peer,
                        "one shared" if shared else "one each",
                        f"{row.writers} {row.writer}",
                        _rate(row),
                        f"{peer_row.writers} {peer_row.writer}",
                        _rate(peer_row),
                        f"{row.per_second / peer_row.per_second:.2f}"
                        if row.rounds and peer_row.rounds
                        else "-",
                    ]
                )
    parts = []
    if latency:
        header = ["peer", "operation", "history", "chronica ms", "async ms", "peer ms", "ratio"]
        header += ["async ratio", "calls"]
        parts.append(table(header, latency))
    if writers:
        header = ["peer", "sessions", "chronica", "acta/s", "peer", "items/s", "ratio"]
        parts.append(table(header, writers))
    targets = verdicts(reports)
    if targets:
        parts.append("\n".join(verdict.line() for verdict in targets))
    return "\n\n".join(parts)
