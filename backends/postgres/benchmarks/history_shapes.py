"""Forks, summaries and tool pairing against a plain window: wall time per call through Chronicarius.

Run ``python backends/postgres/benchmarks/history_shapes.py [URL] [PREFIX]``. In a scratch schema
(dropped afterwards) it writes a chronicum of 100 acta and one of ``PREFIX`` acta (default
100,000), then times, in interleaved rounds, the median wall time of:

- a fork at the newest actum of each (the fork call must not grow with the prefix);
- a last-20 window of a plain chronicum (the store's ``acta``), of a fork of the long chronicum
  with 20 acta of its own, of a chronicum holding summaries, and of one whose last-20 window
  holds tool responses whose requests lie before it (reached back for).

It prints each median in microseconds and its ratio to the baseline (the fork at 100 acta, the
plain window).
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

import psycopg
from chronica_postgres import PostgresStore
from psycopg import sql

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, Span, new_actum_id

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
PREFIX = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
CALLS = 50
ROUNDS = 5
OWNER = "ardian"
BATCH = 1000


def message(chronicum_id: str, text: str, kind: ActumKind = ActumKind.MESSAGE) -> Actum:
    """An actum of ``kind`` (a human's message, else an agent's) saying ``text``."""
    actor_kind = ActorKind.HUMAN if kind is ActumKind.MESSAGE else ActorKind.AGENT
    return Actum(chronicum_id, kind, actor_kind, OWNER, text, new_actum_id())


def fill(chronicarius: Chronicarius, chronicum_id: str, count: int) -> None:
    """Write ``count`` messages into ``chronicum_id``, in batches."""
    for start in range(0, count, BATCH):
        batch = [message(chronicum_id, f"m-{index}") for index in range(start, min(count, start + BATCH))]
        chronicarius.record_acta(OWNER, batch)


def wall_us(operation: Callable[[], object]) -> float:
    """Wall time of one call of ``operation``, in microseconds (mean over :data:`CALLS` calls)."""
    started = time.perf_counter()
    for _ in range(CALLS):
        operation()
    return (time.perf_counter() - started) / CALLS * 1e6


def main() -> None:
    """Write the chronica, time the calls, print the medians, drop the scratch schema."""
    schema = f"chronica_bench_{uuid.uuid4().hex[:12]}"
    try:
        with PostgresStore(URL, schema=schema, max_size=4) as store:
            chronicarius = Chronicarius(store)
            short, long = "short", "long"
            fill(chronicarius, short, 100)
            fill(chronicarius, long, PREFIX)
            plain = "plain"
            fill(chronicarius, plain, 1000)
            fork = chronicarius.fork_chronicum(OWNER, long)
            fill(chronicarius, fork.id, 20)
            summarized = "summarized"
            fill(chronicarius, summarized, 1000)
            first = chronicarius.get_acta(OWNER, summarized)
            for start in range(0, 900, 100):  # nine summaries, each of 100 acta
                span = Span(first[start].id, first[start + 99].id)
                chronicarius.record_actum(OWNER, replace(message(summarized, "in short"), summarizes=span))
            paired = "paired"
            fill(chronicarius, paired, 1000)
            requests = [
                chronicarius.record_actum(OWNER, message(paired, f"call {index}", ActumKind.TOOL_REQUEST))
                for index in range(5)
            ]
            fill(chronicarius, paired, 20)
            for request in requests:
                response = replace(message(paired, "result", ActumKind.TOOL_RESPONSE), answers=request.id)
                chronicarius.record_actum(OWNER, response)
            assert len(chronicarius.get_acta(OWNER, paired, last_n=20)) == 25
            cases: dict[str, Callable[[], object]] = {
                "fork at 100 acta": lambda: chronicarius.fork_chronicum(OWNER, short),
                f"fork at {PREFIX} acta": lambda: chronicarius.fork_chronicum(OWNER, long),
                "last-20, plain": lambda: chronicarius.get_acta(OWNER, plain, last_n=20),
                "last-20, fork": lambda: chronicarius.get_acta(OWNER, fork.id, last_n=20),
                "last-20, summaries": lambda: chronicarius.get_acta(OWNER, summarized, last_n=20),
                "last-20, tool pairing": lambda: chronicarius.get_acta(OWNER, paired, last_n=20),
            }
            for operation in cases.values():
                operation()  # warm: layouts remembered, statements prepared
            timings: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(ROUNDS):
                for name, operation in cases.items():
                    timings[name].append(wall_us(operation))
            medians = {name: statistics.median(values) for name, values in timings.items()}
            baselines = {"fork": medians["fork at 100 acta"], "last": medians["last-20, plain"]}
            for name, median in medians.items():
                ratio = median / baselines[name.split(" ", 1)[0].split("-", 1)[0]]
                print(f"{name:28} {median:9.0f} us  x{ratio:.2f}")
    finally:
        with psycopg.connect(URL, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
