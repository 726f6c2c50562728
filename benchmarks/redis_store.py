"""chronica-redis beside raw redis-py, the OpenAI Agents SDK's RedisSession, and a cluster beside one server.

Usage (from the repository root, with ``./backends/redis`` installed; ``openai-agents[redis]``
too for the RedisSession rows)::

    python -m benchmarks.redis_store [--sizes 100,10000,100000] [--repeat 300]
                                     [--writers 40] [--writes 50] [--no-peer] [--no-cluster]
                                     [--url redis://...] [--cluster-url redis+cluster://...]

Without ``--url`` / ``--cluster-url`` it starts its own servers from Debian's ``redis-server``
on free loopback ports (one server with ``appendonly yes``, a six-node cluster), data in a
temporary folder, and stops them by PID at the end; the keys it writes are never dropped, so
point ``--url`` only at a throw-away server. It prints medians (µs) and ratios, the two sides'
calls alternated:

1. append (``Chronicarius.record_actum``, owner cached) and last-20 messages
   (``get_acta(kinds=[message], last_n=20)``) beside raw redis-py running the same scripts with
   the same keys and arguments (``EVALSHA``), at each history size;
2. the asyncio store beside ``agents.extensions.memory.RedisSession`` on the same server:
   ``add_items([item])`` and ``get_items(limit=20)`` (which loads what it is asked for, without
   filtering by kind);
3. ``--writers`` threads appending ``--writes`` acta each into chronica of their own, acta/s, on
   the cluster and on the one server.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chronica_redis import RedisStore, scripts
from chronica_redis.operations import Run
from chronica_redis.plans import RedisPlans

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    Chronicarius,
    new_actum_id,
    open_async_store,
    open_store,
)

ROOT = Path(__file__).resolve().parent.parent
OWNER = "ardian"
STORY = [
    (ActumKind.MESSAGE, ActorKind.HUMAN),
    (ActumKind.THOUGHT, ActorKind.AGENT),
    (ActumKind.TOOL_REQUEST, ActorKind.AGENT),
    (ActumKind.TOOL_RESPONSE, ActorKind.AGENT),
    (ActumKind.MESSAGE, ActorKind.AGENT),
    (ActumKind.MESSAGE, ActorKind.HUMAN),
    (ActumKind.MESSAGE, ActorKind.AGENT),
]
CONTENT = "Rumah Teduh and Kayu Manis both have a quiet table for four at 7pm."
WINDOW = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=20)


def _actum(chronicum_id: str, index: int) -> Actum:
    kind, actor_kind = STORY[index % len(STORY)]
    return Actum(chronicum_id, kind, actor_kind, "concierge", CONTENT, new_actum_id())


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _paired(ours: Callable[[], Any], theirs: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median µs of each, their calls alternated so that a busy machine slows both alike."""
    for _ in range(max(repeat // 10, 10)):
        ours()
        theirs()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for call, kept in ((ours, samples[0]), (theirs, samples[1])):
            start = time.perf_counter()
            call()
            kept.append(time.perf_counter() - start)
    return _median_us(samples[0]), _median_us(samples[1])


@contextmanager
def _servers(args: argparse.Namespace) -> Iterator[tuple[str, str | None]]:
    """The standalone URL and the cluster URL: given, or servers of the script's own."""
    if args.url and (args.cluster_url or args.no_cluster):
        yield args.url, args.cluster_url
        return
    sys.path.insert(0, str(ROOT / "backends" / "redis" / "tests"))
    import servers  # type: ignore[import-not-found]  # the tests' own: Debian's redis-server on free ports

    root = servers.temporary_directory("bench")
    started: list[Any] = []
    try:
        url = args.url
        if not url:
            server = servers.standalone(root / "standalone")
            started.append(server)
            url = server.url
        cluster_url = args.cluster_url
        if not cluster_url and not args.no_cluster:
            cluster = servers.Cluster(root / "cluster")
            started.append(cluster)
            cluster_url = cluster.url
        yield url, cluster_url
    finally:
        for running in started:
            running.stop()
        shutil.rmtree(root, ignore_errors=True)


def _raw_record(store: RedisStore, plans: RedisPlans, chronicum_id: str) -> Callable[[], Any]:
    """Raw redis-py: the record script, with the keys and arguments the store sends."""
    client = store.client
    keys = plans.keys(chronicum_id)
    counter = iter(range(10**9))

    def call() -> Any:
        actum = _actum(chronicum_id, next(counter))
        index = keys.index(actum.kind, actum.actor_kind)
        return client.evalsha(
            scripts.RECORD.sha, 5, keys.meta, keys.acta, keys.keys, keys.followed, index,
            chronicum_id, plans.channel, "", "", 1,
            actum.id, str(actum.kind), str(actum.actor_kind), actum.actor, actum.content, 1,
        )  # fmt: skip

    return call


def _raw_window(store: RedisStore, plans: RedisPlans, chronicum_id: str) -> Callable[[], Any]:
    """Raw redis-py: the window script with the store's keys (the message lists), then the same decoding."""
    client = store.client
    operation = next(plans.acta(chronicum_id, WINDOW))
    assert isinstance(operation, Run)

    def call() -> Any:
        return client.evalsha(operation.script.sha, len(operation.keys), *operation.keys, *operation.args)

    return call


def _fill(chronicarius: Chronicarius, chronicum_id: str, size: int) -> None:
    store = chronicarius.store
    assert isinstance(store, RedisStore)
    for start in range(0, size, 500):
        batch = [_actum(chronicum_id, index) for index in range(start, min(size, start + 500))]
        chronicarius.record_acta(OWNER, batch)


def _history_row(chronicarius: Chronicarius, store: RedisStore, size: int, repeat: int) -> str:
    chronicum_id = f"history-{size}"
    _fill(chronicarius, chronicum_id, size)

    def window() -> Any:
        return chronicarius.get_acta(OWNER, chronicum_id, actum_kinds=["message"], last_n=20)

    counter = iter(range(10**9))

    def append() -> Any:
        return chronicarius.record_actum(OWNER, _actum(chronicum_id, next(counter)))

    read, raw_read = _paired(window, _raw_window(store, store.plans, chronicum_id), repeat)
    write, raw_write = _paired(append, _raw_record(store, store.plans, chronicum_id), repeat)
    return (
        f"{size:>9,} {write:>9.1f} {raw_write:>9.1f} {write / raw_write:>6.2f} "
        f"{read:>9.1f} {raw_read:>9.1f} {read / raw_read:>6.2f}"
    )


def history(url: str, sizes: list[int], repeat: int) -> None:
    print(f"\n## append and last-20 messages beside raw redis-py (same scripts), {url}")
    print(f"{'history':>9} {'append':>9} {'raw':>9} {'ratio':>6} {'last-20':>9} {'raw':>9} {'ratio':>6}")
    with RedisStore(url, prefix=f"bench-{uuid.uuid4().hex[:8]}") as store:
        chronicarius = Chronicarius(store)
        for size in sizes:
            print(_history_row(chronicarius, store, size, repeat))


async def _paired_async(
    ours: Callable[[], Any], theirs: Callable[[], Any], repeat: int
) -> tuple[float, float]:
    """:func:`_paired` for coroutines."""
    for _ in range(max(repeat // 10, 10)):
        await ours()
        await theirs()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for call, kept in ((ours, samples[0]), (theirs, samples[1])):
            start = time.perf_counter()
            await call()
            kept.append(time.perf_counter() - start)
    return _median_us(samples[0]), _median_us(samples[1])


async def _peer_row(chronicarius: AsyncChronicarius, session: Any, size: int, repeat: int) -> str:
    chronicum_id = f"peer-{size}"
    for start in range(0, size, 500):
        count = min(size, start + 500) - start
        await chronicarius.record_acta(OWNER, [_actum(chronicum_id, start + index) for index in range(count)])
        await session.add_items([{"role": "user", "content": CONTENT} for _ in range(count)])
    counter = iter(range(10**9))

    def append() -> Any:
        return chronicarius.record_actum(OWNER, _actum(chronicum_id, next(counter)))

    def window() -> Any:
        return chronicarius.get_acta(OWNER, chronicum_id, actum_kinds=["message"], last_n=20)

    write, peer_write = await _paired_async(
        append, lambda: session.add_items([{"role": "user", "content": CONTENT}]), repeat
    )
    read, peer_read = await _paired_async(window, lambda: session.get_items(limit=20), repeat)
    return (
        f"{size:>9,} {write:>9.1f} {peer_write:>9.1f} {write / peer_write:>6.2f} "
        f"{read:>9.1f} {peer_read:>9.1f} {read / peer_read:>6.2f}"
    )


async def _peer(url: str, sizes: list[int], repeat: int) -> None:
    try:
        from agents.extensions.memory import RedisSession  # type: ignore[import-not-found, unused-ignore]
    except ImportError as error:
        print(f"\n(RedisSession rows left out: {error}; pip install 'openai-agents[redis]')")
        return
    print(f"\n## asyncio store beside the OpenAI Agents SDK's RedisSession, {url}")
    print(f"{'history':>9} {'append':>9} {'peer':>9} {'ratio':>6} {'last-20':>9} {'peer':>9} {'ratio':>6}")
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    store = open_async_store(url, prefix=prefix)
    chronicarius = AsyncChronicarius(store)
    try:
        for size in sizes:
            session = RedisSession.from_url(session_id=f"{prefix}-{size}", url=url)
            try:
                print(await _peer_row(chronicarius, session, size, repeat))
            finally:
                await session.close()
    finally:
        await store.close()


def writers(url: str, count: int, writes: int) -> float:
    """Acta per second of ``count`` threads appending ``writes`` acta each into chronica of their own."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    with open_store(url, prefix=prefix, max_connections=count * 2) as store:
        chronicarius = Chronicarius(store)
        for writer in range(count):
            chronicarius.record_actum(OWNER, _actum(f"writer-{writer}", 0))
        barrier = threading.Barrier(count + 1)

        def write(writer: int) -> None:
            barrier.wait()
            for index in range(writes):
                chronicarius.record_actum(OWNER, _actum(f"writer-{writer}", index + 1))

        threads = [threading.Thread(target=write, args=(writer,)) for writer in range(count)]
        for thread in threads:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in threads:
            thread.join()
        return count * writes / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.redis_store", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--sizes", default="100,10000,100000", help="history sizes (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=300, help="timed calls per row (default %(default)s)")
    parser.add_argument("--writers", type=int, default=40, help="writer threads (default %(default)s)")
    parser.add_argument(
        "--writes", type=int, default=50, help="acta each writer appends (default %(default)s)"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the writers' run (default %(default)s)"
    )
    parser.add_argument("--url", help="a standalone server to use instead of starting one")
    parser.add_argument("--cluster-url", help="a redis+cluster:// URL to use instead of starting a cluster")
    parser.add_argument("--no-peer", action="store_true", help="leave out the RedisSession rows")
    parser.add_argument("--no-cluster", action="store_true", help="leave out the cluster")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with _servers(args) as (url, cluster_url):
        history(url, sizes, args.repeat)
        if not args.no_peer:
            asyncio.run(_peer(url, sizes, args.repeat))
        print(f"\n## {args.writers} writer threads x {args.writes} appends, distinct chronica (acta/s)")
        for name, target in (("one server", url), ("cluster (3 primaries)", cluster_url)):
            if target is None:
                continue
            rates = [writers(target, args.writers, args.writes) for _ in range(args.rounds)]
            shown = " ".join(f"{rate:,.0f}" for rate in rates)
            print(f"{name:>22}: {shown}  median {statistics.median(rates):,.0f}")


if __name__ == "__main__":
    main()
