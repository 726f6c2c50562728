"""The idle indexes: what they hold under writers, and how a lagging entry is read."""

from __future__ import annotations

import threading
from datetime import timedelta

from chronica_redis import RedisStore
from chronica_redis.keys import chronicum_keys, idle_index_key, micros, owner_idle_key

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius, new_actum_id
from chronica_core.erasure import owner_digest

WRITERS = 8
WRITES = 20


def _actum(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, new_actum_id())


def _scores(store: RedisStore, owner: str, chronicum_id: str) -> tuple[float | None, float | None]:
    raw = store.client
    prefix = store.plans.prefix
    return (
        raw.zscore(idle_index_key(prefix), chronicum_id),
        raw.zscore(owner_idle_key(prefix, owner_digest(owner)), chronicum_id),
    )


def test_racing_writers_leave_the_entry_at_the_last_activity(store: RedisStore) -> None:
    """Every append moving the entry (step 0), from racing threads: it ends at the newest ``at``."""
    store.plans.idle_step = 0
    chronicarius = Chronicarius(store)
    chronicarius.record_actum("ardian", _actum("raced", "first"))

    def write() -> None:
        for index in range(WRITES):
            store.record(_actum("raced", f"w{index}"))

    threads = [threading.Thread(target=write) for _ in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    last = store.get("raced").last_actum_at
    assert last is not None
    assert _scores(store, "ardian", "raced") == (micros(last), micros(last))


def test_an_entry_lags_by_less_than_a_step_and_is_read_right(store: RedisStore) -> None:
    """Within a step an append leaves the entry behind; a retention read skips and moves it."""
    chronicarius = Chronicarius(store)
    first = chronicarius.record_actum("ardian", _actum("lagging", "first"))  # moves it: no move yet
    assert first.at is not None
    assert _scores(store, "ardian", "lagging") == (micros(first.at), micros(first.at))
    later = store.record(_actum("lagging", "second"))  # the step has not passed: not moved
    assert later.at is not None and later.at > first.at
    assert _scores(store, "ardian", "lagging") == (micros(first.at), micros(first.at))
    cutoff = later.at  # idle before the second write: the first, but not the chronicum
    assert store.idle_chronica(cutoff, "ardian", None, 10) == []
    assert _scores(store, "ardian", "lagging") == (micros(later.at), micros(later.at))
    [found] = store.idle_chronica(later.at + timedelta(microseconds=1), "ardian", None, 10)
    assert (found.id, found.last_actum_at) == ("lagging", later.at)


def test_erasure_drops_the_entries(store: RedisStore) -> None:
    """An erased chronicum leaves no entry in either idle index; its keys hold only the marker."""
    chronicarius = Chronicarius(store)
    chronicarius.record_actum("ardian", _actum("erased", "first"))
    assert chronicarius.erase_chronicum("ardian", "erased") == 1
    assert _scores(store, "ardian", "erased") == (None, None)
    keys = chronicum_keys(store.plans.prefix, "erased")
    assert store.client.hgetall(keys.meta) == {"erased": owner_digest("ardian")}


def test_a_fork_s_entry_at_its_shared_actum_is_read_at_its_fork_time(store: RedisStore) -> None:
    """A fork whose entries stand at its shared actum's ``at`` (as earlier builds put them) is not idle
    before its fork time: the erasing script says so, and a retention read moves the entries there."""
    chronicarius = Chronicarius(store)
    shared = chronicarius.record_actum("ardian", _actum("old-source", "long ago"))
    fork = chronicarius.fork_chronicum("ardian", "old-source", fork_id="old-fork")
    assert shared.at is not None and shared.at < fork.started_at
    assert _scores(store, "ardian", fork.id) == (micros(fork.started_at), micros(fork.started_at))
    raw, prefix = store.client, store.plans.prefix
    for index in (idle_index_key(prefix), owner_idle_key(prefix, owner_digest("ardian"))):
        raw.zadd(index, {fork.id: micros(shared.at)})
    assert store.erase_idle("old-source", fork.started_at, owner_digest("ardian")) == 0
    assert [found.id for found in store.idle_chronica(fork.started_at, "ardian", None, 10)] == ["old-source"]
    assert _scores(store, "ardian", fork.id) == (micros(fork.started_at), micros(fork.started_at))
