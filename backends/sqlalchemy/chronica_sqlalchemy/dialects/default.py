"""What every database does alike, in SQL any database SQLAlchemy speaks takes: the default room.

:class:`StoreDialect` holds the statements and plan fragments in which databases differ: how an
append takes its place (the per-chronicum counter), the shape of a context window, the listing's
keyset predicate, the migration lock, the catalog query, the content limit and which refusals
mean "too large". The modules beside this one override what their database does its own way;
:mod:`chronica_sqlalchemy.plans` writes every operation once on top of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CursorResult,
    Dialect,
    Executable,
    Index,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    case,
    insert,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError

from chronica_core.errors import ChronicumNotFound, StoreError
from chronica_core.model import Actum
from chronica_core.plans import Plan
from chronica_core.rows import check_row, check_rows
from chronica_sqlalchemy.acta_rows import actum_columns, actum_values
from chronica_sqlalchemy.schema import ACTA_BY_ID_INDEX, IDLE_INDEX, LISTING_INDEX, OWNER_IDLE_INDEX, Tables
from chronica_sqlalchemy.steps import Step, execute

__all__ = ["EPOCH", "StoreDialect", "actum_row", "batch_row", "shaping"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def actum_row(actum: Actum, seq: Any, at: datetime, key: str | None = None) -> dict[str, Any]:
    """The ``acta`` row of ``actum`` at ``seq`` (a number, or an SQL expression) and ``at``."""
    return {
        "chronicum_id": actum.chronicum_id,
        "seq": seq,
        "id": actum.id,
        "kind": actum.kind.value,
        "actor_kind": actum.actor_kind.value,
        "actor": actum.actor,
        "content": actum.content,
        "at": at,
        "idempotency_key": key,
        **actum_values(actum),
    }


def shaping(acta: Sequence[Actum]) -> int:
    """``1`` when one of ``acta`` is a summary or names the request it answers, else ``0``.

    Such an actum sets its chronicum's ``shaped``: ``Store.acta`` no longer serves its windows.
    """
    return int(any(actum.answers or actum.summarizes is not None for actum in acta))


def batch_row(
    actum: Actum, index: int, count: int, seq: Any, at: datetime, key: str | None
) -> dict[str, Any]:
    """The row of the ``index``-th of ``count`` acta of a batch; the key and the size on the first."""
    row = actum_row(actum, seq, at, key if index == 0 else None)
    row["batch_size"] = count if index == 0 and key is not None and count > 1 else None
    return row


class StoreDialect:
    """One store's statements where databases differ, for its tables on ``dialect``.

    Args:
        tables: the store's tables.
        dialect: the engine's SQLAlchemy dialect.
        schema: the ``schema`` option (``None``: the connection's default).
    """

    name: ClassVar[str] = "default"
    ceiling: ClassVar[int | None] = None
    """The most content, in bytes, the database could ever take (``None``: not known)."""
    most_parameters: ClassVar[int] = 65535
    """The most parameters one statement of a batch takes."""
    autocommit_writes: ClassVar[bool] = False
    """Whether an append, a create and a reopen, one statement each, run in autocommit."""
    creates_schemas: ClassVar[bool] = False
    add_column_guard: ClassVar[str] = ""
    """What ``ALTER TABLE ... ADD COLUMN`` says before the column (MariaDB/MySQL: ``IF NOT EXISTS``)."""
    elsewhere: ClassVar[str] = "Give another schema (the schema option) or another database"
    """What to do instead of opening tables someone else made."""

    def __init__(self, tables: Tables, dialect: Dialect, schema: str | None) -> None:
        self.tables, self.dialect, self.schema = tables, dialect, schema
        acta, chronica = tables.acta, tables.chronica
        self.advance: Executable = self._advance(bindparam("count", type_=Integer()))
        self.advance_summary: Executable = self._advance(literal_column("1"), versioned=True)
        # by whether the database echoes inserted rows (MariaDB tells once connected)
        self.inserts: dict[bool, Executable] = {
            False: insert(acta),
            True: insert(acta).returning(acta.c.chronicum_id, acta.c.id),
        }
        self.inserts_many: dict[bool, Executable] = {
            False: insert(acta),
            True: insert(acta).returning(acta.c.chronicum_id, acta.c.id, sort_by_parameter_order=True),
        }
        self._counter = select(chronica.c.id, chronica.c.last_seq, chronica.c.last_actum_at).where(
            chronica.c.id == bindparam("chronicum_id")
        )

    @property
    def echoes(self) -> bool:
        """Whether an insert can return the rows it stored (``INSERT ... RETURNING``)."""
        return bool(self.dialect.insert_returning)

    @classmethod
    def schema_name_problem(cls, name: str) -> str | None:
        """Why the database would not keep ``name`` as a schema of its own (``None``: it would)."""
        return None

    @classmethod
    def connect_problem(cls, url: URL) -> str | None:
        """What a failure to connect to ``url`` should also say (``None``: the driver's words do)."""
        return None

    def notify(self, columns: Sequence[ColumnElement[Any]]) -> tuple[ColumnElement[Any], ...]:
        """The columns a write that locks a chronicum's row returns (PostgreSQL adds its notification)."""
        return tuple(columns)

    def returning(self, statement: Update, *columns: ColumnElement[Any]) -> Update:
        """``statement`` returning ``columns`` where the database can (else its rowcount tells)."""
        return statement.returning(*columns) if self.dialect.update_returning else statement

    def erasure_mark(self, mark: Update) -> Update:
        """``mark`` (an erasure's ``UPDATE`` of one chronicum's row) telling what else is to be erased.

        See :meth:`erased_shape`; here it returns the row's id, ``forked``, ``forked_from_id`` and
        ``shaped``, which the mark leaves as they were.
        """
        chronica = self.tables.chronica
        c = chronica.c
        return self.returning(mark, *self.notify((c.id, c.forked, c.forked_from_id, c.shaped)))

    def erased_shape(self, marked: CursorResult[Any], chronicum_id: str) -> tuple[Any, ...] | None:
        """``(id, forked, forked_from_id, shaped)`` of the row :meth:`erasure_mark` marked, or ``None``."""
        row = marked.first() if self.dialect.update_returning else None
        return None if row is None else tuple(row[:4])

    def _advance(self, by: Any, versioned: bool = False) -> Update:
        """Lock a live chronicum's row, move ``last_seq`` on by ``by`` and decide ``at`` there.

        ``at`` is the writer's clock (parameter ``at``), raised to ``last_actum_at`` when that is
        later, so it never decreases along the order; ``last_active`` takes it, or ``started_at``
        when that is later (a writer's clock behind the one that started the chronicum).
        Parameters: ``chronicum_id``, ``at``, ``shaping`` (see :func:`shaping`); ``versioned``
        (a summary's): also ``version``, the ``layout_version`` the row must still have, moved on.
        """
        chronica = self.tables.chronica
        at = bindparam("at", type_=chronica.c.last_actum_at.type)
        newest = case((chronica.c.last_actum_at > at, chronica.c.last_actum_at), else_=at)
        moved = (
            update(chronica)
            .where(*self._advanced(versioned))
            .values(
                last_seq=chronica.c.last_seq + by,
                last_actum_at=newest,
                last_active=case((chronica.c.started_at > newest, chronica.c.started_at), else_=newest),
                shaped=self._shaped(),
                **self._moved_version(versioned),
            )
        )
        return self.returning(
            moved, *self.notify((chronica.c.id, chronica.c.last_seq, chronica.c.last_actum_at))
        )

    def _advanced(self, versioned: bool) -> list[ColumnElement[bool]]:
        """Which row an append moves: the live chronicum (with ``versioned``, at ``version``)."""
        chronica = self.tables.chronica
        where = [chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None)]
        if versioned:
            where.append(chronica.c.layout_version == bindparam("version", type_=BigInteger()))
        return where

    def _shaped(self) -> Any:
        """``shaped`` once an append brings a summary or an answer (parameter ``shaping``)."""
        chronica = self.tables.chronica
        return case((bindparam("shaping", type_=Integer()) == 1, 1), else_=chronica.c.shaped)

    def _moved_version(self, versioned: bool) -> dict[str, Any]:
        chronica = self.tables.chronica
        return {"layout_version": chronica.c.layout_version + 1} if versioned else {}

    def moved(
        self, advance: Executable, parameters: dict[str, Any], where: str
    ) -> Plan[Step, tuple[int, Any]]:
        """Run ``advance`` (it locks the row until commit); return the new ``last_seq`` and ``at``."""
        chronicum_id = parameters["chronicum_id"]
        result: CursorResult[Any] = yield execute(advance, parameters, write=True)
        if not self.dialect.update_returning:
            if result.rowcount == 0:
                raise ChronicumNotFound(chronicum_id)
            result = yield execute(self._counter, {"chronicum_id": chronicum_id})
        row: Any = result.first()
        if row is None:
            raise ChronicumNotFound(chronicum_id)
        check_row(where, "chronicum id", chronicum_id, row[0])
        return int(row[1]), row[2]

    def append(
        self, acta: list[Actum], key: str | None, now: datetime, ends: list[int], version: int | None = None
    ) -> Plan[Step, datetime]:
        """Give ``acta`` the chronicum's next places and insert them, in statements ending at ``ends``.

        ``version``: a summary's append (one actum), made only while the chronicum's layout
        version is that; else ``ChronicumNotFound`` (the caller tells a stale layout apart).
        Returns their ``at``. Raises ``ChronicumNotFound``, or ``StoreError`` when a row answers
        for another chronicum or actum than asked.
        """
        count = len(acta)
        where = "sqlalchemy: record actum" if count == 1 else "sqlalchemy: record acta"
        parameters = {
            "chronicum_id": acta[0].chronicum_id,
            "count": count,
            "at": now,
            "shaping": shaping(acta),
        }
        advance = self.advance
        if version is not None:
            parameters["version"], advance = version, self.advance_summary
        last_seq, at = yield from self.moved(advance, parameters, where)
        first, start, echoes = last_seq - count + 1, 0, bool(self.dialect.insert_executemany_returning)
        for end in ends:
            rows = [batch_row(acta[i], i, count, first + i, at, key) for i in range(start, end)]
            statement = self.inserts_many[echoes] if len(rows) > 1 else self.inserts[self.echoes]
            inserted: CursorResult[Any] = yield execute(statement, rows if len(rows) > 1 else rows[0])
            self.check_inserted(inserted, acta[start:end], echoes if len(rows) > 1 else self.echoes)
            start = end
        return at  # type: ignore[no-any-return]

    @staticmethod
    def check_inserted(inserted: CursorResult[Any], acta: Sequence[Actum], echoes: bool) -> None:
        """Check an insert stored ``acta``: the rows it echoed (``echoes``), or else its rowcount."""
        if echoes:
            StoreDialect.check_echoed(acta, [tuple(row) for row in inserted.all()])
        elif inserted.rowcount != len(acta):
            where = "sqlalchemy: record actum" if len(acta) == 1 else "sqlalchemy: record acta"
            raise StoreError(where, f"the acta were not inserted into chronicum {acta[0].chronicum_id!r}")

    @staticmethod
    def check_echoed(acta: Sequence[Actum], rows: list[tuple[Any, ...]]) -> None:
        """Check the ``(chronicum id, actum id, ...)`` rows an insert echoed are those of ``acta``."""
        where = "sqlalchemy: record actum" if len(acta) == 1 else "sqlalchemy: record acta"
        check_rows(where, "chronicum id", acta[0].chronicum_id, rows)
        if sorted(str(row[1]) for row in rows) != sorted(actum.id for actum in acta):
            check_row(where, "actum id", acta[0].id, None)

    def window(self, filters: list[ColumnElement[bool]], limited: bool) -> Executable:
        """A context window's one query: the chronicum's row outer-joined to its newest matching acta.

        Rows ``(chronicum id, seq, *ACTUM_COLUMNS, shaped)`` (see :mod:`chronica_sqlalchemy.acta_rows`),
        ``seq`` ``NULL`` in the chronicum's own row when no actum matches; no row at all when the
        chronicum is missing. ``shaped`` is the chronicum's (``NULL`` or ``0`` where it is not).
        """
        chronica, acta = self.tables.chronica, self.tables.acta
        recent = select(acta.c.chronicum_id, acta.c.seq, *self.actum_columns()).where(
            acta.c.chronicum_id == bindparam("chronicum_id"), *filters
        )
        if limited:
            recent = recent.order_by(acta.c.seq.desc()).limit(bindparam("last_n", type_=Integer()))
        window = recent.subquery("recent")
        return (
            select(chronica.c.id, *list(window.c)[1:], chronica.c.shaped)
            .select_from(chronica.outerjoin(window, true()))
            .where(chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None))
            .order_by(window.c.seq)
        )

    def in_order(self, rows: list[Any], limited: bool) -> list[Any]:
        """The rows of :meth:`window` oldest first."""
        return rows

    def answered(
        self, picked: Any, lead: Sequence[Any], columns: Sequence[Any], segment: Sequence[ColumnElement[bool]]
    ) -> Select[Any]:
        """The acta of one segment that the picked responses answer: rows ``(*lead, *columns)``.

        ``picked``: the window's rows (a CTE with an ``answers`` column); ``columns``: of ``acta``;
        ``segment``: the conditions on ``acta`` that keep the segment's. Here ``acta.id IN (SELECT
        answers FROM picked)``, which SQLite runs as one probe of ``acta_by_id`` an answer.
        """
        acta = self.tables.acta
        answers = select(picked.c.answers).where(picked.c.answers.is_not(None))
        return select(*lead, *columns).where(*segment, acta.c.id.in_(answers))

    def actum_columns(self) -> tuple[Any, ...]:
        """An actum's columns as a window reads them (:data:`chronica_sqlalchemy.acta_rows.ACTUM_COLUMNS`)."""
        return actum_columns(self.tables.acta)

    def listed_id(self) -> Any:
        """The chronicum id as a listing orders it: by code point."""
        return self.tables.chronica.c.id

    def after(self, started_at: Any, chronicum_id: Any) -> ColumnElement[bool]:
        """A listing's keyset predicate: before ``(started_at, chronicum_id)`` in its order."""
        chronica, listed = self.tables.chronica, self.listed_id()
        return and_(  # the first bound lets the index range start at the position
            chronica.c.started_at <= started_at,
            or_(
                chronica.c.started_at < started_at,
                and_(chronica.c.started_at == started_at, listed < chronicum_id),
            ),
        )

    def listing_index(self) -> Index:
        """The index :data:`LISTING_INDEX` on ``chronica (owner_id, started_at, id)`` (attached once)."""
        chronica = self.tables.chronica
        return Index(LISTING_INDEX, chronica.c.owner_id, chronica.c.started_at, self.listed_id())

    def history_indexes(self) -> tuple[Index, ...]:
        """Version 3's indexes (attached once): an actum by id, and the idle chronica (all, an owner's)."""
        chronica, acta = self.tables.chronica, self.tables.acta
        return (
            Index(ACTA_BY_ID_INDEX, acta.c.chronicum_id, acta.c.id),
            Index(IDLE_INDEX, chronica.c.last_active, self.listed_id()),
            Index(OWNER_IDLE_INDEX, chronica.c.owner_id, chronica.c.last_active, self.listed_id()),
        )

    def idle_after(self, last_active: Any, chronicum_id: Any) -> ColumnElement[bool]:
        """Retention's keyset predicate: after ``(last_active, chronicum_id)`` in its order."""
        chronica, listed = self.tables.chronica, self.listed_id()
        return and_(  # the first bound lets the index range start at the position
            chronica.c.last_active >= last_active,
            or_(
                chronica.c.last_active > last_active,
                and_(chronica.c.last_active == last_active, listed > chronicum_id),
            ),
        )

    def catalog(self, names: tuple[str, ...]) -> Executable | None:
        """A query of which of ``names`` exist in the schema, a row (``name``) each (``None``: unknown)."""
        return None

    def keyed_acta_only(self) -> Plan[Step, None]:
        """Version 4's step: here nothing (the unique constraint on the idempotency key stays).

        See :meth:`chronica_sqlalchemy.dialects.postgresql.PostgreSQLStoreDialect.keyed_acta_only`.
        """
        return
        yield

    def lock(self) -> Plan[Step, bool]:
        """Take the migration lock; return whether :meth:`unlock` must release it."""
        return False
        yield  # a plan, though it takes nothing here

    def unlock(self) -> Plan[Step, None]:
        """Release the migration lock :meth:`lock` took."""
        return
        yield

    def content_limit(self, write: bool) -> Plan[Step, int | None]:
        """Read the most content the database takes in one actum, in bytes (``None``: not known).

        ``write``: the plan goes on to write (its first step's flag, see :class:`Step`).
        """
        return None
        yield

    def too_large(self, error: DBAPIError) -> bool:
        """Whether the database refused a write because a value was too large for it."""
        return False

    def batch_budget(self, content_limit: int | None) -> int | None:
        """The most content, in bytes, one statement of a batch may carry (``None``: no bound)."""
        return None
