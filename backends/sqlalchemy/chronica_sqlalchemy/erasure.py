"""Erasure and retention as plans: a chronicum erased with its forks, and the idle chronica found and erased.

An erasure is one transaction. It first marks the chronicum (the ``UPDATE`` locks its row, as an
append does, so a racing write lands wholly before or after) and reads what else it must do:
whether forks were made of it (``forked``; making a fork moves it, holding the source's row until
it commits, so none is missed), whether it is a fork, whether it has summaries. A plain
chronicum's erasure then only deletes its acta. Otherwise it locks its live forks (every
chronicum whose ``lineages`` name it), marks them too, deletes the acta, summaries and lineages
of them all and empties the rest of the chronicum's row. Retention's ``erase_idle`` does the
same only while the chronicum and every fork are still idle, decided on the locked rows.
``idle_chronica`` reads the index on ``last_active`` (the owner's index when one is given): a
marker has no ``last_active``, so none is ever read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, Dialect, Executable, Integer, bindparam, delete, select, update

from chronica_core.errors import ChronicumNotFound
from chronica_core.model import Chronicum
from chronica_core.plans import Plan
from chronica_core.rows import check_row, check_rows
from chronica_core.store import ListingPosition
from chronica_sqlalchemy.acta_rows import chronicum_columns, chronicum_of
from chronica_sqlalchemy.dialects import StoreDialect
from chronica_sqlalchemy.dialects.default import EPOCH
from chronica_sqlalchemy.schema import Identifier, Tables, UTCDateTime
from chronica_sqlalchemy.steps import COMMIT, ROLLBACK, Step, execute

__all__ = ["EMPTIED", "Erasure"]

MARKED: dict[str, Any] = {
    "owner_id": "",
    "started_at": EPOCH,
    "last_actum_at": None,
    "last_seq": 0,
    "last_active": None,
}
"""What the mark empties at once; the columns of :data:`SHAPE` tell what else is to be done."""

SHAPE: dict[str, Any] = {
    "base": 0,
    "forked_from_id": None,
    "forked_from_actum": None,
    "shaped": 0,
    "forked": 0,
}
"""The columns emptied after (already empty in a plain chronicum's row)."""

EMPTIED: dict[str, Any] = {**MARKED, **SHAPE}
"""What a marker keeps of a chronicum's own columns: nothing (its ``layout_version`` stays, so
that the chronicum reopened never has an earlier layout's version)."""


class Erasure:
    """The erasure and retention plans of one store (see the module).

    Args:
        tables: the store's tables.
        rules: the store's dialect room.
        dialect: the engine's SQLAlchemy dialect.
        read_autocommit: whether its one-statement reads ask for autocommit (see ``Plans``).
    """

    def __init__(self, tables: Tables, rules: StoreDialect, dialect: Dialect, read_autocommit: bool) -> None:
        self.tables, self.rules, self.dialect = tables, rules, dialect
        self.read_autocommit = read_autocommit
        chronica, acta, lineages = tables.chronica, tables.acta, tables.lineages
        live = chronica.c.owner_digest.is_(None)
        idle = chronica.c.last_active < bindparam("before", type_=UTCDateTime())
        digest = bindparam("digest", type_=Identifier())
        one = chronica.c.id == bindparam("chronicum_id")
        self._mark = {
            idle_only: rules.erasure_mark(
                update(chronica)
                .where(one, live, *([idle] if idle_only else []))
                .values(**MARKED, owner_digest=digest)
            )
            for idle_only in (False, True)
        }
        self._unshape = update(chronica).where(one).values(**SHAPE)
        ids: Any = bindparam("ids", expanding=True)
        self._mark_forks = rules.returning(
            update(chronica).where(chronica.c.id.in_(ids), live).values(**EMPTIED, owner_digest=digest),
            *rules.notify((chronica.c.id,)),
        )
        named = select(lineages.c.chronicum_id).where(lineages.c.source_id == bindparam("chronicum_id"))
        self._forks = (
            select(chronica.c.id, chronica.c.last_active)
            .where(chronica.c.id.in_(named), live)
            .order_by(chronica.c.id)
            .with_for_update()
        )
        self._deletes = (
            delete(acta).where(acta.c.chronicum_id.in_(ids)),
            delete(tables.summaries).where(tables.summaries.c.chronicum_id.in_(ids)),
            delete(lineages).where(lineages.c.chronicum_id.in_(ids)),
        )
        self._owned = select(chronica.c.id, chronica.c.owner_id).where(
            chronica.c.owner_id == bindparam("owner"), live
        )
        self._idle: dict[tuple[bool, bool], Executable] = {}
        for owned in (False, True):
            for paged in (False, True):
                found = select(*chronicum_columns(chronica)).where(idle, live)
                if owned:
                    found = found.where(chronica.c.owner_id == bindparam("owner"))
                if paged:
                    found = found.where(
                        rules.idle_after(
                            bindparam("after_at", type_=UTCDateTime()),
                            bindparam("after_id", type_=Identifier()),
                        )
                    )
                order = found.order_by(chronica.c.last_active, rules.listed_id())
                self._idle[owned, paged] = order.limit(bindparam("limit", type_=Integer()))

    def erase(self, chronicum_id: str, owner_digest: str) -> Plan[Step, int]:
        """Erase the chronicum and its forks into markers; return the acta deleted.

        Raises ``ChronicumNotFound`` when there is no live chronicum with that id.
        """
        erased = yield from self._erase(chronicum_id, owner_digest, None)
        if erased is None:
            raise ChronicumNotFound(chronicum_id)
        return erased[1]

    def erase_owner(self, owner_id: str, owner_digest: str) -> Plan[Step, int]:
        """Find the owner's live chronica, then erase each with its forks; return how many were erased.

        One erased meanwhile (by another call, or as a fork of one erased before) is not counted.
        """
        result: CursorResult[Any] = yield execute(self._owned, {"owner": owner_id}, write=True)
        rows: list[Any] = list(result.all())
        check_rows("sqlalchemy: erase owner", "owner id", owner_id, rows, column=1)
        erased = 0
        for row in rows:
            done = yield from self._erase(str(row[0]), owner_digest, None)
            erased += 0 if done is None else done[0]
        return erased

    def erase_idle(self, chronicum_id: str, idle_before: datetime, owner_digest: str) -> Plan[Step, int]:
        """Erase the chronicum and its forks if all are still idle; return how many (``0``: none)."""
        erased = yield from self._erase(chronicum_id, owner_digest, idle_before)
        return 0 if erased is None else erased[0]

    def idle_chronica(
        self, idle_before: datetime, owner_id: str | None, after: ListingPosition | None, limit: int
    ) -> Plan[Step, list[Chronicum]]:
        """Up to ``limit`` live chronica idle since before ``idle_before``, oldest first; one query."""
        parameters: dict[str, Any] = {"before": idle_before, "limit": limit}
        if owner_id is not None:
            parameters["owner"] = owner_id
        if after is not None:
            parameters["after_at"], parameters["after_id"] = after
        statement = self._idle[owner_id is not None, after is not None]
        result: CursorResult[Any] = yield execute(statement, parameters, autocommit=self.read_autocommit)
        rows: list[Any] = list(result.all())
        if owner_id is not None:
            check_rows("sqlalchemy: idle chronica", "owner id", owner_id, rows, column=1)
        return [chronicum_of(row) for row in rows]

    def _erase(
        self, chronicum_id: str, owner_digest: str, idle_before: datetime | None
    ) -> Plan[Step, tuple[int, int] | None]:
        """One erasure's transaction; ``(chronica, acta)`` erased, or ``None`` (nothing: rolled back).

        With ``idle_before``, only while the chronicum and its forks are idle since before then.
        """
        parameters: dict[str, Any] = {"chronicum_id": chronicum_id, "digest": owner_digest}
        if idle_before is not None:
            parameters["before"] = idle_before
        marked: CursorResult[Any] = yield execute(self._mark[idle_before is not None], parameters, write=True)
        row = self.rules.erased_shape(marked, chronicum_id)
        if row is None:
            yield ROLLBACK
            return None
        check_row("sqlalchemy: erase chronicum", "chronicum id", chronicum_id, row[0])
        forks: list[Any] = []
        if row[1]:
            found: CursorResult[Any] = yield execute(self._forks, {"chronicum_id": chronicum_id})
            forks = list(found.all())
        if idle_before is not None and any(fork[1] is None or fork[1] >= idle_before for fork in forks):
            yield ROLLBACK  # a fork was written to: the chronicum is kept whole
            return None
        ids = [chronicum_id, *(str(fork[0]) for fork in forks)]
        if forks:
            yield execute(self._mark_forks, {"ids": ids[1:], "digest": owner_digest})
        deleted: CursorResult[Any] = yield execute(self._deletes[0], {"ids": ids})
        if row[1] or row[2] is not None or row[3]:  # not a plain chronicum
            for statement in self._deletes[1:]:
                yield execute(statement, {"ids": ids})
            yield execute(self._unshape, {"chronicum_id": chronicum_id})
        yield COMMIT
        return len(ids), int(deleted.rowcount)
