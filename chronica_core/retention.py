"""Retention: erasing every chronicum idle since a moment, in bounded steps (the ``retention`` capability).

A data-protection rule such as "delete every conversation idle for 90 days" as one call:
``Chronicarius.erase_idle(before=...)``. The plan walks the idle chronica page by page, oldest
first, through the store's index (:meth:`chronica_core.RetentionStore.idle_chronica`), and
erases each one in a short step of its own (:meth:`chronica_core.RetentionStore.erase_idle`),
so that writers never wait long; a chronicum written to while it is being erased is kept whole,
and an erased id is never reused by another owner (the same rules as ``erase_chronicum``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from chronica_core.erasure import owner_digest
from chronica_core.errors import InvalidQuery
from chronica_core.model import Chronicum
from chronica_core.plans import Plan

__all__ = ["IDLE_PAGE", "erase_idle", "idle_before", "last_activity"]

IDLE_PAGE: Final = 100
"""How many idle chronica one read of the index returns."""

StoreCall = tuple[str, tuple[Any, ...]]


def last_activity(chronicum: Chronicum) -> datetime:
    """When ``chronicum`` was last active: the later of its start and its newest actum's ``at``.

    A fork starts when it is forked, so a fresh fork of an old chronicum is active from then
    on, though its newest actum (a shared one) is older.
    """
    if chronicum.last_actum_at is None:
        return chronicum.started_at
    return max(chronicum.started_at, chronicum.last_actum_at)


def idle_before(before: object) -> datetime:
    """Check the moment retention erases before: a timezone-aware ``datetime``.

    Returns:
        The same moment in UTC.

    Raises:
        InvalidQuery: (``field="before"``) anything else: a naive datetime, a str, ``None``, or
            a moment with no UTC ``datetime`` (before year 1 or after year 9999 once in UTC).
    """
    if not isinstance(before, datetime) or before.tzinfo is None or before.utcoffset() is None:
        raise InvalidQuery("before", f"a timezone-aware datetime, not {before!r}")
    try:
        return before.astimezone(UTC)
    except OverflowError:
        raise InvalidQuery(
            "before", f"{before.isoformat()} is out of range in UTC (years 1 to 9999)"
        ) from None


def erase_idle(
    before: datetime, owner_id: str | None, dry_run: bool, forget: Callable[[str], None]
) -> Plan[StoreCall, int]:
    """Plan the erasure of every chronicum whose last activity is before ``before``.

    Every owner's, or ``owner_id``'s only. With ``dry_run``, nothing is erased: the plan counts
    the idle chronica, a source with a fork that is not idle included (the erasure keeps it).
    ``forget(chronicum_id)`` is called for each erased one (the rules' caches).

    Returns:
        How many chronica were erased (forks erased with their source included), or with
        ``dry_run`` how many are idle now.
    """
    erased = 0
    after: tuple[datetime, str] | None = None
    while True:
        page: list[Chronicum] = yield ("idle_chronica", (before, owner_id, after, IDLE_PAGE))
        for chronicum in page:
            if dry_run:
                erased += 1
                continue
            count: int = yield ("erase_idle", (chronicum.id, before, owner_digest(chronicum.owner_id)))
            if count:
                forget(chronicum.id)
            erased += count
        if len(page) < IDLE_PAGE:
            return erased
        after = (last_activity(page[-1]), page[-1].id)
