"""The retention capability on Redis: the idle indexes read, and idle chronica erased with their forks.

Two sorted sets in the slot ``{idle}`` hold every chronicum's last activity (microseconds), and
each owner's (see :func:`chronica_redis.keys.idle_index_key`). A create, a reopen and a fork add
a chronicum's entries; an append moves them forward (``ZADD GT``) once they lag its ``at`` by
:data:`chronica_redis.plans.IDLE_STEP` or more; an erasure drops them. So an entry never stands
after the chronicum's last activity, and at most a step before it: a reader checks each entry
against its chronicum, skips the ones that lag and moves them where they belong.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from chronica_core.erasure import owner_digest
from chronica_core.model import Chronicum
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_core.store import ListingPosition
from chronica_redis import scripts
from chronica_redis.keys import idle_index_key, micros, owner_idle_key
from chronica_redis.operations import Call, Operation
from chronica_redis.plans import RedisPlans

__all__ = ["RetentionPlans"]


class RetentionPlans(RedisPlans):
    """:class:`chronica_redis.plans.RedisPlans` with the retention capability's plans."""

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> Plan[Operation, list[Chronicum]]:
        """Up to ``limit`` live chronica idle since before ``idle_before``, oldest first.

        Reads the idle index (the owner's, or every chronicum's) from ``after`` on, and checks each
        entry against the chronicum it names (see the module's text): an entry whose chronicum is
        missing, erased, or another owner's is skipped; one behind its chronicum's last activity
        is skipped and moved there (where it is read again, if still idle).
        """
        where = "idle chronica"
        if owner_id is None:
            index = idle_index_key(self.prefix)
        else:
            index = owner_idle_key(self.prefix, owner_digest(owner_id))
        cut = micros(idle_before)
        cursor = (-(2**63), "") if after is None else (micros(after[0]), after[1])
        page: list[Chronicum] = []
        wanted = limit
        while len(page) < limit:
            rows: list[tuple[str, float]] = yield from self.run(
                Call(("ZRANGE", index, cursor[0], f"({cut}", "BYSCORE", "LIMIT", 0, wanted, "WITHSCORES")),
                where,
            )
            entries = [(int(score), member) for member, score in _pairs(rows)]
            fresh = [entry for entry in entries if entry > cursor]
            if not fresh:
                if len(entries) < wanted:
                    break
                wanted *= 2  # all of them ties at the cursor's moment, already passed
                continue
            found = yield from self.chronica_of([member for _, member in fresh], where)
            read: list[Chronicum] = []
            moved_still_idle = False
            for (score, chronicum_id), chronicum in zip(fresh, found, strict=True):
                if chronicum is None or (owner_id is not None and chronicum.owner_id != owner_id):
                    continue
                activity = micros(last_activity(chronicum))
                if activity != score:
                    digest = owner_digest(chronicum.owner_id)
                    yield from self.idle(scripts.IDLE_SET, digest, chronicum_id, activity, where)
                    moved_still_idle = moved_still_idle or activity < cut
                else:
                    read.append(chronicum)
            if moved_still_idle:
                continue  # a moved entry may now stand among these: read them again, in order
            page.extend(read[: limit - len(page)])
            cursor = fresh[-1]
            if len(entries) < wanted:
                break
            wanted = limit - len(page)
        return page

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> Plan[Operation, int]:
        """Erase the chronicum and its forks in one script, if each one is still idle since ``idle_before``.

        Returns how many chronica were erased; 0 when one was written to since, or the chronicum
        is missing or erased.
        """
        where = "erase idle chronicum"
        erased = yield from self._erase(chronicum_id, owner_digest, "", where, str(micros(idle_before)))
        return 0 if erased is None else erased[1]


def _pairs(rows: Sequence[Any]) -> list[tuple[str, float]]:
    """``ZRANGE ... WITHSCORES``'s answer as ``(member, score)`` pairs (RESP2 or RESP3 shapes)."""
    if rows and not isinstance(rows[0], (list, tuple)):
        return list(zip(rows[::2], map(float, rows[1::2]), strict=True))
    return [(member, float(score)) for member, score in rows]
