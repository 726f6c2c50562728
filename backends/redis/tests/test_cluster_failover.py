"""On a six-node cluster of the test's own: a primary's quick restart, then its death under load."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chronica_redis import RedisStore
from servers import Cluster

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    StoreError,
    new_actum_id,
)

pytestmark = pytest.mark.cluster

WRITERS = 40
CHRONICA = 10
RUN_SECONDS = 14.0
KILL_AFTER_SECONDS = 2.0
RETRY_PAUSE_SECONDS = 0.05


def _actum(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


def _until_confirmed(chronicarius: Chronicarius, owner: str, actum: Actum) -> Actum:
    """Record ``actum`` with a key, again with the same key until a replica confirms it (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return chronicarius.record_actum(owner, actum, idempotency_key=actum.content)
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(RETRY_PAUSE_SECONDS)


@pytest.fixture(scope="module")
def cluster(temporary_root: Path) -> Iterator[Cluster]:
    # Every write reaches the disk before it is answered: with `appendfsync everysec` (Redis's
    # default) a primary killed while a background fsync is under way has answered writes it had
    # not yet written, and comes back without them; its replica then copies that (see the README).
    own = Cluster(temporary_root / "failover-cluster", "--appendfsync", "always")
    try:
        yield own
    finally:
        own.stop()


def test_a_primary_restarted_at_once_with_aof_keeps_every_actum(cluster: Cluster) -> None:
    """SIGKILL and restart within a moment (before any failover): its acta are all there."""
    with RedisStore(cluster.url, wait_replicas=1) as store:
        chronicarius = Chronicarius(store)
        written = [
            chronicarius.record_actum("ardian", _actum("quick", f"m{index}")).id for index in range(200)
        ]
        victim = cluster.primary_of(store.plans.keys("quick").meta)
        victim.kill()
        victim.start()
        cluster.wait_until_ok()
        assert cluster.primary_of(store.plans.keys("quick").meta) is victim
        for attempt in range(20):
            try:
                assert [actum.id for actum in store.acta("quick", ActaQuery())] == written
                break
            except StoreError:
                if attempt == 19:
                    raise
                time.sleep(0.25)


def test_a_primary_killed_under_forty_writers_and_a_follower(cluster: Cluster) -> None:
    """Every write a replica confirmed is there once, in order; the follower resumes without a gap.

    Forty writer threads append (each write keyed, retried with its key until confirmed) into
    ten chronica; one of them, on the primary killed with SIGKILL, is followed. The killed node
    comes back after the failover, as the new primary's replica (until then that shard has no
    replica to confirm anything, and its writes raise ``WriteUnconfirmed``, retried).
    """
    with RedisStore(cluster.url, wait_replicas=1, wait_timeout=0.5) as store:
        chronicarius = Chronicarius(store)
        owner = "ardian"
        ids = [f"failover-{number}" for number in range(CHRONICA)]
        starts = {
            chronicum_id: _until_confirmed(chronicarius, owner, _actum(chronicum_id, "start"))
            for chronicum_id in ids
        }
        followed = ids[0]
        victim = cluster.primary_of(store.plans.keys(followed).meta)
        stop = threading.Event()
        confirmed: dict[int, list[Actum]] = {writer: [] for writer in range(WRITERS)}
        failures: list[BaseException] = []

        def write(writer: int) -> None:
            chronicum_id = ids[writer % CHRONICA]
            index = 0
            while not stop.is_set():
                key = f"writer-{writer}-{index}"
                actum = _actum(chronicum_id, key)
                while True:
                    try:
                        confirmed[writer].append(chronicarius.record_actum(owner, actum, idempotency_key=key))
                        break
                    except StoreError:  # WriteUnconfirmed, or the primary gone: the same key again
                        if stop.is_set():
                            return
                        time.sleep(RETRY_PAUSE_SECONDS)
                    except BaseException as error:  # noqa: BLE001 - reported by the test
                        failures.append(error)
                        return
                index += 1

        seen: list[Actum] = []
        resumed = 0

        def follow() -> None:
            nonlocal resumed
            position = starts[followed].id
            while True:
                try:
                    for actum in chronicarius.follow(owner, followed, after=position, timeout=3.0):
                        seen.append(actum)
                        position = actum.id
                    if stop.is_set():
                        return
                except StoreError:
                    resumed += 1
                    time.sleep(RETRY_PAUSE_SECONDS)
                except BaseException as error:  # noqa: BLE001 - reported by the test
                    failures.append(error)
                    return

        threads = [threading.Thread(target=write, args=(writer,)) for writer in range(WRITERS)]
        follower = threading.Thread(target=follow)
        for thread in [*threads, follower]:
            thread.start()
        time.sleep(KILL_AFTER_SECONDS)
        victim.kill()
        deadline = time.monotonic() + 60
        while cluster.primary_of(store.plans.keys(followed).meta) is victim:  # the replica takes over
            assert time.monotonic() < deadline, "no failover within a minute"
            time.sleep(0.1)
        cluster.wait_until_ok(replicated=False)
        victim.start()  # back as the new primary's replica
        cluster.wait_until_ok()
        time.sleep(max(0.0, RUN_SECONDS - KILL_AFTER_SECONDS - 8.0))
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        follower.join(timeout=60)
        assert failures == []
        assert cluster.primary_of(store.plans.keys(followed).meta) is not victim

        for number, chronicum_id in enumerate(ids):
            stored = store.acta(chronicum_id, ActaQuery())
            contents = [actum.content for actum in stored]
            assert len(contents) == len(set(contents)), f"{chronicum_id} holds an actum twice"
            for writer in range(number, WRITERS, CHRONICA):
                mine = [actum.id for actum in stored if actum.content.startswith(f"writer-{writer}-")]
                assert mine == [actum.id for actum in confirmed[writer]], (
                    f"writer {writer}'s confirmed writes are not all there, once, in its order"
                )
        final = store.acta(followed, ActaQuery())
        assert [actum.id for actum in seen] == [actum.id for actum in final][1:], (
            "the follower missed acta, saw one twice, or saw one the cluster lost"
        )
        assert sum(len(writes) for writes in confirmed.values()) > WRITERS
