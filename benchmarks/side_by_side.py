"""Two or more stores timed in the same rounds: what ``benchmarks.run`` cannot interleave.

``benchmarks.run`` measures one store URL after another, so a ratio between two stores carries
whatever the machine's load did between their runs. This times ``Chronicarius.record_actum`` and
the last-20-messages ``Chronicarius.get_acta`` on every store given, call by call in the same
rounds (in an order shuffled each round, from ``--seed``), each store appending into and reading
a chronicum of its own, and prints each store's medians and their ratio to the first store's. It
does so ``--runs`` times (:data:`RUNS`), opening the stores anew for each run, and judges the
``side_by_side`` rows of ``benchmarks/targets.toml`` (chronica-sqlalchemy on PostgreSQL,
``postgresql+psycopg://``, against chronica-postgres, ``postgresql://``) on the median of the
runs' ratios, ``ok`` or ``MISSED``, with their spread.

    python -m benchmarks.side_by_side --store postgresql://postgres@127.0.0.1:5432/bench_pg \\
        --store postgresql+psycopg://postgres@127.0.0.1:5432/bench_sa [--history 100] [--repeat 500] \\
        [--runs 5] [--seed N]

Each store gets its default schema of the database in its URL (give each its own throw-away
database; nothing is dropped). The chronicum of each holds ``--history`` acta of the dinner story
before timing, appended through the store. On PostgreSQL each run then ANALYZEs the store's
``acta`` and ``chronica`` (:func:`gather_statistics`), as autovacuum does on a server that runs
it, so that the statements are timed as PostgreSQL plans them on such a server: with statistics
its choice between planning a prepared statement once and planning it on every call changes
(the stores now keep one plan: ``chronica_core.plan_cache``). ``--no-analyze`` times the tables as
they are (the test VM's server runs with autovacuum off; the first lines say so).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import urllib.parse
import uuid
from collections.abc import Callable, Sequence

from benchmarks.acta import LAST_N, story_actum
from benchmarks.run import positive_integer
from benchmarks.targets import Verdict, targets_for
from benchmarks.timing import new_seed, time_interleaved
from chronica_core import ActumKind, Chronicarius, open_store
from chronica_core.urls import split_query_options

__all__ = ["main"]

OWNER = "side-by-side"
RUNS = 5
"""Runs by default, each opening its stores anew (new connections, new server processes). Their
ratios are shown one by one beside their median: how far they agree says how far one figure can be
trusted."""


def _rounds(
    calls: dict[str, Callable[[int], object]], repeat: int, warmup: int, rng: random.Random
) -> dict[str, float]:
    """Median nanoseconds of each call over ``repeat`` rounds after ``warmup``, in shuffled rounds."""
    timings = asyncio.run(time_interleaved(calls, warmup, repeat, rng=rng))
    return {name: timing.median_ns for name, timing in timings.items()}


Medians = dict[str, float]
"""Per store URL, a median in nanoseconds."""


def _libpq_url(url: str) -> tuple[str, str | None] | None:
    """A PostgreSQL store URL as libpq takes it, and its ``schema`` option; None for other stores.

    The query keeps what libpq reads (``sslmode``, ``host`` for a socket directory, ``options``...)
    and drops the store's own options, which libpq would refuse.
    """
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.split("+")[0] not in ("postgresql", "postgres"):
        return None
    import psycopg  # only PostgreSQL stores need it

    libpq_keywords = {default.keyword.decode() for default in psycopg.pq.Conninfo.get_defaults()}
    query = urllib.parse.urlsplit(url).query
    names = {urllib.parse.unquote(item.partition("=")[0]) for item in query.split("&") if item}
    bare, found = split_query_options(f"postgresql://{rest}", names - libpq_keywords)
    return bare, found.get("schema")


def autovacuum_setting(url: str) -> str | None:
    """The ``autovacuum`` setting (``"on"`` or ``"off"``) of the PostgreSQL server at ``url``.

    Returns None for a store that is not on PostgreSQL. Raises ``psycopg.Error`` when the
    server refuses the connection.
    """
    target = _libpq_url(url)
    if target is None:
        return None
    import psycopg  # only PostgreSQL stores need it

    with psycopg.connect(target[0], autocommit=True) as connection:
        row = connection.execute("SHOW autovacuum").fetchone()
    return None if row is None else str(row[0])


def gather_statistics(url: str) -> bool:
    """ANALYZE the ``acta`` and ``chronica`` tables of the PostgreSQL store at ``url``.

    Args:
        url: a store URL (``postgresql://`` or ``postgresql+<driver>://``), its tables in the
            URL's ``?schema=`` or else in the connection's current schema.

    Returns:
        True when analyzed; False for a store not on PostgreSQL (nothing done: MariaDB's InnoDB
        keeps its statistics itself, and SQLite's plan for a context window needs none).

    Raises:
        psycopg.Error: the server refused the connection or the statement (tables missing, say).
    """
    target = _libpq_url(url)
    if target is None:
        return False
    import psycopg  # only PostgreSQL stores need it
    from psycopg import sql

    conninfo, schema = target
    with psycopg.connect(conninfo, autocommit=True) as connection:
        if schema is None:
            row = connection.execute("SELECT current_schema()").fetchone()
            schema = "public" if row is None else str(row[0])
        tables = sql.SQL(", ").join(sql.Identifier(schema, table) for table in ("acta", "chronica"))
        connection.execute(sql.SQL("ANALYZE {}").format(tables))
    return True


def _one_run(
    urls: Sequence[str], history: int, repeat: int, warmup: int, analyze: bool, rng: random.Random
) -> tuple[Medians, Medians]:
    """Open every store, fill a chronicum of each, time reads then appends; close them.

    Returns the median nanoseconds of a last-20 read and of an append, per URL. Each run opens
    its stores anew: new connections, so new server processes, wherever the machine puts them.
    With ``analyze``, the PostgreSQL stores' tables are analyzed after filling
    (:func:`gather_statistics`).
    """
    chronicarii = {url: Chronicarius(open_store(url)) for url in urls}
    chronica = {url: f"side-{uuid.uuid4().hex}" for url in urls}
    rounds = warmup + repeat
    try:
        for url, chronicarius in chronicarii.items():
            for index in range(history):
                chronicarius.record_actum(OWNER, story_actum(chronica[url], index, with_id=True))
            if analyze:
                gather_statistics(url)

        def reader(url: str) -> Callable[[int], object]:
            chronicarius, chronicum_id = chronicarii[url], chronica[url]
            return lambda number: chronicarius.get_acta(
                OWNER, chronicum_id, last_n=LAST_N, actum_kinds=[ActumKind.MESSAGE]
            )

        def appender(url: str) -> Callable[[int], object]:
            chronicarius, chronicum_id = chronicarii[url], chronica[url]
            acta = [story_actum(chronicum_id, index, with_id=True) for index in range(rounds)]
            return lambda number: chronicarius.record_actum(OWNER, acta[number])

        reads = _rounds({url: reader(url) for url in urls}, repeat, warmup, rng)
        appends = _rounds({url: appender(url) for url in urls}, repeat, warmup, rng)
    finally:
        for chronicarius in chronicarii.values():
            chronicarius.store.close()
    return reads, appends


def main(argv: Sequence[str] | None = None) -> int:
    """Time the stores side by side, ``--runs`` times, and print the tables; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", required=True, help="a store URL (two or more)")
    parser.add_argument("--history", type=int, default=100, help="acta in each chronicum before timing")
    parser.add_argument(
        "--repeat", type=positive_integer, default=500, help="timed rounds per operation and run"
    )
    parser.add_argument("--warmup", type=int, default=50, help="untimed rounds first, per run")
    parser.add_argument(
        "--runs",
        type=positive_integer,
        default=RUNS,
        help=f"runs, each opening the stores anew; ratios are medians ({RUNS})",
    )
    parser.add_argument(
        "--no-analyze",
        dest="analyze",
        action="store_false",
        help="do not ANALYZE the PostgreSQL stores' tables after filling (time them as they are)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the shuffled order (default: drawn)")
    arguments = parser.parse_args(argv)
    urls: list[str] = arguments.store
    first = urls[0]
    seed = new_seed() if arguments.seed is None else arguments.seed
    rng = random.Random(seed)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"{os.cpu_count()} CPUs, load average {load}; {arguments.runs} runs of {arguments.repeat} rounds,"
        f" medians in µs; order shuffled each round, seed {seed}"
    )
    for url in urls:
        setting = autovacuum_setting(url)
        if setting is not None:
            done = "ANALYZE after filling, each run" if arguments.analyze else "no ANALYZE (--no-analyze)"
            print(f"    {url}: {done}; the server's autovacuum is {setting}")
    read_ratios: dict[str, list[float]] = {url: [] for url in urls}
    append_ratios: dict[str, list[float]] = {url: [] for url in urls}
    print(f"{'run':>3} {'store':60} {'last-20 read':>13} {'ratio':>6} {'append':>9} {'ratio':>6}")
    for run in range(1, arguments.runs + 1):
        reads, appends = _one_run(
            urls, arguments.history, arguments.repeat, arguments.warmup, arguments.analyze, rng
        )
        for url in urls:
            read_ratio, append_ratio = reads[url] / reads[first], appends[url] / appends[first]
            read_ratios[url].append(read_ratio)
            append_ratios[url].append(append_ratio)
            read, append = reads[url] / 1000, appends[url] / 1000
            print(f"{run:3} {url:60} {read:13.0f} {read_ratio:5.2f}x {append:9.0f} {append_ratio:5.2f}x")
    print(f"median ratio over the runs, to {first}:")
    for url in urls[1:]:
        read_ratio, append_ratio = statistics.median(read_ratios[url]), statistics.median(append_ratios[url])
        print(f"    {url:60} last-20 read {read_ratio:5.2f}x  append {append_ratio:5.2f}x")
    for verdict in judge(urls, read_ratios, append_ratios):
        print(f"  {verdict.line()}")
    return 0


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower()


def judge(
    urls: Sequence[str], reads: dict[str, list[float]], appends: dict[str, list[float]]
) -> list[Verdict]:
    """The ``side_by_side`` targets whose two stores were both measured, on the runs' ratios.

    Args:
        urls: the store URLs, in the order given.
        reads: per URL, each run's read median over the first store's.
        appends: the same for appends.

    Returns:
        One verdict a target whose ``store`` and ``against`` schemes are both among ``urls``: the
        median over the runs of the store's ratio to the other's, with the runs' spread.
    """
    verdicts = []
    for target in targets_for("side_by_side"):
        mine = next((url for url in urls if _scheme(url) == target.store), None)
        theirs = next((url for url in urls if _scheme(url) == target.against), None)
        if mine is None or theirs is None:
            continue
        ratios = reads if target.measure == "read" else appends
        per_run = [own / other for own, other in zip(ratios[mine], ratios[theirs], strict=True)]
        operation = f"last-{LAST_N} read" if target.measure == "read" else "append"
        text = f"{target.store}:// {operation} <= {target.limit:g}x {target.against}://"
        verdicts.append(Verdict.judge(target, text, per_run))
    return verdicts


if __name__ == "__main__":
    sys.exit(main())
