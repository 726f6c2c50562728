"""Where a call's client CPU goes: Chronicarius over the store, against raw psycopg on the same SQL.

Run ``python backends/postgres/benchmarks/cpu_per_call.py [URL]``. In a scratch schema it times,
in interleaved rounds, the CPU time (``time.process_time``: this process, every thread) of a
last-20 read and of an append through ``Chronicarius`` over a ``PostgresStore``, and of raw
psycopg on one autocommit connection running the store's own statements (text rows, as psycopg
does by default), and prints the medians per call in microseconds with their ratios. CPU time is
what the store adds; wall time adds the server and, on a busy machine, every wait for a CPU, which
drowns a difference of tens of microseconds (``python -m benchmarks.run`` prints wall-time ratios).
The scratch schema is dropped afterwards.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable

import psycopg
from chronica_postgres import PostgresStore
from chronica_postgres.plans import text_array
from chronica_postgres.schema import SET_UTC
from psycopg import sql

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, new_actum_id

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
CALLS = 200
ROUNDS = 7
OWNER = "ardian"


def cpu_us(operation: Callable[[], object]) -> float:
    """CPU time of one call of ``operation``, in microseconds (mean over :data:`CALLS` calls)."""
    started = time.process_time()
    for _ in range(CALLS):
        operation()
    return (time.process_time() - started) / CALLS * 1e6


def main() -> None:
    """Fill one chronicum, time the four operations round by round, print the medians."""
    schema = f"cpu_per_call_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(URL, schema=schema, max_size=2)
    raw = psycopg.connect(URL, autocommit=True)
    try:
        raw.execute(SET_UTC)
        chronicarius = Chronicarius(store)
        chronicum_id = f"cpu-{uuid.uuid4().hex}"
        kinds = [ActumKind.MESSAGE, ActumKind.THOUGHT]
        for index in range(100):
            kind = kinds[index % 2]
            chronicarius.record_actum(
                OWNER, Actum(chronicum_id, kind, ActorKind.AGENT, "booking", f"actum {index}")
            )
        window = store.plans.statements.window(kinds=True, actor_kinds=False, limited=True)
        window_parameters = (chronicum_id, text_array(["message"]), 20, chronicum_id)
        record = store.plans.statements.record

        def store_read() -> object:
            return chronicarius.get_acta(OWNER, chronicum_id, last_n=20, actum_kinds=[ActumKind.MESSAGE])

        def raw_read() -> object:
            return raw.execute(window, window_parameters).fetchall()

        def store_append() -> object:
            actum = Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "once more")
            return chronicarius.record_actum(OWNER, actum)

        def raw_append() -> object:
            parameters = (chronicum_id, new_actum_id(), "message", "human", OWNER, "once more", None, None)
            return raw.execute(record, parameters).fetchall()

        operations = {
            "last-20 read, Chronicarius": store_read,
            "last-20 read, raw psycopg": raw_read,
            "append, Chronicarius": store_append,
            "append, raw psycopg": raw_append,
        }
        samples: dict[str, list[float]] = {name: [] for name in operations}
        for _ in range(ROUNDS):
            for name, operation in operations.items():
                samples[name].append(cpu_us(operation))
        medians = {name: statistics.median(values) for name, values in samples.items()}
        print(f"CPU per call, median of {ROUNDS} rounds of {CALLS} calls (load average {_load()}):")
        for name, value in medians.items():
            print(f"  {name:<28} {value:8.1f} us")
        for operation in ("last-20 read", "append"):
            ratio = medians[f"{operation}, Chronicarius"] / medians[f"{operation}, raw psycopg"]
            print(f"  {operation}: Chronicarius / raw psycopg = {ratio:.2f}x")
    finally:
        raw.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        raw.close()
        store.close()


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as loadavg:
            return loadavg.read().split()[0]
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
