"""The tables, their migrations and every statement the PostgreSQL store runs, as SQL text.

Layout (in the schema given by the ``schema`` option, ``public`` by default):

- ``chronica``: ``id`` (primary key), ``owner_id``, ``started_at``, ``last_actum_at``,
  ``last_seq``, the ``seq`` of the chronicum's newest actum (0 while it has none),
  ``followed_until``, until when some follower waits for its acta (NULL: never followed; see
  "Following" below), and ``erased_owner_digest``: set only on the marker an erased chronicum leaves (see
  :mod:`chronica_core.erasure`), which holds nothing else of it: ``owner_id`` and
  ``last_actum_at`` NULL, ``started_at`` the epoch, ``last_seq`` 0 (a check constraint says so).
  Every statement but ``create`` (whose primary key keeps the id taken) and ``reopen`` skips
  markers. An index on ``(owner_id, started_at DESC, id DESC)`` over the live chronica serves
  listing.
- ``acta``: ``chronicum_id`` (references ``chronica``), ``seq``, ``id``, ``kind``, ``actor_kind``,
  ``actor``, ``content`` / ``content_bytes``, ``at``, ``idempotency_key`` and ``batch_size``;
  primary key ``(chronicum_id, seq)`` and no index led by ``seq`` alone (with one the planner may
  walk the whole table backwards for a context window); a unique index on
  ``(chronicum_id, idempotency_key)`` where the key is set. A keyed write puts its key on its
  first actum only, with ``batch_size``, the number of acta it stored (NULL: one), so that a
  repeat reads back the acta with ``seq`` from that actum's to ``seq + batch_size - 1``.
- Native forms, tool answers, summaries and forks (migration 4): ``acta.native_format``,
  ``native_data`` / ``native_data_bytes`` (as content: text, or bytes when it holds NUL),
  ``answers``, a summary's span and positions; ``chronica``'s fork point, lineage, summary count
  and ``shaped``; see :mod:`chronica_postgres.history_sql`. The indexes of idle chronica
  (migration 5, rebuilt on a fork's last activity by migration 6): see
  :mod:`chronica_postgres.retention`.
- ``chronica_schema_version``: one row per migration applied (``version``, ``applied_at``,
  ``description``). It is also what makes the tables this package's own: a schema holding
  ``chronica`` or ``acta`` without it holds someone else's tables (chronica-sqlalchemy's, whose
  versions are in ``chronica_schema``, or another application's), which the store refuses to open
  (see :data:`FOREIGN_TABLES`) and never alters.

Schema names are used exactly as given, quoted, inside every statement: see
:func:`schema_name_problem` for the names refused because PostgreSQL would not keep them apart.

Content: PostgreSQL ``text`` cannot hold NUL, so content without NUL (nearly all) is kept in
``content`` as text, readable and searchable in SQL, and content with NUL is kept, UTF-8 encoded,
in ``content_bytes``; exactly one of the two is set (a check constraint says so).

Order: ``record`` locks the chronicum's row while it takes the next ``seq``, so writers to one
chronicum commit one after the other in ``seq`` order; a reader never sees an actum without every
actum ordered before it. (A sequence would not do: commit order can differ from sequence order.)
The actum's ``at`` is taken under that lock too, from the server's clock, and never earlier than
the chronicum's ``last_actum_at``: ``at`` never decreases along the order.

A batch (``record_many``) takes ``n`` consecutive ``seq`` under that lock, all with one ``at``.
``erase`` runs in one transaction: it locks the rows of the chronicum and of its forks first, as
``record`` does, then (in a second statement, whose snapshot sees every actum committed before the
locks were granted) deletes their acta and turns their rows into markers. A write racing with it
lands wholly before (and is erased) or finds the marker.

Following: an append notifies the schema's channel (:func:`follow_channel`) only while the
chronicum's ``followed_until`` is later than the append's ``now()``: nobody listening, no
notification, so writers skip PostgreSQL's commit-time lock on notifying transactions. A
follower sets ``followed_until`` (:attr:`Statements.follow`, committed) before it reads the
chronicum's newest actum and waits. Either a write took the chronicum's row lock before that
update (which then waited for the write's commit, so the follower's read sees the write), or
after it: its ``UPDATE`` then reads the newest version of the row (read committed re-evaluates an
updated row; ``now()`` is the writer's transaction start, earlier still) and notifies. The
erasure notifies always.

Every statement returns the chronicum id of its rows (and ``record`` the actum id), so that the
store can check that a row answers the statement it sent.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from psycopg import sql

__all__ = [
    "ACTA_BY_ID_INDEX",
    "ACTA_IDEMPOTENCY_INDEX",
    "ACTA_SUMMARIES_INDEX",
    "ACTA_TO_CHRONICA_KEY",
    "ACTUM_COLUMNS",
    "ACTUM_ROW_SIZE",
    "CHRONICA_COLUMNS",
    "CHRONICA_FORKS_INDEX",
    "CHRONICA_IDLE_INDEX",
    "CHRONICA_LISTING_INDEX",
    "CHRONICA_OWNER_IDLE_INDEX",
    "CHRONICA_PRIMARY_KEY",
    "EPOCH",
    "FOREIGN_TABLES",
    "INSERTED_ROW",
    "LAST_ACTIVITY",
    "LATEST_VERSION",
    "MAX_SCHEMA_NAME_BYTES",
    "MIGRATIONS",
    "NEXT_AT",
    "SET_UTC",
    "SQLALCHEMY_VERSION_TABLE",
    "VERSION_TABLE",
    "Migration",
    "Statements",
    "follow_channel",
    "schema_name_problem",
]

MAX_SCHEMA_NAME_BYTES = 63
"""PostgreSQL's longest identifier, in bytes (``NAMEDATALEN - 1``); longer names it silently cuts."""

VERSION_TABLE = "chronica_schema_version"
"""The table of applied migrations: the mark of a schema this package created."""

SQLALCHEMY_VERSION_TABLE = "chronica_schema"
"""chronica-sqlalchemy's version table: where it is, chronica-sqlalchemy has used the schema."""

FOREIGN_TABLES = ("chronica", "acta", SQLALCHEMY_VERSION_TABLE)
"""Tables that, found in a schema without :data:`VERSION_TABLE`, are not this package's own:
``chronica`` and ``acta`` of another application or of chronica-sqlalchemy, and
``chronica_schema``, chronica-sqlalchemy's version table (found next to :data:`VERSION_TABLE`, it
says chronica-sqlalchemy has written into this package's tables)."""


def schema_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be used as the ``schema`` option, or ``None`` when it names exactly one schema.

    Any name is quoted and used exactly (spaces, tabs, ``%``, ``$``, quotes, case), except:
    an empty one, one holding NUL (no identifier can), one longer than
    :data:`MAX_SCHEMA_NAME_BYTES` bytes in UTF-8 (PostgreSQL would cut it, so two names differing
    after that would share a schema) and one starting with ``pg_`` (reserved for the system's own).
    """
    if not name:
        return "must be a non-empty name"
    if "\x00" in name:
        return "cannot hold NUL"
    size = len(name.encode())
    if size > MAX_SCHEMA_NAME_BYTES:
        return (
            f"is {size} bytes in UTF-8, longer than PostgreSQL's {MAX_SCHEMA_NAME_BYTES}-byte identifiers "
            "(it would cut the name, and names differing only after that would share a schema)"
        )
    if name.startswith("pg_"):
        return "cannot start with pg_ (PostgreSQL reserves those schema names for itself)"
    return None


CHRONICA_PRIMARY_KEY = "chronica_pkey"
"""Name of the primary key of ``chronica``: a violation means the chronicum exists."""

ACTA_TO_CHRONICA_KEY = "acta_chronicum_id_fkey"
"""Name of the foreign key from ``acta`` to ``chronica``: a violation means the chronicum is missing."""

ACTA_IDEMPOTENCY_INDEX = "acta_idempotency_key"
"""Name of the unique index on ``(chronicum_id, idempotency_key)``."""

CHRONICA_LISTING_INDEX = "chronica_owner_listing"
"""Name of the index on ``(owner_id, started_at DESC, id DESC)`` of the live chronica (listing)."""

ACTA_BY_ID_INDEX = "acta_by_id"
"""Name of the index on ``(chronicum_id, id)``: an actum found by its id (tool answers, ``locate``)."""

ACTA_SUMMARIES_INDEX = "acta_summaries"
"""Name of the index on ``(chronicum_id, seq)`` of the summaries only: a layout's summary marks."""

CHRONICA_FORKS_INDEX = "chronica_forks"
"""Name of the GIN index on ``lineage_ids`` of the forks: the forks of a chronicum, for erasure."""

CHRONICA_IDLE_INDEX = "chronica_idle"
"""Name of the index on ``(last activity, id)`` of the live chronica (retention)."""

CHRONICA_OWNER_IDLE_INDEX = "chronica_owner_idle"
"""Name of the index on ``(owner_id, last activity, id)`` of the live chronica (retention per owner)."""

LAST_ACTIVITY = "greatest(started_at, last_actum_at)"
"""A chronicum's last activity (see :func:`chronica_core.retention.last_activity`) in SQL: the
later of its start (a fork's: when it was forked) and its newest actum (``greatest`` skips NULL)."""

_LAST_ACTIVITY_5 = "coalesce(last_actum_at, started_at)"
"""The last activity the indexes of version 5 were built on (a fork's was its shared actum's)."""

_UNPLANNED_LIMIT = "(SELECT %s::bigint)"
"""A window's ``LIMIT``, its parameter hidden from the planner: a plan made for the call's values
(no prepared statements, behind a pooler) then assumes a tenth of the rows are read, as a
prepared statement's generic plan does, and walks the primary key backward. Given the limit's
value, on a table never analyzed (autovacuum off or behind) the planner estimates a chronicum's
acta below the limit, and reads every actum of the chronicum to sort them."""

EPOCH = "1970-01-01 00:00:00+00"
"""The ``started_at`` of a marker: a value that says nothing about the erased chronicum."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema's history.

    Attributes:
        version: its number; steps run in increasing order, each once.
        description: one line saying what it does (stored in ``chronica_schema_version``).
        script: the SQL, with ``{schema}`` where the quoted schema name goes.
    """

    version: int
    description: str
    script: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "tables chronica and acta",
        f"""
        CREATE TABLE {{schema}}.chronica (
            id text COLLATE "C" NOT NULL,
            owner_id text NOT NULL,
            started_at timestamptz NOT NULL,
            last_actum_at timestamptz,
            last_seq bigint NOT NULL DEFAULT 0,
            CONSTRAINT {CHRONICA_PRIMARY_KEY} PRIMARY KEY (id)
        );
        CREATE TABLE {{schema}}.acta (
            chronicum_id text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            id text NOT NULL,
            kind text NOT NULL,
            actor_kind text NOT NULL,
            actor text NOT NULL,
            content text,
            content_bytes bytea,
            at timestamptz NOT NULL,
            idempotency_key text COLLATE "C",
            CONSTRAINT acta_pkey PRIMARY KEY (chronicum_id, seq),
            CONSTRAINT {ACTA_TO_CHRONICA_KEY} FOREIGN KEY (chronicum_id) REFERENCES {{schema}}.chronica (id),
            CONSTRAINT acta_content_once CHECK ((content IS NULL) <> (content_bytes IS NULL))
        );
        CREATE UNIQUE INDEX {ACTA_IDEMPOTENCY_INDEX} ON {{schema}}.acta (chronicum_id, idempotency_key)
            WHERE idempotency_key IS NOT NULL;
        """,
    ),
    Migration(
        2,
        "erasure markers, keyed batch sizes, the listing index",
        f"""
        ALTER TABLE {{schema}}.chronica
            ADD COLUMN erased_owner_digest text,
            ALTER COLUMN owner_id DROP NOT NULL,
            ADD CONSTRAINT chronica_marker_holds_only_the_digest CHECK (
                CASE WHEN erased_owner_digest IS NULL THEN owner_id IS NOT NULL
                ELSE owner_id IS NULL AND last_actum_at IS NULL AND last_seq = 0
                    AND started_at = '{EPOCH}' END
            );
        ALTER TABLE {{schema}}.acta
            ADD COLUMN batch_size integer,
            ADD CONSTRAINT acta_batch_size_keyed CHECK (
                batch_size IS NULL OR (batch_size > 0 AND idempotency_key IS NOT NULL)
            );
        CREATE INDEX {CHRONICA_LISTING_INDEX} ON {{schema}}.chronica (owner_id, started_at DESC, id DESC)
            WHERE erased_owner_digest IS NULL;
        """,
    ),
    Migration(
        3,
        "followed_until: appends notify only the chronica being followed",
        """
        ALTER TABLE {schema}.chronica ADD COLUMN followed_until timestamptz;
        """,
    ),
    Migration(
        4,
        "native forms, tool answers, summaries and forks",
        f"""
        ALTER TABLE {{schema}}.acta
            ADD COLUMN native_format text,
            ADD COLUMN native_data text,
            ADD COLUMN native_data_bytes bytea,
            ADD COLUMN answers text,
            ADD COLUMN summarizes_first text,
            ADD COLUMN summarizes_last text,
            ADD COLUMN summary_first bigint,
            ADD COLUMN summary_last bigint,
            ADD CONSTRAINT acta_native_once CHECK (
                CASE WHEN native_format IS NULL THEN native_data IS NULL AND native_data_bytes IS NULL
                ELSE (native_data IS NULL) <> (native_data_bytes IS NULL) END
            ),
            ADD CONSTRAINT acta_summary_whole CHECK (
                (summarizes_first IS NULL) = (summarizes_last IS NULL)
                AND (summary_first IS NULL) = (summarizes_first IS NULL)
                AND (summary_last IS NULL) = (summarizes_first IS NULL)
            );
        ALTER TABLE {{schema}}.chronica
            ADD COLUMN forked_from_id text,
            ADD COLUMN forked_from_actum text,
            ADD COLUMN lineage_ids text[],
            ADD COLUMN lineage_after bigint[],
            ADD COLUMN lineage_upto bigint[],
            ADD COLUMN summaries integer NOT NULL DEFAULT 0,
            ADD COLUMN shaped boolean NOT NULL DEFAULT false,
            ADD CONSTRAINT chronica_marker_holds_no_history CHECK (
                erased_owner_digest IS NULL OR (
                    forked_from_id IS NULL AND lineage_ids IS NULL AND summaries = 0 AND NOT shaped
                )
            );
        CREATE INDEX {ACTA_BY_ID_INDEX} ON {{schema}}.acta (chronicum_id, id);
        CREATE INDEX {ACTA_SUMMARIES_INDEX} ON {{schema}}.acta (chronicum_id, seq)
            WHERE summary_first IS NOT NULL;
        CREATE INDEX {CHRONICA_FORKS_INDEX} ON {{schema}}.chronica USING gin (lineage_ids)
            WHERE lineage_ids IS NOT NULL;
        """,
    ),
    Migration(
        5,
        "the indexes of idle chronica",
        f"""
        CREATE INDEX {CHRONICA_IDLE_INDEX} ON {{schema}}.chronica
            (({_LAST_ACTIVITY_5}), id) WHERE erased_owner_digest IS NULL;
        CREATE INDEX {CHRONICA_OWNER_IDLE_INDEX} ON {{schema}}.chronica
            (owner_id, ({_LAST_ACTIVITY_5}), id) WHERE erased_owner_digest IS NULL;
        """,
    ),
    Migration(
        6,
        "a fork's last activity starts when it is forked",
        f"""
        DROP INDEX {{schema}}.{CHRONICA_IDLE_INDEX};
        DROP INDEX {{schema}}.{CHRONICA_OWNER_IDLE_INDEX};
        CREATE INDEX {CHRONICA_IDLE_INDEX} ON {{schema}}.chronica
            (({LAST_ACTIVITY}), id) WHERE erased_owner_digest IS NULL;
        CREATE INDEX {CHRONICA_OWNER_IDLE_INDEX} ON {{schema}}.chronica
            (owner_id, ({LAST_ACTIVITY}), id) WHERE erased_owner_digest IS NULL;
        """,
    ),
)
"""Every migration, oldest first."""

LATEST_VERSION = MIGRATIONS[-1].version
"""The schema version this package reads and writes."""

SET_UTC = b"SET TIME ZONE 'UTC'"
"""Run on each new pooled connection: timestamps then arrive in UTC, with no conversion to do."""

CHRONICA_COLUMNS = "id, owner_id, started_at, last_actum_at, forked_from_id, forked_from_actum"
"""The columns of a chronicum row, in the order every statement returns them."""

ACTUM_COLUMNS = (
    "chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,"
    " native_format, native_data, native_data_bytes, answers, summarizes_first, summarizes_last"
)
"""The columns of an actum row, in the order every statement returns them."""

ACTUM_ROW_SIZE = len(ACTUM_COLUMNS.split(", "))
"""How many columns an actum row has."""

INSERTED_ROW = "chronicum_id, seq, id, NULL, NULL, NULL, NULL, NULL::bytea, at" + ", NULL" * 6
"""What a keyed write returns of an actum it inserted: an actum row holding its ids and ``at`` only."""

NEXT_AT = "greatest(%s::timestamptz, last_actum_at)"
"""The ``at`` of the next actum, under the chronicum's row lock: the parameter (the application
host's clock, :func:`chronica_core.clock.now`, which also gives ``started_at``), or the
chronicum's ``last_actum_at`` when that is later (``greatest`` skips NULL)."""


_EXTRA_INSERTED = "native_format, native_data, native_data_bytes, answers"
"""The columns of an actum a write sets beyond the base ones (a summary's range aside)."""

_EXTRA_VALUES = "%s::text, %s::text, %s::bytea, %s::text"
"""Their parameters: native format, native data as text or as bytes, the request answered."""

_LIVE = "erased_owner_digest IS NULL"
"""The predicate of a live chronicum's row (not an erased chronicum's marker)."""

_MARKER = (
    f"owner_id = NULL, started_at = '{EPOCH}', last_actum_at = NULL, last_seq = 0, "
    "erased_owner_digest = %s, forked_from_id = NULL, forked_from_actum = NULL, "
    "lineage_ids = NULL, lineage_after = NULL, lineage_upto = NULL, summaries = 0, shaped = false"
)
"""The ``SET`` list turning a chronicum's row into its marker; parameter: the owner digest."""

_STORED_COLUMNS = ", ".join(f"stored.{column}" for column in ACTUM_COLUMNS.split(", "))
""":data:`ACTUM_COLUMNS` of the ``acta`` row named ``stored``."""


def _listing(*, after: str | None) -> str:
    """The listing query, from the newest or after a ``(started_at, id)`` position.

    ``after`` is the comparison with the position (``"<"``: strictly after it in the listing's
    order), ``None`` for none. The row comparison matches the listing index's order, so the index
    scan starts at the position.
    """
    position = f" AND (started_at, id) {after} (%s::timestamptz, %s::text)" if after else ""
    return f"""
        SELECT {CHRONICA_COLUMNS} FROM {{schema}}.chronica
        WHERE owner_id = %s AND {_LIVE}{position}
        ORDER BY started_at DESC, id DESC
        LIMIT %s
        """


def follow_channel(schema: str) -> str:
    """The channel the appends and erasures of ``schema`` notify (``LISTEN`` to follow them).

    ``chronica_acta_`` and 16 hex characters of a digest of the schema name: an identifier
    needing no quotes, well under PostgreSQL's 63 bytes, whatever the schema is called; the
    notification's payload is the chronicum id.
    """
    digest = hashlib.blake2b(f"chronica-postgres follow {schema}".encode(), digest_size=8).hexdigest()
    return f"chronica_acta_{digest}"


def _migration_lock_key(schema: str) -> int:
    """The advisory-lock key (a signed 64-bit integer) guarding migrations of ``schema``."""
    digest = hashlib.blake2b(f"chronica-postgres migrate {schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Statements:
    """Every statement of the store for one schema, composed once as bytes ready to execute.

    Args:
        schema: the schema holding the tables (quoted as an identifier; any name works).
        notify: whether appends notify :attr:`channel` while their chronicum is followed, and
            erasures always (``pg_notify`` in the ``RETURNING`` of the chronicum's row); without it
            they are the same statements less that call.
    """

    def __init__(self, schema: str, *, notify: bool = True) -> None:
        self.schema = schema
        self.notify = notify
        quoted = self._quoted = sql.Identifier(schema).as_string(None)
        self.channel = follow_channel(schema)
        notify_call = f"pg_notify({sql.Literal(self.channel).as_string(None)}, id)"
        channel = f", CASE WHEN followed_until > now() THEN {notify_call} END" if notify else ""
        self.append_notification = channel
        """What an append's ``RETURNING`` of the chronicum's row adds to notify its followers (or ``""``)."""
        erasure_channel = f", {notify_call}" if notify else ""
        # One row: the version, and whether chronica-sqlalchemy's version table is there too.
        self.read_version = self._compose(
            quoted,
            f"""
            SELECT coalesce(max(version), 0), EXISTS (
                SELECT FROM pg_catalog.pg_class AS class
                JOIN pg_catalog.pg_namespace AS namespace ON namespace.oid = class.relnamespace
                WHERE namespace.nspname = {{name}} AND class.relname = '{SQLALCHEMY_VERSION_TABLE}'
            )
            FROM {{schema}}.{VERSION_TABLE}
            """,
            name=sql.Literal(schema).as_string(None),
        )
        # Parameters: the schema name, the table names. Rows: the names found in that schema.
        self.find_tables = self._compose(
            quoted,
            """
            SELECT class.relname FROM pg_catalog.pg_class AS class
            JOIN pg_catalog.pg_namespace AS namespace ON namespace.oid = class.relnamespace
            WHERE namespace.nspname = %s AND class.relname = ANY(%s::text[])
            ORDER BY class.relname
            """,
        )
        self.migrate = self._migration_script(quoted)
        self.create = self._compose(
            quoted,
            "INSERT INTO {schema}.chronica (id, owner_id, started_at, last_actum_at)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING true",
        )
        self.get = self._compose(
            quoted,
            f"SELECT {CHRONICA_COLUMNS} FROM {{schema}}.chronica WHERE id = %s AND {_LIVE}",
        )
        # Parameters: now, whether the actum shapes the history (it answers a request), chronicum id,
        # id, kind, actor kind, actor, content, content bytes, key, native format, native data
        # (text), native data (bytes), the request it answers.
        self.record = self._compose(
            quoted,
            f"""
            WITH chronicum AS (
                UPDATE {{schema}}.chronica
                SET last_seq = last_seq + 1, last_actum_at = {NEXT_AT}, shaped = shaped OR %s::boolean
                WHERE id = %s AND {_LIVE}
                RETURNING id, last_seq, last_actum_at{{channel}}
            )
            INSERT INTO {{schema}}.acta
                (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at, idempotency_key,
                 {_EXTRA_INSERTED})
            SELECT chronicum.id, chronicum.last_seq, %s, %s, %s, %s, %s::text, %s::bytea,
                chronicum.last_actum_at, %s::text, {_EXTRA_VALUES}
            FROM chronicum
            RETURNING chronicum_id, id, at
            """,
            channel=channel,
        )
        # Parameters: chronicum id, key, then those of `record`. One row: (true, chronicum id, seq,
        # id, NULLs..., at) when inserted, (false, the stored actum's columns) when the key was used
        # before; none when the chronicum is missing. A writer racing on the same key fails on the
        # unique index.
        self.record_idempotent = self._compose(
            quoted,
            f"""
            WITH existing AS (
                SELECT {ACTUM_COLUMNS} FROM {{schema}}.acta
                WHERE chronicum_id = %s AND idempotency_key = %s
            ), chronicum AS (
                UPDATE {{schema}}.chronica
                SET last_seq = last_seq + 1, last_actum_at = {NEXT_AT}, shaped = shaped OR %s::boolean
                WHERE id = %s AND {_LIVE} AND NOT EXISTS (SELECT FROM existing)
                RETURNING id, last_seq, last_actum_at{{channel}}
            ), inserted AS (
                INSERT INTO {{schema}}.acta
                    (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,
                     idempotency_key, {_EXTRA_INSERTED})
                SELECT chronicum.id, chronicum.last_seq, %s, %s, %s, %s, %s::text, %s::bytea,
                    chronicum.last_actum_at, %s::text, {_EXTRA_VALUES}
                FROM chronicum
                RETURNING chronicum_id, seq, id, at
            )
            SELECT true, {INSERTED_ROW} FROM inserted
            UNION ALL
            SELECT false, {ACTUM_COLUMNS} FROM existing
            """,
            channel=channel,
        )
        # Parameters: chronicum id, key. Rows: every actum the keyed write stored, in order (none
        # when the key is unknown, or the chronicum was erased since).
        self.read_keyed = self._compose(
            quoted,
            f"""
            SELECT {_STORED_COLUMNS} FROM {{schema}}.acta AS keyed
            JOIN {{schema}}.acta AS stored ON stored.chronicum_id = keyed.chronicum_id
                AND stored.seq BETWEEN keyed.seq AND keyed.seq + coalesce(keyed.batch_size, 1) - 1
            WHERE keyed.chronicum_id = %s AND keyed.idempotency_key = %s
            ORDER BY stored.seq
            """,
        )
        # Parameters: chronicum id, key (NULL: none), the number of acta, whether any answers a
        # request, now, then one array each of ids, kinds, actor kinds, actors, contents (text),
        # contents (bytes), native formats, native data (text), native data (bytes) and the
        # requests they answer, in batch order.
        # Rows, ordered by seq: (true, chronicum id, seq, id, NULLs..., at) for each actum inserted;
        # (false, the stored actum's columns) for each actum of the write that used the key
        # before; none when the chronicum is missing. A writer racing on the same key fails on
        # the unique index, as in `record_idempotent`. The stored batch is read as a range of the
        # primary key driven by the keyed row (OFFSET 0 keeps the planner from flattening the
        # LATERAL subquery into a join that scans the chronicum's whole history on every call).
        self.record_many = self._compose(
            quoted,
            f"""
            WITH given AS (
                SELECT %s::text AS chronicum_id, %s::text AS key, %s::integer AS size,
                    %s::boolean AS shaped
            ), existing AS (
                SELECT keyed.chronicum_id, keyed.seq, coalesce(keyed.batch_size, 1) AS size
                FROM {{schema}}.acta AS keyed, given
                WHERE keyed.chronicum_id = given.chronicum_id AND keyed.idempotency_key = given.key
            ), chronicum AS (
                UPDATE {{schema}}.chronica
                SET last_seq = last_seq + given.size, last_actum_at = {NEXT_AT},
                    shaped = chronica.shaped OR given.shaped
                FROM given
                WHERE id = given.chronicum_id AND {_LIVE} AND NOT EXISTS (SELECT FROM existing)
                RETURNING id, last_seq - given.size AS before_seq, last_actum_at, given.key, given.size
                    {{channel}}
            ), inserted AS (
                INSERT INTO {{schema}}.acta
                    (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,
                     idempotency_key, batch_size, native_format, native_data, native_data_bytes, answers)
                SELECT chronicum.id, chronicum.before_seq + actum.place, actum.id, actum.kind,
                    actum.actor_kind, actum.actor, actum.content, actum.content_bytes,
                    chronicum.last_actum_at,
                    CASE WHEN actum.place = 1 THEN chronicum.key END,
                    CASE WHEN actum.place = 1 AND chronicum.key IS NOT NULL THEN chronicum.size END,
                    actum.native_format, actum.native_data, actum.native_data_bytes, actum.answers
                FROM chronicum CROSS JOIN unnest(
                    %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::bytea[],
                    %s::text[], %s::text[], %s::bytea[], %s::text[]
                ) WITH ORDINALITY AS actum (id, kind, actor_kind, actor, content, content_bytes,
                    native_format, native_data, native_data_bytes, answers, place)
                RETURNING chronicum_id, seq, id, at
            )
            SELECT true, {INSERTED_ROW} FROM inserted
            UNION ALL
            SELECT false, {_STORED_COLUMNS} FROM existing CROSS JOIN LATERAL (
                SELECT * FROM {{schema}}.acta AS within
                WHERE within.chronicum_id = existing.chronicum_id
                    AND within.seq BETWEEN existing.seq AND existing.seq + existing.size - 1
                OFFSET 0
            ) AS stored
            ORDER BY 3
            """,
            channel=channel,
        )
        # Parameters: owner id, the limit. Rows: the owner's live chronica, newest first.
        self.list_chronica = self._compose(quoted, _listing(after=None))
        # Parameters: owner id, started_at and id of the position, the limit.
        self.list_chronica_after = self._compose(quoted, _listing(after="<"))
        # The same, the position itself included: for a position whose id holds NUL, cut there
        # (no stored id holds NUL, so those before it are those up to the cut id, inclusive).
        self.list_chronica_after_or_at = self._compose(quoted, _listing(after="<="))
        # Parameters: chronicum id, the position's actum id (NULL: before the first), chronicum id,
        # the position twice again, the limit. Rows: none when the chronicum is missing or erased; else
        # (chronicum id, whether the position is an actum of it, then the actum's columns) for
        # each actum after the position, in order (one row of NULL columns when there is none).
        # The position is found walking the primary key back from the newest actum: a follower's
        # position is nearly always among the newest. Without a position that walk is skipped by
        # its own condition on the parameter, which a generic plan (the store's sessions keep
        # one) evaluates once, so it never walks a whole chronicum for no row.
        self.acta_after = self._compose(
            quoted,
            f"""
            WITH live AS (
                SELECT id FROM {{schema}}.chronica WHERE id = %s AND {_LIVE}
            ), position AS (
                SELECT seq FROM {{schema}}.acta WHERE %s::text IS NOT NULL AND chronicum_id = %s AND id = %s
                ORDER BY seq DESC LIMIT 1
            ), known AS (
                SELECT %s::text IS NULL OR EXISTS (SELECT FROM position) AS known
            )
            SELECT live.id, known.known, {_STORED_COLUMNS}
            FROM live CROSS JOIN known LEFT JOIN LATERAL (
                SELECT * FROM {{schema}}.acta
                WHERE chronicum_id = live.id AND known.known
                    AND seq > coalesce((SELECT seq FROM position), 0)
                ORDER BY seq LIMIT %s
            ) AS stored ON true
            ORDER BY stored.seq
            """,
        )
        # Parameters: chronicum id twice. Locks the rows of the live chronicum and of its live
        # forks (those whose lineage names it), in id order, for `erase` and `erase_idle`: a fork
        # being made takes a share lock on the chronica of its lineage, so none appears meanwhile.
        self.lock_live = self._compose(
            quoted,
            f"""
            SELECT id FROM {{schema}}.chronica
            WHERE (id = %s OR lineage_ids @> ARRAY[%s::text]) AND {_LIVE}
            ORDER BY id FOR UPDATE
            """,
        )
        # Parameters: chronicum id, the moment it and its forks must have been idle since (NULL:
        # erase whatever their activity), owner digest, chronicum id. Run after `lock_live`, in
        # its transaction. One row (chronicum id, acta deleted, chronica erased) when the
        # chronicum was live (and, with a moment, it and every fork idle); none otherwise.
        self.erase = self._compose(
            quoted,
            f"""
            WITH found AS (
                SELECT id AS doomed_id, {LAST_ACTIVITY} AS activity FROM {{schema}}.chronica
                WHERE (id = %s OR lineage_ids @> ARRAY[%s::text]) AND {_LIVE}
            ), doomed AS (
                SELECT doomed_id FROM found
                WHERE %s::timestamptz IS NULL
                    OR NOT EXISTS (SELECT FROM found WHERE activity >= %s::timestamptz)
            ), erased AS (
                DELETE FROM {{schema}}.acta WHERE chronicum_id IN (SELECT doomed_id FROM doomed)
                RETURNING seq
            ), marked AS (
                UPDATE {{schema}}.chronica SET {_MARKER}
                FROM doomed
                WHERE id = doomed.doomed_id AND {_LIVE}
                RETURNING id{{channel}}
            )
            SELECT id, (SELECT count(*) FROM erased), (SELECT count(*) FROM marked) FROM marked
            WHERE id = %s
            """,
            channel=erasure_channel,
        )
        # Parameters: owner digest, chronicum id. Turns the live chronicum into its marker if it
        # holds no acta (`last_seq` 0; a plain one, not a fork). A writer moves `last_seq` under
        # the row's lock, and read committed re-evaluates a row updated meanwhile, so an actum
        # that landed first keeps it. One row (the chronicum id) when it did; none otherwise.
        self.withdraw = self._compose(
            quoted,
            f"""
            UPDATE {{schema}}.chronica SET {_MARKER}
            WHERE id = %s AND {_LIVE} AND last_seq = 0 AND forked_from_id IS NULL
            RETURNING id{{channel}}
            """,
            channel=erasure_channel,
        )
        # Parameters: the seconds ahead to mark the chronicum followed, its id, the seconds of
        # marking left below which it is renewed, its id again. Marks the live chronicum followed
        # for that long unless it already is for longer than the second figure (so that followers
        # seldom take the row lock writers need). One row (its id, whether it was renewed) when
        # the chronicum is live; none when it is missing or erased.
        self.follow = self._compose(
            quoted,
            f"""
            WITH renewed AS (
                UPDATE {{schema}}.chronica
                SET followed_until = now() + make_interval(secs => %s)
                WHERE id = %s AND {_LIVE}
                    AND (followed_until IS NULL OR followed_until < now() + make_interval(secs => %s))
                RETURNING id
            )
            SELECT id, EXISTS (SELECT FROM renewed) FROM {{schema}}.chronica WHERE id = %s AND {_LIVE}
            """,
        )
        # Parameters: owner id. Rows: the ids of the owner's live chronica.
        self.owned = self._compose(
            quoted, f"SELECT id FROM {{schema}}.chronica WHERE owner_id = %s AND {_LIVE} ORDER BY id"
        )
        # Parameters: owner id, started_at, last_actum_at, chronicum id, owner digest. One row
        # (the chronicum id) when the marker held that digest and is now the fresh chronicum.
        self.reopen = self._compose(
            quoted,
            """
            UPDATE {schema}.chronica
            SET owner_id = %s, started_at = %s, last_actum_at = %s, last_seq = 0,
                erased_owner_digest = NULL
            WHERE id = %s AND erased_owner_digest = %s
            RETURNING id
            """,
        )
        self._windows: dict[tuple[bool, bool, bool], bytes] = {
            (kinds, actor_kinds, limited): self._window(quoted, kinds, actor_kinds, limited)
            for kinds in (False, True)
            for actor_kinds in (False, True)
            for limited in (False, True)
        }

    def compose(self, template: str) -> bytes:
        """``template`` (a statement with parameters) with this schema's quoted name for ``{schema}``."""
        return self._compose(self._quoted, template)

    def window(self, *, kinds: bool, actor_kinds: bool, limited: bool) -> bytes:
        """The context-window query for one shape of :class:`chronica_core.ActaQuery`.

        Parameters, in order: the chronicum id, the kinds (a list, when ``kinds``), the actor kinds
        (when ``actor_kinds``), the limit (when ``limited``), the chronicum id again. Rows: none
        when the chronicum is missing; one row of NULLs when it holds no matching actum; else the
        acta oldest first, as actum rows (see :data:`ACTUM_ROW_SIZE`) whose second column, in
        place of ``seq``, says whether the chronicum's history has a shape (a summary, or a tool
        response naming its request); the chronicum's own id and that flag in the first two
        columns of the row of NULLs too.
        """
        return self._windows[kinds, actor_kinds, limited]

    @staticmethod
    def _window(quoted: str, kinds: bool, actor_kinds: bool, limited: bool) -> bytes:
        filters = "".join(
            condition
            for wanted, condition in (
                (kinds, " AND kind = ANY(%s::text[])"),
                (actor_kinds, " AND actor_kind = ANY(%s::text[])"),
            )
            if wanted
        )
        newest = f" ORDER BY seq DESC LIMIT {_UNPLANNED_LIMIT}" if limited else ""
        return Statements._compose(
            quoted,
            f"""
            SELECT chronicum.id, chronicum.shaped,
                recent.{ACTUM_COLUMNS.split(", ", 2)[2].replace(", ", ", recent.")}
            FROM {{schema}}.chronica AS chronicum
            LEFT JOIN LATERAL (
                SELECT {ACTUM_COLUMNS} FROM {{schema}}.acta
                WHERE chronicum_id = %s{filters}{newest}
            ) AS recent ON true
            WHERE chronicum.id = %s AND chronicum.{_LIVE}
            ORDER BY recent.seq
            """,
        )

    @staticmethod
    def _migration_script(quoted: str) -> bytes:
        """One multi-statement script: lock, then apply each missing migration, in one transaction.

        Run with no parameters (PostgreSQL's simple protocol), so its statements form one implicit
        transaction; ``pg_advisory_xact_lock`` makes concurrent migrators of one schema take turns,
        and each later statement sees what the one before it committed.
        """
        steps = "".join(
            "DO "
            + _dollar_quoted(
                Statements._compose(
                    quoted,
                    f"""
                    BEGIN
                        IF NOT EXISTS (SELECT FROM {{schema}}.{VERSION_TABLE} WHERE version = {step.version})
                        THEN
                            {step.script}
                            INSERT INTO {{schema}}.{VERSION_TABLE} (version, description)
                            VALUES ({step.version}, {sql.Literal(step.description).as_string(None)});
                        END IF;
                    END;
                    """,
                    parameters=False,
                ).decode()
            )
            + "; "
            for step in MIGRATIONS
        )
        return Statements._compose(
            quoted,
            f"""
            SELECT pg_advisory_xact_lock({_migration_lock_key(quoted)});
            CREATE SCHEMA IF NOT EXISTS {{schema}};
            CREATE TABLE IF NOT EXISTS {{schema}}.{VERSION_TABLE} (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now(),
                description text NOT NULL
            );
            {{steps}}
            """,
            parameters=False,
            steps=steps,
        )

    @staticmethod
    def _compose(quoted: str, template: str, *, parameters: bool = True, **values: str) -> bytes:
        """``template`` on one line, with ``{schema}`` (and each ``{name}`` of ``values``) put in as is.

        The template's own spacing is folded before anything goes in, and what goes in is never
        read again, so spaces, tabs, ``%`` or braces inside a quoted name are kept exactly. In a
        statement run with ``parameters`` each ``%`` put in is doubled (psycopg would read it as a
        placeholder).
        """
        values = {"schema": quoted, **values}
        folded = " ".join(template.split())

        def value(match: re.Match[str]) -> str:
            text = values[match[1]]
            return text.replace("%", "%%") if parameters else text

        return re.sub(r"\{(\w+)\}", value, folded).encode()


def _dollar_quoted(body: str) -> str:
    """``body`` between dollar quotes whose tag it does not contain (so no name inside can end them)."""
    tag, number = "$migration$", 0
    while tag in body:
        number += 1
        tag = f"$migration{number}$"
    return f"{tag}{body}{tag}"
