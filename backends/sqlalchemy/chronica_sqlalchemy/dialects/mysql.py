"""MariaDB and MySQL: the counter read back through ``LAST_INSERT_ID``, a ``UNION ALL`` window.

Neither has ``UPDATE ... RETURNING``. The counter's ``UPDATE`` hands the new ``at`` (microseconds
since 1970) to the client as the ``lastrowid`` through ``LAST_INSERT_ID(expr)``, and the insert
takes its ``seq`` and ``at`` from the chronicum's row, which the transaction holds: one round trip
each. DDL commits by itself, so migrations are serialised by ``GET_LOCK``, held by the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Executable,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    case,
    column,
    func,
    insert,
    literal_column,
    null,
    select,
    table,
    text,
    union_all,
    update,
)
from sqlalchemy.exc import DBAPIError

from chronica_core.errors import ChronicumNotFound, StoreError
from chronica_core.model import Actum
from chronica_core.plans import Plan
from chronica_sqlalchemy.dialects.default import EPOCH, MICROSECOND, StoreDialect, batch_row, shaping
from chronica_sqlalchemy.schema import ACTA_BY_ID_INDEX
from chronica_sqlalchemy.steps import Step, execute

__all__ = ["STATEMENT_RESERVE", "MySQLStoreDialect"]

STATEMENT_RESERVE = 16 * 1024
"""Bytes of ``max_allowed_packet`` kept for an insert's own text and its other values, escaped; the
content gets half of the rest, as escaping can double it."""

_MAX_PACKET = 1024 * 1024 * 1024  # the largest max_allowed_packet MariaDB/MySQL allow
_NAME_CHARACTERS = 64
_LOCK_TIMEOUT_SECONDS = 60
# ER_NET_PACKET_TOO_LARGE, ER_WARN_ALLOWED_PACKET_OVERFLOWED, and the server gone or the
# connection lost while the statement was being sent (how a too-large packet usually ends)
_REFUSALS = frozenset({1153, 1301, 2006, 2013})


class MySQLStoreDialect(StoreDialect):
    """MariaDB's and MySQL's own ways (see the module)."""

    name: ClassVar[str] = "mysql"
    ceiling: ClassVar[int | None] = (_MAX_PACKET - STATEMENT_RESERVE) // 2
    creates_schemas: ClassVar[bool] = True
    add_column_guard: ClassVar[str] = " IF NOT EXISTS"  # a step cut short is finished by the next

    @classmethod
    def schema_name_problem(cls, name: str) -> str | None:
        """Names the server refuses, reads otherwise, or could not keep apart from another."""
        if len(name) > _NAME_CHARACTERS:
            return f"is {len(name)} characters, longer than MariaDB/MySQL's {_NAME_CHARACTERS}"
        if name.endswith(" "):
            return "cannot end with a space on MariaDB/MySQL"
        if any(ord(character) > 0xFFFF for character in name):
            return "cannot hold characters beyond U+FFFF on MariaDB/MySQL"
        if name.startswith("#mysql50#"):
            return "cannot start with #mysql50# on MariaDB/MySQL (it marks an old-style file name)"
        if name != name.lower():
            return (
                "cannot hold capital letters on MariaDB/MySQL (InnoDB compares foreign-key names "
                "without regard to case, so two schemas whose names differ only in case would "
                "clash); use lowercase"
            )
        return None

    def _advance(self, by: Any, versioned: bool = False) -> Update:
        """Move the counter; ``at`` (parameter ``at_us``, in microseconds) goes back as ``lastrowid``.

        The assignments run left to right: ``last_active`` takes the new ``last_actum_at``, or
        ``started_at`` when that is later.
        """
        chronica = self.tables.chronica
        epoch: Any = literal_column("'1970-01-01 00:00:00'")
        stored = func.timestampdiff(text("MICROSECOND"), epoch, chronica.c.last_actum_at)
        newest = func.greatest(bindparam("at_us", type_=Integer()), func.coalesce(stored, 0))
        values: list[tuple[Any, Any]] = [
            (chronica.c.last_seq, chronica.c.last_seq + by),
            (
                chronica.c.last_actum_at,
                func.timestampadd(text("MICROSECOND"), func.last_insert_id(newest), epoch),
            ),
            (chronica.c.last_active, func.greatest(chronica.c.last_actum_at, chronica.c.started_at)),
            (chronica.c.shaped, self._shaped()),
            *((chronica.c[name], value) for name, value in self._moved_version(versioned).items()),
        ]
        return update(chronica).where(*self._advanced(versioned)).ordered_values(*values)

    def erasure_mark(self, mark: Update) -> Update:
        """The mark hands ``forked * 4 + 2 * (a fork) + shaped`` to the client as the ``lastrowid``."""
        c = self.tables.chronica.c
        flags = (
            c.forked * 4
            + case((c.forked_from_id.is_not(None), 2), else_=0)
            + case((c.shaped > 0, 1), else_=0)
        )
        return mark.values(forked=func.last_insert_id(flags).op("DIV")(4))  # forked, as it was

    def erased_shape(self, marked: CursorResult[Any], chronicum_id: str) -> tuple[Any, ...] | None:
        """What :meth:`erasure_mark` handed back, as the default room's row tells it."""
        if marked.rowcount != 1:
            return None
        flags = int(marked.lastrowid)
        return chronicum_id, flags >> 2, chronicum_id if flags & 2 else None, flags & 1

    def _moved_at(
        self, advance: Executable, parameters: dict[str, Any], now: datetime
    ) -> Plan[Step, datetime]:
        parameters["at_us"] = (now - EPOCH) // MICROSECOND
        moved: CursorResult[Any] = yield execute(advance, parameters, write=True)
        if moved.rowcount == 0:
            raise ChronicumNotFound(parameters["chronicum_id"])
        return EPOCH + int(moved.lastrowid) * MICROSECOND

    def append(
        self, acta: list[Actum], key: str | None, now: datetime, ends: list[int], version: int | None = None
    ) -> Plan[Step, datetime]:
        """Each row's ``seq`` read from the chronicum's row this transaction moved and holds."""
        acta_table, chronica, count = self.tables.acta, self.tables.chronica, len(acta)
        parameters: dict[str, Any] = {
            "chronicum_id": acta[0].chronicum_id,
            "count": count,
            "shaping": shaping(acta),
        }
        advance = self.advance
        if version is not None:
            parameters["version"], advance = version, self.advance_summary
        at = yield from self._moved_at(advance, parameters, now)
        last_seq = select(chronica.c.last_seq).where(chronica.c.id == acta[0].chronicum_id).scalar_subquery()
        start, echoes = 0, self.echoes
        for end in ends:
            rows = [
                batch_row(acta[i], i, count, last_seq - (count - 1 - i), at, key) for i in range(start, end)
            ]
            statement: Any = insert(acta_table).values(rows)
            if echoes:
                statement = statement.returning(acta_table.c.chronicum_id, acta_table.c.id)
            inserted: CursorResult[Any] = yield execute(statement)
            self.check_inserted(inserted, acta[start:end], echoes)
            start = end
        return at

    def window(self, filters: list[ColumnElement[bool]], limited: bool) -> Executable:
        """The acta and the chronicum's row as a ``UNION ALL``; :meth:`in_order` sorts them.

        A derived table of them would be materialised, ``LONGTEXT`` and all, on disk.
        """
        chronica, acta = self.tables.chronica, self.tables.acta
        recent = select(acta.c.chronicum_id, acta.c.seq, *self.actum_columns(), null()).where(
            acta.c.chronicum_id == bindparam("chronicum_id"), *filters
        )
        if limited:
            recent = recent.order_by(acta.c.seq.desc()).limit(bindparam("last_n", type_=Integer()))
        empty = (null() for _ in range(len(self.actum_columns()) + 1))  # seq and the actum
        itself = select(chronica.c.id, *empty, chronica.c.shaped).where(
            chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None)
        )
        return union_all(recent, itself)

    def answered(
        self, picked: Any, lead: Sequence[Any], columns: Sequence[Any], segment: Sequence[ColumnElement[bool]]
    ) -> Select[Any]:
        """The requests the picked responses answer: ``picked`` joined to ``acta`` by ``acta_by_id``.

        MariaDB has no ``LATERAL``. Until InnoDB's statistics count a new or fast-growing table's
        rows, it runs an ``IN`` or a plain join from the ``acta`` side through the primary key,
        reading the whole segment; ``STRAIGHT_JOIN`` keeps ``picked`` outside and ``FORCE INDEX``
        makes each picked row one probe of ``acta_by_id`` (a request two responses answer comes
        twice).
        """
        acta = self.tables.acta
        joined = picked.join(acta, and_(acta.c.id == picked.c.answers, *segment))
        return (
            select(*lead, *columns)
            .select_from(joined)
            .prefix_with("STRAIGHT_JOIN")
            .with_hint(acta, f"FORCE INDEX ({ACTA_BY_ID_INDEX})")
        )

    def in_order(self, rows: list[Any], limited: bool) -> list[Any]:
        """The acta's rows by ``seq``."""
        return sorted((row for row in rows if row[1] is not None), key=lambda row: row[1])

    def catalog(self, names: tuple[str, ...]) -> Executable | None:
        """``information_schema.tables`` of the schema (the URL's database by default)."""
        tables = table("tables", column("table_schema"), column("table_name"), schema="information_schema")
        database = self.schema if self.schema is not None else func.database()
        return select(tables.c.table_name.label("name")).where(
            tables.c.table_schema == database, tables.c.table_name.in_(names)
        )

    def _lock_name(self) -> Any:
        """A server-wide lock name (at most 64 characters), one per database."""
        database = self.schema if self.schema is not None else func.database()
        return func.concat("chronica:", func.sha1(func.concat("chronica-sqlalchemy:", database)))

    def lock(self) -> Plan[Step, bool]:
        """``GET_LOCK``, held by the session until :meth:`unlock`."""
        result: CursorResult[Any] = yield execute(
            select(func.get_lock(self._lock_name(), _LOCK_TIMEOUT_SECONDS)), write=True
        )
        taken = result.scalar()
        if taken is None and self.schema is None:  # GET_LOCK(NULL, ...): DATABASE() is NULL
            raise StoreError(
                "sqlalchemy: migrate",
                "no database selected: name one in the URL (mariadb+pymysql://host/DATABASE) "
                "or give the schema option",
            )
        if taken != 1:
            raise StoreError(
                "sqlalchemy: migrate",
                f"could not take the migration lock within {_LOCK_TIMEOUT_SECONDS} seconds",
            )
        return True

    def unlock(self) -> Plan[Step, None]:
        """``RELEASE_LOCK``."""
        yield execute(select(func.release_lock(self._lock_name())))

    def content_limit(self, write: bool) -> Plan[Step, int | None]:
        """Half of ``max_allowed_packet`` less :data:`STATEMENT_RESERVE`: the insert, escaped, fits."""
        result: CursorResult[Any] = yield execute(text("SELECT @@max_allowed_packet"), write=write)
        return (int(result.scalar_one()) - STATEMENT_RESERVE) // 2

    def too_large(self, error: DBAPIError) -> bool:
        """A packet too large, or the connection ended while the statement was sent."""
        original = error.orig
        return bool(original is not None and original.args and original.args[0] in _REFUSALS)

    def batch_budget(self, content_limit: int | None) -> int | None:
        """One actum's limit: a statement, content escaped, must fit in ``max_allowed_packet``."""
        return content_limit
