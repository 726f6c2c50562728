"""Failover: a synchronous standby promoted while 40 writers and a follower work through a multi-host URL.

The primary's postmaster is killed with SIGKILL, the standby promoted; psycopg's multi-host
connection (``target_session_attrs=read-write``) finds the new primary. Every append a writer saw
acknowledged must be in its chronicum once, in the writer's order; a write that failed is retried
with its idempotency key, so it lands once; the follower, resuming from its last actum after an
error, gets exactly the followed chronicum's acta.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from postgres_cluster import PostgresPair

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    StoreError,
    new_chronicum_id,
    open_store,
)

WRITERS = 40
BEFORE_KILL = 400
"""Acknowledged appends (all writers) before the primary is killed, and again after the promotion."""
GIVE_UP = 90.0
"""Seconds a writer keeps retrying one append, and the whole run waits for a phase, before failing."""
OWNER = "failover"

URLS: dict[str, Callable[[PostgresPair], str]] = {
    "chronica-postgres": lambda pair: (
        f"postgresql://postgres@127.0.0.1:{pair.primary_port},127.0.0.1:{pair.standby_port}/postgres"
        "?target_session_attrs=read-write"
    ),
    "chronica-sqlalchemy": lambda pair: (
        f"postgresql+psycopg://postgres@/postgres?host=127.0.0.1:{pair.primary_port}"
        f"&host=127.0.0.1:{pair.standby_port}&target_session_attrs=read-write"
    ),
}


class Run:
    """The writers' acknowledged acta, the follower's, and a stop flag."""

    def __init__(self) -> None:
        self.acknowledged: dict[str, list[str]] = {}
        self.followed: list[str] = []
        self.failures = 0
        self.problems: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def total(self) -> int:
        with self.lock:
            return sum(len(ids) for ids in self.acknowledged.values())

    def wait_for(self, total: int) -> None:
        deadline = time.monotonic() + GIVE_UP
        while self.total() < total:
            assert not self.problems, self.problems
            assert time.monotonic() < deadline, f"{self.total()} acknowledged of {total} after {GIVE_UP} s"
            time.sleep(0.05)


def _actum(chronicum_id: str, writer: int, count: int) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, f"writer-{writer}", f"{writer}:{count}")


def _write(keeper: Chronicarius, run: Run, writer: int, chronicum_id: str) -> None:
    count = 0
    while not run.stop.is_set():
        deadline = time.monotonic() + GIVE_UP
        while True:  # with the same key, however often: it lands once
            try:
                stored = keeper.record_actum(
                    OWNER, _actum(chronicum_id, writer, count), idempotency_key=f"{writer}:{count}"
                )
                break
            except StoreError as error:
                with run.lock:
                    run.failures += 1
                if time.monotonic() > deadline:
                    run.problems.append(f"writer {writer}: append {count} failed for {GIVE_UP} s: {error}")
                    return
                time.sleep(0.05)
        with run.lock:
            run.acknowledged[chronicum_id].append(stored.id)
        count += 1


def _follow(keeper: Chronicarius, run: Run, chronicum_id: str, after: str) -> None:
    while not (run.stop.is_set() and len(run.followed) >= len(run.acknowledged[chronicum_id]) - 1):
        try:
            for actum in keeper.follow(OWNER, chronicum_id, after=after, timeout=1.0):
                run.followed.append(actum.id)
                after = actum.id
        except StoreError:
            time.sleep(0.05)  # resumes after the last actum it got


@pytest.mark.parametrize("backend", URLS)
def test_a_synchronous_standby_promoted_under_40_writers_loses_no_acknowledged_actum(
    postgres_pair: PostgresPair, backend: str
) -> None:
    run = Run()
    with open_store(URLS[backend](postgres_pair)) as store:
        keeper = Chronicarius(store)
        chronica = [new_chronicum_id() for _ in range(WRITERS)]
        for writer, chronicum_id in enumerate(chronica):
            opening = keeper.record_actum(OWNER, _actum(chronicum_id, writer, -1))
            run.acknowledged[chronicum_id] = [opening.id]
        threads = [
            threading.Thread(target=_write, args=(keeper, run, writer, chronicum_id))
            for writer, chronicum_id in enumerate(chronica)
        ]
        first = run.acknowledged[chronica[0]][0]
        threads.append(threading.Thread(target=_follow, args=(keeper, run, chronica[0], first)))
        for thread in threads:
            thread.start()
        try:
            run.wait_for(WRITERS + BEFORE_KILL)
            postgres_pair.kill_primary()
            postgres_pair.promote_standby()
            promoted = run.total()
            run.wait_for(promoted + BEFORE_KILL)
        finally:
            run.stop.set()
            for thread in threads:
                thread.join(timeout=GIVE_UP + 30)
        assert not any(thread.is_alive() for thread in threads)
        assert not run.problems, run.problems
        # Every acknowledged actum once, in its writer's order, read back from the new primary.
        for chronicum_id, acknowledged in run.acknowledged.items():
            stored = [actum.id for actum in keeper.get_acta(OWNER, chronicum_id)]
            assert stored == acknowledged, chronicum_id
        assert run.followed == run.acknowledged[chronica[0]][1:]
    with psycopg.connect(postgres_pair.conninfo(postgres_pair.standby_port)) as promoted_server:
        assert promoted_server.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    print(f"{backend}: {run.total()} acknowledged, {run.failures} failed calls retried")
