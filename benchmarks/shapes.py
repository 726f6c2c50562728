"""Forks, summaries and tool exchanges against a plain window: what a history's shape costs a store.

Prints (asserts nothing): a fork's cost at 100 and at 100,000 acta of prefix, and the newest-20
window of a fork, of a chronicum with a summary over half its 100,000 acta and of one whose
newest response answers a request outside the window, each against the plain newest-20 window
of a 100,000-acta chronicum. Medians of ``--repeat`` calls after a warm-up, in milliseconds.

    python -m benchmarks.shapes --store 'sqlite:////tmp/shapes.db'
    python -m benchmarks.shapes --store 'postgresql+psycopg://postgres@127.0.0.1/test?schema=bench'

Everything it writes belongs to one new owner, erased at the end.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, Span, open_store

_BATCH = 1000


def _said(chronicum_id: str, text: str, kind: ActumKind = ActumKind.MESSAGE, **fields: Any) -> Actum:
    return Actum(chronicum_id, kind, ActorKind.HUMAN, "ardian", text, **fields)


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    for _ in range(5):
        call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _window(rules: Chronicarius, owner: str, chronicum_id: str) -> Callable[[], object]:
    return lambda: rules.get_acta(owner, chronicum_id, last_n=20)


def main() -> None:
    """Parse the arguments, write the histories, print the timings."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", required=True, help="the store URL")
    parser.add_argument("--size", type=int, default=100_000, help="acta of the long histories")
    parser.add_argument("--repeat", type=int, default=60, help="timed calls per measure")
    arguments = parser.parse_args()
    size, repeat = arguments.size, arguments.repeat
    store = open_store(arguments.store)
    rules = Chronicarius(store)
    owner = f"shapes-{uuid.uuid4().hex[:8]}"

    def fill(chronicum_id: str, count: int) -> list[Actum]:
        written = [rules.record_actum(owner, _said(chronicum_id, "start"))]
        while len(written) < count:
            batch = [
                _said(chronicum_id, f"m{len(written) + i}") for i in range(min(_BATCH, count - len(written)))
            ]
            written.extend(rules.record_acta(owner, batch))
        return written

    try:
        short, long = f"short-{uuid.uuid4().hex}", f"long-{uuid.uuid4().hex}"
        fill(short, 100)
        fill(long, size)
        fork_short = _median_ms(lambda: rules.fork_chronicum(owner, short), repeat)
        fork_long = _median_ms(lambda: rules.fork_chronicum(owner, long), repeat)
        print(
            f"fork at 100 acta: {fork_short:.2f} ms; at {size}: {fork_long:.2f} ms "
            f"({fork_long / fork_short:.2f}x)"
        )
        plain = _median_ms(lambda: rules.get_acta(owner, long, last_n=20), repeat)
        fork = rules.fork_chronicum(owner, long)
        for index in range(10):
            rules.record_actum(owner, _said(fork.id, f"own {index}"))
        summarized = f"summarized-{uuid.uuid4().hex}"
        acta = fill(summarized, size)
        span = Span(acta[0].id, acta[size // 2 - 1].id)
        rules.record_actum(owner, _said(summarized, "the first half", summarizes=span))
        paired = f"paired-{uuid.uuid4().hex}"
        fill(paired, size)
        request = rules.record_actum(owner, _said(paired, "call", ActumKind.TOOL_REQUEST))
        for index in range(30):
            rules.record_actum(owner, _said(paired, f"between {index}"))
        rules.record_actum(owner, _said(paired, "result", ActumKind.TOOL_RESPONSE, answers=request.id))
        print(f"plain newest-20 window: {plain:.2f} ms")
        for name, chronicum_id in (
            ("over a fork", fork.id),
            ("with a summary", summarized),
            ("with tool pairing", paired),
        ):
            shaped = _median_ms(_window(rules, owner, chronicum_id), repeat)
            print(f"window {name}: {shaped:.2f} ms ({shaped / plain:.2f}x plain)")
    finally:
        rules.erase_owner(owner)
        store.close()


if __name__ == "__main__":
    main()
