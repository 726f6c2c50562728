"""The retention capability in PostgreSQL: idle chronica found through an index, erased with their forks.

A chronicum's last activity is ``greatest(started_at, last_actum_at)``
(:data:`chronica_postgres.schema.LAST_ACTIVITY`): a fork's starts when it is forked. Two partial
indexes over the live chronica hold it: ``(last activity, id)`` and ``(owner_id, last activity,
id)``, so that a page of idle chronica is one index range scan, every owner's or one owner's,
whatever else the table holds.

``erase_idle`` is :meth:`chronica_postgres.plans.Plans.erase` with a moment: one transaction that
locks the rows of the chronicum and of its forks (writers take the same row locks), then, in a
second statement that sees every write committed before those locks were granted, erases them
all only if none was active since the moment.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from chronica_core import Chronicum, ListingPosition
from chronica_core.plans import Plan
from chronica_core.rows import check_row
from chronica_postgres.plans import Operation, Plans, Statement, chronicum_of
from chronica_postgres.schema import CHRONICA_COLUMNS, LAST_ACTIVITY, Statements

__all__ = ["AsyncPostgresRetention", "PostgresRetention", "RetentionPlans", "RetentionStatements"]

Result = TypeVar("Result")

_LIVE = "erased_owner_digest IS NULL"


def _idle(*, owner: bool, after: bool) -> str:
    """The query of idle chronica, oldest last activity first, ties by id.

    Parameters: the owner id (with ``owner``), the moment, the position's last activity and id
    (with ``after``), the limit. The row comparison matches the index's order, so the scan starts
    just after the position.
    """
    owned = " AND owner_id = %s" if owner else ""
    position = f" AND ({LAST_ACTIVITY}, id) > (%s::timestamptz, %s::text)" if after else ""
    return f"""
        SELECT {CHRONICA_COLUMNS} FROM {{schema}}.chronica
        WHERE {_LIVE}{owned} AND {LAST_ACTIVITY} < %s::timestamptz{position}
        ORDER BY {LAST_ACTIVITY}, id
        LIMIT %s
        """


class RetentionStatements:
    """The queries of idle chronica for one schema, composed once.

    Args:
        statements: the store's statements (for the schema's quoted name).
    """

    def __init__(self, statements: Statements) -> None:
        self._idle = {
            (owner, after): statements.compose(_idle(owner=owner, after=after))
            for owner in (False, True)
            for after in (False, True)
        }

    def idle(self, *, owner: bool, after: bool) -> bytes:
        """The query of idle chronica, of one owner (``owner``) or all, after a position (``after``)."""
        return self._idle[owner, after]


class RetentionPlans:
    """The plans of ``idle_chronica`` and ``erase_idle`` (see :class:`chronica_core.RetentionStore`).

    Args:
        plans: the store's plans (their statements, error handling and erasure).
    """

    def __init__(self, plans: Plans) -> None:
        self._plans = plans
        self._statements = RetentionStatements(plans.statements)

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> Plan[Operation, list[Chronicum]]:
        """Up to ``limit`` live chronica last active before ``idle_before``, oldest first; one query.

        After ``after`` = ``(last activity, id)``, of ``owner_id`` only unless ``None``. Served by
        the idle indexes. Raises ``StoreError``.
        """
        if owner_id is not None and "\x00" in owner_id:  # text cannot hold NUL: no such owner
            return []
        parameters: list[object] = [] if owner_id is None else [owner_id]
        parameters.append(idle_before)
        if after is not None:
            activity, after_id = after
            # no stored id holds NUL: those after an id holding one are those after its part before NUL
            parameters.extend((activity, after_id.split("\x00", 1)[0]))
        parameters.append(limit)
        sql = self._statements.idle(owner=owner_id is not None, after=after is not None)
        rows = yield from self._plans.read(Statement(sql, tuple(parameters)), "find idle chronica", "")
        chronica = [chronicum_of(row) for row in rows]
        if owner_id is not None:
            for chronicum in chronica:
                check_row("postgres: find idle chronica", "owner id", owner_id, chronicum.owner_id)
        return chronica

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> Plan[Operation, int]:
        """Erase the chronicum and its forks if none was active since ``idle_before``; one transaction.

        Returns how many chronica were erased: ``0`` when one was written to meanwhile (all kept
        whole), or when the chronicum is missing or erased. Raises ``StoreError``.
        """
        if "\x00" in chronicum_id:
            return 0
        erasure = self._plans.erasure(chronicum_id, owner_digest, idle_before)
        rows = yield from self._plans.write(erasure, "erase idle chronicum", chronicum_id)
        if not rows:
            return 0
        check_row("postgres: erase idle chronicum", "chronicum id", chronicum_id, rows[0][0])
        return int(rows[0][2])


class PostgresRetention:
    """The ``retention`` capability of :class:`chronica_postgres.PostgresStore` (a mixin)."""

    plans: Plans

    if TYPE_CHECKING:  # PlannedStore's, which the store inherits after this mixin

        def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    @functools.cached_property
    def _retention(self) -> RetentionPlans:
        return RetentionPlans(self.plans)

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica`: one query on an idle index."""
        return self._run_if_open(self._retention.idle_chronica(idle_before, owner_id, after, limit))

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`chronica_core.RetentionStore.erase_idle`: one transaction of two statements."""
        return self._run_if_open(self._retention.erase_idle(chronicum_id, idle_before, owner_digest))


class AsyncPostgresRetention:
    """The ``retention`` capability of :class:`chronica_postgres.AsyncPostgresStore` (a mixin)."""

    plans: Plans

    if TYPE_CHECKING:  # AsyncPlannedStore's, which the store inherits after this mixin

        async def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    @functools.cached_property
    def _retention(self) -> RetentionPlans:
        return RetentionPlans(self.plans)

    async def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> list[Chronicum]:
        """See :meth:`chronica_core.RetentionStore.idle_chronica`."""
        return await self._run_if_open(self._retention.idle_chronica(idle_before, owner_id, after, limit))

    async def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> int:
        """See :meth:`chronica_core.RetentionStore.erase_idle`."""
        return await self._run_if_open(self._retention.erase_idle(chronicum_id, idle_before, owner_digest))
