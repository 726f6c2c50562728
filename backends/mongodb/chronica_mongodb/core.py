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
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from bson import encode
from bson.errors import BSONError
from bson.int64 import Int64
from bson.objectid import ObjectId
from pymongo.errors import DocumentTooLarge, DuplicateKeyError, OperationFailure, PyMongoError

from chronica_core.errors import (
    ActumTooLarge,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
)
from chronica_core.limits import check_content_size, content_size
from chronica_core.model import MAX_ID_LENGTH, ActaQuery, ActorKind, Actum, ActumKind, Chronicum
from chronica_core.plans import Plan
from chronica_core.rows import check_row
from chronica_core.timeouts import WRITE_FATE_UNKNOWN

__all__ = [
    "ACTA",
    "CHRONICA",
    "DATABASE",
    "DOCUMENT_RESERVE",
    "MAX_DOCUMENT_BYTES",
    "Command",
    "MongoCore",
]

CHRONICA: Final = "chronica"
"""The collection of chronica: ``_id`` (the chronicum id), ``owner_id``, ``started_at``."""

ACTA: Final = "acta"
"""The collection of acta, one document each, ordered within a chronicum by ``seq``."""

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

_OUR_INDEXES: Final = frozenset({"_id_", SEQUENCE_INDEX, IDEMPOTENCY_INDEX})
_CHRONICUM_FIELDS: Final = frozenset({"_id", "owner_id", "started_at"})
_ACTUM_FIELDS_STORED: Final = frozenset({"chronicum_id", "seq", "id", "kind", "content", "at"})

MAX_ATTEMPTS: Final = 10_000
"""How many sequence numbers one write tries before giving up (each lost try is another's write)."""

SEQUENCE_CACHE_SIZE: Final = 100_000
"""How many chronica a store remembers the newest sequence number of."""

_ACTUM_FIELDS: Final = {
    "_id": 0,
    "chronicum_id": 1,
    "id": 1,
    "kind": 1,
    "actor_kind": 1,
    "actor": 1,
    "content": 1,
    "at": 1,
}
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
    }


DOCUMENT_RESERVE: Final = len(encode(_widest_actum_document()))
"""Bytes of a document that are not content, at their largest (ids of 255 four-byte characters):
the content limit is the server's ``maxBsonObjectSize`` less this, so content up to it always
fits, whatever the ids."""


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
    now = datetime.now(UTC)
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


Newest = tuple[int, datetime | None]
"""A chronicum's newest stored actum: its sequence number and ``at`` (``(0, None)`` while it has none)."""


def _actum(chronicum_id: str, document: Mapping[str, Any], where: str) -> Actum:
    """The actum ``document`` holds, after checking it is one of ``chronicum_id`` (else ``StoreError``)."""
    check_row(f"mongodb: {where}", "chronicum id", chronicum_id, document.get("chronicum_id"))
    return Actum(
        chronicum_id=document["chronicum_id"],
        kind=ActumKind(document["kind"]),
        actor_kind=ActorKind(document["actor_kind"]),
        actor=document["actor"],
        content=document["content"],
        id=document["id"],
        at=document["at"],
    )


class MongoCore:
    """The store operations as plans of :class:`Command`, shared by the sync and async stores.

    Besides the documents, it keeps one piece of state: for each chronicum it has seen (up to
    :data:`SEQUENCE_CACHE_SIZE`), the newest sequence number known to be stored and that actum's
    ``at``. Nothing is ever deleted, so a chronicum seen once still exists and its next actum is
    usually that number plus one; a stale number only costs a refused insert and a re-read, never
    correctness.
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

    def migrate(self) -> Plan[Command, None]:
        """Create the acta indexes if they are missing (idempotent; chronica needs only ``_id``).

        One command in the steady state (the indexes are listed, and found). Before creating
        them it makes sure the collections are not someone else's (see :meth:`check`).

        Raises ``StoreError("mongodb: migrate: ...")``: the collections are not this package's, or
        an index of the same name has another definition.
        """
        present = yield from self._own_indexes("migrate")
        for name, keys, options in _INDEXES:
            if name not in present:
                yield from self._run(
                    Command(ACTA, "create_index", (keys,), {"name": name, **options}), "migrate"
                )

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
        ours = {name for name, wanted, _ in _INDEXES if keys.get(name) == wanted}
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
                if document is not None and not fields <= document.keys():
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
        started_at, started_at_us = _split_microseconds(chronicum.started_at)
        document: dict[str, Any] = {
            "_id": chronicum.id,
            "owner_id": chronicum.owner_id,
            "started_at": started_at,
            "started_at_us": started_at_us,
        }
        try:
            yield from self._run(
                Command(CHRONICA, "insert_one", (document,)), "create chronicum", duplicates=True
            )
        except DuplicateKeyError as error:
            if _violated_index(error) != "_id":
                raise StoreError("mongodb: create chronicum", str(error)) from error
            raise ChronicumExists(chronicum.id) from None
        self._remember(chronicum.id, (0, None))

    def get(self, chronicum_id: str) -> Plan[Command, Chronicum]:
        """Read the chronicum; ``last_actum_at`` is the ``at`` of its newest actum.

        Raises ``ChronicumNotFound``, else ``StoreError("mongodb: get chronicum: ...")``.
        """
        document = yield from self._probe(chronicum_id, "get chronicum")
        newest = document["newest"][0] if document["newest"] else None
        started_at: datetime = document["started_at"]
        return Chronicum(
            id=document["_id"],
            owner_id=document["owner_id"],
            started_at=started_at + timedelta(microseconds=document.get("started_at_us", 0)),
            last_actum_at=newest["at"] if newest is not None else None,
        )

    def record(self, actum: Actum, key: str | None = None) -> Plan[Command, Actum]:
        """Append ``actum`` (with idempotency ``key`` when given) at the next place in its chronicum.

        Returns the stored actum with ``at`` set (UTC, to the millisecond); with a key already used
        in the chronicum, the actum stored that first time instead.

        Raises:
            ActumTooLarge: the content is larger than :meth:`content_limit`; checked before
                anything is sent (and, should the server still refuse the document as too
                large, after it: the limit is then read again).
            ChronicumNotFound: the chronicum does not exist.
            StoreError: anything else, as ``mongodb: record actum: ...``.
        """
        where = "record actum" if key is None else "record idempotent actum"
        chronicum_id = actum.chronicum_id
        check_content_size(actum.content, (yield from self.content_limit(where)))
        document: dict[str, Any] = {
            "chronicum_id": chronicum_id,
            "seq": Int64(0),
            "id": actum.id,
            "kind": str(actum.kind),
            "actor_kind": str(actum.actor_kind),
            "actor": actum.actor,
            "content": actum.content,
            "at": _now(),  # set again on each try: a retried write takes the time of the try that lands
        }
        if key is not None:
            document["idempotency_key"] = key
        known = self._known_newest(chronicum_id)
        if known is None:
            known = yield from self._newest_stored(chronicum_id, where, probe=True)
        newest, newest_at = known
        for _ in range(MAX_ATTEMPTS):
            now = _now()
            at = now if newest_at is None or now >= newest_at else newest_at
            document["seq"], document["at"] = Int64(newest + 1), at
            try:
                yield from self._run(Command(ACTA, "insert_one", (dict(document),)), where, duplicates=True)
            except DuplicateKeyError as error:
                violated = _violated_index(error)
                if violated == "key" and key is not None:
                    return (yield from self._keyed(chronicum_id, key, where, error))
                if violated != "seq":
                    raise StoreError(f"mongodb: {where}", str(error)) from error
                # Another writer stored this number: read the newest (its number and its `at`,
                # which ours must not precede) and try the one after it.
                newest, newest_at = yield from self._newest_stored(chronicum_id, where)
                continue
            except (DocumentTooLarge, OperationFailure) as error:  # refused as too large
                yield from self._refused_as_too_large(actum.content, where, error)
                raise StoreError(f"mongodb: {where}", str(error)) from error
            self._remember(chronicum_id, (newest + 1, at))
            return replace(actum, at=at)
        raise StoreError(
            f"mongodb: {where}", f"no free place in chronicum {chronicum_id!r} after {MAX_ATTEMPTS} tries"
        )

    def record_idempotent(self, actum: Actum, key: str) -> Plan[Command, Actum]:
        """:meth:`record` with the idempotency ``key``: the same result and errors.

        Returns the newly stored actum, or the one stored the first time ``key`` was used.
        """
        return self.record(actum, key)

    def acta(self, chronicum_id: str, query: ActaQuery) -> Plan[Command, list[Actum]]:
        """Return the context window: one query that filters, sorts by ``seq`` descending and limits.

        Returns the acta oldest first. Raises ``ChronicumNotFound`` when the chronicum does not
        exist (an empty window of an existing one is ``[]``), else ``StoreError``.
        """
        where = "read acta"
        criteria: dict[str, Any] = {"chronicum_id": chronicum_id}
        if query.actum_kinds is not None:
            criteria["kind"] = {"$in": [str(kind) for kind in query.actum_kinds]}
        if query.actor_kinds is not None:
            criteria["actor_kind"] = {"$in": [str(kind) for kind in query.actor_kinds]}
        options: dict[str, Any] = {"projection": _ACTUM_FIELDS}
        if query.last_n > 0:
            options.update(sort=[("seq", -1)], limit=query.last_n)
        else:
            options.update(sort=[("seq", 1)])
        documents: list[dict[str, Any]] = yield from self._run(
            Command(ACTA, "find", (criteria,), options, cursor=True), where
        )
        if not documents:
            found = yield from self._run(
                Command(CHRONICA, "find_one", ({"_id": chronicum_id},), {"projection": {"_id": 1}}), where
            )
            if found is None:
                raise ChronicumNotFound(chronicum_id)
            check_row(f"mongodb: {where}", "chronicum id", chronicum_id, found.get("_id"))
            return []
        if query.last_n > 0:
            documents.reverse()
        return [_actum(chronicum_id, document, where) for document in documents]

    def _refused_as_too_large(self, content: str, where: str, error: Exception) -> Plan[Command, None]:
        """Raise ``ActumTooLarge`` if ``content`` is over the server's limit read again now.

        The server (or pymongo, with the limit the server told it) refused a document the store
        thought small enough: the limit changed since the store read it. Returns otherwise.
        """
        self._content_limit = None
        limit = yield from self.content_limit(where)
        size = content_size(content)
        if limit is not None and size > limit:
            raise ActumTooLarge(size, limit) from error

    def _keyed(
        self, chronicum_id: str, key: str, where: str, error: DuplicateKeyError
    ) -> Plan[Command, Actum]:
        """Return the actum stored first with ``key`` (its insert refused ours as a duplicate)."""
        document = yield from self._run(
            Command(
                ACTA,
                "find_one",
                ({"chronicum_id": chronicum_id, "idempotency_key": key},),
                {"projection": _ACTUM_FIELDS},
            ),
            where,
        )
        if document is None:  # only if someone deleted it: acta are never deleted by Chronica
            raise StoreError(f"mongodb: {where}", f"key {key!r} is taken but its actum is gone") from error
        return _actum(chronicum_id, document, where)

    def _probe(self, chronicum_id: str, where: str) -> Plan[Command, dict[str, Any]]:
        """Read the chronicum and its newest actum's ``seq`` and ``at`` in one round trip.

        Returns the chronicum document with ``newest``: a list of zero or one ``{seq, at}``.
        Raises ``ChronicumNotFound``, or ``StoreError`` when the document is another chronicum's.
        """
        pipeline = [
            {"$match": {"_id": chronicum_id}},
            {
                "$lookup": {
                    "from": ACTA,
                    "localField": "_id",
                    "foreignField": "chronicum_id",
                    "pipeline": [
                        {"$sort": {"seq": -1}},
                        {"$limit": 1},
                        {"$project": {"_id": 0, "seq": 1, "at": 1}},
                    ],
                    "as": "newest",
                }
            },
        ]
        documents: list[dict[str, Any]] = yield from self._run(
            Command(CHRONICA, "aggregate", (pipeline,), cursor=True), where
        )
        if not documents:
            raise ChronicumNotFound(chronicum_id)
        document = documents[0]
        check_row(f"mongodb: {where}", "chronicum id", chronicum_id, document.get("_id"))
        newest = document["newest"][0] if document["newest"] else None
        self._remember(chronicum_id, (0, None) if newest is None else (int(newest["seq"]), newest["at"]))
        return document

    def _newest_stored(self, chronicum_id: str, where: str, *, probe: bool = False) -> Plan[Command, Newest]:
        """Read the number and ``at`` of a chronicum's newest stored actum (``(0, None)``: none).

        With ``probe``, through :meth:`_probe`, which also tells a missing chronicum
        (``ChronicumNotFound``); else the chronicum is known to exist.
        """
        if probe:
            document = yield from self._probe(chronicum_id, where)
            newest = document["newest"][0] if document["newest"] else None
        else:
            newest = yield from self._run(
                Command(
                    ACTA,
                    "find_one",
                    ({"chronicum_id": chronicum_id},),
                    {"projection": {"_id": 0, "seq": 1, "at": 1}, "sort": [("seq", -1)]},
                ),
                where,
            )
        found: Newest = (0, None) if newest is None else (int(newest["seq"]), newest["at"])
        self._remember(chronicum_id, found)
        return found

    def _known_newest(self, chronicum_id: str) -> Newest | None:
        with self._newest_lock:
            return self._newest.get(chronicum_id)

    def _remember(self, chronicum_id: str, newest: Newest) -> None:
        with self._newest_lock:
            if newest[0] >= self._newest.get(chronicum_id, (0, None))[0]:
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
            if isinstance(error, PyMongoError) and error.timeout:
                raise StoreError(f"mongodb: {where}", f"timed out: {error}; {WRITE_FATE_UNKNOWN}") from error
            raise StoreError(f"mongodb: {where}", str(error)) from error


def _left_to_caller(error: Exception) -> bool:
    """Whether a write's ``error`` is a duplicate key or a refusal as too large (see ``MongoCore._run``)."""
    if isinstance(error, DuplicateKeyError | DocumentTooLarge):
        return True
    return isinstance(error, OperationFailure) and error.code in _TOO_LARGE_CODES
