"""How many server connections one store holds at most, counted by the server under load.

For each store URL: a blocking store with a small pool, :data:`THREADS` threads appending and
reading at once (more than the pool holds) and one follower waiting, for :data:`SECONDS`; then the
asyncio store from two event loops (two threads) at once, :data:`THREADS` tasks each, and a
follower in each. A sampler counts the store's connections on the server every 10 ms
(PostgreSQL: ``pg_stat_activity`` by ``application_name``; MariaDB: ``information_schema.processlist``
by a database of the run's own; Redis: ``CLIENT LIST`` by ``client_name``) and prints the peak
beside what the backend's README says the store holds at most.

Usage (from a tox environment that has the backend installed)::

    python -m benchmarks.connection_ceiling postgresql://postgres@127.0.0.1/test
    python -m benchmarks.connection_ceiling postgresql+psycopg://postgres@127.0.0.1/test
    python -m benchmarks.connection_ceiling mariadb+pymysql://root@127.0.0.1/test
    python -m benchmarks.connection_ceiling redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    new_chronicum_id,
    open_async_store,
    open_store,
)

THREADS = 12
"""Threads (and tasks per event loop) appending and reading at once: more than any pool here."""

SECONDS = 3.0
"""How long each load runs."""

NAME = f"chronica-ceiling-{os.getpid()}"
"""The ``application_name`` / ``client_name`` / database the run's connections carry."""

SCHEMA = NAME.replace("-", "_")
"""The PostgreSQL schema (dropped afterwards) or MariaDB database the run's tables go to."""

POOLS: dict[str, dict[str, Any]] = {
    "postgresql": {"max_size": 4, "schema": SCHEMA},
    "postgresql+psycopg": {"pool_size": 2, "max_overflow": 2, "schema": SCHEMA},
    "mariadb+pymysql": {"pool_size": 2, "max_overflow": 2},
    "redis": {"client_name": NAME, "prefix": SCHEMA, "accept_restart_loss": True},
}
"""The small pool each URL scheme's store is opened with."""

DOCUMENTED = {
    "postgresql": (
        "max_size + 1 listener = 5",
        "per loop max_size + 1 listener = 10, + 1 check while a loop's pool opens",
    ),
    "postgresql+psycopg": (
        "pool_size + max_overflow = 4 (watcher from the pool)",
        "per loop pool_size + max_overflow, + 1 watcher = 9",
    ),
    "mariadb+pymysql": (
        "2 x (pool_size + max_overflow) = 8 (watcher from the write pool)",
        "per loop 2 x (pool_size + max_overflow), + 1 watcher = 17",
    ),
    "redis": (
        "operations in flight (12 writers, the follower's reads) + 1 listener = 14",
        "per loop operations in flight, + 1 listener = 27",
    ),
}
"""What each backend's README says the store holds at most, for the pools above."""


def _said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


def _counter(url: str) -> tuple[str, Callable[[], int], Callable[[], None]]:
    """The store URL carrying :data:`NAME`, a function counting its connections, and a cleanup."""
    scheme = url.partition("://")[0]
    if scheme.startswith("postgresql"):
        import psycopg

        admin = psycopg.connect(url.replace("+psycopg", ""), autocommit=True)
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        separator = "&" if "?" in url else "?"

        def drop_schema() -> None:
            admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            admin.close()

        return (
            f"{url}{separator}application_name={NAME}",
            lambda: int(admin.execute(query, (NAME,)).fetchone()[0]),  # type: ignore[index]
            drop_schema,
        )
    if scheme.startswith("mariadb") or scheme.startswith("mysql"):
        from sqlalchemy import create_engine, text

        base, _, _ = url.rpartition("/")
        engine = create_engine(f"{base}/test", isolation_level="AUTOCOMMIT")
        database = SCHEMA
        with engine.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {database}"))

        def count() -> int:
            query = text("SELECT count(*) FROM information_schema.processlist WHERE db = :db")
            with engine.connect() as connection:
                return int(connection.execute(query, {"db": database}).scalar_one())

        def drop() -> None:
            with engine.connect() as connection:
                connection.execute(text(f"DROP DATABASE {database}"))
            engine.dispose()

        return f"{base}/{database}", count, drop
    if scheme.startswith("redis"):
        import redis

        client = redis.Redis.from_url(url)

        def drop_keys() -> None:
            for key in client.scan_iter(f"{SCHEMA}*"):
                client.delete(key)
            client.close()

        return url, lambda: sum(each.get("name") == NAME for each in client.client_list()), drop_keys
    raise SystemExit(f"no connection counter for {scheme}")


@contextmanager
def _sampled(count: Callable[[], int]) -> Iterator[list[int]]:
    """Count every 10 ms while the body runs; the list holds the peak once it ends."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], count())

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def _blocking_load(url: str, options: dict[str, Any]) -> None:
    store = open_store(url, **options)
    try:
        chronicarius = Chronicarius(store)
        followed = new_chronicum_id()
        first = chronicarius.record_actum("ardian", _said(followed, "start"))
        deadline = time.monotonic() + SECONDS

        def follow() -> None:
            for _ in chronicarius.follow("ardian", followed, after=first.id, timeout=SECONDS):
                pass

        def work() -> None:
            chronicum_id = new_chronicum_id()
            while time.monotonic() < deadline:
                chronicarius.record_actum("ardian", _said(chronicum_id, "load"))
                chronicarius.get_acta("ardian", chronicum_id, last_n=5)

        threads = [threading.Thread(target=follow)] + [threading.Thread(target=work) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        store.close()


def _async_load(url: str, options: dict[str, Any]) -> None:
    store = open_async_store(url, **options)
    chronicarius = AsyncChronicarius(store)

    async def loop_load() -> None:
        followed = new_chronicum_id()
        first = await chronicarius.record_actum("ardian", _said(followed, "start"))
        deadline = time.monotonic() + SECONDS

        async def follow() -> None:
            follower = chronicarius.follow("ardian", followed, after=first.id)
            try:
                async with asyncio.timeout(SECONDS):
                    async for _ in follower:
                        pass
            except TimeoutError:
                pass

        async def work() -> None:
            chronicum_id = new_chronicum_id()
            while time.monotonic() < deadline:
                await chronicarius.record_actum("ardian", _said(chronicum_id, "load"))
                await chronicarius.get_acta("ardian", chronicum_id, last_n=5)

        await asyncio.gather(follow(), *(work() for _ in range(THREADS)))

    threads = [threading.Thread(target=asyncio.run, args=(loop_load(),)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    asyncio.run(store.close())


def main() -> None:
    """Measure each URL given on the command line and print a line per store and flavour."""
    parser = argparse.ArgumentParser(description="How many server connections one store holds at most.")
    parser.add_argument("urls", nargs="+")
    for url in parser.parse_args().urls:
        scheme = url.partition("://")[0]
        options = POOLS.get(scheme, {})
        named, count, cleanup = _counter(url)
        try:
            for flavour, load, documented in (
                ("blocking", _blocking_load, DOCUMENTED[scheme][0]),
                ("asyncio, 2 loops", _async_load, DOCUMENTED[scheme][1]),
            ):
                with _sampled(count) as peak:
                    load(named, options)
                print(
                    f"{scheme} {options} {flavour}: peak {peak[0]} server connections; README: {documented}"
                )
        finally:
            cleanup()


if __name__ == "__main__":
    main()
