"""The retention capability on MongoDB: idle chronica found through an index, erased atomically with writers.

Every live ``chronica`` document holds its last activity: ``active_at`` (milliseconds) and
``active_at_us`` (the microseconds below them): the later of its start (a fork's: when it was
forked) and the ``at`` of its newest actum. A write moves it in the same single-document update
that checks, after the insert, that the chronicum is still live (see ``MongoCore._still_live``); a
write into a fork also moves ``family_active_at`` of every ancestor. :func:`idle_chronica` walks
the index ``idle`` (or ``owner_idle``) in that order.

:func:`erase_idle` turns the chronicum into its marker only if its document still says it and its
forks are idle: one conditional single-document write decides. A write that landed before it was
published in ``active_at`` is erased with the rest (it landed before the erase); one after it
meets the marker and is refused, as with ``erase``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from chronica_core.errors import ChronicumNotFound
from chronica_core.model import Chronicum
from chronica_core.plans import Plan
from chronica_core.rows import check_row
from chronica_core.store import ListingPosition
from chronica_mongodb.core import _NEWEST, CHRONICA, Command, MongoCore, _chronicum, _split_microseconds

__all__ = ["erase_idle", "idle_chronica"]


def _before(moment: datetime) -> dict[str, Any]:
    """The filter of documents whose last activity is strictly before ``moment``."""
    at, microseconds = _split_microseconds(moment)
    return {
        "$or": [
            {"active_at": {"$lt": at}},
            {"active_at": at, "active_at_us": {"$lt": microseconds}},
        ]
    }


def _after(position: ListingPosition) -> dict[str, Any]:
    """The filter of documents after ``(last activity, id)`` in the order of the index ``idle``."""
    at, microseconds = _split_microseconds(position[0])
    return {
        "$or": [
            {"active_at": {"$gt": at}},
            {"active_at": at, "active_at_us": {"$gt": microseconds}},
            {"active_at": at, "active_at_us": microseconds, "_id": {"$gt": position[1]}},
        ]
    }


def idle_chronica(
    core: MongoCore, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
) -> Plan[Command, list[Chronicum]]:
    """Plan :meth:`chronica_core.RetentionStore.idle_chronica`: one aggregation on ``chronica``.

    Along ``idle`` (``owner_idle`` with an owner), oldest last activity first, ties by id, each
    with its newest actum for ``last_actum_at``. Raises ``StoreError("mongodb: idle chronica: ...")``.
    """
    where = "idle chronica"
    criteria: list[dict[str, Any]] = [_before(idle_before)]
    if after is not None:
        criteria.append(_after(after))
    match: dict[str, Any] = {
        "owner_id": {"$exists": True} if owner_id is None else owner_id,
        "$and": criteria,
    }
    pipeline = [
        {"$match": match},
        {"$sort": {"active_at": 1, "active_at_us": 1, "_id": 1}},
        {"$limit": limit},
        _NEWEST,
    ]
    documents: list[dict[str, Any]] = yield from core._run(
        Command(CHRONICA, "aggregate", (pipeline,), cursor=True), where
    )
    if owner_id is not None:
        for document in documents:
            check_row(f"mongodb: {where}", "owner id", owner_id, document.get("owner_id"))
    return [_chronicum(document) for document in documents]


def erase_idle(
    core: MongoCore, chronicum_id: str, idle_before: datetime, owner_digest: str
) -> Plan[Command, int]:
    """Plan :meth:`chronica_core.RetentionStore.erase_idle`: erase the chronicum and its forks if idle.

    The chronicum becomes its marker only if its last activity and that of its forks
    (``family_active_at``, kept to the millisecond above) are before ``idle_before``; then its
    forks and acta go as with ``erase``. Returns how many chronica were erased, ``0`` when it is
    missing, erased or not idle. Raises ``StoreError("mongodb: erase idle: ...")``.
    """
    family_before = idle_before - timedelta(microseconds=idle_before.microsecond % 1000)
    condition = {
        "$and": [
            _before(idle_before),
            {
                "$or": [
                    {"family_active_at": {"$exists": False}},
                    {"family_active_at": {"$lt": family_before}},
                ]
            },
        ]
    }
    try:
        chronica, _ = yield from core.erase_family(chronicum_id, owner_digest, "erase idle", condition)
    except ChronicumNotFound:
        return 0
    return chronica
