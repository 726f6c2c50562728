"""The history capability on MongoDB: positions, forks, summary marks, tool exchanges.

What is stored where:

- **Positions.** Every document of ``acta`` holds ``position`` (a batch's first actum: the
  batch's first position, and ``end``, its last) and every one of ``batch_acta`` its own
  ``position``. A writer takes the position after the newest actum's with the same insert that
  takes its ``seq`` (see :mod:`chronica_mongodb.core`). A range of positions is read along the
  index ``chronicum_position``: one aggregation, whatever the length of the history.
- **Forks.** A fork's ``chronica`` document holds ``forked_from``, ``lineage`` (its ancestors'
  segments: ``{chronicum_id, after, upto}``), ``base`` (the position it branched at: its own acta
  take the positions after it) and ``shared_at`` (the ``at`` of the last actum it shares). Nothing
  of the prefix is copied: a fork's window reads its ancestors' acta by position. Erasing a
  chronicum erases the forks whose lineage names it (index ``forks``).
- **Summaries.** A summary is an actum with ``summarizes`` (the ids of its range) and ``covers``
  (their positions). Its mark (position, range, actor kind) is pushed onto ``marks`` of its
  chronicum's document, with ``summaries`` counting them: the layout version is that count and
  the document's ``incarnation``. :func:`record_summary` inserts the summary hidden (``pending``),
  then pushes the mark only if the count is still the version given (one conditional
  single-document update decides, so two summaries checked against one layout never both land),
  then shows it; refused, it deletes the summary and raises ``StaleLayout``.
- **Tool exchanges.** A tool response keeps ``answers``; a request is found by its id along the
  indexes ``chronicum_actum_id`` of ``acta`` and ``batch_actum_id`` of ``batch_acta``.

:func:`window` performs every read of a :class:`~chronica_core.history.WindowReads` in one
aggregation, reading last the documents of the chronica it read from (as ``acta`` does): a
chronicum erased meanwhile answers ``ChronicumNotFound``, never part of its acta. A request
answered by a response it read but not among the rows is found by a second query.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from bson.int64 import Int64
from bson.objectid import ObjectId
from pymongo.errors import DuplicateKeyError

from chronica_core.errors import ChronicumExists, ChronicumNotFound, StoreError
from chronica_core.history import (
    Layout,
    Located,
    PositionsRead,
    RangeRead,
    Segment,
    StaleLayout,
    SummaryMark,
    WindowReads,
    WindowRows,
)
from chronica_core.model import ActorKind, Actum, ActumKind, Chronicum
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_core.rows import check_row
from chronica_core.rules import MAX_BATCH_SIZE
from chronica_mongodb.core import (
    _LIVE,
    _NEWEST,
    _UNCLAIMED,
    ACTA,
    BATCH_ACTA,
    CHRONICA,
    ERASING,
    PENDING,
    Command,
    MongoCore,
    _chronicum,
    _chronicum_document,
    _violated_index,
    _with_batch_members,
)
from chronica_mongodb.documents import ACTUM_FIELDS, actum_of

__all__ = ["fork", "layout", "locate", "millisecond_ceiling", "record_summary", "window"]

_ROW_FIELDS: Final = {**ACTUM_FIELDS, "position": 1}


def _segments(documents: Sequence[dict[str, Any]]) -> tuple[Segment, ...]:
    return tuple(Segment(s["chronicum_id"], int(s["after"]), int(s["upto"])) for s in documents)


def _lineage(document: dict[str, Any]) -> tuple[Segment, ...]:
    """A chronicum's lineage from its document: its ancestors' segments, then its own acta."""
    own = Segment(document["_id"], int(document.get("base", 0)), None)
    return (*_segments(document.get("lineage", ())), own)


def _marks(document: dict[str, Any], segment: Segment) -> list[SummaryMark]:
    return [
        SummaryMark(int(m["position"]), int(m["first"]), int(m["last"]), ActorKind(m["actor_kind"]))
        for m in document.get("marks", ())
        if segment.holds(int(m["position"]))
    ]


def _version(document: dict[str, Any]) -> Hashable:
    """The layout version of a chronicum's document: its incarnation and how many summaries it has."""
    incarnation = document.get("incarnation")
    return ("mongodb", "" if incarnation is None else str(incarnation), int(document.get("summaries", 0)))


def layout(core: MongoCore, chronicum_id: str) -> Plan[Command, Layout]:
    """Plan :meth:`chronica_core.HistoryStore.layout`: one aggregation on ``chronica``.

    The chronicum's document with its newest actum and its ancestors' documents (for the marks
    in its shared prefix). Raises ``ChronicumNotFound`` when it, or an ancestor (being erased
    with its forks), is missing or erased; else ``StoreError("mongodb: read layout: ...")``.
    """
    where = "read layout"
    pipeline = [
        {"$match": {"_id": chronicum_id, "owner_id": _LIVE}},
        _NEWEST,
        {
            "$lookup": {
                "from": CHRONICA,
                "localField": "lineage.chronicum_id",
                "foreignField": "_id",
                "as": "ancestors",
            }
        },
    ]
    documents: list[dict[str, Any]] = yield from core._run(
        Command(CHRONICA, "aggregate", (pipeline,), cursor=True), where
    )
    if not documents:
        core._forget(chronicum_id)
        raise ChronicumNotFound(chronicum_id)
    document = documents[0]
    check_row(f"mongodb: {where}", "chronicum id", chronicum_id, document.get("_id"))
    lineage = _lineage(document)
    ancestors = {ancestor["_id"]: ancestor for ancestor in document["ancestors"] if "owner_id" in ancestor}
    marks: list[SummaryMark] = []
    for segment in lineage[:-1]:
        ancestor = ancestors.get(segment.chronicum_id)
        if ancestor is None:
            raise ChronicumNotFound(chronicum_id)
        marks.extend(_marks(ancestor, segment))
    marks.extend(_marks(document, lineage[-1]))
    marks.sort(key=lambda mark: mark.position)
    return Layout(_chronicum(document), lineage, tuple(marks), _version(document))


def _kinds(read: RangeRead) -> dict[str, Any]:
    criteria: dict[str, Any] = {}
    if read.actum_kinds is not None:
        criteria["kind"] = {"$in": [str(kind) for kind in read.actum_kinds]}
    if read.actor_kinds is not None:
        criteria["actor_kind"] = {"$in": [str(kind) for kind in read.actor_kinds]}
    if not read.summaries:
        criteria["summarizes"] = {"$exists": False}
    return criteria


def _range_pipeline(read: RangeRead, tag: int) -> list[dict[str, Any]]:
    """The stages reading ``read``: heads along ``chronicum_position``, their batches, then filters.

    A batch's first actum lies at most ``MAX_BATCH_SIZE - 1`` positions before any of its acta:
    so the heads of the range lie within ``after - MAX_BATCH_SIZE`` and ``upto``, and their
    ``end`` is after ``after``.
    """
    segment = read.segment
    order = -1 if read.newest else 1
    positions: dict[str, Any] = {"$gt": Int64(segment.after - MAX_BATCH_SIZE)}
    within: dict[str, Any] = {"$gt": Int64(segment.after)}
    if segment.upto is not None:
        positions["$lte"] = within["$lte"] = Int64(segment.upto)
    pipeline: list[dict[str, Any]] = [
        {
            "$match": {
                "chronicum_id": segment.chronicum_id,
                "position": positions,
                "end": {"$gt": Int64(segment.after)},
                ERASING: _UNCLAIMED,
                PENDING: _UNCLAIMED,
            }
        },
        {"$sort": {"position": order}},
        *_with_batch_members(read.newest),
        {"$match": {"position": within, **_kinds(read)}},
    ]
    if read.limit > 0:
        pipeline.append({"$limit": read.limit})
    pipeline.append({"$project": {**_ROW_FIELDS, "read": {"$literal": tag}}})
    return pipeline


def _positions_pipeline(read: PositionsRead, tag: int) -> list[dict[str, Any]]:
    """The stages reading the summaries at ``read.positions`` (summaries are never in a batch)."""
    return [
        {
            "$match": {
                "chronicum_id": read.chronicum_id,
                "position": {"$in": [Int64(position) for position in read.positions]},
                ERASING: _UNCLAIMED,
            }
        },
        {"$project": {**_ROW_FIELDS, "read": {"$literal": tag}}},
    ]


def _window_pipeline(chronicum_id: str, reads: WindowReads) -> tuple[list[dict[str, Any]], set[str]]:
    """A window's aggregation on ``acta``: each read, then the rows of the chronica they read.

    Returns the pipeline and the ids of those chronica (``chronicum_id`` among them).
    """
    chronica = {chronicum_id}
    # keeps nothing, names the shard key: the start of an aggregation made of `$unionWith` stages
    pipeline: list[dict[str, Any]] = [{"$match": {"chronicum_id": chronicum_id, "_id": {"$in": []}}}]
    for tag, read in enumerate(reads.reads):
        if isinstance(read, PositionsRead):
            chronica.add(read.chronicum_id)
            stages = _positions_pipeline(read, tag)
        else:
            chronica.add(read.segment.chronicum_id)
            stages = _range_pipeline(read, tag)
        pipeline.append({"$unionWith": {"coll": ACTA, "pipeline": stages}})
    pipeline.append(
        {
            "$unionWith": {
                "coll": CHRONICA,
                "pipeline": [
                    {"$match": {"_id": {"$in": sorted(chronica)}}},
                    {"$project": {"chronicum": "$_id", "owner_id": 1, "incarnation": 1, "summaries": 1}},
                ],
            }
        }
    )
    return pipeline, chronica


def _answered(
    core: MongoCore, lineage: tuple[Segment, ...], rows: list[tuple[int, Actum]]
) -> Plan[Command, list[Located]]:
    """The requests the tool responses among ``rows`` answer: from ``rows``, else found in ``lineage``."""
    wanted = {actum.answers for _, actum in rows if actum.answers and actum.kind is ActumKind.TOOL_RESPONSE}
    held = {actum.id: Located(position, actum) for position, actum in rows if actum.id in wanted}
    answered = list(held.values())
    missing = tuple(sorted(wanted - set(held)))
    if missing:
        found = yield from locate(core, lineage, missing)
        answered.extend(found.values())
    return answered


def window(core: MongoCore, chronicum_id: str, reads: WindowReads) -> Plan[Command, WindowRows]:
    """Plan :meth:`chronica_core.HistoryStore.window` (see the module): one aggregation on ``acta``.

    Raises ``ChronicumNotFound`` when the chronicum, or a chronicum it read from, is missing or
    erased (checked after the reads); else ``StoreError("mongodb: read window: ...")``.
    """
    where = "read window"
    pipeline, chronica = _window_pipeline(chronicum_id, reads)
    documents: list[dict[str, Any]] = yield from core._run(
        Command(ACTA, "aggregate", (pipeline,), cursor=True), where
    )
    live = {document["chronicum"]: document for document in documents if "chronicum" in document}
    own = live.get(chronicum_id)
    if own is None or "owner_id" not in own or any("owner_id" not in live.get(c, {}) for c in chronica):
        core._forget(chronicum_id)
        raise ChronicumNotFound(chronicum_id)
    by_read: list[list[tuple[int, Actum]]] = [[] for _ in reads.reads]
    for document in documents:
        if "read" in document:
            row = int(document["position"]), actum_of(document["chronicum_id"], document, where)
            by_read[int(document["read"])].append(row)
    rows = [row for read_rows in by_read for row in sorted(read_rows, key=lambda row: row[0])]
    answered: list[Located] = []
    if reads.answered_in is not None:
        answered = yield from _answered(core, reads.answered_in, rows)
    return WindowRows(
        [actum for _, actum in rows], [position for position, _ in rows], answered, _version(own)
    )


def locate(
    core: MongoCore, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]
) -> Plan[Command, dict[str, Located]]:
    """Plan :meth:`chronica_core.HistoryStore.locate`: one aggregation along the actum id indexes.

    The acta of the lineage's chronica with these ids, in ``acta`` and in committed batches of
    ``batch_acta``, kept where their segment holds their position. Raises
    ``StoreError("mongodb: locate acta: ...")``.
    """
    where = "locate acta"
    if not actum_ids or not lineage:
        return {}
    match = {
        "chronicum_id": {"$in": sorted({s.chronicum_id for s in lineage})},
        "id": {"$in": list(actum_ids)},
    }
    pipeline: list[dict[str, Any]] = [
        {"$match": {**match, ERASING: _UNCLAIMED, PENDING: _UNCLAIMED}},
        {"$project": _ROW_FIELDS},
        {
            "$unionWith": {
                "coll": BATCH_ACTA,
                "pipeline": [
                    {"$match": match},
                    {"$lookup": {"from": ACTA, "localField": "batch", "foreignField": "batch", "as": "head"}},
                    {"$match": {"head.0": {"$exists": True}}},
                    {"$project": _ROW_FIELDS},
                ],
            }
        },
    ]
    documents: list[dict[str, Any]] = yield from core._run(
        Command(ACTA, "aggregate", (pipeline,), cursor=True), where
    )
    segments = {segment.chronicum_id: segment for segment in lineage}
    found: dict[str, Located] = {}
    for document in documents:
        position = int(document["position"])
        if segments[document["chronicum_id"]].holds(position):
            found[document["id"]] = Located(position, actum_of(document["chronicum_id"], document, where))
    return found


def millisecond_ceiling(moment: datetime) -> datetime:
    """``moment`` rounded up to the millisecond (a fork's activity, compared with writes' ``at``)."""
    below = moment.microsecond % 1000
    return moment if below == 0 else moment + timedelta(microseconds=1000 - below)


def fork(core: MongoCore, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> Plan[Command, None]:
    """Plan :meth:`chronica_core.HistoryStore.fork`: insert the fork's document, then check its ancestors.

    After the insert, every chronicum of its lineage and its source must still be live: an
    erase marks the chronicum first, then looks for its forks, so a fork inserted before the
    mark is found and erased with it, and one inserted after sees the mark here, deletes its
    document and raises ``ChronicumNotFound``. Then ``family_active_at`` of its ancestors moves
    to its last activity. Raises ``ChronicumExists`` (the id is taken, or a marker), else
    ``StoreError("mongodb: fork chronicum: ...")``.
    """
    where = "fork chronicum"
    assert chronicum.forked_from is not None
    source = chronicum.forked_from.chronicum_id
    document = _chronicum_document(chronicum)
    document.update(
        forked_from=chronicum.forked_from.to_dict(),
        lineage=[
            {"chronicum_id": s.chronicum_id, "after": Int64(s.after), "upto": Int64(s.upto or 0)}
            for s in lineage[:-1]
        ],
        base=Int64(lineage[-1].after),
    )
    if chronicum.last_actum_at is not None:
        document["shared_at"] = chronicum.last_actum_at
    try:
        yield from core._run(Command(CHRONICA, "insert_one", (document,)), where, duplicates=True)
    except DuplicateKeyError as error:
        if _violated_index(error) != "_id":
            raise StoreError(f"mongodb: {where}", str(error)) from error
        raise ChronicumExists(chronicum.id) from None
    ancestors = list(dict.fromkeys(s.chronicum_id for s in lineage[:-1]))
    needed = sorted({source, *ancestors})
    live = yield from core._run(
        Command(CHRONICA, "count_documents", ({"_id": {"$in": needed}, "owner_id": _LIVE},)), where
    )
    if live != len(needed):
        yield from core._run(
            Command(CHRONICA, "delete_one", ({"_id": chronicum.id, "incarnation": document["incarnation"]},)),
            where,
        )
        raise ChronicumNotFound(source)
    if ancestors:
        active = millisecond_ceiling(last_activity(chronicum))
        yield from core._run(
            Command(
                CHRONICA,
                "update_many",
                ({"_id": {"$in": ancestors}}, {"$max": {"family_active_at": active}}),
            ),
            where,
        )
    core._remember(chronicum.id, (0, None, lineage[-1].after, tuple(ancestors)))


def _parsed(version: Hashable) -> tuple[ObjectId | None, int] | None:
    """The incarnation and summary count of a version :func:`layout` made, else ``None``."""
    if not (isinstance(version, tuple) and len(version) == 3 and version[0] == "mongodb"):
        return None
    _, incarnation, count = version
    if not isinstance(incarnation, str) or not isinstance(count, int):
        return None
    if incarnation == "":
        return None, count
    if not ObjectId.is_valid(incarnation):
        return None
    return ObjectId(incarnation), count


def record_summary(
    core: MongoCore, actum: Actum, first: int, last: int, version: Hashable, key: str | None
) -> Plan[Command, Actum]:
    """Plan :meth:`chronica_core.HistoryStore.record_summary` (see the module).

    Raises ``StaleLayout`` (nothing stays written) when the layout is no longer ``version``;
    ``ChronicumNotFound``, ``ActumTooLarge`` as ``record``; else
    ``StoreError("mongodb: record summary: ...")``.
    """
    where = "record summary"
    chronicum_id = actum.chronicum_id
    parsed = _parsed(version)
    if parsed is None:  # no layout of this store has it: only a key already used answers
        if key is not None:
            first_write = yield from core._run(core._keyed_lookup(chronicum_id, key, ACTUM_FIELDS), where)
            if first_write is not None:
                return actum_of(chronicum_id, first_write, where)
        raise StaleLayout(chronicum_id)
    incarnation, count = parsed
    token = ObjectId()
    extra = {PENDING: token, "covers": {"first": Int64(first), "last": Int64(last)}}
    stored, seq, position = yield from core.append(actum, key, where, extra)
    if seq is None:  # the key was used: that write's summary
        return stored
    expected: dict[str, Any] = {
        "_id": chronicum_id,
        "owner_id": _LIVE,
        "incarnation": {"$exists": False} if incarnation is None else incarnation,
        "summaries": {"$exists": False} if count == 0 else count,
    }
    mark = {
        "position": Int64(position),
        "first": Int64(first),
        "last": Int64(last),
        "actor_kind": str(actum.actor_kind),
    }
    accepted = yield from core._run(
        Command(CHRONICA, "update_one", (expected, {"$inc": {"summaries": 1}, "$push": {"marks": mark}})),
        where,
    )
    mine = {"chronicum_id": chronicum_id, "seq": seq}
    if accepted.matched_count == 0:
        claimed = yield from core._run(
            Command(ACTA, "update_one", ({**mine, ERASING: _UNCLAIMED}, {"$set": {ERASING: "writer"}})), where
        )
        if claimed.modified_count:
            yield from core._run(Command(ACTA, "delete_one", ({**mine, ERASING: "writer"},)), where)
        core._forget(chronicum_id)
        raise StaleLayout(chronicum_id)
    yield from core._run(
        Command(ACTA, "update_one", ({**mine, PENDING: token}, {"$unset": {PENDING: ""}})), where
    )
    return stored
