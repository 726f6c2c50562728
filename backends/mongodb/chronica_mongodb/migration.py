"""Bringing a database up to the native, history and retention capabilities, keeping its data.

A database made before them has acta without positions and chronica without a last activity.
:func:`migrate` gives them both, then makes the indexes of :data:`chronica_mongodb.core.SHAPE_INDEXES`;
the absence of ``chronicum_position`` on ``acta`` is what tells such a database. Nothing else
changes: acta written before keep their fields and read back as before (no native form, no
answers), at positions ``1, 2, ...`` in their order (a batch takes one position per actum).

The backfill runs while the index is missing, so a store that opens the database meanwhile
(another process migrating too) may run it again: each step writes values computed from the
acta, the same each time. A store of the previous version writing at the same time is not
supported: stop those first.
"""

from __future__ import annotations

import logging
from typing import Any

from bson.int64 import Int64

from chronica_core.plans import Plan
from chronica_mongodb.core import (
    ACTA,
    BATCH_ACTA,
    CHRONICA,
    Command,
    MongoCore,
)

__all__ = ["migrate"]

_log = logging.getLogger("chronica.mongodb")
_WHERE = "migrate"


def migrate(core: MongoCore) -> Plan[Command, None]:
    """Create the indexes if missing, after giving the documents made before them their new fields.

    :meth:`chronica_mongodb.core.MongoCore.migrate` with :func:`_backfill`, run on a database
    whose ``acta`` lacks ``chronicum_position``. Raises ``StoreError("mongodb: migrate: ...")``.
    """
    yield from core.migrate(_backfill)


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
