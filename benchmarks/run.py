"""The benchmark harness: Chronica's stores beside the bare drivers, at growing history sizes.

Run ``python -m benchmarks.run --store URL [--sizes 100,10000,100000] [--option k=v ...]
[--runs 3] [--seed N] [--max-connections 60] [--json FILE]``. For each store URL it prints, per
history size, the medians of ``Chronicarius.record_actum`` and of ``Chronicarius.get_acta(owner,
id, last_n=20, actum_kinds=[message])`` beside the backend's raw columns
(``benchmarks/baselines/<backend>.py``: the floor, the bare driver, first), with the client CPU
of a call and each ratio; how flat the read stays from the smallest to the largest history; the
asyncio store beside the blocking one; 40 writers at once; a batch against one append; and the
first page of a listing as other owners' chronica grow in number. Columns run in an order
shuffled each round; every timed phase runs ``--runs`` times; the targets of
``benchmarks/targets.toml`` are judged on the median of the runs, each with its spread. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from benchmarks.connections import MAX_CONNECTIONS
from benchmarks.report import Report, render
from benchmarks.store_bench import CONCURRENT_ROUNDS, PHASES, RUNS, Settings, StoreBench
from benchmarks.timing import new_seed

__all__ = ["Settings", "StoreBench", "main", "parse_arguments", "positive_integer"]


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
        description="Time Chronica stores beside the bare drivers (see benchmarks/README.md).",
    )
    add = parser.add_argument
    add("--store", action="append", required=True, metavar="URL", help="store URL (repeatable)")
    add("--sizes", type=_sizes, default=[100, 10_000, 100_000], help="history sizes (100,10000,100000)")
    add(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="store option (repeatable)",
    )
    add("--repeat", type=positive_integer, default=500, help="timed calls per column, size and run (500)")
    add("--warmup", type=int, default=None, help="untimed rounds first (default repeat/10, at least 20)")
    add(
        "--runs",
        type=positive_integer,
        default=RUNS,
        help=f"timed runs of each phase; targets on their median ({RUNS})",
    )
    add(
        "--seed",
        type=int,
        default=None,
        help="seed of the shuffled column order (default: drawn and printed)",
    )
    add("--writers", type=positive_integer, default=40, help="concurrent writer threads / tasks (40)")
    add("--writes", type=positive_integer, default=50, help="timed writes per concurrent writer (50)")
    add(
        "--concurrent-rounds",
        type=positive_integer,
        default=CONCURRENT_ROUNDS,
        help="rounds of the writer rows (5)",
    )
    add(
        "--max-connections",
        type=positive_integer,
        default=MAX_CONNECTIONS,
        help=f"server connections this process may hold; a row that could pass it is refused"
        f" ({MAX_CONNECTIONS})",
    )
    add("--max-seconds", type=float, default=60.0, help="time budget of each timed phase of a run (60)")
    add("--no-async", action="store_true", help="skip the asyncio rows")
    add("--phases", type=_phases, default=PHASES, help=f"what to measure (default all: {','.join(PHASES)})")
    add("--batch-size", type=positive_integer, default=20, help="acta per timed batch (20)")
    add(
        "--others",
        type=_sizes,
        default=[100, 100_000],
        help="other owners' chronica per listing (100,100000)",
    )
    add("--owned", type=positive_integer, default=20, help="chronica the listed owner holds (20)")
    add("--json", metavar="FILE", help="also write the results as JSON to FILE")
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
        runs=arguments.runs,
        seed=new_seed() if arguments.seed is None else arguments.seed,
        max_connections=arguments.max_connections,
    )
    reports: list[Report] = []
    status = 0
    for url in arguments.store:
        print(f"measuring {url} (seed {settings.seed})", file=sys.stderr, flush=True)
        try:
            report = StoreBench(url, settings).run()
        except Exception as error:  # noqa: BLE001 - one failing store must not hide the others
            print(f"{url}: failed: {type(error).__name__}: {error}", file=sys.stderr)
            status = 1
            continue
        reports.append(report)
        print(render(report), flush=True)
        print()
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as file:
            json.dump([asdict(report) for report in reports], file, indent=2)
            file.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
