"""PostgreSQL: one-statement appends in autocommit, notifications for followers, code point order.

An append is one statement, ``WITH moved AS (UPDATE chronica ... RETURNING ...) INSERT INTO acta
... SELECT ... FROM moved``, run in the driver's autocommit mode: the statement is its own
transaction, one round trip. A batch is one such statement too, its acta given as arrays. Every
statement that locks a chronicum's row for a write also returns ``pg_notify(channel, id)``, so
followers are told when, and only if, it commits (see :mod:`chronica_sqlalchemy.follow`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Executable,
    Index,
    Integer,
    LargeBinary,
    Select,
    String,
    Table,
    bindparam,
    case,
    column,
    func,
    insert,
    literal,
    literal_column,
    null,
    select,
    table,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateIndex, DropConstraint

from chronica_core.errors import ChronicumNotFound
from chronica_core.limits import POSTGRESQL_MAX_CONTENT_BYTES
from chronica_core.model import Actum
from chronica_core.plans import Plan
from chronica_sqlalchemy.acta_rows import actum_values
from chronica_sqlalchemy.dialects.default import StoreDialect, shaping
from chronica_sqlalchemy.schema import IDEMPOTENCY_INDEX, Content, Identifier, Tables
from chronica_sqlalchemy.steps import Step, execute

__all__ = ["PostgreSQLStoreDialect", "follow_channel", "follow_notification"]

_NAME_BYTES = 63  # NAMEDATALEN - 1: PostgreSQL silently cuts longer identifiers
_LIMIT_EXCEEDED = "54000"  # program_limit_exceeded


def follow_channel(schema: str | None) -> str:
    """The channel the appends and erasures of the tables in ``schema`` notify.

    ``chronica_sqlalchemy_`` and 16 hex characters of a digest of the schema name: an identifier
    needing no quotes, whatever the schema is called. The payload is the chronicum id.
    """
    digest = hashlib.blake2b(f"chronica-sqlalchemy follow {schema or ''}".encode(), digest_size=8)
    return f"chronica_sqlalchemy_{digest.hexdigest()}"


def follow_notification(chronica: Table, schema: str | None) -> ColumnElement[Any]:
    """``pg_notify(channel, chronica.id)``: queued in the write's transaction, delivered at commit."""
    return func.pg_notify(literal(follow_channel(schema)), chronica.c.id)


class PostgreSQLStoreDialect(StoreDialect):
    """PostgreSQL's own ways (see the module)."""

    name: ClassVar[str] = "postgresql"
    ceiling: ClassVar[int | None] = POSTGRESQL_MAX_CONTENT_BYTES
    autocommit_writes: ClassVar[bool] = True
    creates_schemas: ClassVar[bool] = True

    def __init__(self, tables: Tables, dialect: Any, schema: str | None) -> None:
        super().__init__(tables, dialect, schema)
        self.record_statement = self._one_statement_append()
        self._record_many = self._one_statement_batch()
        digest = hashlib.sha256(f"chronica-sqlalchemy:migrate:{schema or ''}".encode()).digest()
        self._lock_key = int.from_bytes(digest[:8], "big", signed=True)
        acta = tables.acta
        self._keyed_index = Index(
            IDEMPOTENCY_INDEX,
            acta.c.chronicum_id,
            acta.c.idempotency_key,
            unique=True,
            postgresql_where=acta.c.idempotency_key.is_not(None),
        )

    @classmethod
    def schema_name_problem(cls, name: str) -> str | None:
        """Longer than 63 bytes (it would be cut), or starting with ``pg_`` (reserved)."""
        size = len(name.encode())
        if size > _NAME_BYTES:
            return (
                f"is {size} bytes in UTF-8, longer than PostgreSQL's {_NAME_BYTES}-byte identifiers (it "
                "would cut the name, and names differing only after that would share a schema)"
            )
        if name.startswith("pg_"):
            return "cannot start with pg_ (PostgreSQL reserves those schema names for itself)"
        return None

    def notify(self, columns: Sequence[ColumnElement[Any]]) -> tuple[ColumnElement[Any], ...]:
        """The columns, and the followers' notification."""
        return (*columns, follow_notification(self.tables.chronica, self.schema))

    def _new_columns(self) -> list[Any]:
        acta = self.tables.acta
        names = (
            "chronicum_id",
            "seq",
            "id",
            "kind",
            "actor_kind",
            "actor",
            "content",
            "at",
            "idempotency_key",
            "native_format",
            "native_data",
            "answers",
            "summary_first_id",
            "summary_last_id",
        )
        return [acta.c[name] for name in names]

    def _one_statement_append(self) -> Executable:
        """Move the counter and insert the actum from its result; parameters: :meth:`record_parameters`.

        The ``UPDATE`` locks the chronicum's row until the statement's transaction ends, so the
        writers of one chronicum commit in ``seq`` order. Returns ``(chronicum id, id, at)``.
        """
        acta = self.tables.acta
        moved = self._advance(literal_column("1")).cte("moved")
        row = select(
            moved.c.id,
            moved.c.last_seq,
            bindparam("actum_id", type_=Identifier()),  # not "id": the UPDATE would set that column
            bindparam("kind", type_=String()),
            bindparam("actor_kind", type_=String()),
            bindparam("actor", type_=Identifier()),
            bindparam("content", type_=Content()),
            moved.c.last_actum_at,
            bindparam("idempotency_key", type_=Identifier()),
            bindparam("native_format", type_=Identifier()),
            bindparam("native_data", type_=Content()),
            bindparam("answers", type_=Identifier()),
            bindparam("summary_first_id", type_=Identifier()),
            bindparam("summary_last_id", type_=Identifier()),
        )
        insert_row = insert(acta).from_select(self._new_columns(), row)
        return insert_row.returning(acta.c.chronicum_id, acta.c.id, acta.c.at)

    def _one_statement_batch(self) -> Executable:
        """A batch's one statement: its acta as arrays, unnested with their place (1 to ``count``).

        The actum at place ``p`` gets ``seq`` ``last_seq - count + p``; the first, the key and the
        batch's size. Returns ``(chronicum id, id, at)`` per actum.
        """
        acta, count = self.tables.acta, bindparam("count", type_=Integer())
        moved = self._advance(count).cte("moved")
        given = (
            func.unnest(
                bindparam("actum_ids", type_=ARRAY(Identifier())),
                bindparam("kinds", type_=ARRAY(String())),
                bindparam("actor_kinds", type_=ARRAY(String())),
                bindparam("actors", type_=ARRAY(Identifier())),
                bindparam("contents", type_=ARRAY(LargeBinary())),
                bindparam("native_formats", type_=ARRAY(Identifier())),
                bindparam("native_data", type_=ARRAY(LargeBinary())),
                bindparam("answers", type_=ARRAY(Identifier())),
                bindparam("summary_first_ids", type_=ARRAY(Identifier())),
                bindparam("summary_last_ids", type_=ARRAY(Identifier())),
            )
            .table_valued(
                "actum_id",
                "kind",
                "actor_kind",
                "actor",
                "content",
                "native_format",
                "native_data",
                "answers",
                "summary_first_id",
                "summary_last_id",
                with_ordinality="place",
            )
            .render_derived()
        )
        first = given.c.place == 1
        row = select(
            moved.c.id,
            moved.c.last_seq - count + given.c.place,
            given.c.actum_id,
            given.c.kind,
            given.c.actor_kind,
            given.c.actor,
            given.c.content,
            moved.c.last_actum_at,
            case((first, bindparam("idempotency_key", type_=Identifier())), else_=null()),
            given.c.native_format,
            given.c.native_data,
            given.c.answers,
            given.c.summary_first_id,
            given.c.summary_last_id,
            case((first, bindparam("batch_size", type_=Integer())), else_=null()),
        ).select_from(moved.join(given, true()))
        insert_rows = insert(acta).from_select([*self._new_columns(), acta.c.batch_size], row)
        return insert_rows.returning(acta.c.chronicum_id, acta.c.id, acta.c.at)

    @staticmethod
    def record_parameters(actum: Actum, at: datetime, key: str | None = None) -> dict[str, Any]:
        """The parameters of :attr:`record_statement` for ``actum``, ``at`` the writer's clock."""
        return {
            "chronicum_id": actum.chronicum_id,
            "actum_id": actum.id,
            "kind": actum.kind.value,
            "actor_kind": actum.actor_kind.value,
            "actor": actum.actor,
            "content": actum.content,
            "at": at,
            "idempotency_key": key,
            "shaping": shaping((actum,)),
            **actum_values(actum),
        }

    def append(
        self, acta: list[Actum], key: str | None, now: datetime, ends: list[int], version: int | None = None
    ) -> Plan[Step, datetime]:
        """One statement in autocommit; a summary, or a batch too large for one, in a transaction."""
        if len(ends) > 1 or version is not None:
            return (yield from super().append(acta, key, now, ends, version))
        if len(acta) == 1:
            statement, parameters = self.record_statement, self.record_parameters(acta[0], now, key)
        else:
            statement, parameters = self._record_many, self._batch_parameters(acta, key, now)
        inserted: CursorResult[Any] = yield execute(statement, parameters, write=True, autocommit=True)
        rows = [tuple(row) for row in inserted.all()]
        if not rows:
            raise ChronicumNotFound(acta[0].chronicum_id)
        self.check_echoed(acta, rows)
        return rows[0][2]  # type: ignore[no-any-return]

    @staticmethod
    def _batch_parameters(acta: list[Actum], key: str | None, now: datetime) -> dict[str, Any]:
        count = len(acta)
        return {
            "chronicum_id": acta[0].chronicum_id,
            "at": now,
            "count": count,
            "idempotency_key": key,
            "batch_size": count if key is not None else None,
            "actum_ids": [actum.id for actum in acta],
            "kinds": [actum.kind.value for actum in acta],
            "actor_kinds": [actum.actor_kind.value for actum in acta],
            "actors": [actum.actor for actum in acta],
            "contents": [actum.content.encode("utf-8") for actum in acta],
            "shaping": shaping(acta),
            "native_formats": [None if actum.native is None else actum.native.format for actum in acta],
            "native_data": [
                None if actum.native is None else actum.native.data.encode("utf-8") for actum in acta
            ],
            "answers": [actum.answers or None for actum in acta],
            "summary_first_ids": [
                None if actum.summarizes is None else actum.summarizes.first for actum in acta
            ],
            "summary_last_ids": [
                None if actum.summarizes is None else actum.summarizes.last for actum in acta
            ],
        }

    def answered(
        self, picked: Any, lead: Sequence[Any], columns: Sequence[Any], segment: Sequence[ColumnElement[bool]]
    ) -> Select[Any]:
        """The requests the picked responses answer: ``picked JOIN LATERAL (...) ON true``, one lookup each.

        Without statistics (a new or fast-growing table) PostgreSQL would run a join or an ``IN``
        from the ``acta`` side, reading the whole segment; the lateral subquery, kept whole by its
        ``LIMIT 1``, is one probe of ``acta_by_id`` a picked row, whatever the estimates.
        """
        acta = self.tables.acta
        lookup = select(*columns).where(*segment, acta.c.id == picked.c.answers).limit(1).lateral("found")
        return (
            select(*lead, *lookup.c)
            .select_from(picked.join(lookup, true()))
            .where(picked.c.answers.is_not(None))
        )

    def listed_id(self) -> Any:
        """``id COLLATE "C"``: code point order, whatever the database's collation."""
        return self.tables.chronica.c.id.collate("C")

    def after(self, started_at: Any, chronicum_id: Any) -> ColumnElement[bool]:
        """A row comparison: PostgreSQL walks the index backwards from that position."""
        chronica = self.tables.chronica
        return tuple_(chronica.c.started_at, self.listed_id()) < tuple_(started_at, chronicum_id)

    def idle_after(self, last_active: Any, chronicum_id: Any) -> ColumnElement[bool]:
        """A row comparison: PostgreSQL walks the index forwards from that position."""
        chronica = self.tables.chronica
        return tuple_(chronica.c.last_active, self.listed_id()) > tuple_(last_active, chronicum_id)

    def catalog(self, names: tuple[str, ...]) -> Executable | None:
        """Any relation of those names in the schema (``pg_class``)."""
        relations = table("pg_class", column("relname"), column("relnamespace"), schema="pg_catalog")
        namespaces = table("pg_namespace", column("oid"), column("nspname"), schema="pg_catalog")
        namespace = self.schema if self.schema is not None else func.current_schema()
        return (
            select(relations.c.relname.label("name"))
            .join_from(relations, namespaces, relations.c.relnamespace == namespaces.c.oid)
            .where(namespaces.c.nspname == namespace, relations.c.relname.in_(names))
        )

    def keyed_acta_only(self) -> Plan[Step, None]:
        """Version 4's step: the idempotency key's uniqueness as a unique index of the keyed acta only.

        The unique constraint's index held a row for every actum, and deduplication kept those of a
        chronicum written without keys in a few pages: without statistics PostgreSQL then read a
        chronicum's acta through it and sorted them all rather than walk the primary key back from
        the newest. ``NULL`` keys never collided, so the same keys are refused as before.
        """
        [constraint] = [found for found in self.tables.acta.constraints if found.name == IDEMPOTENCY_INDEX]
        yield execute(DropConstraint(constraint, if_exists=True))
        yield execute(CreateIndex(self._keyed_index, if_not_exists=True))

    def lock(self) -> Plan[Step, bool]:
        """A transaction-scoped advisory lock, one per schema: released by the migration's commit."""
        yield execute(select(func.pg_advisory_xact_lock(self._lock_key)), write=True)
        return False

    def content_limit(self, write: bool) -> Plan[Step, int | None]:
        """:data:`chronica_core.limits.POSTGRESQL_MAX_CONTENT_BYTES` (no setting to read)."""
        return POSTGRESQL_MAX_CONTENT_BYTES
        yield

    def too_large(self, error: DBAPIError) -> bool:
        """``program_limit_exceeded``."""
        return getattr(error.orig, "sqlstate", None) == _LIMIT_EXCEEDED

    def batch_budget(self, content_limit: int | None) -> int | None:
        """A protocol message holds about 1 GiB."""
        return POSTGRESQL_MAX_CONTENT_BYTES
