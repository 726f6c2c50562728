r"""The tables and column types, the same on every dialect.

Five tables (names may be qualified by a schema):

- ``chronica``: one row a chronicum: ``id``, ``owner_id``, ``started_at``, ``last_actum_at`` and
  ``last_seq``, the counter that hands each actum its place in the chronicum, and
  ``owner_digest``, ``NULL`` for a live chronicum. An erased chronicum's row is its marker: the
  id and ``owner_digest`` (see :func:`chronica_core.erasure.owner_digest`), every other column
  emptied (``owner_id`` ``''``, ``started_at`` 1970-01-01, ``last_actum_at`` ``NULL``,
  ``last_seq`` 0). The index ``chronica_owner_listing`` on ``(owner_id, started_at, id)`` serves
  an owner's listing (on PostgreSQL its ``id`` is ``COLLATE "C"``: code point order whatever
  the database's collation). ``last_active`` is its last activity (the later of ``started_at``
  and ``last_actum_at``: a fork's starts when it is forked; ``NULL`` for a marker), indexed alone
  and after ``owner_id`` for retention. A fork has ``base`` (the position it branched at),
  ``forked_from_id`` and ``forked_from_actum``; ``layout_version`` changes with each summary (and
  reopening), ``shaped`` is set by the first summary or tool response naming its request,
  ``forked`` counts the forks made of it.
- ``acta``: one row an actum, keyed by ``(chronicum_id, seq)``; ``seq`` is assigned by the store
  (1, 2, 3, ... per chronicum, in the order writes were serialised) and is the only thing that
  orders acta. A unique constraint on ``(chronicum_id, idempotency_key)`` (on PostgreSQL a unique
  index of the keyed acta only) makes a retried write land once; acta written without a key have
  ``NULL`` there, and ``NULL`` never collides. A
  keyed batch keeps its key and its size (``batch_size``) on its first actum's row; the rest of
  the batch are the acta that follow it in ``seq`` (``batch_size`` ``NULL``: a single actum).
  ``seq`` is also the actum's position: a fork's ``last_seq`` starts at its ``base``. Beside
  the content: ``native_format`` and ``native_data`` (``NULL``: no native form), ``answers``
  and a summary's span ids (``summary_first_id``, ``summary_last_id``); the index
  ``acta_by_id`` on ``(chronicum_id, id)`` finds an actum by its id.
- ``lineages``: a fork's shared history, one row a segment of it (``ordinal`` from 0, oldest
  first): ``source_id``'s acta at positions after ``after_position`` up to ``upto_position``;
  indexed by ``source_id`` too, to find a chronicum's forks. A fork's own acta follow in ``acta``.
- ``summaries``: one row a summary (the actum at ``position`` of ``chronicum_id``): the range
  ``first_position`` to ``last_position`` it stands for and its actor kind.
- ``chronica_schema``: the schema version, so that a newer release can migrate an older database.
  It is also what makes ``chronica`` and ``acta`` this package's own: found without it, they are
  someone else's (another application's, or chronica-postgres's, whose versions are in
  ``chronica_schema_version``), and the store refuses to open over them.

Ids are data: on MariaDB/MySQL they use a binary collation without padding, so ``'a'`` and
``'A'`` differ and so do ``'a'`` and ``'a '``. Timestamps are stored as UTC and always come back
timezone-aware UTC, also on dialects whose column type keeps no zone. Content is ``TEXT`` (``LONGTEXT``
on MariaDB/MySQL); on PostgreSQL, whose ``text`` cannot hold ``"\x00"``, it is ``bytea`` holding UTF-8.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Dialect,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.types import TypeEngine

from chronica_core.model import MAX_ID_LENGTH

__all__ = [
    "ACTA_BY_ID_INDEX",
    "DIGEST_LENGTH",
    "FORMAT_LENGTH",
    "IDEMPOTENCY_INDEX",
    "IDLE_INDEX",
    "ID_LENGTH",
    "LISTING_INDEX",
    "OTHER_BACKEND_VERSIONS",
    "OWNER_IDLE_INDEX",
    "SCHEMA_VERSION",
    "Content",
    "Identifier",
    "Tables",
    "UTCDateTime",
    "is_mysql",
]

SCHEMA_VERSION = 5
"""The version of the tables this release creates and expects.

1. ``chronica``, ``acta`` and ``chronica_schema``.
2. ``chronica.owner_digest`` (erasure markers), ``acta.batch_size`` (keyed batches) and the
   index ``chronica_owner_listing`` (listing).
3. Native forms, forks, summaries, tool exchanges and retention: the new columns of ``chronica``
   and ``acta`` (see the module), the tables ``lineages`` and ``summaries``, the indexes
   ``acta_by_id``, ``chronica_idle`` and ``chronica_owner_idle``.
4. On PostgreSQL, ``acta_idempotency_key`` a unique index of the keyed acta only (see
   :data:`IDEMPOTENCY_INDEX`); elsewhere nothing changes.
5. ``last_active`` no earlier than ``started_at``: a fork's last activity starts when it was forked
   (earlier releases gave it its shared actum's ``at``); no table changes.
"""

LISTING_INDEX = "chronica_owner_listing"
"""The index on ``chronica (owner_id, started_at, id)`` that serves an owner's listing."""

IDEMPOTENCY_INDEX = "acta_idempotency_key"
"""The unique constraint on ``acta (chronicum_id, idempotency_key)``; on PostgreSQL, since version
4, a unique index of that name holding the keyed acta only."""

ACTA_BY_ID_INDEX = "acta_by_id"
"""The index on ``acta (chronicum_id, id)``: an actum found by its id."""

IDLE_INDEX = "chronica_idle"
"""The index on ``chronica (last_active, id)``: the idle chronica of every owner."""

OWNER_IDLE_INDEX = "chronica_owner_idle"
"""The index on ``chronica (owner_id, last_active, id)``: one owner's idle chronica."""

FORMAT_LENGTH = 255
"""The longest native format, in characters (the limit ``Chronicarius`` enforces)."""

DIGEST_LENGTH = 80
"""Room for an owner digest: ``"sha256:"`` and 64 hex digits are 71 characters."""

ID_LENGTH = MAX_ID_LENGTH
"""The longest chronicum id, actum id, owner id, actor and idempotency key, in characters: the
limit ``Chronicarius`` enforces, so no valid id is ever too long for a column."""

_MYSQL_CHARSET = "utf8mb4"

OTHER_BACKEND_VERSIONS = "chronica_schema_version"
"""chronica-postgres's version table: where it is, the tables are chronica-postgres's."""


def is_mysql(dialect: Dialect) -> bool:
    """Whether ``dialect`` speaks to MariaDB or MySQL (named ``mysql`` or ``mariadb``)."""
    return dialect.name in ("mysql", "mariadb")


def _mysql_binary_collation(dialect: Dialect) -> str:
    """A utf8mb4 collation comparing code points exactly, trailing spaces included (NO PAD)."""
    if getattr(dialect, "is_mariadb", False):
        return "utf8mb4_nopad_bin"  # MariaDB 10.2+; utf8mb4_bin would ignore trailing spaces
    version = dialect.server_version_info or (8, 0, 17)
    return "utf8mb4_0900_bin" if version >= (8, 0, 17) else "utf8mb4_bin"


class Identifier(TypeDecorator[str]):
    """An id compared byte for byte: ``VARCHAR(length)``, binary NO PAD collation on MariaDB/MySQL.

    Args:
        length: the most characters it holds (default :data:`ID_LENGTH`).
    """

    impl = String(ID_LENGTH)
    cache_ok = True

    def __init__(self, length: int = ID_LENGTH) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """The column type on ``dialect``."""
        if is_mysql(dialect):
            return dialect.type_descriptor(
                mysql.VARCHAR(self.length, charset=_MYSQL_CHARSET, collation=_mysql_binary_collation(dialect))
            )
        return dialect.type_descriptor(String(self.length))


class Content(TypeDecorator[str]):
    r"""Actum content: any ``str`` (every plane, ``"\x00"``, megabytes) that round-trips exactly."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """The column type on ``dialect``: ``LONGTEXT``, ``bytea`` (PostgreSQL) or ``TEXT``."""
        if is_mysql(dialect):
            return dialect.type_descriptor(mysql.LONGTEXT(charset=_MYSQL_CHARSET))
        if dialect.name == "postgresql":
            return dialect.type_descriptor(LargeBinary())
        return dialect.type_descriptor(Text())

    def process_bind_param(self, value: str | None, dialect: Dialect) -> Any:
        """Encode to UTF-8 for PostgreSQL's ``bytea``; pass through elsewhere."""
        if value is not None and dialect.name == "postgresql":
            return value.encode("utf-8")
        return value

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        """Decode on PostgreSQL only; elsewhere the driver's ``str`` is returned untouched."""
        if dialect.name == "postgresql":
            return super().result_processor(dialect, coltype)
        return None

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        """Decode PostgreSQL's ``bytea`` from UTF-8; pass text through."""
        if isinstance(value, bytes | memoryview):
            return bytes(value).decode("utf-8")
        return value  # type: ignore[no-any-return]


class UTCDateTime(TypeDecorator[datetime]):
    """A moment stored as UTC (microseconds kept) and read back as a timezone-aware UTC datetime."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``DATETIME(6)`` on MariaDB/MySQL, ``timestamptz`` on PostgreSQL, ``DATETIME`` elsewhere."""
        if is_mysql(dialect):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        if dialect.name == "postgresql":
            return dialect.type_descriptor(DateTime(timezone=True))
        return dialect.type_descriptor(DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert to UTC (a naive value is taken as UTC); drop the zone where the column keeps none."""
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """On SQLite write ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC in one call, inside the writer's turn.

        The same text SQLAlchemy's ``DATETIME`` writes after :meth:`process_bind_param` (a naive
        value taken as UTC, microseconds always written).
        """
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        def process(value: datetime | None) -> str | None:
            if value is None:
                return None
            if value.tzinfo is None:
                return value.isoformat(" ", "microseconds")
            if value.tzinfo is not UTC:
                value = value.astimezone(UTC)
            return value.isoformat(" ", "microseconds")[:26]  # without its "+00:00"

        return process

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        """On SQLite parse the stored text straight into an aware UTC datetime.

        The text is stored without a zone (UTC): parsed with ``+00:00`` appended, it comes back
        aware in one call. Text that does not parse so (a zone of its own, written by something
        else) is parsed as it is and converted to UTC.
        """
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)
        parse = datetime.fromisoformat

        def process(value: str | None) -> datetime | None:
            if value is None:
                return None
            try:
                return parse(value + "+00:00")
            except ValueError:
                parsed = parse(value)
                return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)

        return process

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return a timezone-aware UTC datetime (a naive value from the column is UTC)."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Tables:
    """The tables of one store, optionally inside a named schema (database on MariaDB/MySQL).

    Attributes:
        metadata: the :class:`MetaData` holding them.
        chronica: one row a chronicum.
        acta: one row an actum.
        versions: one row: the schema version.
        lineages: one row a segment of a fork's shared history (from version 3).
        summaries: one row a summary (from version 3).
    """

    metadata: MetaData
    chronica: Table
    acta: Table
    versions: Table
    lineages: Table
    summaries: Table

    @classmethod
    def build(cls, schema: str | None = None, version: int = SCHEMA_VERSION) -> Tables:
        """Return the table definitions, qualified by ``schema`` when it is given.

        ``version``: the schema version whose columns they have (an older one only to build, or
        migrate from, the tables an older release created); the listing index is not among
        them (see :meth:`chronica_sqlalchemy.dialects.StoreDialect.listing_index`).
        """
        metadata = MetaData(schema=schema)
        since_2, since_3 = version >= 2, version >= 3
        chronica = Table(
            "chronica",
            metadata,
            Column("id", Identifier(), nullable=False),
            Column("owner_id", Identifier(), nullable=False),
            Column("started_at", UTCDateTime(), nullable=False),
            Column("last_actum_at", UTCDateTime(), nullable=True),
            Column("last_seq", BigInteger(), nullable=False),
            *([Column("owner_digest", Identifier(DIGEST_LENGTH), nullable=True)] if since_2 else []),
            *(_chronica_since_3() if since_3 else []),
            # Primary keys stay unnamed: PostgreSQL names them <table>_pkey, and MariaDB/MySQL
            # ignores a name there with a warning (which asyncmy logs).
            PrimaryKeyConstraint("id"),
            mysql_engine="InnoDB",
            mysql_charset=_MYSQL_CHARSET,
        )
        acta = Table(
            "acta",
            metadata,
            Column("chronicum_id", Identifier(), nullable=False),
            Column("seq", BigInteger(), nullable=False, autoincrement=False),
            Column("id", Identifier(), nullable=False),
            Column("kind", String(16), nullable=False),
            Column("actor_kind", String(16), nullable=False),
            Column("actor", Identifier(), nullable=False),
            Column("content", Content(), nullable=False),
            Column("at", UTCDateTime(), nullable=False),
            Column("idempotency_key", Identifier(), nullable=True),
            *([Column("batch_size", Integer(), nullable=True)] if since_2 else []),
            *(_acta_since_3() if since_3 else []),
            PrimaryKeyConstraint("chronicum_id", "seq"),
            UniqueConstraint("chronicum_id", "idempotency_key", name=IDEMPOTENCY_INDEX),
            ForeignKeyConstraint(
                ["chronicum_id"],
                [chronica.c.id],
                name="acta_chronicum_fkey",
            ),
            mysql_engine="InnoDB",
            mysql_charset=_MYSQL_CHARSET,
        )
        versions = Table(
            "chronica_schema",
            metadata,
            Column("component", String(64), nullable=False),
            Column("version", Integer(), nullable=False),
            PrimaryKeyConstraint("component"),
            mysql_engine="InnoDB",
            mysql_charset=_MYSQL_CHARSET,
        )
        lineages = Table(
            "lineages",
            metadata,
            Column("chronicum_id", Identifier(), nullable=False),
            Column("ordinal", Integer(), nullable=False, autoincrement=False),
            Column("source_id", Identifier(), nullable=False),
            Column("after_position", BigInteger(), nullable=False),
            Column("upto_position", BigInteger(), nullable=False),
            PrimaryKeyConstraint("chronicum_id", "ordinal"),
            Index("lineages_source", "source_id"),
            mysql_engine="InnoDB",
            mysql_charset=_MYSQL_CHARSET,
        )
        summaries = Table(
            "summaries",
            metadata,
            Column("chronicum_id", Identifier(), nullable=False),
            Column("position", BigInteger(), nullable=False, autoincrement=False),
            Column("first_position", BigInteger(), nullable=False),
            Column("last_position", BigInteger(), nullable=False),
            Column("actor_kind", String(16), nullable=False),
            PrimaryKeyConstraint("chronicum_id", "position"),
            mysql_engine="InnoDB",
            mysql_charset=_MYSQL_CHARSET,
        )
        return cls(metadata, chronica, acta, versions, lineages, summaries)


def _chronica_since_3() -> list[Column[Any]]:
    """The columns version 3 adds to ``chronica`` (each with a default: existing rows stay plain)."""
    return [
        Column("last_active", UTCDateTime(), nullable=True),
        Column("base", BigInteger(), nullable=False, server_default="0"),
        Column("forked_from_id", Identifier(), nullable=True),
        Column("forked_from_actum", Identifier(), nullable=True),
        Column("layout_version", BigInteger(), nullable=False, server_default="0"),
        Column("shaped", Integer(), nullable=False, server_default="0"),
        Column("forked", Integer(), nullable=False, server_default="0"),
    ]


def _acta_since_3() -> list[Column[Any]]:
    """The columns version 3 adds to ``acta`` (nullable: existing acta have none of them)."""
    return [
        Column("native_format", Identifier(FORMAT_LENGTH), nullable=True),
        Column("native_data", Content(), nullable=True),
        Column("answers", Identifier(), nullable=True),
        Column("summary_first_id", Identifier(), nullable=True),
        Column("summary_last_id", Identifier(), nullable=True),
    ]
