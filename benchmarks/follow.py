"""The follow benchmark: how soon a follower in another process sees a write, and what followers cost.

Run ``python -m benchmarks.follow --store URL [--option k=v ...] [--samples 200]
[--followers 100] [--chronica 1000] [--idle-seconds 5] [--settle-seconds 1] [--json FILE]``. It
measures, per store:

1. **Latency**: a follower in another process (``Chronicarius.follow``), and this process
   recording one actum at a time with ``Chronicarius.record_actum``; for each actum, the time
   from ``record_actum`` returning here to ``follow`` yielding it there (both read
   ``time.monotonic_ns``, one clock for every process on the machine), median and p99. The next
   actum is written only once the follower has reported the last, so each one finds the
   follower idle, waiting. ``memory://`` lives in one process: its follower is a thread.
2. **Cost of many followers**, with the asyncio store: ``--followers`` tasks following one
   chronicum, then one task each on ``--chronica`` chronica, all in one store; for each, the
   connections the store holds on the database server meanwhile (PostgreSQL: counted in
   ``pg_stat_activity`` by the ``application_name`` this benchmark sets; every server store:
   this process's established TCP connections to the server's port, from ``/proc`` on Linux,
   which is what MariaDB's processlist and MongoDB count for it; the most seen while the
   followers start and while they all get the news, and the number while they are idle), and
   the CPU this process spends while they are all idle for ``--idle-seconds``, as a share of
   one core (measured ``--settle-seconds`` after they start, at least ``1 + followers / 200``
   seconds, when all of them wait: they start four at a time; lengthen it on a loaded machine).
   Then one actum is written to each followed chronicum and the time until every follower has
   it is reported.

Nothing here is asserted: it prints, and writes ``--json``. Point it at a throw-away schema,
database or file: it leaves what it wrote.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from benchmarks.connections import held_connections
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    open_async_store,
    open_store,
)

__all__ = ["FollowReport", "main"]

OWNER = "ardian"
APPLICATION_NAME = "chronica-follow-benchmark"
GUARD_SECONDS = 60.0
"""How long any wait of the benchmark lasts before it gives up (a guard against a hang)."""


@dataclass
class FollowReport:
    """What one store's run measured (times in milliseconds, CPU as a share of one core)."""

    store: str
    samples: int = 0
    latency_median_ms: float | None = None
    latency_p99_ms: float | None = None
    latency_max_ms: float | None = None
    many: list[dict[str, Any]] = field(default_factory=list)


def _message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", content)


_POSTGRESQL_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
"""PostgreSQL URLs whose connections are counted: chronica-postgres's, chronica-sqlalchemy's on psycopg."""


def _with_application_name(url: str) -> str:
    if not url.startswith(_POSTGRESQL_SCHEMES):
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}application_name={APPLICATION_NAME}"


def _longer_than(lines: list[str], count: int) -> bool:
    return len(lines) > count


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def follower_main(url: str, options: dict[str, str], chronicum_id: str, after: str, count: int) -> None:
    """The follower process: print ``<content> <monotonic ns>`` for each actum it is given."""
    with open_store(url, **options) as store:
        chronicarius = Chronicarius(store)
        follower = chronicarius.follow(OWNER, chronicum_id, after=after, timeout=GUARD_SECONDS)
        print("ready", flush=True)
        for seen, actum in enumerate(follower, start=1):
            print(f"{actum.content} {time.monotonic_ns()}", flush=True)
            if seen == count:
                return


def _latency(url: str, options: dict[str, str], samples: int) -> list[float]:
    """Milliseconds from record_actum returning to the follower yielding, per sample."""
    chronicum_id = f"follow-bench-{uuid.uuid4().hex}"
    latencies: list[float] = []
    with open_store(url, **options) as store:
        chronicarius = Chronicarius(store)
        first = chronicarius.record_actum(OWNER, _message(chronicum_id, "start"))
        if url.startswith("memory:"):
            lines: list[str] = []
            ready = threading.Event()
            arrived = threading.Condition()

            def follow() -> None:
                follower = chronicarius.follow(OWNER, chronicum_id, after=first.id, timeout=GUARD_SECONDS)
                ready.set()
                for seen, actum in enumerate(follower, start=1):
                    with arrived:
                        lines.append(f"{actum.content} {time.monotonic_ns()}")
                        arrived.notify_all()
                    if seen == samples:
                        return

            thread = threading.Thread(target=follow, daemon=True)
            thread.start()
            ready.wait(GUARD_SECONDS)
            for index in range(samples):
                chronicarius.record_actum(OWNER, _message(chronicum_id, str(index)))
                returned = time.monotonic_ns()
                with arrived:
                    arrived.wait_for(functools.partial(_longer_than, lines, index), GUARD_SECONDS)
                yielded = int(lines[index].split()[1])
                latencies.append((yielded - returned) / 1e6)
            thread.join(GUARD_SECONDS)
            return latencies
        command = [sys.executable, "-m", "benchmarks.follow", "--role", "follower", "--store", url]
        command += [item for key, value in options.items() for item in ("--option", f"{key}={value}")]
        command += ["--chronicum", chronicum_id, "--after", first.id, "--samples", str(samples)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1) as process:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise SystemExit("the follower process did not start")
            time.sleep(0.5)  # let it reach its first wait (pacing, not measured)
            for index in range(samples):
                chronicarius.record_actum(OWNER, _message(chronicum_id, str(index)))
                returned = time.monotonic_ns()
                content, yielded_text = process.stdout.readline().split()
                if content != str(index):
                    raise SystemExit(f"the follower yielded {content!r} for actum {index}")
                latencies.append((int(yielded_text) - returned) / 1e6)
            process.wait(GUARD_SECONDS)
    return latencies


def _server_connections(url: str) -> int | None:
    """The connections this benchmark holds on a PostgreSQL server (``None`` elsewhere)."""
    if not url.startswith(_POSTGRESQL_SCHEMES):
        return None
    import psycopg

    base = urlsplit(url)._replace(scheme="postgresql", query="").geturl()
    with psycopg.connect(base, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (APPLICATION_NAME,)
        ).fetchone()
    return None if row is None else int(row[0])


class _Peak:
    """The most connections of this process seen while it samples them (every 10 ms, in a thread)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.most: int | None = held_connections(url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exception: object) -> None:
        self._stop.set()
        self._thread.join(GUARD_SECONDS)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            now = held_connections(self._url)
            if now is not None:
                self.most = max(self.most or 0, now)


async def _many(
    url: str, options: dict[str, str], followers: int, chronica: int, idle: float, settle: float = 1.0
) -> dict[str, Any]:
    """``followers`` tasks on ``chronica`` chronica (one store): connections, idle CPU, fan-out time."""
    ids = [f"follow-many-{uuid.uuid4().hex}" for _ in range(chronica)]
    async with open_async_store(url, **options) as store:
        chronicarius = AsyncChronicarius(store)
        firsts = [
            await chronicarius.record_actum(OWNER, _message(chronicum_id, "start")) for chronicum_id in ids
        ]
        before = await asyncio.to_thread(_server_connections, url)
        process_before = held_connections(url)
        arrived = 0
        everyone = asyncio.Event()

        async def follow(index: int) -> None:
            nonlocal arrived
            chronicum = index % chronica
            async for _ in chronicarius.follow(OWNER, ids[chronicum], after=firsts[chronicum].id):
                arrived += 1
                if arrived == followers:
                    everyone.set()
                return

        with _Peak(url) as starting:
            tasks = [asyncio.create_task(follow(index)) for index in range(followers)]
            # every follower reaches its wait (they start four at a time)
            await asyncio.sleep(max(settle, 1.0 + followers / 200))
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.sleep(idle)
        idle_cpu = (time.process_time() - cpu) / (time.monotonic() - wall)
        during = await asyncio.to_thread(_server_connections, url)
        process_idle = held_connections(url)
        with _Peak(url) as delivering:
            started = time.monotonic()
            shared = getattr(store, "sync_store", None) if url.startswith("memory:") else None
            writer = Chronicarius(
                shared if shared is not None else await asyncio.to_thread(open_store, url, **options)
            )
            try:
                for chronicum_id in ids:
                    await asyncio.to_thread(writer.record_actum, OWNER, _message(chronicum_id, "news"))
                written = time.monotonic()
                async with asyncio.timeout(GUARD_SECONDS):
                    await everyone.wait()
            finally:
                if shared is None:
                    await asyncio.to_thread(writer.store.close)
            delivered = time.monotonic()
        await asyncio.gather(*tasks)
    return {
        "followers": followers,
        "chronica": chronica,
        "connections_before": before,
        "connections_while_following": during,
        "process_connections_before": process_before,
        "process_connections_most_while_starting": starting.most,
        "process_connections_idle": process_idle,
        "process_connections_most_while_delivering": delivering.most,
        "idle_cpu_share": round(idle_cpu, 4),
        "write_all_seconds": round(written - started, 3),
        "all_delivered_after_last_write_ms": round((delivered - written) * 1000, 1),
    }


def run(
    url: str,
    options: dict[str, str],
    samples: int,
    followers: int,
    chronica: int,
    idle: float,
    settle: float = 1.0,
) -> FollowReport:
    """Measure one store (see the module)."""
    url = _with_application_name(url)
    report = FollowReport(store=url)
    latencies = _latency(url, options, samples)
    report.samples = len(latencies)
    report.latency_median_ms = round(statistics.median(latencies), 3)
    report.latency_p99_ms = round(_percentile(latencies, 0.99), 3)
    report.latency_max_ms = round(max(latencies), 3)
    print(
        f"{url}: latency record_actum -> follow over {len(latencies)} acta: median "
        f"{report.latency_median_ms} ms, p99 {report.latency_p99_ms} ms, max {report.latency_max_ms} ms",
        flush=True,
    )
    for count, spread in ((followers, 1), (chronica, chronica)):
        result = asyncio.run(_many(url, options, count, spread, idle, settle))
        report.many.append(result)
        print(f"{url}: {json.dumps(result)}", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run each store, print and write the report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.follow", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", action="append", required=True, help="a store URL (repeatable)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a store option")
    parser.add_argument("--samples", type=int, default=200, help="acta timed for the latency")
    parser.add_argument("--followers", type=int, default=100, help="followers of one chronicum")
    parser.add_argument("--chronica", type=int, default=1000, help="chronica followed by one follower each")
    parser.add_argument(
        "--idle-seconds", type=float, default=5.0, help="how long the CPU of idle followers is measured"
    )
    parser.add_argument(
        "--settle-seconds", type=float, default=1.0, help="how long the followers start before the idle CPU"
    )
    parser.add_argument("--json", default=None, help="write the report here")
    parser.add_argument("--role", default="main", choices=("main", "follower"), help=argparse.SUPPRESS)
    parser.add_argument("--chronicum", default="", help=argparse.SUPPRESS)
    parser.add_argument("--after", default="", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    options = dict(item.split("=", 1) for item in arguments.option)
    if arguments.role == "follower":
        follower_main(arguments.store[0], options, arguments.chronicum, arguments.after, arguments.samples)
        return 0
    reports = [
        run(
            url,
            options,
            arguments.samples,
            arguments.followers,
            arguments.chronica,
            arguments.idle_seconds,
            arguments.settle_seconds,
        )
        for url in arguments.store
    ]
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as report_file:
            json.dump([asdict(report) for report in reports], report_file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
