"""Every MongoDB store operation, written once as a plan that does no I/O.

Each plan yields :class:`Command` values (one pymongo collection call each), receives their
outcomes, turns documents into :class:`~chronica_core.Actum` and :class:`~chronica_core.Chronicum`
and pymongo errors into Chronica errors. :class:`chronica_mongodb.MongoStore` performs the commands
with a blocking ``MongoClient``, :class:`chronica_mongodb.AsyncMongoStore` awaits them on an
``AsyncMongoClient``; neither decides anything.

How order is kept (see the package README): an actum's sequence number is taken by the insert
itself. The unique index on ``(chronicum_id, seq)`` lets exactly one insert have number ``n``, and a
writer only tries ``n`` after it has seen ``n - 1`` stored (read back, or written by itself). So the
acta of a chronicum always form an unbroken run ``1..n``, and any read that sees number ``n`` also
sees every number before it. The writer then also knows the ``at`` of number ``n - 1``, and gives
number ``n`` its own clock's time, or that ``at`` if it is later (another host's clock ahead of
ours): ``at`` never decreases along the order, and ``last_actum_at``, read from the newest actum,
never decreases either.

A batch takes one number: its acta after the first are written to ``batch_acta`` first, where
no reader looks except through a batch's first actum, then the first actum is inserted into
``acta`` at the next number, naming the batch. That one single-document insert commits the
batch: no transaction is needed, so it holds on a standalone server as on a replica set.

An erase first replaces the chronicum document with its marker (one single-document write), then
deletes its acta. Every write reads the chronicum document after its insert and deletes what it
wrote if it finds a marker; every read of acta reads it after the acta. So a write racing with an
erase lands wholly before it (and is erased) or answers ``ChronicumNotFound``, and a read never
returns part of what an erase deleted.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from bson import encode
from bson.errors import BSONError
from bson.int64 import Int64
from bson.objectid import ObjectId
from pymongo.errors import (
    DocumentTooLarge,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from chronica_core import clock
from chronica_core.errors import (
    ActumTooLarge,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
)
from chronica_core.history import StaleLayout
from chronica_core.limits import actum_size, check_actum_size
from chronica_core.model import (
    MAX_ID_LENGTH,
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    ForkPoint,
    recorded_at,
)
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_core.rows import check_row
from chronica_core.store import ListingPosition
from chronica_core.timeouts import WRITE_FATE_UNKNOWN
from chronica_mongodb.documents import ACTUM_FIELDS, actum_document, actum_of

_log = logging.getLogger("chronica.mongodb")

__all__ = [
    "ACTA",
    "BATCH_ACTA",
    "CHRONICA",
    "DATABASE",
    "DOCUMENT_RESERVE",
    "INDEX_SPECS",
    "MAX_DOCUMENT_BYTES",
    "SHARD_KEYS",
    "Command",
    "IndexSpec",
    "MongoCore",
]

CHRONICA: Final = "chronica"
"""The collection of chronica: ``_id`` (the chronicum id), ``owner_id``, ``started_at``."""

ACTA: Final = "acta"
"""The collection of acta, one document each, ordered within a chronicum by ``seq``.

The first actum of a batch stands for the whole batch: it also holds ``batch`` (an ObjectId) and
``size`` (how many acta the batch has), and the others are in :data:`BATCH_ACTA`."""

BATCH_ACTA: Final = "batch_acta"
"""The collection of the acta of a batch after its first: ``batch``, ``pos`` (1 to size - 1) and
the actum's fields. They are written before the batch's first actum, and read only through it:
until that one insert lands, no reader sees any of them."""

DATABASE: Final = ""
"""The "collection" of a :class:`Command` addressed to the database itself (``hello``, say)."""

MAX_DOCUMENT_BYTES: Final = 16 * 1024 * 1024
"""MongoDB's limit on one BSON document (16 MiB), in bytes: what servers report as
``maxBsonObjectSize``, used when one does not."""

SEQUENCE_INDEX: Final = "chronicum_seq"
"""Unique index ``(chronicum_id, seq)``: one actum per place in a chronicum's order."""

IDEMPOTENCY_INDEX: Final = "chronicum_idempotency_key"
"""Unique partial index ``(chronicum_id, idempotency_key)`` over the acta that have a key."""

_INDEXES: Final[tuple[tuple[str, list[tuple[str, int]], dict[str, Any]], ...]] = (
    (SEQUENCE_INDEX, [("chronicum_id", 1), ("seq", 1)], {"unique": True}),
    (
        IDEMPOTENCY_INDEX,
        [("chronicum_id", 1), ("idempotency_key", 1)],
        {"unique": True, "partialFilterExpression": {"idempotency_key": {"$exists": True}}},
    ),
)
"""The indexes :meth:`MongoCore.migrate` makes on ``acta``: name, keys, options."""

LISTING_INDEX: Final = "owner_started"
"""Index ``(owner_id, started_at desc, started_at_us desc, _id desc)`` on ``chronica``: an owner's
chronica, newest first, for ``list_chronica``. Markers have no ``owner_id``."""

BATCH_INDEX: Final = "batch_pos"
"""Unique index ``(batch, pos)`` on ``batch_acta``: a batch's acta in order."""

BATCH_CHRONICUM_INDEX: Final = "batch_chronicum"
"""Index ``(chronicum_id)`` on ``batch_acta``: what ``erase`` deletes."""

MARKER_INDEX: Final = "erased_owner"
"""Index ``(owner_digest)`` on ``chronica``, over markers only: the unfinished markers
``erase_owner`` finishes."""

UNFINISHED: Final = "unfinished"
"""Field of a marker whose erase has not finished deleting the chronicum's acta."""

_OTHER_INDEXES: Final[
    tuple[tuple[str, tuple[tuple[str, list[tuple[str, int]], dict[str, Any]], ...]], ...]
] = (
    (
        CHRONICA,
        (
            (
                LISTING_INDEX,
                [("owner_id", 1), ("started_at", -1), ("started_at_us", -1), ("_id", -1)],
                {},
            ),
            (
                MARKER_INDEX,
                [("owner_digest", 1)],
                {"partialFilterExpression": {"owner_digest": {"$exists": True}}},
            ),
        ),
    ),
    (
        BATCH_ACTA,
        (
            (BATCH_INDEX, [("batch", 1), ("pos", 1)], {"unique": True}),
            (BATCH_CHRONICUM_INDEX, [("chronicum_id", 1)], {}),
        ),
    ),
)
"""The indexes :meth:`MongoCore.migrate` makes on the other collections (added with the batch,
listing and erasure capabilities; a database made before gains them when it is migrated)."""

IndexSpec = tuple[str, list[tuple[str, int]], dict[str, Any]]
"""An index :meth:`MongoCore.migrate` makes: its name, its keys (field, 1 or -1), its options."""

POSITION_INDEX: Final = "chronicum_position"
"""Index ``(chronicum_id, position, end)`` on ``acta``: the acta of a range of positions (a
batch's first actum holds the batch's first position and ``end``, its last)."""

ACTUM_ID_INDEX: Final = "chronicum_actum_id"
"""Index ``(chronicum_id, id)`` on ``acta``: an actum by its id (``locate``)."""

BATCH_ACTUM_ID_INDEX: Final = "batch_actum_id"
"""Index ``(chronicum_id, id)`` on ``batch_acta``: an actum of a batch by its id (``locate``)."""

BATCH_HEAD_INDEX: Final = "batch_head"
"""Index ``(batch)`` on ``acta``, over batches' first acta only: whether a batch is committed."""

IDLE_INDEX: Final = "idle"
"""Index ``(active_at, active_at_us, _id)`` on ``chronica``: chronica by last activity, for
``idle_chronica``. Markers have no ``active_at``."""

OWNER_IDLE_INDEX: Final = "owner_idle"
"""Index ``(owner_id, active_at, active_at_us, _id)`` on ``chronica``: an owner's chronica by last
activity."""

FORKS_INDEX: Final = "forks"
"""Multikey index ``(lineage.chronicum_id)`` on ``chronica``, over forks only: the forks of a
chronicum (forks of forks included), which its erasure erases."""

_LIVE_ACTIVE: Final = {"partialFilterExpression": {"active_at": {"$exists": True}}}

SHAPE_INDEXES: Final[tuple[tuple[str, tuple[IndexSpec, ...]], ...]] = (
    (
        ACTA,
        (
            (POSITION_INDEX, [("chronicum_id", 1), ("position", 1), ("end", 1)], {}),
            (ACTUM_ID_INDEX, [("chronicum_id", 1), ("id", 1)], {}),
            (BATCH_HEAD_INDEX, [("batch", 1)], {"partialFilterExpression": {"batch": {"$exists": True}}}),
        ),
    ),
    (
        CHRONICA,
        (
            (IDLE_INDEX, [("active_at", 1), ("active_at_us", 1), ("_id", 1)], _LIVE_ACTIVE),
            (
                OWNER_IDLE_INDEX,
                [("owner_id", 1), ("active_at", 1), ("active_at_us", 1), ("_id", 1)],
                _LIVE_ACTIVE,
            ),
            (
                FORKS_INDEX,
                [("lineage.chronicum_id", 1)],
                {"partialFilterExpression": {"lineage": {"$exists": True}}},
            ),
        ),
    ),
    (BATCH_ACTA, ((BATCH_ACTUM_ID_INDEX, [("chronicum_id", 1), ("id", 1)], {}),)),
)
"""The indexes of the native, history and retention capabilities, made by :meth:`MongoCore.migrate`
once the documents written before them have their positions and last activity (see
:mod:`chronica_mongodb.migration`)."""

INDEX_SPECS: Final[dict[str, tuple[IndexSpec, ...]]] = {
    collection: (
        *(_INDEXES if collection == ACTA else dict(_OTHER_INDEXES).get(collection, ())),
        *dict(SHAPE_INDEXES).get(collection, ()),
    )
    for collection in (ACTA, CHRONICA, BATCH_ACTA)
}
"""Every index the store makes, by collection (besides MongoDB's own ``_id_``)."""

SHARD_KEYS: Final[dict[str, str]] = {CHRONICA: "_id", ACTA: "chronicum_id", BATCH_ACTA: "batch"}
"""The shard key field of each collection on a sharded cluster (docs: "Scaling out").

``chronica`` on ``_id``, the chronicum id: only then is ``_id`` unique across the cluster, which
``create`` (``ChronicumExists``) needs; it may be hashed. ``acta`` on ``chronicum_id``, ranged: both
of its unique indexes start with it, so MongoDB enforces them across shards, and every read and
write names it. ``batch_acta`` on ``batch``, ranged: its unique index ``batch_pos`` starts with it.
The indexes that do not start with their collection's shard key (:data:`LISTING_INDEX`,
:data:`MARKER_INDEX`, :data:`BATCH_CHRONICUM_INDEX`) are not unique, and the queries they serve
(an owner's listing, ``erase_owner``'s sweep of markers, ``erase``'s deletion of batch tails) go
to every shard; so do those of the history and retention capabilities that do not start with
``chronicum_id`` (:data:`BATCH_HEAD_INDEX`, :data:`IDLE_INDEX`, :data:`OWNER_IDLE_INDEX`,
:data:`FORKS_INDEX`, :data:`BATCH_ACTUM_ID_INDEX`), none of them unique."""

_OUR_INDEXES: Final = frozenset({"_id_", SEQUENCE_INDEX, IDEMPOTENCY_INDEX, LISTING_INDEX})
_CHRONICUM_FIELDS: Final = frozenset({"_id", "owner_id", "started_at"})
_MARKER_FIELDS: Final = frozenset({"_id", "owner_digest"})
_LIVE: Final = {"$exists": True}
ERASING: Final = "erasing"
"""The field of an ``acta`` document claimed for deletion: by an erase (its ObjectId), or by its
own writer (``"writer"``) that found the chronicum erased after writing it. Readers skip such
documents; whoever claimed one first decides whether its write counts as landed."""
_UNCLAIMED: Final = {"$exists": False}
PENDING: Final = "pending"
"""The field of a summary written but not yet accepted by its chronicum's layout (see
:func:`chronica_mongodb.history.record_summary`): no read but a summary's by its position sees it."""
_BY_WRITER: Final = "writer"
"""The ``owner_id`` of a chronicum that is not an erasure marker (a marker has none)."""
_ACTUM_FIELDS_STORED: Final = frozenset({"chronicum_id", "seq", "id", "kind", "content", "at"})

MAX_ATTEMPTS: Final = 10_000
"""How many sequence numbers one write tries before giving up (each lost try is another's write)."""

SEQUENCE_CACHE_SIZE: Final = 100_000
"""How many chronica a store remembers the newest sequence number of."""

_BATCH_HEAD_FIELDS: Final = {**ACTUM_FIELDS, "batch": 1, "size": 1}
_TOO_LARGE_CODES: Final = frozenset({10334, 17419})  # BSONObjectTooLarge, and "document too large" on insert


def _widest_actum_document() -> dict[str, Any]:
    """An actum document with empty content and every other field at its largest."""
    widest = "\U0001f37d" * MAX_ID_LENGTH  # four bytes a character in UTF-8
    return {
        "_id": ObjectId(),
        "chronicum_id": widest,
        "seq": Int64(2**63 - 1),
        "id": widest,
        "kind": max((kind.value for kind in ActumKind), key=len),
        "actor_kind": max((kind.value for kind in ActorKind), key=len),
        "actor": widest,
        "content": "",
        "at": datetime.now(UTC),
        "idempotency_key": widest,
        "native": {"format": widest, "data": ""},
        "answers": widest,
        "summarizes": {"first": widest, "last": widest},
        "covers": {"first": Int64(2**63 - 1), "last": Int64(2**63 - 1)},
        "position": Int64(2**63 - 1),
        "pending": ObjectId(),
        "batch": ObjectId(),
        "size": Int64(2**63 - 1),
    }


DOCUMENT_RESERVE: Final = len(encode(_widest_actum_document()))
"""Bytes of a document that are not content or native data, at their largest (ids and a native
format of 255 four-byte characters): the content limit is the server's ``maxBsonObjectSize`` less
this, so content and native data up to it always fit, whatever the ids."""


@dataclass(frozen=True, slots=True)
class Command:
    """One pymongo collection call for a store to perform.

    Attributes:
        collection: ``"chronica"`` or ``"acta"``.
        method: the name of a pymongo ``Collection`` method, e.g. ``"insert_one"``.
        args: its positional arguments.
        kwargs: its keyword arguments.
        cursor: the method returns a cursor; the outcome sent back is then its documents as a list.
    """

    collection: str
    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    cursor: bool = False


def _now() -> datetime:
    """Now, in UTC, cut to the millisecond a BSON date holds (so ``at`` reads back exactly)."""
    now = clock.now()
    return now.replace(microsecond=now.microsecond - now.microsecond % 1000)


def _split_microseconds(moment: datetime) -> tuple[datetime, int]:
    """Return ``moment`` cut to the millisecond and the microseconds cut off (0 to 999)."""
    remainder = moment.microsecond % 1000
    return moment - timedelta(microseconds=remainder), remainder


def _violated_index(error: DuplicateKeyError) -> str:
    """Say which unique index ``error`` is about: ``"seq"``, ``"key"``, ``"_id"`` or ``""``."""
    details = error.details or {}
    pattern = details.get("keyPattern")
    fields = set(pattern) if isinstance(pattern, Mapping) else set()
    message = str(details.get("errmsg", error))
    if "idempotency_key" in fields or IDEMPOTENCY_INDEX in message:
        return "key"
    if "seq" in fields or SEQUENCE_INDEX in message:
        return "seq"
    if "_id" in fields or "_id_" in message:
        return "_id"
    return ""


Newest = tuple[int, datetime | None, int, tuple[str, ...]]
"""What a writer needs to know of a chronicum: its newest stored actum's sequence number and
``at`` (``0, None`` while it has none), the last position taken (its ``base`` while it has no
acta: ``0``, or a fork's branching position), and the ids of its ancestors (a fork's lineage)."""


def _split(moment: datetime) -> dict[str, Any]:
    """``active_at`` and ``active_at_us``: ``moment`` cut to the millisecond, and the rest."""
    active_at, active_at_us = _split_microseconds(moment)
    return {"active_at": active_at, "active_at_us": active_at_us}


def _chronicum_document(chronicum: Chronicum) -> dict[str, Any]:
    """The ``chronica`` document of ``chronicum`` (a fork's own fields are added by ``fork``).

    ``started_at`` is split into milliseconds and the rest, as is its last activity
    (``active_at``: the later of when it started and its newest actum's ``at``, see
    :func:`chronica_core.retention.last_activity`). ``incarnation`` tells this document from
    another of the same id (erased and started again): it is part of the layout version.
    """
    started_at, started_at_us = _split_microseconds(chronicum.started_at)
    return {
        "_id": chronicum.id,
        "owner_id": chronicum.owner_id,
        "started_at": started_at,
        "started_at_us": started_at_us,
        "incarnation": ObjectId(),
        **_split(last_activity(chronicum)),
    }


def _chronicum(document: Mapping[str, Any]) -> Chronicum:
    """The chronicum of a ``chronica`` document read with its ``newest`` actum (see ``_NEWEST``).

    A fork without acta of its own has the ``at`` of the last actum it shares (``shared_at``).
    """
    newest = document["newest"][0] if document["newest"] else None
    started_at: datetime = document["started_at"]
    forked_from = document.get("forked_from")
    return Chronicum(
        id=document["_id"],
        owner_id=document["owner_id"],
        started_at=started_at + timedelta(microseconds=document.get("started_at_us", 0)),
        last_actum_at=newest["at"] if newest is not None else document.get("shared_at"),
        forked_from=None
        if forked_from is None
        else ForkPoint(forked_from["chronicum_id"], forked_from["actum_id"]),
    )


def _newest_of(document: Mapping[str, Any]) -> Newest:
    """What a writer needs (:data:`Newest`) from a chronicum document read with ``_NEWEST``."""
    newest = document["newest"][0] if document["newest"] else None
    ancestors = tuple(dict.fromkeys(segment["chronicum_id"] for segment in document.get("lineage", ())))
    if newest is None:
        return 0, None, int(document.get("base", 0)), ancestors
    return int(newest["seq"]), newest["at"], _end(newest), ancestors


def _end(head: Mapping[str, Any]) -> int:
    """The last position a document of ``acta`` holds (a batch's first holds the whole batch's)."""
    return int(head.get("end", head.get("position", head["seq"])))


_NEWEST: Final = {
    "$lookup": {
        "from": ACTA,
        "localField": "_id",
        "foreignField": "chronicum_id",
        "pipeline": [
            {"$sort": {"seq": -1}},
            {"$limit": 1},
            {"$project": {"_id": 0, "seq": 1, "at": 1, "position": 1, "end": 1}},
        ],
        "as": "newest",
    }
}
"""The pipeline stage adding a chronicum's newest actum (``seq``, ``at`` and its positions) as
``newest``: a list of zero or one. The first actum of a batch holds the ``at`` of the whole batch."""


_WHOLE_BATCHES: Final = {
    "$match": {"$expr": {"$eq": [{"$size": "$members"}, {"$subtract": [{"$ifNull": ["$size", 1]}, 1]}]}}
}
"""The pipeline stage keeping a batch's first actum only when all its other acta were found
(as ``members``): an erase may delete them between their insert and the first actum's, and its
writer then deletes that first actum (see ``MongoCore._still_live``); no reader sees it meanwhile."""


def _with_batch_members(newest_first: bool) -> list[dict[str, Any]]:
    """The stages that put each batch's other acta beside its first, in order, one document each.

    They follow a ``$sort`` of first acta (newest first when ``newest_first``): each batch's
    members are looked up, a batch with any missing is left out (:data:`_WHOLE_BATCHES`), and
    the first actum and its members are unwound into one stream, in the same order.
    """
    order = -1 if newest_first else 1
    members = "$members"
    items = [members, ["$$ROOT"]] if newest_first else [["$$ROOT"], members]
    return [
        {
            "$lookup": {
                "from": BATCH_ACTA,
                "localField": "batch",
                "foreignField": "batch",
                "pipeline": [{"$sort": {"pos": order}}],
                "as": "members",
            }
        },
        _WHOLE_BATCHES,
        {"$project": {"items": {"$concatArrays": items}}},
        {"$unwind": "$items"},
        {"$replaceRoot": {"newRoot": "$items"}},
    ]


class MongoCore:
    """The store operations as plans of :class:`Command`, shared by the sync and async stores.

    Besides the documents, it keeps one piece of state: for each chronicum it has seen (up to
    :data:`SEQUENCE_CACHE_SIZE`), the newest sequence number known to be stored and that actum's
    ``at``. Its next actum is usually that number plus one; a stale number only costs a refused
    insert and a re-read, never correctness. An erase or reopen by this store forgets the
    chronicum; after one by another process, the remembered number is too high for the
    reopened chronicum: its first write from here takes the number after it, and a first write
    from a process that read the reopened chronicum at the same moment may take 1, which a
    reader can then see appear before an actum it has already read. Only that moment after a
    reopen is affected.
    """

    def __init__(self, max_content_bytes: int | None = None) -> None:
        self._newest: OrderedDict[str, Newest] = OrderedDict()
        self._newest_lock = threading.Lock()
        self.max_content_bytes = max_content_bytes
        self._content_limit: int | None = None  # the server's, read once (see content_limit)

    def content_limit(self, where: str = "read content limit") -> Plan[Command, int | None]:
        """Return the largest content ``record`` accepts, in bytes of UTF-8.

        The server's ``maxBsonObjectSize`` (from ``hello``, asked once, then remembered; 16 MiB on
        every MongoDB so far) less :data:`DOCUMENT_RESERVE`, and never above the
        ``max_content_bytes`` given. Raises ``StoreError("mongodb: <where>: ...")`` (``where``: the
        operation that needs the limit, ``read content limit`` by default).
        """
        limit = self._content_limit
        if limit is None:
            hello = yield from self._run(Command(DATABASE, "command", ("hello",)), where)
            largest = int(hello.get("maxBsonObjectSize", MAX_DOCUMENT_BYTES))
            self._content_limit = limit = max(largest - DOCUMENT_RESERVE, 0)
        if self.max_content_bytes is not None and self.max_content_bytes < limit:
            return self.max_content_bytes
        return limit

    def migrate(self, backfill: Callable[[], Plan[Command, None]] | None = None) -> Plan[Command, None]:
        """Create the indexes of :data:`INDEX_SPECS` if they are missing (idempotent).

        Three commands in the steady state (each collection's indexes are listed, and found). A
        database made before the batch, listing and erasure capabilities, or before the native,
        history and retention ones, gains their indexes here; ``backfill`` runs first when
        ``acta`` lacks :data:`POSITION_INDEX` (see :mod:`chronica_mongodb.migration`). Before
        creating any, it makes sure the collections are not someone else's (see :meth:`check`).

        Raises ``StoreError("mongodb: migrate: ...")``: the collections are not this package's, or
        an index of the same name has another definition.
        """
        present = yield from self._own_indexes("migrate")
        for name, keys, options in INDEX_SPECS[ACTA]:
            if name not in present:
                if name == POSITION_INDEX and backfill is not None:
                    yield from backfill()
                yield from self._run(
                    Command(ACTA, "create_index", (keys,), {"name": name, **options}), "migrate"
                )
                _log.info("created the index %s of %s", name, ACTA)
        for collection in (CHRONICA, BATCH_ACTA):
            listed = yield from self._run(Command(collection, "list_indexes", cursor=True), "migrate")
            found = {index["name"]: list(index["key"].items()) for index in listed}
            for name, keys, options in INDEX_SPECS[collection]:
                if found.get(name) != keys:
                    yield from self._run(
                        Command(collection, "create_index", (keys,), {"name": name, **options}),
                        "migrate",
                    )
                    _log.info("created the index %s of %s", name, collection)

    def check(self) -> Plan[Command, None]:
        """What a store opened without ``auto_migrate`` runs first: refuse collections not its own.

        ``chronica`` and ``acta`` are this package's once ``acta`` has its index
        ``chronicum_seq`` (one command then). Before that, neither may hold a document without this
        package's fields nor an index of another name (an application's own collections of those
        names); empty or missing collections are fine. Nothing is written.

        Raises ``StoreError("mongodb: open: ...")`` naming what was found and what to do.
        """
        yield from self._own_indexes("open")

    def _own_indexes(self, where: str) -> Plan[Command, set[str]]:
        """Which of the store's indexes ``acta`` has, once the collections are known to be its own.

        An index of the same name but other keys is not among them: creating it then fails,
        naming the conflict.
        """
        acta_indexes = yield from self._run(Command(ACTA, "list_indexes", cursor=True), where)
        keys = {index["name"]: list(index["key"].items()) for index in acta_indexes}
        ours = {name for name, wanted, _ in INDEX_SPECS[ACTA] if keys.get(name) == wanted}
        if SEQUENCE_INDEX in ours:
            return ours
        chronica_indexes = yield from self._run(Command(CHRONICA, "list_indexes", cursor=True), where)
        problems: list[str] = []
        for collection, indexes, fields in (
            (CHRONICA, chronica_indexes, _CHRONICUM_FIELDS),
            (ACTA, acta_indexes, _ACTUM_FIELDS_STORED),
        ):
            others = sorted(index["name"] for index in indexes if index["name"] not in _OUR_INDEXES)
            if others:
                problems.append(
                    f"{collection} has indexes chronica-mongodb does not make ({', '.join(others)})"
                )
            if indexes:  # the collection exists: look at one of its documents
                document = yield from self._run(Command(collection, "find_one", ({},)), where)
                if document is not None and not (
                    fields <= document.keys() or document.keys() == _MARKER_FIELDS
                ):
                    expected = ", ".join(sorted(fields))
                    problems.append(
                        f"{collection} holds documents without chronica-mongodb's fields ({expected})"
                    )
        if problems:
            raise StoreError(
                f"mongodb: {where}",
                f"{'; '.join(problems)}: collections chronica-mongodb did not create, they look like another "
                "application's; chronica-mongodb uses only collections it created and has left these "
                "untouched. Give another database (the database option, or the URL's path)",
            )
        return ours

    def create(self, chronicum: Chronicum) -> Plan[Command, None]:
        """Insert ``chronicum``. Raises ``ChronicumExists`` if its id is taken, else ``StoreError``."""
        document = _chronicum_document(chronicum)
        try:
            yield from self._run(
                Command(CHRONICA, "insert_one", (document,)), "create chronicum", duplicates=True
            )
        except DuplicateKeyError as error:
            if _violated_index(error) != "_id":
                raise StoreError("mongodb: create chronicum", str(error)) from error
            raise ChronicumExists(chronicum.id) from None
        self._remember(chronicum.id, (0, None, 0, ()))

    def get(self, chronicum_id: str) -> Plan[Command, Chronicum]:
        """Read the chronicum; ``last_actum_at`` is the ``at`` of its newest actum.

        Raises ``ChronicumNotFound``, else ``StoreError("mongodb: get chronicum: ...")``.
        """
        document = yield from self._probe(chronicum_id, "get chronicum")
        return _chronicum(document)

    def record(self, actum: Actum, key: str | None = None) -> Plan[Command, Actum]:
        """Append ``actum`` (with idempotency ``key`` when given) at the next place in its chronicum.

        Returns the stored actum with ``at`` set (UTC, to the millisecond); with a key already used
        in the chronicum, the actum stored that first time instead. See :meth:`append`.

        Raises:
            ActumTooLarge: the content and native data are larger than :meth:`content_limit`;
                checked before anything is sent (and, should the server still refuse the
                document as too large, after it: the limit is then read again).
            ChronicumNotFound: the chronicum does not exist, or is an erasure marker: read again
                after the insert, which is then deleted (an erase racing with the write).
            StoreError: anything else, as ``mongodb: record actum: ...``.
        """
        where = "record actum" if key is None else "record idempotent actum"
        stored, _, _ = yield from self.append(actum, key, where)
        return stored

    def append(
        self, actum: Actum, key: str | None, where: str, extra: Mapping[str, Any] | None = None
    ) -> Plan[Command, tuple[Actum, Int64 | None, int]]:
        """Insert ``actum`` at the next place: return it stored, its ``seq`` and its position.

        The document holds ``extra`` fields too. ``seq`` is ``None`` when ``key`` was used
        already: the actum returned is then the one that write stored (position ``0``). An actum
        that shapes the history (a tool response naming its request, or a summary) first marks
        the chronicum ``shaped``, so that ``acta`` refuses it (``StaleLayout``) from before
        such an actum can be read. Errors as :meth:`record`.
        """
        chronicum_id = actum.chronicum_id
        check_actum_size(actum, (yield from self.content_limit(where)))
        # `at` is set again on each try: a retried write takes the time of the try that lands
        document: dict[str, Any] = {**actum_document(actum, _now()), **(extra or {}), "seq": Int64(0)}
        if key is not None:
            document["idempotency_key"] = key
        known = self._known_newest(chronicum_id)
        if known is None:
            known = yield from self._newest_stored(chronicum_id, where, probe=True)
        newest, newest_at, end, ancestors = known
        if actum.answers or actum.summarizes is not None:
            yield from self._shape(chronicum_id, where)
        for _ in range(MAX_ATTEMPTS):
            now = _now()
            at = now if newest_at is None or now >= newest_at else newest_at
            document["seq"], document["at"] = Int64(newest + 1), at
            document["position"] = document["end"] = Int64(end + 1)
            try:
                yield from self._run(Command(ACTA, "insert_one", (dict(document),)), where, duplicates=True)
            except DuplicateKeyError as error:
                violated = _violated_index(error)
                if violated == "key" and key is not None:
                    return (yield from self._keyed(chronicum_id, key, where, error)), None, 0
                if violated != "seq":
                    raise StoreError(f"mongodb: {where}", str(error)) from error
                # Another writer stored this number: read the newest (its number and its `at`,
                # which ours must not precede) and try the one after it.
                newest, newest_at, end, ancestors = yield from self._newest_stored(chronicum_id, where)
                continue
            except (DocumentTooLarge, OperationFailure) as error:  # refused as too large
                yield from self._refused_as_too_large(actum, where, error)
                raise StoreError(f"mongodb: {where}", str(error)) from error
            self._remember(chronicum_id, (newest + 1, at, end + 1, ancestors))
            yield from self._still_live(chronicum_id, where, Int64(newest + 1), at=at, ancestors=ancestors)
            return recorded_at(actum, at), Int64(newest + 1), end + 1
        raise StoreError(
            f"mongodb: {where}", f"no free place in chronicum {chronicum_id!r} after {MAX_ATTEMPTS} tries"
        )

    def _shape(self, chronicum_id: str, where: str) -> Plan[Command, None]:
        """Mark the chronicum ``shaped`` (see :meth:`append`). Raises ``ChronicumNotFound``."""
        result = yield from self._run(
            Command(
                CHRONICA, "update_one", ({"_id": chronicum_id, "owner_id": _LIVE}, {"$set": {"shaped": True}})
            ),
            where,
        )
        if result.matched_count == 0:
            self._forget(chronicum_id)
            raise ChronicumNotFound(chronicum_id)

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Command, Actum]:
        """:meth:`record` with the idempotency ``key``: the same result and errors.

        Returns the newly stored actum, or the one stored the first time ``key`` was used.
        """
        return self.record(actum, key)

    def acta(
        self, chronicum_id: str, query: ActaQuery, *, own_acta: bool = False
    ) -> Plan[Command, list[Actum]]:
        """Return the context window: one aggregation, which also reads the chronicum last.

        The aggregation walks ``acta`` along ``chronicum_seq`` (descending when ``last_n`` limits
        it), puts each batch's other acta (from ``batch_acta``) in place after its first, filters,
        then limits; a final ``$unionWith`` reads the chronicum document, after every actum. If
        it is missing or an erasure marker by then, the acta read may be part of what an erase
        deleted, and ``ChronicumNotFound`` is raised.

        Returns the acta oldest first. Raises ``ChronicumNotFound`` when the chronicum does not
        exist or is erased (an empty window of an existing one is ``[]``), ``StaleLayout`` when
        it is ``shaped`` (a summary, or a tool response naming its request: the rules read it
        with ``window``) unless ``own_acta`` (following reads the chronicum's own acta
        whatever its layout), else ``StoreError``.
        """
        where = "read acta"
        newest_first = query.last_n > 0
        order = -1 if newest_first else 1
        criteria: dict[str, Any] = {}
        if query.actum_kinds is not None:
            criteria["kind"] = {"$in": [str(kind) for kind in query.actum_kinds]}
        if query.actor_kinds is not None:
            criteria["actor_kind"] = {"$in": [str(kind) for kind in query.actor_kinds]}
        pipeline: list[dict[str, Any]] = [
            {"$match": {"chronicum_id": chronicum_id, ERASING: _UNCLAIMED, PENDING: _UNCLAIMED}},
            {"$sort": {"seq": order}},
            *_with_batch_members(newest_first),
        ]
        if criteria:
            pipeline.append({"$match": criteria})
        if newest_first:
            pipeline.append({"$limit": query.last_n})
        pipeline.append({"$project": ACTUM_FIELDS})
        pipeline.append(
            {
                "$unionWith": {
                    "coll": CHRONICA,
                    "pipeline": [
                        {"$match": {"_id": chronicum_id, "owner_id": _LIVE}},
                        {"$project": {"_id": 0, "live": "$_id", "shaped": 1}},
                    ],
                }
            }
        )
        documents: list[dict[str, Any]] = yield from self._run(
            Command(ACTA, "aggregate", (pipeline,), cursor=True), where
        )
        live = documents.pop() if documents and "live" in documents[-1] else None
        if live is None:
            self._forget(chronicum_id)
            raise ChronicumNotFound(chronicum_id)
        check_row(f"mongodb: {where}", "chronicum id", chronicum_id, live["live"])
        if live.get("shaped") and not own_acta:
            raise StaleLayout(chronicum_id)
        if newest_first:
            documents.reverse()
        return [actum_of(chronicum_id, document, where) for document in documents]

    def record_many(self, acta: Sequence[Actum], key: str | None) -> Plan[Command, list[Actum]]:
        """Append ``acta`` (at least one, all of one chronicum) as one batch; one insert makes it visible.

        The acta after the first are inserted into ``batch_acta`` first (no reader looks there
        except through a batch's first actum); then the first actum is inserted into ``acta`` at
        the next place, as :meth:`record` does, holding the batch's id and size (and the key).
        That one single-document insert is the commit: before it no reader sees any actum of the
        batch, after it every reader sees all of them, at consecutive places in the order (the
        batch takes one ``seq``). If the process dies before it, the batch's documents stay
        unseen until ``erase`` deletes them. Every actum of the batch has one ``at``: the clock's,
        or the newest actum's if that is later.

        Returns the stored acta in the order given. With a ``key`` already used in the chronicum,
        nothing stays written and the acta that write stored are returned.

        Raises:
            ActumTooLarge: an actum's content is over :meth:`content_limit` (nothing is sent).
            ChronicumNotFound: the chronicum does not exist, or is an erasure marker (also when
                erased while writing: what was written is then deleted).
            StoreError: anything else, as ``mongodb: record acta: ...``.
        """
        where = "record acta"
        limit = yield from self.content_limit(where)
        for actum in acta:
            check_actum_size(actum, limit)
        chronicum_id = acta[0].chronicum_id
        known = self._known_newest(chronicum_id)
        if known is None:
            known = yield from self._newest_stored(chronicum_id, where, probe=True)
        if key is not None:
            first = yield from self._run(
                self._keyed_lookup(chronicum_id, key, _BATCH_HEAD_FIELDS),
                where,
            )
            if first is not None:
                return (yield from self._batch_of(chronicum_id, first, where))
        newest, newest_at, end, ancestors = known
        if any(actum.answers or actum.summarizes is not None for actum in acta):
            yield from self._shape(chronicum_id, where)
        now = _now()
        at = now if newest_at is None or now >= newest_at else newest_at
        batch = ObjectId()
        head: dict[str, Any] = {**actum_document(acta[0], at), "seq": Int64(0)}
        if len(acta) > 1:
            head.update(batch=batch, size=Int64(len(acta)))
            yield from self._insert_members(acta, at, batch, end, where)
        if key is not None:
            head["idempotency_key"] = key
        for _ in range(MAX_ATTEMPTS):
            head["seq"], head["at"] = Int64(newest + 1), at
            head["position"], head["end"] = Int64(end + 1), Int64(end + len(acta))
            try:
                yield from self._run(Command(ACTA, "insert_one", (dict(head),)), where, duplicates=True)
            except DuplicateKeyError as error:
                violated = _violated_index(error)
                if violated == "key" and key is not None:
                    yield from self._discard(batch, where)
                    return (yield from self._kept_batch(chronicum_id, key, where, error))
                if violated != "seq":
                    yield from self._discard(batch, where)
                    raise StoreError(f"mongodb: {where}", str(error)) from error
                (newest, _, end, ancestors), at = yield from self._moved_on(acta, batch, at, end, where)
                continue
            except (DocumentTooLarge, OperationFailure) as error:
                yield from self._discard(batch, where)
                yield from self._refused_as_too_large(acta[0], where, error)
                raise StoreError(f"mongodb: {where}", str(error)) from error
            self._remember(chronicum_id, (newest + 1, at, end + len(acta), ancestors))
            if len(acta) > 1:
                yield from self._still_live(
                    chronicum_id, where, Int64(newest + 1), batch, len(acta), at=at, ancestors=ancestors
                )
            else:
                yield from self._still_live(
                    chronicum_id, where, Int64(newest + 1), at=at, ancestors=ancestors
                )
            return [recorded_at(actum, at) for actum in acta]
        yield from self._discard(batch, where)
        raise StoreError(
            f"mongodb: {where}", f"no free place in chronicum {chronicum_id!r} after {MAX_ATTEMPTS} tries"
        )

    def _insert_members(
        self, acta: Sequence[Actum], at: datetime, batch: ObjectId, end: int, where: str
    ) -> Plan[Command, None]:
        """Insert the acta of a batch after its first into ``batch_acta``, at the places after ``end``.

        Raises ``ActumTooLarge`` or ``StoreError`` when the database refuses them (discarded then).
        """
        members = [
            {**actum_document(actum, at), "batch": batch, "pos": Int64(pos), "position": Int64(end + 1 + pos)}
            for pos, actum in enumerate(acta[1:], 1)
        ]
        try:
            yield from self._run(
                Command(BATCH_ACTA, "insert_many", (members,), {"ordered": True}), where, duplicates=True
            )
        except (DocumentTooLarge, OperationFailure) as error:
            yield from self._discard(batch, where)
            for actum in acta[1:]:
                yield from self._refused_as_too_large(actum, where, error)
            raise StoreError(f"mongodb: {where}", str(error)) from error

    def _kept_batch(
        self, chronicum_id: str, key: str, where: str, error: DuplicateKeyError
    ) -> Plan[Command, list[Actum]]:
        """The acta the write keyed ``key`` stored (its key was found taken by ``error``)."""
        first = yield from self._run(self._keyed_lookup(chronicum_id, key, _BATCH_HEAD_FIELDS), where)
        if first is None:
            yield from self._still_live(chronicum_id, where, None)
            raise StoreError(f"mongodb: {where}", f"key {key!r} is taken but its acta are gone") from error
        return (yield from self._batch_of(chronicum_id, first, where))

    def _moved_on(
        self, acta: Sequence[Actum], batch: ObjectId, at: datetime, before: int, where: str
    ) -> Plan[Command, tuple[Newest, datetime]]:
        """Another write took the batch's place: read the newest again, and move the batch after it.

        Returns what :meth:`_newest_stored` read and the batch's ``at`` (never before the newest's).
        """
        known = yield from self._newest_stored(acta[0].chronicum_id, where)
        newest_at, end = known[1], known[2]
        moved: dict[str, Any] = {}
        if newest_at is not None and newest_at > at:  # the batch must not precede it
            at = newest_at
            moved["$set"] = {"at": at}
        if end != before:  # its other acta take the positions after its first's
            moved["$inc"] = {"position": end - before}
        if len(acta) > 1 and moved:
            yield from self._run(Command(BATCH_ACTA, "update_many", ({"batch": batch}, moved)), where)
        return known, at

    def list_chronica(
        self, owner_id: str, limit: int, after: ListingPosition | None
    ) -> Plan[Command, list[Chronicum]]:
        """Return up to ``limit`` of the owner's chronica, newest first, strictly after ``after``.

        One aggregation on ``chronica`` along the index ``owner_started``: ``owner_id``, then
        ``started_at`` (milliseconds) and ``started_at_us`` (the microseconds below them)
        descending, then ``_id`` descending (MongoDB compares strings as bytes of UTF-8, which is
        code point order), limited, each with its newest actum for ``last_actum_at``. Markers
        have no ``owner_id`` and are never listed. Raises ``StoreError("mongodb: list chronica:
        ...")``, also when a document listed is another owner's.
        """
        where = "list chronica"
        criteria: dict[str, Any] = {"owner_id": owner_id}
        if after is not None:
            started_at, started_at_us = _split_microseconds(after[0])
            criteria["$or"] = [
                {"started_at": {"$lt": started_at}},
                {"started_at": started_at, "started_at_us": {"$lt": started_at_us}},
                {"started_at": started_at, "started_at_us": started_at_us, "_id": {"$lt": after[1]}},
            ]
        pipeline = [
            {"$match": criteria},
            {"$sort": {"started_at": -1, "started_at_us": -1, "_id": -1}},
            {"$limit": limit},
            _NEWEST,
        ]
        documents: list[dict[str, Any]] = yield from self._run(
            Command(CHRONICA, "aggregate", (pipeline,), cursor=True), where
        )
        for document in documents:
            check_row(f"mongodb: {where}", "owner id", owner_id, document.get("owner_id"))
        return [_chronicum(document) for document in documents]

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Command, int]:
        """Erase the chronicum: its document becomes the marker, then its acta are deleted.

        The marker (``_id``, ``owner_digest`` and ``unfinished: true``) replaces the chronicum
        document in one single-document write, first: from then on every operation answers
        ``ChronicumNotFound`` for it. Then its acta not yet claimed are claimed (``erasing``: this
        erase's ObjectId, one ``update_many``), counted (a batch's first actum counts for the
        batch) and deleted, with every other claimed one and the chronicum's ``batch_acta``; last,
        ``unfinished`` is removed, leaving ``_id`` and ``owner_digest`` only. A write racing with
        the erase reads the marker after its insert and claims its own document unless the erase
        has (see :meth:`_still_live`): so the count is exactly the writes that landed before the
        erase. An erase cut short (a lost connection) leaves the marker unfinished: ``reopen``
        refuses it, and :meth:`erase_owner` finishes it. Returns how many acta were erased.

        A chronicum with forks (see :mod:`chronica_mongodb.history`) is marked first, so that no
        fork of it can be made from then on; then every fork whose lineage names it (forks of
        forks included, found along the index ``forks``) is erased the same way, its acta
        counted too; then the chronicum's own acta are deleted.

        Raises ``ChronicumNotFound`` (no chronicum, or only a marker), else
        ``StoreError("mongodb: erase chronicum: ...")``.
        """
        where = "erase chronicum"
        _, erased = yield from self.erase_family(chronicum_id, owner_digest, where)
        return erased

    def erase_family(
        self, chronicum_id: str, owner_digest: str, where: str, condition: Mapping[str, Any] | None = None
    ) -> Plan[Command, tuple[int, int]]:
        """Erase the chronicum (if its document also matches ``condition``) and its forks.

        Returns how many chronica and how many acta were erased. Raises ``ChronicumNotFound``
        when no live chronicum of that id matches.
        """
        marked = yield from self._mark(chronicum_id, owner_digest, where, condition)
        if marked is None:
            raise ChronicumNotFound(chronicum_id)
        forks: list[dict[str, Any]] = yield from self._run(
            Command(
                CHRONICA,
                "find",
                ({"lineage.chronicum_id": chronicum_id, "owner_id": _LIVE},),
                {"projection": {"_id": 1}},
                cursor=True,
            ),
            where,
        )
        chronica, acta = 1, 0
        for fork in forks:
            if (yield from self._mark(fork["_id"], owner_digest, where)) is not None:
                chronica += 1
                acta += yield from self._finish_erasure(fork["_id"], owner_digest, where)
        acta += yield from self._finish_erasure(chronicum_id, owner_digest, where)
        return chronica, acta

    def _mark(
        self, chronicum_id: str, owner_digest: str, where: str, condition: Mapping[str, Any] | None = None
    ) -> Plan[Command, dict[str, Any] | None]:
        """Replace the live chronicum's document with its unfinished marker; return the document it was.

        ``None`` when no live chronicum of that id (matching ``condition``) was there.
        """
        before: dict[str, Any] | None = yield from self._run(
            Command(
                CHRONICA,
                "find_one_and_replace",
                (
                    {**(condition or {}), "_id": chronicum_id, "owner_id": _LIVE},
                    {"owner_digest": owner_digest, UNFINISHED: True},
                ),
            ),
            where,
        )
        if before is not None:
            check_row(f"mongodb: {where}", "chronicum id", chronicum_id, before.get("_id"))
            self._forget(chronicum_id)
        return before

    def _claim_acta(self, chronicum_id: str, where: str) -> Plan[Command, tuple[ObjectId, int]]:
        """Claim the chronicum's acta no erasure claimed yet; return the claim's token and how many."""
        token = ObjectId()
        claimed = yield from self._run(
            Command(
                ACTA,
                "update_many",
                ({"chronicum_id": chronicum_id, ERASING: _UNCLAIMED}, {"$set": {ERASING: token}}),
            ),
            where,
        )
        return token, int(claimed.modified_count)

    def _finish_erasure(self, chronicum_id: str, owner_digest: str, where: str) -> Plan[Command, int]:
        """Claim, count and delete the acta of a marker's chronicum, then mark the marker finished."""
        token, _ = yield from self._claim_acta(chronicum_id, where)
        counted: list[dict[str, Any]] = yield from self._run(
            Command(
                ACTA,
                "aggregate",
                (
                    [
                        {"$match": {"chronicum_id": chronicum_id, ERASING: token}},
                        {"$group": {"_id": None, "acta": {"$sum": {"$ifNull": ["$size", 1]}}}},
                    ],
                ),
                cursor=True,
            ),
            where,
        )
        yield from self._run(
            Command(ACTA, "delete_many", ({"chronicum_id": chronicum_id, ERASING: {"$exists": True}},)),
            where,
        )
        yield from self._run(Command(BATCH_ACTA, "delete_many", ({"chronicum_id": chronicum_id},)), where)
        yield from self._run(
            Command(
                CHRONICA,
                "update_one",
                ({"_id": chronicum_id, "owner_digest": owner_digest}, {"$unset": {UNFINISHED: ""}}),
            ),
            where,
        )
        return int(counted[0]["acta"]) if counted else 0

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Command, int]:
        """Erase every live chronicum of ``owner_id``, each as :meth:`erase` does; return how many.

        A chronicum's forks are erased with it, and counted.

        The owner's chronica are found along the index ``owner_started``. One erased meanwhile by
        another call is not counted. Raises ``StoreError("mongodb: erase owner: ...")`` or
        ``StoreError("mongodb: erase chronicum: ...")``.
        """
        where = "erase owner"
        documents: list[dict[str, Any]] = yield from self._run(
            Command(
                CHRONICA, "find", ({"owner_id": owner_id},), {"projection": {"owner_id": 1}}, cursor=True
            ),
            where,
        )
        erased = 0
        for document in documents:
            check_row(f"mongodb: {where}", "owner id", owner_id, document.get("owner_id"))
            try:
                chronica, _ = yield from self.erase_family(document["_id"], owner_digest, "erase chronicum")
            except ChronicumNotFound:  # erased meanwhile, or a fork erased with its source
                continue
            erased += chronica
        unfinished: list[dict[str, Any]] = yield from self._run(
            Command(
                CHRONICA,
                "find",
                ({"owner_digest": owner_digest, UNFINISHED: True},),
                {"projection": {"_id": 1}},
                cursor=True,
            ),
            where,
        )
        for marker in unfinished:  # an erase cut short (a lost connection): finish it
            yield from self._finish_erasure(marker["_id"], owner_digest, where)
        return erased

    def reopen(self, chronicum: Chronicum, owner_digest: str) -> Plan[Command, bool]:
        """Replace the marker of ``chronicum.id`` with ``chronicum`` if it holds ``owner_digest``.

        One ``replace_one`` conditional on the marker's digest and on the marker being finished
        (an erase cut short is finished by :meth:`erase_owner` first; until then the id answers
        ``ChronicumNotFound`` to its owner too). Returns whether it matched. Raises
        ``StoreError("mongodb: reopen chronicum: ...")``.
        """
        where = "reopen chronicum"
        result = yield from self._run(
            Command(
                CHRONICA,
                "replace_one",
                (
                    {"_id": chronicum.id, "owner_digest": owner_digest, UNFINISHED: {"$exists": False}},
                    _chronicum_document(chronicum),
                ),
            ),
            where,
        )
        self._forget(chronicum.id)
        return bool(result.matched_count == 1)

    def withdraw(self, chronicum_id: str, owner_digest: str) -> Plan[Command, bool]:
        """Turn the chronicum into its marker if it holds no acta; return whether it did.

        A chronicum holding an actum is left as it is. Otherwise its document (a plain chronicum's,
        not a fork's) becomes the unfinished marker, as :meth:`erase` makes it, and the acta
        written meanwhile are claimed as an erase claims them. None claimed: no write landed
        before the marker (a write that lands after it finds the marker and deletes what it wrote,
        see :meth:`_still_live`), so the marker is finished. Some claimed: those writes landed
        first and stand; they are given back and the chronicum document put back as it was (a
        write or a read meanwhile may have answered ``ChronicumNotFound``). Cut short (a lost
        connection), the marker stays unfinished, as an erase's does. Raises
        ``StoreError("mongodb: withdraw chronicum: ...")``.
        """
        where = "withdraw chronicum"
        held = yield from self._run(
            Command(ACTA, "find_one", ({"chronicum_id": chronicum_id},), {"projection": {"_id": 1}}), where
        )
        if held is not None:
            return False
        before = yield from self._mark(chronicum_id, owner_digest, where, {"lineage": {"$exists": False}})
        if before is None:
            return False
        token, claimed = yield from self._claim_acta(chronicum_id, where)
        marker = {"_id": chronicum_id, "owner_digest": owner_digest, UNFINISHED: True}
        if claimed == 0:
            yield from self._run(
                Command(CHRONICA, "update_one", (marker, {"$unset": {UNFINISHED: ""}})), where
            )
            return True
        yield from self._run(
            Command(
                ACTA,
                "update_many",
                ({"chronicum_id": chronicum_id, ERASING: token}, {"$unset": {ERASING: ""}}),
            ),
            where,
        )
        yield from self._run(Command(CHRONICA, "replace_one", (marker, before)), where)
        self._forget(chronicum_id)
        return False

    def _batch_of(
        self, chronicum_id: str, first: Mapping[str, Any], where: str
    ) -> Plan[Command, list[Actum]]:
        """The acta of the write whose first actum is ``first``: one, or its whole batch in order."""
        stored = [actum_of(chronicum_id, first, where)]
        size = int(first.get("size", 1))
        if size > 1:
            members: list[dict[str, Any]] = yield from self._run(
                Command(
                    BATCH_ACTA,
                    "find",
                    ({"batch": first["batch"]},),
                    {"projection": ACTUM_FIELDS, "sort": [("pos", 1)]},
                    cursor=True,
                ),
                where,
            )
            if len(members) != size - 1:
                yield from self._still_live(chronicum_id, where, None)
                raise StoreError(
                    f"mongodb: {where}", f"a batch of {size} acta reads back with {len(members) + 1}"
                )
            stored += [actum_of(chronicum_id, member, where) for member in members]
        return stored

    def _discard(self, batch: ObjectId, where: str) -> Plan[Command, None]:
        """Delete the ``batch_acta`` of a batch that will not be committed (nothing reads them)."""
        yield from self._run(Command(BATCH_ACTA, "delete_many", ({"batch": batch},)), where)

    def _still_live(
        self,
        chronicum_id: str,
        where: str,
        written: Int64 | None,
        batch: ObjectId | None = None,
        size: int | None = None,
        *,
        at: datetime | None = None,
        ancestors: tuple[str, ...] = (),
    ) -> Plan[Command, None]:
        """Raise ``ChronicumNotFound`` if the chronicum is missing or erased, after deleting ``written``.

        Read after a write (``written``: the ``seq`` it took, and the ``batch`` of ``size`` acta
        it wrote, if any): an erase that began before this look makes the chronicum a marker
        first. What was written is then claimed (``erasing``) by whichever comes first: the
        erase, which counts and deletes it (the write landed before the erase: this returns), or
        this writer, which deletes it and raises. A batch whose other acta are not all there any
        more (an erase deleted them, and the chronicum was reopened since) goes the same way.

        With ``at`` (the write's), the same look moves the chronicum's last activity
        (``active_at``, ``active_at_us``) to it when it is later (an ``at`` in the millisecond the
        chronicum started may be before its start), and then that of a fork's ``ancestors``
        (``family_active_at``): retention erases a chronicum only while both are older than its moment.
        """
        live = {"_id": chronicum_id, "owner_id": _LIVE}
        if at is None:
            look = Command(CHRONICA, "find_one", (live,), {"projection": {"_id": 1}})
        else:
            later = {"$gt": [at, "$active_at"]}  # a missing active_at is before any moment
            active = [
                {
                    "$set": {
                        "active_at": {"$cond": [later, at, "$active_at"]},
                        "active_at_us": {"$cond": [later, 0, "$active_at_us"]},
                    }
                }
            ]
            look = Command(CHRONICA, "find_one_and_update", (live, active), {"projection": {"_id": 1}})
        found = yield from self._run(look, where)
        if found is not None:
            check_row(f"mongodb: {where}", "chronicum id", chronicum_id, found.get("_id"))
            if at is not None and ancestors:
                yield from self._run(
                    Command(
                        CHRONICA,
                        "update_many",
                        ({"_id": {"$in": list(ancestors)}}, {"$max": {"family_active_at": at}}),
                    ),
                    where,
                )
            if batch is None or size is None:
                return
            members = yield from self._run(Command(BATCH_ACTA, "count_documents", ({"batch": batch},)), where)
            if members == size - 1:
                return
            # An erase deleted the batch's other acta before its first landed, and the chronicum
            # was reopened since: the batch is incomplete (readers skip it); it did not land.
        self._forget(chronicum_id)
        if written is not None:
            mine = {"chronicum_id": chronicum_id, "seq": written}
            claimed = yield from self._run(
                Command(ACTA, "update_one", ({**mine, ERASING: _UNCLAIMED}, {"$set": {ERASING: _BY_WRITER}})),
                where,
            )
            if claimed.modified_count == 0:
                # An erase claimed it first (and counted it): the write landed before the erase.
                return
            yield from self._run(Command(ACTA, "delete_one", ({**mine, ERASING: _BY_WRITER},)), where)
        if batch is not None:
            yield from self._discard(batch, where)
        raise ChronicumNotFound(chronicum_id)

    def _refused_as_too_large(self, actum: Actum, where: str, error: Exception) -> Plan[Command, None]:
        """Raise ``ActumTooLarge`` if ``actum`` (content and native data) is over the limit read again now.

        The server (or pymongo, with the limit the server told it) refused a document the store
        thought small enough: the limit changed since the store read it. Returns otherwise.
        """
        self._content_limit = None
        limit = yield from self.content_limit(where)
        size = actum_size(actum)
        if limit is not None and size > limit:
            raise ActumTooLarge(size, limit) from error

    @staticmethod
    def _keyed_lookup(chronicum_id: str, key: str, projection: Mapping[str, Any]) -> Command:
        """The command finding the first actum of the write that used ``key`` in the chronicum."""
        return Command(
            ACTA,
            "find_one",
            ({"chronicum_id": chronicum_id, "idempotency_key": key, ERASING: _UNCLAIMED},),
            {"projection": projection},
        )

    def _keyed(
        self, chronicum_id: str, key: str, where: str, error: DuplicateKeyError
    ) -> Plan[Command, Actum]:
        """Return the actum stored first with ``key`` (its insert refused ours as a duplicate)."""
        document = yield from self._run(
            self._keyed_lookup(chronicum_id, key, ACTUM_FIELDS),
            where,
        )
        if document is None:  # erased since, or deleted by someone else
            yield from self._still_live(chronicum_id, where, None)
            raise StoreError(f"mongodb: {where}", f"key {key!r} is taken but its actum is gone") from error
        return actum_of(chronicum_id, document, where)

    def _probe(self, chronicum_id: str, where: str) -> Plan[Command, dict[str, Any]]:
        """Read the chronicum and its newest actum's ``seq`` and ``at`` in one round trip.

        Returns the chronicum document with ``newest``: a list of zero or one ``{seq, at}``.
        Raises ``ChronicumNotFound`` (an erasure marker is not a chronicum), or ``StoreError``
        when the document is another chronicum's.
        """
        pipeline = [{"$match": {"_id": chronicum_id, "owner_id": _LIVE}}, _NEWEST]
        documents: list[dict[str, Any]] = yield from self._run(
            Command(CHRONICA, "aggregate", (pipeline,), cursor=True), where
        )
        if not documents:
            raise ChronicumNotFound(chronicum_id)
        document = documents[0]
        check_row(f"mongodb: {where}", "chronicum id", chronicum_id, document.get("_id"))
        self._remember(chronicum_id, _newest_of(document))
        return document

    def _newest_stored(self, chronicum_id: str, where: str, *, probe: bool = False) -> Plan[Command, Newest]:
        """Read what a writer needs of a chronicum (:data:`Newest`).

        With ``probe``, through :meth:`_probe`, which also tells a missing chronicum
        (``ChronicumNotFound``); else the chronicum is known to exist and to hold an actum (a
        write of it was refused as a duplicate number), and only its newest actum is read.
        """
        known = self._known_newest(chronicum_id)
        if probe or known is None:
            document = yield from self._probe(chronicum_id, where)
            return _newest_of(document)
        newest = yield from self._run(
            Command(
                ACTA,
                "find_one",
                ({"chronicum_id": chronicum_id},),
                {"projection": {"_id": 0, "seq": 1, "at": 1, "position": 1, "end": 1}, "sort": [("seq", -1)]},
            ),
            where,
        )
        if newest is None:  # erased since: the probe tells
            document = yield from self._probe(chronicum_id, where)
            return _newest_of(document)
        found: Newest = (int(newest["seq"]), newest["at"], _end(newest), known[3])
        self._remember(chronicum_id, found)
        return found

    def _known_newest(self, chronicum_id: str) -> Newest | None:
        with self._newest_lock:
            return self._newest.get(chronicum_id)

    def _forget(self, chronicum_id: str) -> None:
        """Drop what is known of the chronicum's newest actum (it was erased, or reopened)."""
        with self._newest_lock:
            self._newest.pop(chronicum_id, None)

    def _remember(self, chronicum_id: str, newest: Newest) -> None:
        with self._newest_lock:
            known = self._newest.get(chronicum_id)
            if known is None or newest[0] >= known[0]:
                self._newest[chronicum_id] = newest
            self._newest.move_to_end(chronicum_id)
            while len(self._newest) > SEQUENCE_CACHE_SIZE:
                self._newest.popitem(last=False)

    @staticmethod
    def _run(command: Command, where: str, *, duplicates: bool = False) -> Plan[Command, Any]:
        """Perform ``command``; a driver error becomes ``StoreError("mongodb: <where>: ...")``.

        A timeout (``operation_timeout``, pymongo's ``timeoutMS`` or ``socketTimeoutMS``) says
        ``timed out: ...`` and that a write's fate is unknown. With ``duplicates``, a
        ``DuplicateKeyError``, and a refusal of the document as too large (``DocumentTooLarge``,
        or the server's own), are left to the caller to translate.
        """
        try:
            return (yield command)
        except (PyMongoError, BSONError) as error:
            if duplicates and _left_to_caller(error):
                raise
            if isinstance(error, ServerSelectionTimeoutError):  # whichever operation needed a server
                raise StoreError("mongodb: connect", _no_server(error)) from error
            if isinstance(error, PyMongoError) and error.timeout:
                raise StoreError(f"mongodb: {where}", f"timed out: {error}; {WRITE_FATE_UNKNOWN}") from error
            raise StoreError(f"mongodb: {where}", str(error)) from error


def _no_server(error: ServerSelectionTimeoutError) -> str:
    """One line for a server selection that timed out: why each server failed, not pymongo's topology.

    pymongo's message is ``<errors>, Timeout: 5.0s, Topology Description: <...>``; the description
    repeats the errors inside a dump of every server's state. No server was selected, so the
    operation was not sent (a retried write whose retry finds no server raises the first
    attempt's error instead, not this one).
    """
    errors, separator, rest = str(error).partition(", Timeout: ")
    if not separator:
        return f"no server could be used: {error}; nothing was sent"
    waited = rest.partition(",")[0]
    return f"no server could be used within {waited} (serverSelectionTimeoutMS): {errors}; nothing was sent"


def _left_to_caller(error: Exception) -> bool:
    """Whether a write's ``error`` is a duplicate key or a refusal as too large (see ``MongoCore._run``)."""
    if isinstance(error, DuplicateKeyError | DocumentTooLarge):
        return True
    return isinstance(error, OperationFailure) and error.code in _TOO_LARGE_CODES
