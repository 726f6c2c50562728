"""Benchmark: ``get_session(num_recent_events=5)`` on a 500-event session against a 5-event one.

Not a test: it prints medians and their ratio, measured in one run, the two sessions read in
alternation so that a busy machine slows both alike. The read of a long session should cost
about what the short one's does (a context window, not a full read); the whole 500-event read
is printed next to them for scale, and the median ``append_event`` while filling.

    python integrations/adk/benchmarks/read_window.py --store memory://
    python integrations/adk/benchmarks/read_window.py --store sqlite:////tmp/adk-bench.db
    python integrations/adk/benchmarks/read_window.py --analyze
        --store postgresql://postgres@127.0.0.1:5432/test --option schema=adk_bench   (one line)

``--option key=value`` pairs go to ``open_async_store``. It never deletes what it wrote except
the two sessions it made: point it at a throw-away schema or file.

On PostgreSQL, ``--analyze`` runs ``ANALYZE`` on the schema's ``acta`` table (through psycopg)
after filling it. A table just created has no statistics until autovacuum analyzes it; until
then the planner may read a chronicum's whole history for a filtered window (a bitmap scan and a
sort, whose cost grows with the history) instead of walking its index backwards.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from chronica_adk import ChronicaSessionService
from google.adk.events import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from chronica_core import open_async_store

APP = "adk-benchmark"
USER = "ardian"


def event(number: int) -> Event:
    """The ``number``-th event of the benchmark's conversation: the person and the agent in turn."""
    author = "user" if number % 2 == 0 else "concierge"
    return Event(
        author=author,
        invocation_id=f"inv-{number // 2}",
        content=types.Content(
            role="user" if author == "user" else "model",
            parts=[types.Part(text=f"turn {number}: a quiet table for four in Kemang on Friday at 7pm")],
        ),
    )


async def fill(service: ChronicaSessionService, count: int, appends: list[float] | None = None) -> str:
    """Create a session holding ``count`` events; return its id (each append's seconds into ``appends``)."""
    session = await service.create_session(app_name=APP, user_id=USER, session_id=f"bench-{uuid.uuid4().hex}")
    for number in range(count):
        start = time.perf_counter()
        await service.append_event(session, event(number))
        if appends is not None:
            appends.append(time.perf_counter() - start)
    return session.id


async def timed(service: ChronicaSessionService, session_id: str, config: GetSessionConfig | None) -> float:
    """Seconds one ``get_session`` with ``config`` took."""
    start = time.perf_counter()
    session = await service.get_session(app_name=APP, user_id=USER, session_id=session_id, config=config)
    elapsed = time.perf_counter() - start
    assert session is not None
    return elapsed


def analyze(url: str, schema: str) -> None:
    """Give PostgreSQL's planner statistics of the freshly filled ``acta`` table."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("ANALYZE {}.acta").format(sql.Identifier(schema)))


async def main(
    url: str, options: dict[str, str], repeat: int, long_size: int, short_size: int, analyzed: bool
) -> None:
    """Fill the two sessions, time their reads in alternation, print the medians and the ratio."""
    store = open_async_store(url, **options)
    service = ChronicaSessionService(store)
    try:
        appends: list[float] = []
        long_id = await fill(service, long_size, appends)
        short_id = await fill(service, short_size)
        if analyzed:
            analyze(url, options.get("schema", "public"))
        window = GetSessionConfig(num_recent_events=5)
        columns: dict[str, list[float]] = {"long": [], "short": [], "long whole": []}
        for round_number in range(repeat + repeat // 10):
            long_time = await timed(service, long_id, window)
            short_time = await timed(service, short_id, window)
            whole_time = await timed(service, long_id, None) if round_number % 5 == 0 else None
            if round_number >= repeat // 10:  # the first tenth warms up
                columns["long"].append(long_time)
                columns["short"].append(short_time)
                if whole_time is not None:
                    columns["long whole"].append(whole_time)
        long_median = statistics.median(columns["long"])
        short_median = statistics.median(columns["short"])
        whole_median = statistics.median(columns["long whole"])
        statistics_note = ", acta analyzed" if analyzed else ""
        warm_up = repeat // 10
        print(f"store: {url} ({repeat} reads per column after {warm_up} warm-up rounds{statistics_note})")
        print(f"get_session(num_recent_events=5), {long_size} events: median {long_median * 1e3:.3f} ms")
        print(f"get_session(num_recent_events=5), {short_size} events: median {short_median * 1e3:.3f} ms")
        print(f"ratio {long_size}/{short_size}: {long_median / short_median:.2f}x")
        print(
            f"for scale, get_session() whole, {long_size} events: median {whole_median * 1e3:.3f} ms "
            f"({len(columns['long whole'])} reads)"
        )
        print(
            f"append_event while filling the long session: median {statistics.median(appends) * 1e3:.3f} ms"
        )
        for session_id in (long_id, short_id):
            await service.delete_session(app_name=APP, user_id=USER, session_id=session_id)
    finally:
        await store.close()


def _options(pairs: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals:
            raise SystemExit(f"--option takes key=value, not {pair!r}")
        options[key] = value
    return options


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--store", default="memory://", help="a Chronica store URL")
    parser.add_argument("--option", action="append", default=[], help="key=value for open_async_store")
    parser.add_argument("--repeat", type=int, default=200, help="timed reads per column")
    parser.add_argument("--long", type=int, default=500, help="events of the long session")
    parser.add_argument("--short", type=int, default=5, help="events of the short session")
    parser.add_argument("--analyze", action="store_true", help="PostgreSQL: ANALYZE acta after filling")
    arguments = parser.parse_args()
    asyncio.run(
        main(
            arguments.store,
            _options(arguments.option),
            arguments.repeat,
            arguments.long,
            arguments.short,
            arguments.analyze,
        )
    )
