"""Resident memory beside live heap, minute by minute, from a memray capture of a soak run.

Capture with memray's native tracking, then read it back::

    memray run --native -o soak.bin -m benchmarks.soak --store URL --minutes 25 --warmup-minutes 5
    python -m benchmarks.soak_heap soak.bin

The heap is every allocation still alive (Python objects and the drivers' and SQLite's own); when
it stays flat while the resident memory grows, what grows is memory the allocator keeps after it
was freed, not memory anything holds. memray (``pip install memray``) is needed only to read the
file.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Point", "main", "per_minute"]

_MB = 2**20


@dataclass(frozen=True)
class Point:
    """One point of the curve: ``minute`` since the capture began, ``rss_mb`` and ``heap_mb`` (MB)."""

    minute: float
    rss_mb: float
    heap_mb: float


def per_minute(snapshots: Iterable[tuple[int, int, int]]) -> list[Point]:
    """The first snapshot of each whole minute, and the last one.

    Args:
        snapshots: ``(time, rss, heap)`` in capture order; time in milliseconds (any origin),
            rss and heap in bytes, as memray's ``FileReader.get_memory_snapshots()`` gives them.

    Returns:
        Points in order, minutes counted from the first snapshot; empty when there is none.
    """
    points: list[Point] = []
    start: int | None = None
    last: Point | None = None
    for time, rss, heap in snapshots:
        start = time if start is None else start
        last = Point(round((time - start) / 60_000, 2), round(rss / _MB, 1), round(heap / _MB, 1))
        if not points or int(last.minute) > int(points[-1].minute):
            points.append(last)
    if last is not None and points[-1] != last:
        points.append(last)
    return points


def main(argv: Sequence[str] | None = None) -> int:
    """Print the curve of the capture named on the command line; returns the exit status (0)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak_heap", description=__doc__)
    parser.add_argument("capture", help="a file written by `memray run --native -o FILE ...`")
    arguments = parser.parse_args(argv)
    memray = importlib.import_module("memray")  # only here: the harness runs without memray
    reader = memray.FileReader(arguments.capture)
    snapshots = ((s.time, s.rss, s.heap) for s in reader.get_memory_snapshots())
    print(f"{'minute':>7} {'rss_mb':>8} {'heap_mb':>8}")
    for point in per_minute(snapshots):
        print(f"{point.minute:7.2f} {point.rss_mb:8.1f} {point.heap_mb:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
