"""The soak run: hours of a mixed agent-app load on one store, watching what the process holds.

Run ``python -m benchmarks.soak --store URL [--asyncio] [--minutes 60] [--warmup-minutes 10]
[--interval 30] [--option k=v ...] [--kill-at MINUTES] [--json FILE]``. One process, one store,
the load of a busy agent server:

- ``--writers`` (8) threads (or tasks with ``--asyncio``) append acta with idempotency keys, each
  to chronica of its own, together about ``--append-rate`` (39) a second, content 200 B to 20 KB;
  a write that fails is retried with its key, so it lands once;
- ``--readers`` (4) read last-20 context windows of random chronica, together ``--read-rate``
  (20) a second;
- ``--followers`` (3) follow one writer chronicum each, resuming after a failure;
- each minute a lister walks the owner's chronica, and a chronicum of another owner is written
  and erased;
- at ``--kill-at`` minutes (server stores: PostgreSQL, MariaDB/MySQL), the server ends every
  connection this process holds (:mod:`benchmarks.soak_kill`).

Every ``--interval`` seconds it samples the process's resident memory, file descriptors,
threads, its connections to the server, and the append and read p50/p99 of the interval. At the
end it checks that every acknowledged actum is in its chronicum exactly once and in order, and
that every follower got exactly its chronicum's acta; it prints the memory growth after the
warm-up (and its slope) and the checks, and writes ``--json``. Nothing is asserted: the exit
status is 1 when a check failed. Point it at a throw-away database or file: it leaves its
chronica behind (the owner it prints).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import string
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.connections import held_connections
from benchmarks.run import _option
from benchmarks.soak_kill import KillFailed, kill_connections
from benchmarks.soak_ledger import IdLog
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    StoreError,
    new_chronicum_id,
    open_async_store,
    open_store,
)
from chronica_core.capabilities import ERASURE, LISTING, store_capabilities

__all__ = ["Load", "Sample", "Soak", "main", "rss_megabytes"]

WINDOW = 20
"""The context window the readers read: the last 20 acta."""

SMALLEST, LARGEST = 200, 20_000
"""Content sizes in bytes, drawn log-uniformly between them."""

RETRIES, RETRY_PAUSE = 100, 0.1
"""A failed append is tried again with its key up to this many times, this many seconds apart."""

CATCH_UP = 30.0
"""Seconds the followers get, once the writers stop, to reach the last acknowledged actum."""


@dataclass(frozen=True, slots=True)
class Load:
    """What the run does: workers, rates (per second, all workers together), its length."""

    writers: int = 8
    readers: int = 4
    followers: int = 3
    append_rate: float = 39.0
    read_rate: float = 20.0
    chronica_per_writer: int = 4
    minutes: float = 60.0
    warmup_minutes: float = 10.0
    interval: float = 30.0
    kill_at: float | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """One interval: the process's holdings at its end and the latencies (ms) within it."""

    minute: float
    rss_mb: float
    fds: int
    threads: int
    connections: int | None
    appends: int
    reads: int
    failures: int
    append_p50_ms: float
    append_p99_ms: float
    read_p50_ms: float
    read_p99_ms: float


@dataclass(slots=True)
class Soak:
    """What a run saw: samples, acknowledged acta per chronicum, what each follower got.

    The ids are kept in files of ``folder`` (:class:`IdLog`), not in the memory being watched.
    """

    load: Load
    folder: Path
    samples: list[Sample] = field(default_factory=list)
    acknowledged: dict[str, IdLog] = field(default_factory=dict)
    followed: dict[str, IdLog] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    _appends: list[float] = field(default_factory=list)
    _reads: list[float] = field(default_factory=list)
    _failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def log_acknowledged(self, chronicum_id: str) -> IdLog:
        """Start the log of the acta acknowledged in ``chronicum_id`` (a file named after it)."""
        with self._lock:
            log = self.acknowledged[chronicum_id] = IdLog(self.folder / f"acknowledged-{chronicum_id}")
        return log

    def log_followed(self, chronicum_id: str) -> IdLog:
        """Start the log of the acta the follower of ``chronicum_id`` got (a file named after it).

        Safe to call from the follower threads as they start.
        """
        with self._lock:
            log = self.followed[chronicum_id] = IdLog(self.folder / f"followed-{chronicum_id}")
        return log

    def timed_append(self, seconds: float) -> None:
        """Count one acknowledged append that took ``seconds``."""
        with self._lock:
            self._appends.append(seconds)

    def timed_read(self, seconds: float) -> None:
        """Count one read that took ``seconds``."""
        with self._lock:
            self._reads.append(seconds)

    def failed(self) -> None:
        """Count one call that failed (and was retried or skipped)."""
        with self._lock:
            self._failures += 1

    def sample(self, minute: float, url: str) -> Sample:
        """Take a sample now, reset the interval's latencies, keep and return it."""
        with self._lock:
            appends, reads, failures = self._appends, self._reads, self._failures
            self._appends, self._reads, self._failures = [], [], 0
        taken = Sample(
            minute=round(minute, 2),
            rss_mb=round(rss_megabytes(), 1),
            fds=len(os.listdir("/proc/self/fd")),
            threads=threading.active_count(),
            connections=held_connections(url),
            appends=len(appends),
            reads=len(reads),
            failures=failures,
            append_p50_ms=_quantile_ms(appends, 0.5),
            append_p99_ms=_quantile_ms(appends, 0.99),
            read_p50_ms=_quantile_ms(reads, 0.5),
            read_p99_ms=_quantile_ms(reads, 0.99),
        )
        self.samples.append(taken)
        return taken

    def verify(self, stored: dict[str, list[str]]) -> None:
        """Compare what each chronicum holds (``stored``: ids in order) and each follower got."""
        for chronicum_id, log in self.acknowledged.items():
            acknowledged = log.ids()
            held = stored.get(chronicum_id, [])
            if held != acknowledged:
                lost = len(set(acknowledged) - set(held))
                twice = len(held) - len(set(held))
                what = f"{lost} lost, {twice} twice" if lost or twice else "out of order"
                self.problems.append(
                    f"{chronicum_id}: {len(held)} stored, {len(acknowledged)} acknowledged: {what}"
                )
        for chronicum_id, log in self.followed.items():
            got = log.ids()
            expected = self.acknowledged[chronicum_id].ids()[1:]  # the follower starts after the first
            if got != expected:
                what = "out of order" if sorted(got) == sorted(expected) else f"expected {len(expected)}"
                self.problems.append(f"follower of {chronicum_id}: got {len(got)}, {what}")

    def growth(self) -> tuple[float, float] | None:
        """RSS growth (MB) from the first sample after the warm-up to the last, and its slope (MB/min)."""
        after = [sample for sample in self.samples if sample.minute >= self.load.warmup_minutes]
        if len(after) < 2:
            return None
        minutes = [sample.minute for sample in after]
        rss = [sample.rss_mb for sample in after]
        slope = statistics.linear_regression(minutes, rss).slope
        return round(rss[-1] - rss[0], 1), round(slope, 3)


def rss_megabytes() -> float:
    """This process's resident memory in MB (``VmRSS`` of ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _quantile_ms(seconds: Sequence[float], quantile: float) -> float:
    if not seconds:
        return math.nan
    ordered = sorted(seconds)
    return round(ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] * 1000, 2)


def content(rng: random.Random) -> str:
    """Random text of 200 B to 20 KB, sizes drawn log-uniformly."""
    size = int(math.exp(rng.uniform(math.log(SMALLEST), math.log(LARGEST))))
    return "".join(rng.choices(string.ascii_letters + " ", k=size))


def _actum(chronicum_id: str, writer: int, rng: random.Random) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, f"writer-{writer}", content(rng))


def _caught_up(soak: Soak, chronicum_id: str) -> bool:
    return soak.followed[chronicum_id].count >= soak.acknowledged[chronicum_id].count - 1


def _stored_ids(acta: Sequence[Actum]) -> list[str]:
    return [actum.id for actum in acta if actum.actor.startswith("writer-")]


class Pace:
    """Spaces a worker's calls ``1 / rate`` seconds apart on a fixed schedule (no drift)."""

    def __init__(self, rate: float) -> None:
        self.period = 1 / rate
        self.next = time.monotonic()

    def wait(self) -> float:
        """Seconds to sleep before the next call is due (0 when late); moves the schedule on."""
        self.next += self.period
        return max(0.0, self.next - self.period - time.monotonic())


# --- the blocking run --------------------------------------------------------------------------


def run_blocking(url: str, options: dict[str, Any], load: Load, owner: str, seed: int, folder: Path) -> Soak:
    """Run ``load`` on a blocking store opened from ``url``; return what it saw, verified.

    The run's ids are logged in files of ``folder``.
    """
    soak = Soak(load, folder)
    stop = threading.Event()
    store = open_store(url, **options)
    keeper = Chronicarius(store)
    capabilities = store_capabilities(store)
    rng = random.Random(seed)
    owned = [[new_chronicum_id() for _ in range(load.chronica_per_writer)] for _ in range(load.writers)]
    for writer, chronica in enumerate(owned):
        for chronicum_id in chronica:  # a first actum, so followers can start after it
            first = keeper.record_actum(owner, _actum(chronicum_id, writer, rng))
            soak.log_acknowledged(chronicum_id).add(first.id)

    def write(writer: int) -> None:
        local = random.Random(seed + writer)
        pace = Pace(load.append_rate / load.writers)
        count = 0
        while not stop.wait(pace.wait()):
            chronicum_id = owned[writer][count % len(owned[writer])]
            actum, key = _actum(chronicum_id, writer, local), f"soak:{writer}:{count}"
            for _ in range(RETRIES):  # with the same key: it lands once
                started = time.perf_counter()
                try:
                    stored = keeper.record_actum(owner, actum, idempotency_key=key)
                except StoreError:
                    soak.failed()
                    time.sleep(RETRY_PAUSE)
                    continue
                soak.timed_append(time.perf_counter() - started)
                soak.acknowledged[chronicum_id].add(stored.id)
                break
            else:
                soak.problems.append(f"writer {writer}: an append failed {RETRIES} times; it was given up")
                return
            count += 1

    def read(reader: int) -> None:
        local = random.Random(seed + 1000 + reader)
        pace = Pace(load.read_rate / load.readers)
        everyone = [chronicum_id for chronica in owned for chronicum_id in chronica]
        while not stop.wait(pace.wait()):
            started = time.perf_counter()
            try:
                keeper.get_acta(owner, local.choice(everyone), last_n=WINDOW)
            except StoreError:
                soak.failed()
                continue
            soak.timed_read(time.perf_counter() - started)

    def follow(chronicum_id: str) -> None:
        got = soak.log_followed(chronicum_id)
        after = soak.acknowledged[chronicum_id].first
        while not (stop.is_set() and (_caught_up(soak, chronicum_id) or time.monotonic() > deadline[0])):
            try:  # a step ends after a second without news, to look at the clock
                for actum in keeper.follow(owner, chronicum_id, after=after, timeout=1.0):
                    got.add(actum.id)
                    after = actum.id
            except StoreError:
                soak.failed()  # resumes after the last actum it got

    def each_minute() -> None:
        local = random.Random(seed + 2000)
        while not stop.wait(60):
            try:
                if LISTING in capabilities:
                    cursor: str | None = None
                    while True:
                        page = keeper.list_chronica(owner, limit=100, cursor=cursor)
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                if ERASURE in capabilities:
                    other = f"{owner}-erased"
                    doomed = keeper.record_actum(other, _actum(new_chronicum_id(), 0, local))
                    keeper.erase_chronicum(other, doomed.chronicum_id)
            except StoreError:
                soak.failed()

    deadline = [math.inf]
    workers = [threading.Thread(target=write, args=(i,), name=f"writer-{i}") for i in range(load.writers)]
    workers += [threading.Thread(target=read, args=(i,), name=f"reader-{i}") for i in range(load.readers)]
    followed = [chronica[0] for chronica in owned[: load.followers]]
    workers += [threading.Thread(target=follow, args=(c,), name=f"follower-{c}") for c in followed]
    workers.append(threading.Thread(target=each_minute, name="each-minute"))
    _drive(soak, url, load, workers, stop, deadline)
    soak.verify({c: _stored_ids(keeper.get_acta(owner, c)) for c in soak.acknowledged})
    store.close()
    return soak


def _drive(
    soak: Soak,
    url: str,
    load: Load,
    workers: list[threading.Thread],
    stop: threading.Event,
    deadline: list[float],
) -> None:
    """Start ``workers``, sample every interval (killing connections once if asked), then stop them."""
    began = time.monotonic()
    for worker in workers:
        worker.start()
    killed = load.kill_at is None
    print(_header(), flush=True)
    while (minute := (time.monotonic() - began) / 60) < load.minutes:
        time.sleep(min(load.interval, max(0.1, (load.minutes - minute) * 60)))
        minute = (time.monotonic() - began) / 60
        if not killed and load.kill_at is not None and minute >= load.kill_at:
            print(f"# minute {minute:.2f}: {_kill(url)}", flush=True)
            killed = True
        print(_row(soak.sample(minute, url)), flush=True)
    stop.set()
    deadline[0] = time.monotonic() + CATCH_UP
    for worker in workers:
        worker.join()


def _kill(url: str) -> str:
    """Have the server end this process's connections; say how many, or why it could not."""
    try:
        return f"the server ends {kill_connections(url)} connections"
    except KillFailed as error:  # the kill is the harness's, not the store's: the run goes on
        return f"the connection kill failed: {error!r}"


def _header() -> str:
    return "minute  rss_mb  fds threads conns appends reads fails  app_p50 app_p99 read_p50 read_p99"


def _row(sample: Sample) -> str:
    connections = "-" if sample.connections is None else str(sample.connections)
    return (
        f"{sample.minute:6.2f} {sample.rss_mb:7.1f} {sample.fds:4d} {sample.threads:7d} {connections:>5} "
        f"{sample.appends:7d} {sample.reads:5d} {sample.failures:5d} {sample.append_p50_ms:8.2f} "
        f"{sample.append_p99_ms:7.2f} {sample.read_p50_ms:8.2f} {sample.read_p99_ms:8.2f}"
    )


# --- the asyncio run ---------------------------------------------------------------------------


def run_asyncio(url: str, options: dict[str, Any], load: Load, owner: str, seed: int, folder: Path) -> Soak:
    """Run ``load`` on an asyncio store from ``url``, in tasks of one event loop (as :func:`run_blocking`)."""
    return asyncio.run(_run_asyncio(url, options, load, owner, seed, folder))


async def _run_asyncio(
    url: str, options: dict[str, Any], load: Load, owner: str, seed: int, folder: Path
) -> Soak:
    soak = Soak(load, folder)
    stop = asyncio.Event()
    store = open_async_store(url, **options)
    keeper = AsyncChronicarius(store)
    capabilities = store_capabilities(store)
    rng = random.Random(seed)
    owned = [[new_chronicum_id() for _ in range(load.chronica_per_writer)] for _ in range(load.writers)]
    for writer, chronica in enumerate(owned):
        for chronicum_id in chronica:
            first = await keeper.record_actum(owner, _actum(chronicum_id, writer, rng))
            soak.log_acknowledged(chronicum_id).add(first.id)

    async def pause(seconds: float) -> bool:
        """Sleep ``seconds`` unless stopped first; ``True`` when the run is stopping."""
        if stop.is_set():  # wait_for with no time left would time out before looking
            return True
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def write(writer: int) -> None:
        local = random.Random(seed + writer)
        pace = Pace(load.append_rate / load.writers)
        count = 0
        while not await pause(pace.wait()):
            chronicum_id = owned[writer][count % len(owned[writer])]
            actum, key = _actum(chronicum_id, writer, local), f"soak:{writer}:{count}"
            for _ in range(RETRIES):  # with the same key: it lands once
                started = time.perf_counter()
                try:
                    stored = await keeper.record_actum(owner, actum, idempotency_key=key)
                except StoreError:
                    soak.failed()
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
                soak.timed_append(time.perf_counter() - started)
                soak.acknowledged[chronicum_id].add(stored.id)
                break
            else:
                soak.problems.append(f"writer {writer}: an append failed {RETRIES} times; it was given up")
                return
            count += 1

    async def read(reader: int) -> None:
        local = random.Random(seed + 1000 + reader)
        pace = Pace(load.read_rate / load.readers)
        everyone = [chronicum_id for chronica in owned for chronicum_id in chronica]
        while not await pause(pace.wait()):
            started = time.perf_counter()
            try:
                await keeper.get_acta(owner, local.choice(everyone), last_n=WINDOW)
            except StoreError:
                soak.failed()
                continue
            soak.timed_read(time.perf_counter() - started)

    async def follow(chronicum_id: str) -> None:
        got = soak.log_followed(chronicum_id)
        after = soak.acknowledged[chronicum_id].first
        while True:  # until cancelled
            try:
                async for actum in keeper.follow(owner, chronicum_id, after=after):
                    got.add(actum.id)
                    after = actum.id
            except StoreError:
                soak.failed()  # resumes after the last actum it got

    async def each_minute() -> None:
        local = random.Random(seed + 2000)
        while not await pause(60):
            try:
                if LISTING in capabilities:
                    cursor: str | None = None
                    while True:
                        page = await keeper.list_chronica(owner, limit=100, cursor=cursor)
                        if (cursor := page.next_cursor) is None:
                            break
                if ERASURE in capabilities:
                    other = f"{owner}-erased"
                    doomed = await keeper.record_actum(other, _actum(new_chronicum_id(), 0, local))
                    await keeper.erase_chronicum(other, doomed.chronicum_id)
            except StoreError:
                soak.failed()

    tasks = [asyncio.create_task(write(i)) for i in range(load.writers)]
    tasks += [asyncio.create_task(read(i)) for i in range(load.readers)]
    tasks.append(asyncio.create_task(each_minute()))
    followers = [asyncio.create_task(follow(chronica[0])) for chronica in owned[: load.followers]]
    began = time.monotonic()
    killed = load.kill_at is None
    print(_header(), flush=True)
    while (minute := (time.monotonic() - began) / 60) < load.minutes:
        await asyncio.sleep(min(load.interval, max(0.1, (load.minutes - minute) * 60)))
        minute = (time.monotonic() - began) / 60
        if not killed and load.kill_at is not None and minute >= load.kill_at:
            print(f"# minute {minute:.2f}: {await asyncio.to_thread(_kill, url)}", flush=True)
            killed = True
        print(_row(soak.sample(minute, url)), flush=True)
    stop.set()
    await asyncio.gather(*tasks)
    deadline = time.monotonic() + CATCH_UP
    while not all(_caught_up(soak, c) for c in soak.followed) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    for task in followers:
        task.cancel()
    for outcome in await asyncio.gather(*followers, return_exceptions=True):
        if not isinstance(outcome, asyncio.CancelledError):
            soak.problems.append(f"a follower ended: {outcome!r}")
    soak.verify({c: _stored_ids(await keeper.get_acta(owner, c)) for c in soak.acknowledged})
    await store.close()
    return soak


# --- the command -------------------------------------------------------------------------------


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line (``argv`` without the program name; ``None`` reads ``sys.argv``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True, help="the store URL")
    parser.add_argument("--asyncio", action="store_true", help="the asyncio store, tasks in one loop")
    parser.add_argument("--option", action="append", type=_option, default=[], metavar="KEY=VALUE")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--warmup-minutes", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--followers", type=int, default=3)
    parser.add_argument("--append-rate", type=float, default=39.0, help="appends a second, all writers")
    parser.add_argument("--read-rate", type=float, default=20.0, help="reads a second, all readers")
    parser.add_argument("--kill-at", type=float, default=None, help="minute of the connection kill")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write the samples and checks here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a soak from the command line; return 0 when every check held, 1 otherwise."""
    arguments = parse_arguments(argv)
    load = Load(
        writers=arguments.writers,
        readers=arguments.readers,
        followers=min(arguments.followers, arguments.writers),
        append_rate=arguments.append_rate,
        read_rate=arguments.read_rate,
        minutes=arguments.minutes,
        warmup_minutes=arguments.warmup_minutes,
        interval=arguments.interval,
        kill_at=arguments.kill_at,
    )
    seed = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(2**32)
    owner = f"soak-{os.getpid()}-{seed}"
    print(f"# soak of {arguments.store} ({'asyncio' if arguments.asyncio else 'blocking'}), owner {owner}, "
          f"seed {seed}, {asdict(load)}", flush=True)  # fmt: skip
    runner: Callable[[str, dict[str, Any], Load, str, int, Path], Soak] = (
        run_asyncio if arguments.asyncio else run_blocking
    )
    with tempfile.TemporaryDirectory(prefix="chronica-soak-") as folder:
        soak = runner(arguments.store, dict(arguments.option), load, owner, seed, Path(folder))
        for log in (*soak.acknowledged.values(), *soak.followed.values()):
            log.close()
    growth = soak.growth()
    acknowledged = sum(log.count for log in soak.acknowledged.values())
    if growth is None:
        print("# RSS growth after the warm-up: not enough samples after it")
    else:
        print(f"# RSS growth after the warm-up: {growth[0]:+.1f} MB ({growth[1]:+.3f} MB/min)")
    followed = sum(log.count for log in soak.followed.values())
    print(f"# {acknowledged} acknowledged acta; followers got {followed}")
    print(
        "# checks: "
        + ("every actum once and in order, every follower exact" if not soak.problems else "FAILED")
    )
    for problem in soak.problems:
        print(f"#   {problem}")
    if arguments.json is not None:
        report = {
            "store": arguments.store,
            "asyncio": arguments.asyncio,
            "seed": seed,
            "load": asdict(load),
            "samples": [asdict(sample) for sample in soak.samples],
            "growth_mb": None if growth is None else growth[0],
            "slope_mb_per_minute": None if growth is None else growth[1],
            "acknowledged": acknowledged,
            "problems": soak.problems,
        }
        arguments.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if soak.problems else 0


if __name__ == "__main__":
    sys.exit(main())
