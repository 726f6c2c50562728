"""Chronica's SQLite store beside the OpenAI Agents SDK's ``SQLiteSession``, side by side.

Run from the repository root in a venv holding both (``tox -e openai-agents --notest`` makes one)::

    .tox/openai-agents/bin/python -m benchmarks.sqlite_writers [--rounds 7] [--writers 40]
        [--writes 25] [--reads 300] [--history 100] [--directory DIR]

Each store gets a fresh file of its own in a temporary directory (``--directory``: there
instead), with the settings each uses by default (printed: both WAL; ``synchronous`` FULL for
both, Chronica's default and SQLite's built-in one for ``SQLiteSession``). Every round times, in
an order shuffled each round (``--seed``, printed):

- **40 threads**: ``--writers`` threads, each appending ``--writes`` acta, one at a time, to a
  conversation of its own (started before the clock). Chronica: ``Chronicarius.record_actum``
  on one shared blocking store (``sqlite:///``). ``SQLiteSession``: a session per thread, each
  thread running ``add_items([item])`` on an event loop of its own (an ``asyncio.Runner`` kept for
  the round; the SDK offers no blocking API).
- **40 tasks**: the same on one event loop. Chronica: ``AsyncChronicarius.record_actum`` on
  ``open_async_store("sqlite:///...")`` (worker threads) and, as a second row, on
  ``sqlite+aiosqlite:///...``; ``SQLiteSession``: ``add_items([item])``.
- **last 20**: ``--reads`` calls, interleaved call by call (the three in an order shuffled for
  each call), reading the newest 20 of a conversation holding ``--history`` items:
  ``AsyncChronicarius.get_acta(owner, id, last_n=20)`` (worker threads, as ``get_items`` runs on
  one), the blocking ``Chronicarius.get_acta``, and ``SQLiteSession.get_items(20)``, the median
  call of each.

Printed: per round the throughputs (writes/s) and read medians (µs), then the median over rounds
of each Chronica/peer ratio, and the ``peers`` rows of ``benchmarks/targets.toml`` for
``sqlite-session`` that it measures, each with ``ok`` or ``MISSED`` and its spread over the rounds
(never asserted), and the load average before and after. The machine's other work slows both
columns alike within a round; rerun when the load average is far above the number of CPUs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession

from benchmarks.targets import Verdict, targets_for
from benchmarks.timing import new_seed, shuffled
from chronica_core import (
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    new_actum_id,
    open_async_store,
    open_store,
)
from chronica_core.model import ActorKind

OWNER = "ardian"
CONTENT = "Shall we book the table for eight at the usual place, or try the new one by the river?"
MEASURES = {
    "threads": "40 threads",
    "tasks": "40 tasks",
    "read": "last 20 (blocking)",
    "read_async": "last 20 (async)",
}
"""Per measure of a ``peers`` target, the ratio of this benchmark that it judges."""


def actum(chronicum_id: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", CONTENT, id=new_actum_id())


def item() -> Any:
    return {"role": "user", "content": CONTENT}


class Side:
    """Chronica's stores and the peer's sessions on the files of one run."""

    def __init__(self, directory: Path) -> None:
        self.chronica_file = directory / "chronica.db"
        self.peer_file = directory / "agents.db"
        self.store = open_store(f"sqlite:///{self.chronica_file}")
        self.chronicarius = Chronicarius(self.store)
        self.counter = 0

    def fresh(self, label: str) -> str:
        self.counter += 1
        return f"{label}-{self.counter}-{os.getpid()}"

    def chronica(self, count: int, history: int = 0) -> list[str]:
        """``count`` new chronica of :data:`OWNER`, each holding ``history`` acta (at least one)."""
        ids = [self.fresh("chronicum") for _ in range(count)]
        for chronicum_id in ids:
            self.chronicarius.record_actum(OWNER, actum(chronicum_id))  # creates it
            if history > 1:
                self.chronicarius.record_acta(OWNER, [actum(chronicum_id) for _ in range(history - 1)])
        return ids

    def sessions(self, count: int, history: int = 0) -> list[SQLiteSession]:
        """``count`` new sessions, each holding ``history`` items (at least one)."""
        sessions = [SQLiteSession(self.fresh("session"), self.peer_file) for _ in range(count)]
        for session in sessions:
            asyncio.run(session.add_items([item() for _ in range(max(history, 1))]))
        return sessions

    def close(self) -> None:
        self.store.close()


def settings(path: Path) -> str:
    connection = sqlite3.connect(path)
    try:
        journal = connection.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = connection.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        connection.close()
    levels = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    return f"journal_mode={journal}, synchronous={levels.get(synchronous, synchronous)}"


def threads_throughput(writers: int, writes: int, make: Callable[[int], Callable[[], None]]) -> float:
    """Writes/s of ``writers`` threads, each calling its ``make(index)()`` ``writes`` times."""
    calls = [make(index) for index in range(writers)]
    barrier = threading.Barrier(writers + 1)
    failures: list[BaseException] = []

    def work(call: Callable[[], None]) -> None:
        call()  # a warm-up write: connections open, loops start
        barrier.wait()
        try:
            for _ in range(writes):
                call()
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)
        barrier.wait()

    threads = [threading.Thread(target=work, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    barrier.wait()
    elapsed = time.perf_counter() - began
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} writers failed, first: {failures[0]!r}")
    return writers * writes / elapsed


async def tasks_throughput(writes: int, calls: list[Callable[[], Awaitable[Any]]]) -> float:
    """Writes/s of one task per call, each awaiting its call ``writes`` times (after one warm-up)."""
    await asyncio.gather(*(call() for call in calls))

    async def work(call: Callable[[], Awaitable[Any]]) -> None:
        for _ in range(writes):
            await call()

    began = time.perf_counter()
    await asyncio.gather(*(work(call) for call in calls))
    return len(calls) * writes / (time.perf_counter() - began)


def chronica_threads(side: Side, writers: int, writes: int) -> float:
    ids = side.chronica(writers)

    def make(index: int) -> Callable[[], None]:
        def call() -> None:
            side.chronicarius.record_actum(OWNER, actum(ids[index]))

        return call

    return threads_throughput(writers, writes, make)


def peer_threads(side: Side, writers: int, writes: int) -> float:
    sessions = side.sessions(writers)
    runners: list[asyncio.Runner] = []

    def make(index: int) -> Callable[[], None]:
        runner: list[asyncio.Runner] = []

        def call() -> None:
            if not runner:  # made in the writer's own thread, as an app's loop would be
                runner.append(asyncio.Runner())
                runners.append(runner[0])
            runner[0].run(sessions[index].add_items([item()]))

        return call

    try:
        return threads_throughput(writers, writes, make)
    finally:
        for runner in runners:
            runner.close()
        for session in sessions:
            session.close()


def chronica_tasks(side: Side, scheme: str, writers: int, writes: int) -> float:
    ids = side.chronica(writers)

    async def run() -> float:
        async with open_async_store(f"{scheme}:///{side.chronica_file}", auto_migrate=False) as store:
            chronicarius = AsyncChronicarius(store)

            def call(chronicum_id: str) -> Awaitable[Actum]:
                return chronicarius.record_actum(OWNER, actum(chronicum_id))

            return await tasks_throughput(
                writes, [functools.partial(call, chronicum_id) for chronicum_id in ids]
            )

    return asyncio.run(run())


def peer_tasks(side: Side, writers: int, writes: int) -> float:
    sessions = side.sessions(writers)

    async def run() -> float:
        def call(session: SQLiteSession) -> Awaitable[None]:
            return session.add_items([item()])

        return await tasks_throughput(writes, [functools.partial(call, session) for session in sessions])

    try:
        return asyncio.run(run())
    finally:
        for session in sessions:
            session.close()


def reads(side: Side, history: int, count: int, rng: random.Random) -> dict[str, float]:
    """Median µs of each reader over ``count`` rounds, interleaved call by call."""
    [chronicum_id] = side.chronica(1, history)
    [session] = side.sessions(1, history)
    samples: dict[str, list[float]] = {"chronica async": [], "chronica": [], "SQLiteSession": []}

    async def run() -> None:
        async with open_async_store(f"sqlite:///{side.chronica_file}", auto_migrate=False) as store:
            chronicarius = AsyncChronicarius(store)
            await chronicarius.get_acta(OWNER, chronicum_id, last_n=20)  # owner cached, store open

            async def read_async() -> int:
                return len(await chronicarius.get_acta(OWNER, chronicum_id, last_n=20))

            async def read_peer() -> int:
                return len(await session.get_items(20))

            async def read_blocking() -> int:
                return len(side.chronicarius.get_acta(OWNER, chronicum_id, last_n=20))

            readers = [
                ("chronica async", read_async),
                ("SQLiteSession", read_peer),
                ("chronica", read_blocking),
            ]
            for index in range(count + count // 10):
                timed = index >= count // 10
                for name, read in shuffled(readers, rng):
                    began = time.perf_counter()
                    read_count = await read()
                    elapsed = time.perf_counter() - began
                    assert read_count == 20
                    if timed:
                        samples[name].append(elapsed)

    try:
        asyncio.run(run())
    finally:
        session.close()
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


def verdicts(ratios: dict[str, list[float]]) -> list[Verdict]:
    """The ``peers`` targets for ``sqlite-session`` that this benchmark measures, on the rounds' ratios."""
    found = []
    for target in targets_for("peers", peer="sqlite-session"):
        label = MEASURES.get(target.measure)
        if label is None or label not in ratios:
            continue
        sign = "<=" if target.at_most is not None else ">="
        text = f"{label} {sign} {target.limit:g}x SQLiteSession"
        found.append(Verdict.judge(target, text, ratios[label], over="rounds"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--writers", type=int, default=40)
    parser.add_argument("--writes", type=int, default=25)
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--history", type=int, default=100)
    parser.add_argument("--directory", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--seed", type=int, default=None, help="seed of the shuffled order (default: drawn)")
    arguments = parser.parse_args()
    seed = new_seed() if arguments.seed is None else arguments.seed
    rng = random.Random(seed)
    print(f"order shuffled each round, seed {seed} (--seed {seed} repeats it)")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=arguments.directory) as directory:
        side = Side(Path(directory))
        side.sessions(1)
        print(
            f"Chronica ({side.chronica_file.name}): {settings(side.chronica_file)} (synchronous as the "
            "file's new connections get it; the store sets its default FULL on each), busy_timeout 30 s"
        )
        print(
            f"SQLiteSession ({side.peer_file.name}): {settings(side.peer_file)} (SQLite's built-in "
            "defaults), busy_timeout 0 (its writers queue on its own per-file lock)"
        )
        rows: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        writers, writes = arguments.writers, arguments.writes
        measures: dict[str, Callable[[], float]] = {
            "40 threads/chronica": lambda: chronica_threads(side, writers, writes),
            "40 threads/SQLiteSession": lambda: peer_threads(side, writers, writes),
            "40 tasks/chronica": lambda: chronica_tasks(side, "sqlite", writers, writes),
            "40 tasks (aiosqlite)/chronica": lambda: chronica_tasks(
                side, "sqlite+aiosqlite", writers, writes
            ),
            "40 tasks/SQLiteSession": lambda: peer_tasks(side, writers, writes),
        }
        for round_number in range(arguments.rounds):
            got = {name: measures[name]() for name in shuffled(list(measures), rng)}
            for name, value in got.items():
                rows.setdefault(name, []).append(value)
            for label in ("40 threads", "40 tasks", "40 tasks (aiosqlite)"):
                peer = got[f"{label.split(' (')[0]}/SQLiteSession"]
                ratios.setdefault(label, []).append(got[f"{label}/chronica"] / peer)
            read = reads(side, arguments.history, arguments.reads, rng)
            for name, value in read.items():
                rows.setdefault(f"last 20 µs/{name}", []).append(value)
            ratios.setdefault("last 20 (async)", []).append(read["chronica async"] / read["SQLiteSession"])
            ratios.setdefault("last 20 (blocking)", []).append(read["chronica"] / read["SQLiteSession"])
            shown = ", ".join(f"{name} {value:,.0f}" for name, value in {**got, **read}.items())
            print(f"round {round_number + 1}: {shown}")
        side.close()
    print()
    print(f"{'median over rounds':<34} {'value':>10}")
    for name, values in rows.items():
        print(f"{name:<34} {statistics.median(values):>10,.0f}")
    print()
    print(f"{'chronica / SQLiteSession':<34} {'ratio':>7}  spread over rounds")
    for label, values in ratios.items():
        print(f"{label:<34} {statistics.median(values):>7.2f}  {min(values):.2f}-{max(values):.2f}")
    print()
    for judged in verdicts(ratios):
        print(judged.line())
    load_after = os.getloadavg()
    print(f"\nload average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs)")
    if arguments.json is not None:
        results = {
            "rows": rows,
            "ratios": ratios,
            "load": [load_before, load_after],
            "arguments": {key: str(value) for key, value in vars(arguments).items()},
            "seed": seed,
        }
        arguments.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
