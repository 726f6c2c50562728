"""Chronica beside its peers: the session stores of other agent frameworks, on the same databases.

Run ``python -m benchmarks.peers [--peers NAME,...] [--sizes 100,10000,100000] [--json FILE]``
(``tox -e peers`` installs the peers). Each peer is paired with the Chronica store on the same
database (the same SQLite file, the same PostgreSQL schema, or memory), and for each history size
both are filled (the peer through bulk SQL into its own tables, with increasing timestamps, where
its API would take hours) and timed in the same interleaved rounds: the peer's own "last 20" call
against ``Chronicarius.get_acta(owner, id, last_n=20)``, its own append against
``Chronicarius.record_actum``, then 40 writers on distinct sessions, and for langchain-postgres 40
writers on one shared session. A latency ratio is Chronica's median / the peer's (below 1: Chronica
is faster); a writers ratio is Chronica's acta/s / the peer's items/s (above 1: Chronica is
faster). The project's SQLite targets against ``SQLiteSession`` are printed with ok/MISSED. Nothing
here calls a model or the network; every schema and file it makes is dropped at the end. See
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.acta import LAST_N, OWNER, fresh_id, history, story_actum
from benchmarks.baselines import load_baseline
from benchmarks.connections import MAX_CONNECTIONS, Budget, BudgetExceeded
from benchmarks.peer_stores import PEERS, POOL_SIZE, POSTGRES_URL, SIZES, LangchainPostgresPeer, Peer, Place
from benchmarks.peers_report import LatencyRow, PeerReport, WritersRow, format_reports, machine
from benchmarks.timing import (
    AsyncWriter,
    Closer,
    Writer,
    new_seed,
    run_tasks,
    run_threads,
    shuffled,
    time_interleaved,
)
from chronica_core import (
    Actum,
    AsyncChronicarius,
    AsyncStore,
    Chronicarius,
    Store,
    open_async_store,
    open_store,
)
from chronica_core.registry import registry

# --------------------------------------------------------------------------------------------
# A pairing: one peer and the Chronica store on its database


@dataclass(slots=True)
class Settings:
    """What to run (from the command line)."""

    peers: list[str]
    sizes: list[int]
    repeat: int
    warmup: int
    max_seconds: float
    writers: int
    writes: int
    writer_rounds: int
    postgres_url: str
    pool_size: int
    shared_writers: bool = True
    json_file: str | None = None
    seed: int = 0
    max_connections: int = MAX_CONNECTIONS


@dataclass(frozen=True, slots=True)
class Filled:
    """What one history size filled: the chronicum, its asyncio twin (memory only) and the peer's session."""

    size: int
    chronicum_id: str
    async_chronicum_id: str
    session_id: str


class Pairing:
    """Measures one peer beside the Chronica store on the same database.

    Args:
        peer_class: the peer.
        place: the database they share.
        settings: what to run.
        runner: the event loop every asyncio call of the run goes through.
    """

    def __init__(
        self, peer_class: type[Peer], place: Place, settings: Settings, runner: asyncio.Runner
    ) -> None:
        self.peer = peer_class(place)
        self.place = place
        self.settings = settings
        self.runner = runner
        self.rng = random.Random(f"{settings.seed}-{peer_class.key}")
        self.budget = Budget(place.chronica_url, settings.max_connections)
        self.report = PeerReport(
            peer=peer_class.key,
            title=peer_class.title,
            database=place.database,
            chronica_url=place.chronica_url,
            last_twenty=peer_class.last_twenty,
            asynchronous=peer_class.asynchronous,
            machine=machine(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self.store: Store | None = None
        self.chronicarius: Chronicarius | None = None
        self.async_store: AsyncStore | None = None
        self.async_chronicarius: AsyncChronicarius | None = None

    def note(self, text: str) -> None:
        """Add a line to the report's notes and show it now (on stderr)."""
        self.report.notes.append(text)
        print(f"  note: {text}", file=sys.stderr, flush=True)

    def run(self) -> PeerReport:
        """Fill, time and close; return the report."""
        began = time.perf_counter()
        url, options = self.place.chronica_url, self.place.chronica_options
        self.store = open_store(url, **options)
        self.chronicarius = Chronicarius(self.store)
        try:
            if registry().backend_for(url).open_async is not None:
                self.async_store = self.runner.run(_open_async(url, options))
                self.async_chronicarius = AsyncChronicarius(self.async_store)
            self.runner.run(self.peer.open())
            try:
                filled = [self._fill(size) for size in self.settings.sizes]
                if filled:
                    self._time("last 20", filled)
                    self._time("append", filled)
                if self.settings.writers > 0:
                    self._measure_writers(shared=False)
                    if self.settings.shared_writers and isinstance(self.peer, LangchainPostgresPeer):
                        self._measure_writers(shared=True)
            finally:
                self.runner.run(self.peer.close())
        finally:
            if self.async_store is not None:
                self.runner.run(self.async_store.close())
            self.store.close()
        self.report.seconds = round(time.perf_counter() - began, 1)
        print(f"  {self.peer.key}: done in {self.report.seconds:.0f} s", file=sys.stderr, flush=True)
        return self.report

    # -- filling ---------------------------------------------------------------------------

    def _fill(self, size: int) -> Filled:
        """Fill a chronicum (two on memory: the asyncio store is another store) and a peer session."""
        print(f"  {self.peer.key}: filling {size:,}", file=sys.stderr, flush=True)
        began = time.perf_counter()
        chronicum_id = fresh_id(f"peers-{size}")
        acta = history(chronicum_id, size)
        async_chronicum_id = chronicum_id
        if self.place.database == "memory":
            assert self.chronicarius is not None
            for actum in acta:
                self.chronicarius.record_actum(OWNER, actum)
            if self.async_chronicarius is not None:
                async_chronicum_id = fresh_id(f"peers-{size}-async")
                self.runner.run(_fill_async(self.async_chronicarius, history(async_chronicum_id, size)))
        else:
            baseline = _chronica_loader(self.place)
            try:
                baseline.prepare(chronicum_id, OWNER)
                baseline.fill(chronicum_id, acta)
            finally:
                baseline.close()
        assert self.chronicarius is not None
        self.chronicarius.get_acta(OWNER, chronicum_id, last_n=1)  # the owner cache, warm
        if self.async_chronicarius is not None:
            self.runner.run(self.async_chronicarius.get_acta(OWNER, async_chronicum_id, last_n=1))
        session_id = str(uuid.uuid4())
        self.runner.run(self.peer.fill(session_id, size))
        print(f"  {self.peer.key}: filled {size:,} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        return Filled(size, chronicum_id, async_chronicum_id, session_id)

    # -- latency ---------------------------------------------------------------------------

    def _time(self, operation: str, chronica: list[Filled]) -> None:
        """Time ``operation`` for Chronica and the peer at every size, all in the same rounds."""
        assert self.chronicarius is not None
        chronicarius, peer = self.chronicarius, self.peer
        blocking: dict[str, Callable[[int], object]] = {}
        awaited: dict[str, Callable[[int], Awaitable[object]]] = {}
        for filled in chronica:
            size, chronicum_id, session_id = filled.size, filled.chronicum_id, filled.session_id
            async_id = filled.async_chronicum_id
            if operation == "last 20":
                self._check_windows(size, chronicum_id, session_id)
                blocking[f"{size} chronica"] = _chronica_reader(chronicarius, chronicum_id)
                if self.async_chronicarius is not None:
                    awaited[f"{size} async"] = _async_chronica_reader(self.async_chronicarius, async_id)
                if peer.asynchronous:
                    awaited[f"{size} peer"] = _async_peer_reader(peer, session_id)
                else:
                    blocking[f"{size} peer"] = _peer_reader(peer, session_id)
            else:
                blocking[f"{size} chronica"] = _chronica_appender(chronicarius, chronicum_id)
                if self.async_chronicarius is not None:
                    awaited[f"{size} async"] = _async_chronica_appender(self.async_chronicarius, async_id)
                if peer.asynchronous:
                    awaited[f"{size} peer"] = _async_peer_appender(peer, session_id)
                else:
                    blocking[f"{size} peer"] = _peer_appender(peer, session_id)
        print(f"  {peer.key}: timing {operation}", file=sys.stderr, flush=True)
        timings = self.runner.run(
            time_interleaved(
                blocking,
                self.settings.warmup,
                self.settings.repeat,
                awaited,
                self.settings.max_seconds,
                self.rng,
            )
        )
        count = min(timing.count for timing in timings.values())
        if count < self.settings.repeat:
            self.note(
                f"{operation}: {count} timed calls per column, not {self.settings.repeat} (--max-seconds)"
            )
        for size in (filled.size for filled in chronica):
            self.report.latency.append(
                LatencyRow(
                    peer.key,
                    operation,
                    size,
                    timings[f"{size} chronica"],
                    timings.get(f"{size} async"),
                    timings[f"{size} peer"],
                )
            )

    def _check_windows(self, size: int, chronicum_id: str, session_id: str) -> None:
        """Both sides read the same number of items before they are timed (else a note)."""
        assert self.chronicarius is not None
        expected = min(LAST_N, size)
        got = len(self.chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N))
        peer_got = (
            self.runner.run(self.peer.aread(session_id))
            if self.peer.asynchronous
            else self.peer.read(session_id)
        )
        if got != expected or peer_got != expected:
            self.note(
                f"history {size}: last 20 read {got} acta and {peer_got} peer items, expected {expected}"
            )

    # -- many writers ----------------------------------------------------------------------

    def _measure_writers(self, *, shared: bool) -> None:
        """Chronica's writer threads and tasks against the peer's writers, rounds interleaved."""
        assert self.chronicarius is not None
        count, writes = self.settings.writers, self.settings.writes
        label = "one shared session" if shared else "a session each"
        print(f"  {self.peer.key}: {count} writers x {writes} writes, {label}", file=sys.stderr, flush=True)
        contenders: dict[str, Callable[[], float]] = {"chronica threads": self._chronica_threads(shared)}
        if self.async_chronicarius is not None:
            contenders["chronica tasks"] = self._chronica_tasks(shared)
        peer_writer = "peer tasks" if self.peer.asynchronous else "peer threads"
        contenders[peer_writer] = self._peer_writers(shared)
        if isinstance(self.peer, LangchainPostgresPeer):
            self.peer.open_pool()
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        failures: dict[str, list[str]] = {name: [] for name in contenders}
        adds = min(count, self.place.pool_size) if self.place.database == "postgresql" else count
        for round_number in range(self.settings.writer_rounds):
            for name in shuffled(list(contenders), self.rng):
                try:
                    self.budget.admit(f"{count} {name}, {label}", adds)
                except BudgetExceeded as refusal:
                    failures[name].append(str(refusal))
                    self.note(str(refusal))
                    continue
                try:
                    seconds = contenders[name]()
                except RuntimeError as error:  # a writer failed: the round says why, the others go on
                    cause = error.__cause__ if error.__cause__ is not None else error
                    failures[name].append(f"{type(cause).__name__}: {cause}".splitlines()[0])
                    self.note(f"{count} {name}, {label}, round {round_number + 1}: {failures[name][-1]}")
                    continue
                rates[name].append(count * writes / seconds)
        if isinstance(self.peer, LangchainPostgresPeer):
            self.peer.close_pool()
        for name, values in rates.items():
            self.report.writers.append(
                WritersRow(
                    self.peer.key,
                    shared,
                    name,
                    count,
                    statistics.median(values) if values else 0.0,
                    values,
                    failures[name],
                )
            )

    def _chronica_threads(self, shared: bool) -> Callable[[], float]:
        chronicarius = self.chronicarius
        assert chronicarius is not None
        count, writes, warmup = self.settings.writers, self.settings.writes, 2

        def measure() -> float:
            shared_id = fresh_id("peers-shared")
            chronicarius.record_actum(OWNER, story_actum(shared_id, 0))

            def make_writer(index: int) -> tuple[Writer, Closer]:
                chronicum_id = shared_id if shared else fresh_id(f"peers-writer-{index}")
                acta = [story_actum(chronicum_id, number) for number in range(warmup + writes)]
                return (lambda number: chronicarius.record_actum(OWNER, acta[number])), _nothing

            return run_threads(count, make_writer, warmup, writes)

        return measure

    def _chronica_tasks(self, shared: bool) -> Callable[[], float]:
        chronicarius = self.async_chronicarius
        assert chronicarius is not None
        count, writes, warmup = self.settings.writers, self.settings.writes, 2

        def measure() -> float:
            shared_id = fresh_id("peers-shared-async")
            self.runner.run(chronicarius.record_actum(OWNER, story_actum(shared_id, 0)))

            def make_writer(index: int) -> AsyncWriter:
                chronicum_id = shared_id if shared else fresh_id(f"peers-task-{index}")
                acta = [story_actum(chronicum_id, number) for number in range(warmup + writes)]
                return lambda number: chronicarius.record_actum(OWNER, acta[number])

            return self.runner.run(run_tasks(count, make_writer, warmup, writes))

        return measure

    def _peer_writers(self, shared: bool) -> Callable[[], float]:
        peer = self.peer
        count, writes, warmup = self.settings.writers, self.settings.writes, 2

        def session_ids() -> list[str]:
            if shared:
                return [str(uuid.uuid4())] * count
            return [str(uuid.uuid4()) for _ in range(count)]

        if peer.asynchronous:

            def measure_tasks() -> float:
                ids = session_ids()
                for session_id in set(ids):
                    self.runner.run(peer.new_session(session_id))

                def make_writer(index: int) -> AsyncWriter:
                    return lambda number: peer.aappend(ids[index], number)

                return self.runner.run(run_tasks(count, make_writer, warmup, writes))

            return measure_tasks

        append = peer.pooled_append if isinstance(peer, LangchainPostgresPeer) else peer.append

        def measure_threads() -> float:
            ids = session_ids()
            for session_id in set(ids):
                self.runner.run(peer.new_session(session_id))

            def make_writer(index: int) -> tuple[Writer, Closer]:
                return (lambda number: append(ids[index], number)), _nothing

            return run_threads(count, make_writer, warmup, writes)

        return measure_threads


def _nothing() -> None:
    """A writer's closer when it opened nothing of its own."""


async def _fill_async(chronicarius: AsyncChronicarius, acta: Sequence[Actum]) -> None:
    """Record ``acta`` one by one through the asyncio store (memory: it has no bulk load)."""
    for actum in acta:
        await chronicarius.record_actum(OWNER, actum)


async def _open_async(url: str, options: dict[str, str]) -> AsyncStore:
    """Open the asyncio store inside the run's event loop."""
    return open_async_store(url, **options)


def _chronica_loader(place: Place) -> Any:
    """The baseline's loader that bulk-loads Chronica's own tables on ``place``'s database."""
    baseline = load_baseline(registry().backend_for(place.chronica_url).name)
    return baseline.open_loader(place.chronica_url, place.chronica_options)


def _chronica_reader(chronicarius: Chronicarius, chronicum_id: str) -> Callable[[int], object]:
    return lambda _: chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N)


def _async_chronica_reader(
    chronicarius: AsyncChronicarius, chronicum_id: str
) -> Callable[[int], Awaitable[object]]:
    return lambda _: chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N)


def _chronica_appender(chronicarius: Chronicarius, chronicum_id: str) -> Callable[[int], object]:
    return lambda number: chronicarius.record_actum(OWNER, story_actum(chronicum_id, number))


def _async_chronica_appender(
    chronicarius: AsyncChronicarius, chronicum_id: str
) -> Callable[[int], Awaitable[object]]:
    return lambda number: chronicarius.record_actum(OWNER, story_actum(chronicum_id, number))


def _peer_reader(peer: Peer, session_id: str) -> Callable[[int], object]:
    return lambda _: peer.read(session_id)


def _async_peer_reader(peer: Peer, session_id: str) -> Callable[[int], Awaitable[object]]:
    return lambda _: peer.aread(session_id)


def _peer_appender(peer: Peer, session_id: str) -> Callable[[int], object]:
    return lambda number: peer.append(session_id, number)


def _async_peer_appender(peer: Peer, session_id: str) -> Callable[[int], Awaitable[object]]:
    return lambda number: peer.aappend(session_id, number)


# --------------------------------------------------------------------------------------------
# Throw-away places


class Places:
    """Makes each pairing's database and removes all of them at the end.

    SQLite: one file per pairing in a temporary folder (Chronica's tables and the peer's side by
    side). PostgreSQL: one schema per run (Chronica's tables and every peer's side by side: their
    names do not clash), dropped with everything in it.

    Args:
        settings: the run's settings (server URL, pool size).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.folder = tempfile.mkdtemp(prefix="chronica-peers-")
        self.schema = f"chronica_peers_{uuid.uuid4().hex[:8]}"
        self.schema_made = False

    def place(self, peer_class: type[Peer]) -> Place:
        """The database ``peer_class`` runs on, with the Chronica store's URL on it."""
        size = self.settings.pool_size
        if peer_class.database == "sqlite":
            path = str(Path(self.folder) / f"{peer_class.key}.db")
            return Place("sqlite", f"sqlite:///{path}", sqlite_path=path, pool_size=size)
        if peer_class.database == "postgresql":
            self.schema_made = True
            url = self.settings.postgres_url
            options = {"schema": self.schema, "max_size": str(size)}
            return Place("postgresql", url, options, postgres_url=url, schema=self.schema, pool_size=size)
        return Place("memory", "memory://", pool_size=size)

    def remove(self) -> None:
        """Drop the schema (if a pairing made it) and delete the SQLite files."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if not self.schema_made:
            return
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.settings.postgres_url, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )


# --------------------------------------------------------------------------------------------
# Command line


def _positive_counts(text: str, option: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(value <= 0 for value in values):
        raise argparse.ArgumentTypeError(
            f"{option} wants positive whole numbers separated by commas, got {text!r}"
        )
    return values


def parse_arguments(argv: Sequence[str] | None) -> Settings:
    """Read the command line into :class:`Settings`.

    Args:
        argv: the arguments (``None``: ``sys.argv[1:]``).

    Returns:
        The settings, peers in the order given (``--peers``), every peer by default.

    Raises:
        SystemExit: with status 2 and a message naming the option, for an unknown peer, a size
            that is not a positive whole number, or any other bad option (argparse's behaviour).
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description="Chronica beside other agent frameworks' session stores, on the same databases.",
    )
    parser.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"comma-separated, some of {','.join(PEERS)} (default: all)",
    )
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES), help="history sizes")
    parser.add_argument("--repeat", type=int, default=200, help="timed calls per column and size")
    parser.add_argument("--warmup", type=int, default=10, help="untimed rounds first")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=15.0,
        help="time budget of each timed phase per peer (never below 10 rounds)",
    )
    parser.add_argument(
        "--writers", type=int, default=40, help="writer threads or tasks (0: no writers phase)"
    )
    parser.add_argument("--writes", type=int, default=10, help="timed writes per writer and round")
    parser.add_argument(
        "--writer-rounds", type=int, default=3, help="interleaved rounds of the writers phase"
    )
    parser.add_argument("--no-shared", action="store_true", help="skip writers on one shared session")
    parser.add_argument("--postgres-url", default=os.environ.get("CHRONICA_TEST_POSTGRES_URL", POSTGRES_URL))
    parser.add_argument(
        "--pool-size",
        type=int,
        default=POOL_SIZE,
        help="server connections each pool may hold (Chronica's blocking and asyncio stores, the peer)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the reports as JSON to FILE")
    parser.add_argument("--seed", type=int, default=None, help="seed of the shuffled order (default: drawn)")
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        help=f"server connections this process may hold; a writers row that could pass it is refused"
        f" ({MAX_CONNECTIONS})",
    )
    arguments = parser.parse_args(argv)
    peers = [name.strip() for name in arguments.peers.split(",") if name.strip()]
    unknown = [name for name in peers if name not in PEERS]
    if unknown or not peers:
        parser.error(f"--peers wants some of {','.join(PEERS)}, got {arguments.peers!r}")
    try:
        sizes = _positive_counts(arguments.sizes, "--sizes")
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    for option in ("repeat", "writes", "writer_rounds", "pool_size", "max_connections"):
        if getattr(arguments, option) <= 0:
            parser.error(f"--{option.replace('_', '-')} wants a positive number")
    settings = Settings(
        peers=peers,
        sizes=sorted(set(sizes)),
        repeat=arguments.repeat,
        warmup=max(0, arguments.warmup),
        max_seconds=arguments.max_seconds,
        writers=max(0, arguments.writers),
        writes=arguments.writes,
        writer_rounds=arguments.writer_rounds,
        postgres_url=arguments.postgres_url,
        pool_size=arguments.pool_size,
        shared_writers=not arguments.no_shared,
        json_file=arguments.json,
        seed=new_seed() if arguments.seed is None else arguments.seed,
        max_connections=arguments.max_connections,
    )
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    """Run every chosen peer; print the tables; return 0, or 1 when a peer failed.

    A failing peer (its package missing, its server down) becomes a line on stderr and the run
    goes on with the others.
    """
    settings = parse_arguments(argv)
    began = time.perf_counter()
    print(f"{machine()}; sizes {settings.sizes}; peers {','.join(settings.peers)}", file=sys.stderr)
    print(f"order shuffled each round, seed {settings.seed} (--seed {settings.seed} repeats it)")
    reports: list[PeerReport] = []
    failed = False
    places = Places(settings)
    try:
        with asyncio.Runner() as runner:
            for key in settings.peers:
                peer_class = PEERS[key]
                try:
                    reports.append(Pairing(peer_class, places.place(peer_class), settings, runner).run())
                except Exception as error:  # noqa: BLE001 - one peer's failure must not hide the others
                    failed = True
                    print(f"{key}: failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    finally:
        places.remove()
    print(format_reports(reports))
    print(f"\n{machine()} at the end; {time.perf_counter() - began:.0f} s in all")
    if settings.json_file:
        Path(settings.json_file).write_text(json.dumps([report.as_json() for report in reports], indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
