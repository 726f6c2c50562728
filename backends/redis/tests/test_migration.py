"""Chronica written by the previous chronica-redis (no idle indexes, no positions, no native fields).

The keys are written here as that version wrote them; the current store then reads them back as
they were, writes on after them, and ``migrate`` adds what retention and lookups by id use.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chronica_redis import RedisStore
from chronica_redis.keys import chronicum_keys, listing_member, micros, owner_index_key

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicarius, new_actum_id
from chronica_core.erasure import owner_digest
from chronica_core.history import Segment

OWNER = "ardian"
OLD = [
    ("m1", ActumKind.MESSAGE, ActorKind.HUMAN, "Book a table for five"),
    ("t1", ActumKind.THOUGHT, ActorKind.AGENT, "Friday, 20:00"),
    ("q1", ActumKind.TOOL_REQUEST, ActorKind.AGENT, '{"book": 5}'),
    ("r1", ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, '{"booked": true}'),
    ("m2", ActumKind.MESSAGE, ActorKind.AGENT, "Booked"),
]
STARTED = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _write_old_schema(store: RedisStore, chronicum_id: str) -> list[datetime]:
    """The keys the previous version wrote for a chronicum of five acta, one of them keyed."""
    raw = store.client
    keys = chronicum_keys(store.plans.prefix, chronicum_id)
    moments = [STARTED + timedelta(seconds=index + 1) for index in range(len(OLD))]
    raw.zadd(
        owner_index_key(store.plans.prefix, owner_digest(OWNER)), {listing_member(STARTED, chronicum_id): 0}
    )
    raw.hset(keys.meta, mapping={"owner": OWNER, "started": micros(STARTED), "seq": 0})
    for seq, ((actum_id, kind, actor_kind, content), at) in enumerate(zip(OLD, moments, strict=True), 1):
        fields = {
            "i": actum_id,
            "k": str(kind),
            "a": str(actor_kind),
            "r": "bot",
            "c": content,
            "t": micros(at),
        }
        raw.xadd(keys.acta, fields, id=f"{seq}-0")
        raw.rpush(keys.index(kind, actor_kind), seq)
    raw.hset(keys.meta, mapping={"seq": len(OLD), "last": micros(moments[-1])})
    raw.hset(keys.keys, "retried", "4:1")
    return moments


def test_acta_written_before_read_back_as_before(store: RedisStore) -> None:
    """Every read of the current store returns the old acta unchanged: no native form, no links."""
    moments = _write_old_schema(store, "old")
    chronicarius = Chronicarius(store)
    expected = [
        Actum("old", kind, actor_kind, "bot", content, actum_id, at)
        for (actum_id, kind, actor_kind, content), at in zip(OLD, moments, strict=True)
    ]
    assert chronicarius.get_acta(OWNER, "old") == expected
    assert store.acta("old", ActaQuery(actum_kinds=(ActumKind.MESSAGE,))) == [expected[0], expected[4]]
    assert chronicarius.get_actum(OWNER, "old", "t1") == expected[1]
    layout = store.layout("old")
    assert (layout.lineage, layout.summaries) == ((Segment("old", 0, None),), ())
    found = store.locate(layout.lineage, ("m1", "r1", "nope"))
    assert {actum_id: located.position for actum_id, located in found.items()} == {"m1": 1, "r1": 4}
    assert [chronicum.id for chronicum in chronicarius.list_chronica(OWNER).chronica] == ["old"]
    retried = store.record_idempotent(
        Actum("old", ActumKind.MESSAGE, ActorKind.HUMAN, "x", "y", new_actum_id()), "retried"
    )
    assert retried == expected[3]


def test_writes_go_on_after_them_and_forks_share_them(store: RedisStore) -> None:
    """New acta take the next positions; a fork of an old chronicum reads the old acta through it."""
    _write_old_schema(store, "old")
    chronicarius = Chronicarius(store)
    answer = chronicarius.record_actum(
        OWNER, Actum("old", ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "bot", "again", answers="q1")
    )
    layout = store.layout("old")
    assert store.locate(layout.lineage, (answer.id,))[answer.id].position == len(OLD) + 1
    fork = chronicarius.fork_chronicum(OWNER, "old", at="q1")
    own = chronicarius.record_actum(
        OWNER, Actum(fork.id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "Six?")
    )
    assert [actum.id for actum in chronicarius.get_acta(OWNER, fork.id)] == ["m1", "t1", "q1", own.id]
    window = chronicarius.get_acta(OWNER, "old", last_n=1)
    assert [actum.id for actum in window] == ["q1", answer.id]  # the response keeps its request


def test_migrate_indexes_them_for_retention(store: RedisStore) -> None:
    """Before ``migrate`` retention cannot find an old chronicum; after it, it can, and erases it."""
    _write_old_schema(store, "old")
    keys = chronicum_keys(store.plans.prefix, "old")
    soon = datetime.now(UTC) + timedelta(days=1)
    assert store.idle_chronica(soon, OWNER, None, 10) == []
    store.migrate()
    store.migrate()  # safe to repeat
    assert store.client.hgetall(keys.positions) == {"m1": "1", "t1": "2", "q1": "3", "r1": "4", "m2": "5"}
    [found] = store.idle_chronica(soon, OWNER, None, 10)
    assert (found.id, found.last_actum_at) == ("old", STARTED + timedelta(seconds=len(OLD)))
    assert [chronicum.id for chronicum in store.idle_chronica(soon, None, None, 1000)].count("old") == 1
    assert Chronicarius(store).erase_idle(before=soon, owner_id=OWNER) == 1
