"""The performance targets, as data: ``benchmarks/targets.toml`` read into :class:`Target` rows.

A harness asks for the rows it judges (:func:`targets_for`), computes each row's value once per
run or round (the measures it knows are listed in :data:`MEASURES`), and turns the values into a
:class:`Verdict`: the median of the values against the row's limit, with their spread. A row
whose measure a run did not take is left out (a note says so where it matters). Adding a target
is adding a row to the file; a new measure is a name here and its computation in the harness
that judges it (``benchmarks/judge.py`` for ``run``, ``benchmarks/side_by_side.py``,
``benchmarks/peers.py``, ``benchmarks/sqlite_writers.py`` and ``benchmarks/governance.py``).
"""

from __future__ import annotations

import statistics
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "MEASURES",
    "TARGETS_FILE",
    "Target",
    "TargetsError",
    "Verdict",
    "load_targets",
    "targets_for",
]

TARGETS_FILE = Path(__file__).with_name("targets.toml")
"""Where the targets are kept."""

MEASURES: dict[str, tuple[str, ...]] = {
    "run": (
        "read",
        "append",
        "read_us",
        "append_us",
        "flat",
        "threads",
        "tasks",
        "async",
        "batch",
        "listing",
    ),
    "side_by_side": ("read", "append"),
    "peers": ("read", "read_async", "append", "append_async", "threads", "tasks"),
    "governance": ("encrypted_append", "encrypted_read", "tracing", "no_provider"),
}
"""Per harness, the measures it computes (a row naming another is refused when the file is read)."""

_KEYS = {
    "harness",
    "measure",
    "at_most",
    "at_least",
    "backend",
    "schemes",
    "against",
    "store",
    "peer",
    "or_driver_times",
    "why",
}


class TargetsError(ValueError):
    """The targets file has a row the harness cannot judge (its message names the row and key)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One row of the targets file.

    Attributes:
        harness: the program that judges it (a key of :data:`MEASURES`).
        measure: what is compared.
        at_most: the highest value that meets it (lower is better), or ``None``.
        at_least: the lowest value that meets it (higher is better), or ``None``.
        backend: ``run``: the store's backend name.
        schemes: ``run``: the URL scheme prefixes it applies to (empty: any).
        against: the column (``run``) or store scheme (``side_by_side``) compared with.
        store: ``side_by_side``: the store scheme judged.
        peer: ``peers``: the peer compared with.
        or_driver_times: ``run``'s ``async``: the limit is at least this many times the
            driver's own asyncio/blocking ratio.
        why: where the target comes from.
    """

    harness: str
    measure: str
    at_most: float | None = None
    at_least: float | None = None
    backend: str | None = None
    schemes: tuple[str, ...] = ()
    against: str | None = None
    store: str | None = None
    peer: str | None = None
    or_driver_times: float | None = None
    why: str = ""

    @property
    def limit(self) -> float:
        """The limit, whichever side it is on."""
        value = self.at_most if self.at_most is not None else self.at_least
        assert value is not None
        return value

    def applies_to(self, url: str) -> bool:
        """Whether a store at ``url`` is within the row's ``schemes`` (any, when it names none)."""
        scheme = url.partition("://")[0].lower()
        return not self.schemes or any(scheme.startswith(prefix) for prefix in self.schemes)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A target judged on the median of its values (one a run or round).

    Attributes:
        target: the row as printed (what, the comparison, the limit).
        value: the median of ``values``.
        holds: whether ``value`` meets the limit.
        values: each run's (or round's) value, in order.
        limit: the limit applied.
    """

    target: str
    value: float
    holds: bool
    values: list[float] = field(default_factory=list)
    limit: float = 0.0
    over: str = "runs"

    @classmethod
    def judge(
        cls,
        target: Target,
        text: str,
        values: Sequence[float],
        limit: float | None = None,
        over: str = "runs",
    ) -> Verdict:
        """Judge ``target`` (printed as ``text``) on the median of ``values`` (at least one), each
        value one of ``over`` (``"runs"`` or ``"rounds"``)."""
        applied = target.limit if limit is None else limit
        value = float(statistics.median(values))
        holds = value <= applied if target.at_most is not None else value >= applied
        return cls(text, value, holds, [float(one) for one in values], applied, over)

    def spread(self) -> str:
        """``"3 runs 1.05-1.20"``: how many values and their range (one value: ``"1 run"``)."""
        if len(self.values) == 1:
            return f"1 {self.over.removesuffix('s')}"
        return f"{len(self.values)} {self.over} {min(self.values):.2f}-{max(self.values):.2f}"

    def line(self) -> str:
        """The verdict as one printed line: ``ok``/``MISSED``, the target, the median, the spread."""
        mark = "ok    " if self.holds else "MISSED"
        return f"{mark} {self.target}: {self.value:.2f} ({self.spread()})"


def _target(row: dict[str, Any], number: int) -> Target:
    where = f"targets.toml, target {number}"
    unknown = set(row) - _KEYS
    if unknown:
        raise TargetsError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    harness, measure = row.get("harness"), row.get("measure")
    if harness not in MEASURES:
        raise TargetsError(f"{where}: harness must be one of {', '.join(MEASURES)}, got {harness!r}")
    if measure not in MEASURES[harness]:
        raise TargetsError(f"{where}: {harness} measures {', '.join(MEASURES[harness])}, got {measure!r}")
    if ("at_most" in row) == ("at_least" in row):
        raise TargetsError(f"{where}: give exactly one of at_most and at_least")
    for key in ("at_most", "at_least", "or_driver_times"):
        if key in row and not isinstance(row[key], int | float):
            raise TargetsError(f"{where}: {key} must be a number, got {row[key]!r}")
    return Target(
        harness=harness,
        measure=measure,
        at_most=None if "at_most" not in row else float(row["at_most"]),
        at_least=None if "at_least" not in row else float(row["at_least"]),
        backend=row.get("backend"),
        schemes=tuple(row.get("schemes", ())),
        against=row.get("against"),
        store=row.get("store"),
        peer=row.get("peer"),
        or_driver_times=row.get("or_driver_times"),
        why=row.get("why", ""),
    )


def load_targets(path: Path = TARGETS_FILE) -> list[Target]:
    """Read every target row of ``path``, in the file's order.

    Raises:
        TargetsError: a row names an unknown harness, measure or key, or gives no limit or two.
        tomllib.TOMLDecodeError: the file is not TOML.
        OSError: the file cannot be read.
    """
    with path.open("rb") as file:
        document = tomllib.load(file)
    return [_target(row, number) for number, row in enumerate(document.get("target", []), start=1)]


def targets_for(harness: str, path: Path = TARGETS_FILE, **selectors: str) -> list[Target]:
    """The rows of ``harness`` whose selectors (``backend=``, ``peer=``, ``store=``) match.

    A row without a selector's key matches any value of it. Raises as :func:`load_targets`.
    """
    return [
        target
        for target in load_targets(path)
        if target.harness == harness
        and all(getattr(target, key) in (None, value) for key, value in selectors.items())
    ]
