"""Bringing a database up to the native, history and retention capabilities, keeping its data.

A database made before them has acta without positions and chronica without a last activity.
:func:`migrate` gives them both, then makes the indexes of :data:`chronica_mongodb.core.SHAPE_INDEXES`;
the absence of ``chronicum_position`` on ``acta`` is what tells such a database. Nothing else
changes: acta written before keep their fields and read back as before (no native form, no
answers), at positions ``1, 2, ...`` in their order (a batch takes one position per actum).

Earlier builds with forks gave a fork the last activity of its shared actum instead of its start
(its fork time), and its ancestors that ``family_active_at``. Every :func:`migrate` then runs
:func:`_fork_times`: one query over the index ``forks`` finds the live forks whose ``active_at``
is before their start (none once done), and moves their keys up to it.

The backfill runs while the index is missing, so a store that opens the database meanwhile
(another process migrating too) may run it again: each step writes values computed from the
acta, the same each time. A store of the previous version writing at the same time is not
supported: stop those first. :func:`_fork_times` is safe beside writers of this version: it moves
keys only forward, as their writes do.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from bson.int64 import Int64

from chronica_core.plans import Plan
from chronica_mongodb.core import (
    ACTA,
    BATCH_ACTA,
    CHRONICA,
    FORKS_INDEX,
    Command,
    MongoCore,
)
from chronica_mongodb.history import millisecond_ceiling

__all__ = ["migrate"]

_log = logging.getLogger("chronica.mongodb")
_WHERE = "migrate"


def migrate(core: MongoCore) -> Plan[Command, None]:
    """Create the indexes if missing, after giving the documents made before them their new fields.

    :meth:`chronica_mongodb.core.MongoCore.migrate` with :func:`_backfill`, run on a database
    whose ``acta`` lacks ``chronicum_position``; then :func:`_fork_times`. Raises
    ``StoreError("mongodb: migrate: ...")``.
    """
    yield from core.migrate(_backfill)
    yield from _fork_times()


def _fork_times() -> Plan[Command, None]:
    """Move each live fork's last activity, and its ancestors' ``family_active_at``, up to its start.

    For forks whose ``active_at`` (with ``active_at_us``) is before ``started_at`` (with
    ``started_at_us``), as earlier builds left them. The ancestors move first (``$max``, to the
    start rounded up to the millisecond, as a fork does), then the fork, only while it is still
    the same chronicum and still before its start: a step cut short is done again by the next.
    """
    earlier = {
        "$or": [
            {"$lt": ["$active_at", "$started_at"]},
            {
                "$and": [
                    {"$eq": ["$active_at", "$started_at"]},
                    {"$lt": [{"$ifNull": ["$active_at_us", 0]}, {"$ifNull": ["$started_at_us", 0]}]},
                ]
            },
        ]
    }
    forks: list[dict[str, Any]] = yield from MongoCore._run(
        Command(
            CHRONICA,
            "find",
            ({"lineage": {"$exists": True}, "active_at": {"$exists": True}, "$expr": earlier},),
            {
                "projection": {"started_at": 1, "started_at_us": 1, "lineage": 1, "incarnation": 1},
                "hint": FORKS_INDEX,
            },
            cursor=True,
        ),
        _WHERE,
    )
    for document in forks:
        started_at, started_at_us = document["started_at"], int(document.get("started_at_us", 0))
        start = started_at + timedelta(microseconds=started_at_us)
        ancestors = list(dict.fromkeys(segment["chronicum_id"] for segment in document["lineage"]))
        if ancestors:
            yield from MongoCore._run(
                Command(
                    CHRONICA,
                    "update_many",
                    ({"_id": {"$in": ancestors}}, {"$max": {"family_active_at": millisecond_ceiling(start)}}),
                ),
                _WHERE,
            )
        still_earlier = {
            "_id": document["_id"],
            "incarnation": document.get("incarnation"),
            "$or": [
                {"active_at": {"$lt": started_at}},
                {"active_at": started_at, "active_at_us": {"$lt": started_at_us}},
            ],
        }
        yield from MongoCore._run(
            Command(
                CHRONICA,
                "update_one",
                (still_earlier, {"$set": {"active_at": started_at, "active_at_us": started_at_us}}),
            ),
            _WHERE,
        )
    if forks:
        _log.info("moved the last activity of %d forks made by earlier builds to their fork time", len(forks))


def _backfill() -> Plan[Command, None]:
    """Give every actum its position and every live chronicum its last activity (see the module)."""
    chronica: list[str] = yield from MongoCore._run(
        Command(ACTA, "distinct", ("chronicum_id", {"position": {"$exists": False}})), _WHERE
    )
    for chronicum_id in chronica:
        yield from _positions(chronicum_id)
    idle: list[dict[str, Any]] = yield from MongoCore._run(
        Command(
            CHRONICA,
            "find",
            ({"owner_id": {"$exists": True}, "active_at": {"$exists": False}},),
            {"projection": {"started_at": 1, "started_at_us": 1}},
            cursor=True,
        ),
        _WHERE,
    )
    for document in idle:
        newest = yield from MongoCore._run(
            Command(
                ACTA,
                "find_one",
                ({"chronicum_id": document["_id"]},),
                {"projection": {"at": 1}, "sort": [("seq", -1)]},
            ),
            _WHERE,
        )
        active = (  # the later of its start and its newest actum (see last_activity)
            {"active_at": document["started_at"], "active_at_us": document.get("started_at_us", 0)}
            if newest is None or newest["at"] <= document["started_at"]
            else {"active_at": newest["at"], "active_at_us": 0}
        )
        yield from MongoCore._run(
            Command(
                CHRONICA,
                "update_one",
                ({"_id": document["_id"], "active_at": {"$exists": False}}, {"$set": active}),
            ),
            _WHERE,
        )
    if chronica or idle:
        _log.info(
            "gave the acta of %d chronica their positions, %d their last activity", len(chronica), len(idle)
        )


def _positions(chronicum_id: str) -> Plan[Command, None]:
    """Number the chronicum's acta ``1, 2, ...`` in their order.

    Sets ``position`` and ``end`` on each document of ``acta`` (a batch's first holds the batch's
    first and last), ``position`` on each of ``batch_acta``.
    """
    heads: list[dict[str, Any]] = yield from MongoCore._run(
        Command(
            ACTA,
            "find",
            ({"chronicum_id": chronicum_id},),
            {"projection": {"seq": 1, "size": 1, "batch": 1}, "sort": [("seq", 1)]},
            cursor=True,
        ),
        _WHERE,
    )
    end = 0
    for head in heads:
        position = end + 1
        end = position + int(head.get("size", 1)) - 1
        yield from MongoCore._run(
            Command(
                ACTA,
                "update_one",
                ({"_id": head["_id"]}, {"$set": {"position": Int64(position), "end": Int64(end)}}),
            ),
            _WHERE,
        )
        if "batch" not in head:
            continue
        members: list[dict[str, Any]] = yield from MongoCore._run(
            Command(BATCH_ACTA, "find", ({"batch": head["batch"]},), {"projection": {"pos": 1}}, cursor=True),
            _WHERE,
        )
        for member in members:
            yield from MongoCore._run(
                Command(
                    BATCH_ACTA,
                    "update_one",
                    ({"_id": member["_id"]}, {"$set": {"position": Int64(position + int(member["pos"]))}}),
                ),
                _WHERE,
            )
