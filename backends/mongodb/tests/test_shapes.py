"""The native, history and retention capabilities on MongoDB, proven on the raw collections.

The conformance suite checks what the stores answer; these tests read ``chronica``, ``acta`` and
``batch_acta`` themselves: what a database made before these capabilities reads back after a
store opens it, what a fork and a summary store, and that an encrypted store keeps no plaintext.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from chronica_mongodb import MongoStore
from chronica_mongodb.core import SHAPE_INDEXES
from pymongo import MongoClient

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Native,
    Span,
    clock,
    open_store,
)
from chronica_core.encryption import DerivedKeys
from chronica_core.erasure import owner_digest
from chronica_core.history import RangeRead, Segment, WindowReads
from chronica_core.retention import last_activity

OWNER = "ardian"
SECRET = "the door code is 4711"


def _old_actum(chronicum_id: str, seq: int, actum_id: str, at: datetime, **more: Any) -> dict[str, Any]:
    """An ``acta`` document as the previous version wrote it."""
    return {
        "chronicum_id": chronicum_id,
        "seq": Int64(seq),
        "id": actum_id,
        "kind": "message",
        "actor_kind": "human",
        "actor": OWNER,
        "content": f"said {actum_id}",
        "at": at,
        **more,
    }


def _previous_version(client: MongoClient[dict[str, Any]], database: str) -> datetime:
    """Make the collections and indexes of the previous version, holding a batch and an empty chronicum."""
    old = client[database]
    old["acta"].create_index([("chronicum_id", 1), ("seq", 1)], name="chronicum_seq", unique=True)
    old["acta"].create_index(
        [("chronicum_id", 1), ("idempotency_key", 1)],
        name="chronicum_idempotency_key",
        unique=True,
        partialFilterExpression={"idempotency_key": {"$exists": True}},
    )
    old["chronica"].create_index(
        [("owner_id", 1), ("started_at", -1), ("started_at_us", -1), ("_id", -1)], name="owner_started"
    )
    old["batch_acta"].create_index([("batch", 1), ("pos", 1)], name="batch_pos", unique=True)
    old["batch_acta"].create_index([("chronicum_id", 1)], name="batch_chronicum")
    at = datetime(2026, 11, 30, 8, 0, 0, 123000, tzinfo=UTC)
    old["chronica"].insert_many(
        [
            {"_id": "old", "owner_id": OWNER, "started_at": at, "started_at_us": 456},
            {"_id": "empty", "owner_id": OWNER, "started_at": at, "started_at_us": 789},
        ]
    )
    batch = ObjectId()
    later = at + timedelta(seconds=1)
    old["acta"].insert_many(
        [
            _old_actum("old", 1, "a1", at),
            _old_actum("old", 2, "a2", later, batch=batch, size=Int64(3)),
            _old_actum("old", 3, "a5", later + timedelta(seconds=1)),
        ]
    )
    old["batch_acta"].insert_many(
        [_old_actum("old", 0, f"a{pos + 2}", later, batch=batch, pos=Int64(pos)) for pos in (1, 2)]
    )
    return at


def test_a_database_of_the_previous_version_reads_back_and_gains_positions(
    mongodb_server_url: str, database: str, admin_client: MongoClient[dict[str, Any]]
) -> None:
    """Acta written before read back as before (no native form, no answers), numbered 1, 2, ...

    The migration gives each actum its position (a batch one per actum), each chronicum its
    last activity, and makes the new indexes; the history, retention and native calls then
    work on the old data, and new acta take the positions after it.
    """
    at = _previous_version(admin_client, database)
    with MongoStore(mongodb_server_url, database=database) as store:
        acta = store.acta("old", ActaQuery())
        assert [actum.id for actum in acta] == ["a1", "a2", "a3", "a4", "a5"]
        assert [actum.content for actum in acta] == [f"said a{n}" for n in range(1, 6)]
        assert all(actum.native is None and actum.answers == "" for actum in acta)
        raw = admin_client[database]
        heads = {d["id"]: (d["position"], d["end"]) for d in raw["acta"].find({"chronicum_id": "old"})}
        assert heads == {"a1": (1, 1), "a2": (2, 4), "a5": (5, 5)}
        members = {d["id"]: d["position"] for d in raw["batch_acta"].find({"chronicum_id": "old"})}
        assert members == {"a3": 3, "a4": 4}
        for collection, indexes in SHAPE_INDEXES:
            names = {index["name"] for index in raw[collection].list_indexes()}
            assert {name for name, _, _ in indexes} <= names, collection

        layout = store.layout("old")
        assert layout.lineage == (Segment("old", 0, None),) and layout.summaries == ()
        rows = store.window("old", WindowReads((RangeRead(layout.lineage[0], None, None, 3, True, True),)))
        assert list(rows.positions) == [3, 4, 5]
        assert [actum.id for actum in rows.acta] == ["a3", "a4", "a5"]
        located = store.locate(layout.lineage, ("a4", "a1", "nowhere"))
        assert {actum_id: (found.position, found.actum.id) for actum_id, found in located.items()} == {
            "a4": (4, "a4"),
            "a1": (1, "a1"),
        }

        idle = store.idle_chronica(datetime.now(UTC), OWNER, None, 10)
        assert [(c.id, c.last_actum_at) for c in idle] == [
            ("empty", None),
            ("old", at + timedelta(seconds=2)),
        ]

        keeper = Chronicarius(store)
        native = Native("openai-agents.item", '{"role": "user"}')
        new = keeper.record_actum(
            OWNER,
            replace(Actum("old", ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "after"), native=native),
        )
        assert raw["acta"].find_one({"id": new.id})["position"] == 6  # type: ignore[index]
        fork = keeper.fork_chronicum(OWNER, "old", at="a3")
        assert [actum.id for actum in keeper.get_acta(OWNER, fork.id)] == ["a1", "a2", "a3"]
        assert keeper.get_acta(OWNER, "old")[-1].native == native


def test_a_fork_stores_its_lineage_and_no_acta(store: MongoStore) -> None:
    """A fork's document names its ancestors' segments; none of their acta are copied."""
    keeper = Chronicarius(store)
    source = f"source-{uuid.uuid4().hex}"
    written = [
        keeper.record_actum(OWNER, Actum(source, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, f"m{n}"))
        for n in range(5)
    ]
    fork = keeper.fork_chronicum(OWNER, source, at=written[2].id)
    document = store.database["chronica"].find_one({"_id": fork.id})
    assert document is not None
    assert document["lineage"] == [{"chronicum_id": source, "after": 0, "upto": 3}]
    assert document["base"] == 3
    assert document["forked_from"] == {"chronicum_id": source, "actum_id": written[2].id}
    assert store.database["acta"].count_documents({"chronicum_id": fork.id}) == 0
    own = keeper.record_actum(OWNER, Actum(fork.id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "mine"))
    mine = store.database["acta"].find_one({"chronicum_id": fork.id})
    assert mine is not None and (mine["id"], mine["position"]) == (own.id, 4)


def test_a_summary_leaves_its_mark_on_the_chronicum(store: MongoStore) -> None:
    """The mark (position, range, actor kind) and the count that versions the layout."""
    keeper = Chronicarius(store)
    chronicum_id = f"summed-{uuid.uuid4().hex}"
    written = [
        keeper.record_actum(OWNER, Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, f"m{n}"))
        for n in range(4)
    ]
    summary = replace(
        Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "summarizer", "in short"),
        summarizes=Span(written[0].id, written[2].id),
    )
    stored = keeper.record_actum(OWNER, summary)
    document = store.database["chronica"].find_one({"_id": chronicum_id})
    assert document is not None
    assert document["marks"] == [{"position": 5, "first": 1, "last": 3, "actor_kind": "agent"}]
    assert document["summaries"] == 1 and document["shaped"] is True
    raw = store.database["acta"].find_one({"id": stored.id})
    assert raw is not None and "pending" not in raw
    assert raw["covers"] == {"first": 1, "last": 3}
    assert [actum.content for actum in keeper.get_acta(OWNER, chronicum_id)] == ["in short", "m3"]


def test_an_encrypted_store_keeps_no_plaintext_content_or_native_data(
    mongodb_server_url: str, database: str
) -> None:
    """With ``encryption_keys``, the documents hold sealed content and native data only."""
    keys = DerivedKeys({"k1": b"m" * 32}, current="k1")
    chronicum_id = f"sealed-{uuid.uuid4().hex}"
    native = Native("openai-agents.item", f'{{"content": "{SECRET}"}}')
    store = open_store(mongodb_server_url, database=database, encryption_keys=keys)
    try:
        keeper = Chronicarius(store)
        actum = replace(Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, SECRET), native=native)
        keeper.record_actum(OWNER, actum)
        keeper.record_acta(OWNER, [replace(actum, id=f"b{n}") for n in range(3)])
        read = keeper.get_acta(OWNER, chronicum_id)
        assert [(a.content, a.native) for a in read] == [(SECRET, native)] * 4
    finally:
        store.close()
    raw: MongoClient[dict[str, Any]]
    with MongoClient(mongodb_server_url) as raw:
        documents = [
            *raw[database]["acta"].find({"chronicum_id": chronicum_id}),
            *raw[database]["batch_acta"].find({"chronicum_id": chronicum_id}),
        ]
    assert len(documents) == 4
    for document in documents:
        assert "4711" not in document["content"]
        assert "4711" not in document["native"]["data"]
        assert "4711" not in repr(document)


def test_a_chronicum_with_a_summary_is_followed(store: MongoStore) -> None:
    """A follower of a summarized chronicum waits on its own acta (``acta`` would refuse it)."""
    keeper = Chronicarius(store)
    chronicum_id = f"followed-{uuid.uuid4().hex}"
    written = [
        keeper.record_actum(OWNER, Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, f"m{n}"))
        for n in range(3)
    ]
    summary = replace(
        Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "summarizer", "in short"),
        summarizes=Span(written[0].id, written[1].id),
    )
    stored = keeper.record_actum(OWNER, summary)
    follower = keeper.follow(OWNER, chronicum_id, after=written[2].id, timeout=0.5)
    assert [actum.id for actum in follower] == [stored.id]
    assert store.acta_after(chronicum_id, written[1].id, 10) == [written[2], stored]


@pytest.mark.parametrize("fork", [False, True], ids=["chronicum", "fork"])
def test_a_write_in_the_millisecond_a_chronicum_started_keeps_its_last_activity(
    store: MongoStore, monkeypatch: pytest.MonkeyPatch, fork: bool
) -> None:
    """A BSON date holds milliseconds: a write's ``at`` may be before its chronicum's start, that millisecond.

    Its last activity (the start) stays what the idle index holds: neither ``idle_chronica`` nor
    ``erase_idle`` takes it for idle before its start.
    """
    moment = datetime(2026, 12, 7, 22, 0, 0, 123_500, tzinfo=UTC)
    monkeypatch.setattr(clock, "now", lambda: moment)
    keeper = Chronicarius(store)
    chronicum_id = f"same-ms-{uuid.uuid4().hex}"
    keeper.record_actum(OWNER, Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "first"))
    if fork:
        chronicum_id = keeper.fork_chronicum(OWNER, chronicum_id).id
        keeper.record_actum(OWNER, Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "own"))
    written = keeper.get_chronicum(OWNER, chronicum_id)
    assert (written.started_at, written.last_actum_at) == (moment, moment.replace(microsecond=123_000))
    assert last_activity(written) == moment
    assert store.idle_chronica(moment, OWNER, None, 10) == []
    assert store.erase_idle(chronicum_id, moment, owner_digest(OWNER)) == 0
    later = moment + timedelta(microseconds=1)
    idle = store.idle_chronica(later, OWNER, None, 10)
    assert chronicum_id in [c.id for c in idle] and {last_activity(c) for c in idle} == {moment}


def test_migrate_moves_a_fork_made_by_an_earlier_build_to_its_fork_time(
    store: MongoStore, mongodb_server_url: str, database: str, admin_client: MongoClient[dict[str, Any]]
) -> None:
    """Earlier builds gave a fork the ``active_at`` of its shared actum, and its source that
    ``family_active_at``: once migrated, both count from the fork time, and ``erase_idle`` keeps them."""
    long_ago = datetime(2026, 8, 1, 9, 0, tzinfo=UTC)
    forked_at = datetime(2026, 12, 1, 12, 0, 0, 123_456, tzinfo=UTC)
    keeper = Chronicarius(store)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(clock, "now", lambda: long_ago)
        keeper.record_actum(OWNER, Actum("old-source", ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, "long ago"))
        patch.setattr(clock, "now", lambda: forked_at)
        fork = keeper.fork_chronicum(OWNER, "old-source", fork_id="old-fork")
    assert fork.started_at == forked_at
    chronica = admin_client[database]["chronica"]
    chronica.update_one({"_id": "old-fork"}, {"$set": {"active_at": long_ago, "active_at_us": 0}})
    chronica.update_one({"_id": "old-source"}, {"$set": {"family_active_at": long_ago}})
    earlier = [c.id for c in store.idle_chronica(forked_at, OWNER, None, 10)]
    assert earlier == ["old-fork", "old-source"]  # as earlier builds left it

    for _ in range(2):  # a second migration finds nothing to move
        with MongoStore(mongodb_server_url, database=database) as migrated:
            assert [c.id for c in migrated.idle_chronica(forked_at, OWNER, None, 10)] == ["old-source"]
            assert migrated.erase_idle("old-source", forked_at, owner_digest(OWNER)) == 0
            assert Chronicarius(migrated).erase_idle(before=forked_at) == 0
        fork_document = chronica.find_one({"_id": "old-fork"})
        source_document = chronica.find_one({"_id": "old-source"})
        assert fork_document is not None and source_document is not None
        assert (fork_document["active_at"], fork_document["active_at_us"]) == (
            forked_at.replace(microsecond=123_000, tzinfo=None),
            456,
        )
        assert source_document["family_active_at"] == forked_at.replace(microsecond=124_000, tzinfo=None)
        assert source_document["active_at"] == long_ago.replace(tzinfo=None)
    assert [c.id for c in keeper.list_chronica(OWNER).chronica] == ["old-fork", "old-source"]
