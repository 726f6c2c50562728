"""The tables, their migrations and every statement the PostgreSQL store runs, as SQL text.

Layout (in the schema given by the ``schema`` option, ``public`` by default):

- ``chronica``: ``id`` (primary key), ``owner_id``, ``started_at``, ``last_actum_at`` and
  ``last_seq``, the ``seq`` of the chronicum's newest actum (0 while it has none).
- ``acta``: ``chronicum_id`` (references ``chronica``), ``seq``, ``id``, ``kind``, ``actor_kind``,
  ``actor``, ``content`` / ``content_bytes``, ``at`` and ``idempotency_key``; primary key
  ``(chronicum_id, seq)`` and no index led by ``seq`` alone (with one the planner may walk the whole
  table backwards for a context window); a unique index on ``(chronicum_id, idempotency_key)``
  where the key is set.
- ``chronica_schema_version``: one row per migration applied (``version``, ``applied_at``,
  ``description``).

Content: PostgreSQL ``text`` cannot hold NUL, so content without NUL (nearly all) is kept in
``content`` as text, readable and searchable in SQL, and content with NUL is kept, UTF-8 encoded,
in ``content_bytes``; exactly one of the two is set (a check constraint says so).

Order: ``record`` locks the chronicum's row while it takes the next ``seq``, so writers to one
chronicum commit one after the other in ``seq`` order; a reader never sees an actum without every
actum ordered before it. (A sequence would not do: commit order can differ from sequence order.)
The actum's ``at`` is taken under that lock too, from the server's clock, and never earlier than
the chronicum's ``last_actum_at``: ``at`` never decreases along the order.

Every statement returns the chronicum id of its rows (and ``record`` the actum id), so that the
store can check that a row answers the statement it sent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from psycopg import sql

__all__ = [
    "ACTA_IDEMPOTENCY_INDEX",
    "ACTA_TO_CHRONICA_KEY",
    "CHRONICA_PRIMARY_KEY",
    "LATEST_VERSION",
    "MIGRATIONS",
    "SET_UTC",
    "Migration",
    "Statements",
]

CHRONICA_PRIMARY_KEY = "chronica_pkey"
"""Name of the primary key of ``chronica``: a violation means the chronicum exists."""

ACTA_TO_CHRONICA_KEY = "acta_chronicum_id_fkey"
"""Name of the foreign key from ``acta`` to ``chronica``: a violation means the chronicum is missing."""

ACTA_IDEMPOTENCY_INDEX = "acta_idempotency_key"
"""Name of the unique index on ``(chronicum_id, idempotency_key)``."""


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
)
"""Every migration, oldest first."""

LATEST_VERSION = MIGRATIONS[-1].version
"""The schema version this package reads and writes."""

SET_UTC = b"SET TIME ZONE 'UTC'"
"""Run on each new pooled connection: timestamps then arrive in UTC, with no conversion to do."""

_ACTUM_COLUMNS = "chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at"
"""The columns of an actum row, in the order every statement returns them."""

_NEXT_AT = "greatest(clock_timestamp(), last_actum_at)"
"""The ``at`` of the next actum, taken under the chronicum's row lock (``greatest`` skips NULL)."""


def _migration_lock_key(schema: str) -> int:
    """The advisory-lock key (a signed 64-bit integer) guarding migrations of ``schema``."""
    digest = hashlib.blake2b(f"chronica-postgres migrate {schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Statements:
    """Every statement of the store for one schema, composed once as bytes ready to execute.

    Args:
        schema: the schema holding the tables (quoted as an identifier; any name works).
    """

    def __init__(self, schema: str) -> None:
        self.schema = schema
        quoted = sql.Identifier(schema).as_string(None)
        self.read_version = self._compose(
            quoted, "SELECT coalesce(max(version), 0) FROM {schema}.chronica_schema_version"
        )
        self.migrate = self._migration_script(quoted)
        self.create = self._compose(
            quoted,
            "INSERT INTO {schema}.chronica (id, owner_id, started_at, last_actum_at)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING true",
        )
        self.get = self._compose(
            quoted, "SELECT id, owner_id, started_at, last_actum_at FROM {schema}.chronica WHERE id = %s"
        )
        # Parameters: chronicum id, id, kind, actor kind, actor, content, content bytes, key.
        self.record = self._compose(
            quoted,
            f"""
            WITH chronicum AS (
                UPDATE {{schema}}.chronica
                SET last_seq = last_seq + 1, last_actum_at = {_NEXT_AT}
                WHERE id = %s
                RETURNING id, last_seq, last_actum_at
            )
            INSERT INTO {{schema}}.acta
                (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at, idempotency_key)
            SELECT chronicum.id, chronicum.last_seq, %s, %s, %s, %s, %s::text, %s::bytea,
                chronicum.last_actum_at, %s::text
            FROM chronicum
            RETURNING chronicum_id, id, at
            """,
        )
        # Parameters: chronicum id, key, then those of `record`. One row: (true, chronicum id, seq,
        # id, NULLs..., at) when inserted, (false, the stored actum's columns) when the key was used
        # before; none when the chronicum is missing. A writer racing on the same key fails on the
        # unique index.
        self.record_idempotent = self._compose(
            quoted,
            f"""
            WITH existing AS (
                SELECT {_ACTUM_COLUMNS} FROM {{schema}}.acta
                WHERE chronicum_id = %s AND idempotency_key = %s
            ), chronicum AS (
                UPDATE {{schema}}.chronica
                SET last_seq = last_seq + 1, last_actum_at = {_NEXT_AT}
                WHERE id = %s AND NOT EXISTS (SELECT FROM existing)
                RETURNING id, last_seq, last_actum_at
            ), inserted AS (
                INSERT INTO {{schema}}.acta
                    (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,
                     idempotency_key)
                SELECT chronicum.id, chronicum.last_seq, %s, %s, %s, %s, %s::text, %s::bytea,
                    chronicum.last_actum_at, %s::text
                FROM chronicum
                RETURNING chronicum_id, seq, id, at
            )
            SELECT true, chronicum_id, seq, id, NULL, NULL, NULL, NULL, NULL::bytea, at FROM inserted
            UNION ALL
            SELECT false, {_ACTUM_COLUMNS} FROM existing
            """,
        )
        self.read_keyed = self._compose(
            quoted,
            f"SELECT {_ACTUM_COLUMNS} FROM {{schema}}.acta WHERE chronicum_id = %s AND idempotency_key = %s",
        )
        self._windows: dict[tuple[bool, bool, bool], bytes] = {
            (kinds, actor_kinds, limited): self._window(quoted, kinds, actor_kinds, limited)
            for kinds in (False, True)
            for actor_kinds in (False, True)
            for limited in (False, True)
        }

    def window(self, *, kinds: bool, actor_kinds: bool, limited: bool) -> bytes:
        """The context-window query for one shape of :class:`chronica_core.ActaQuery`.

        Parameters, in order: the chronicum id, the kinds (a list, when ``kinds``), the actor kinds
        (when ``actor_kinds``), the limit (when ``limited``), the chronicum id again. Rows: none
        when the chronicum is missing; one row of NULLs when it holds no matching actum; else the
        acta ``(chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at)`` oldest
        first (the chronicum's own id in the first column of the row of NULLs too).
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
        newest = " ORDER BY seq DESC LIMIT %s" if limited else ""
        return Statements._compose(
            quoted,
            f"""
            SELECT chronicum.id, recent.{_ACTUM_COLUMNS.split(", ", 1)[1].replace(", ", ", recent.")}
            FROM {{schema}}.chronica AS chronicum
            LEFT JOIN LATERAL (
                SELECT {_ACTUM_COLUMNS} FROM {{schema}}.acta
                WHERE chronicum_id = %s{filters}{newest}
            ) AS recent ON true
            WHERE chronicum.id = %s
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
            f"""
            DO $migration$ BEGIN
                IF NOT EXISTS (SELECT FROM {{schema}}.chronica_schema_version WHERE version = {step.version})
                THEN
                    {step.script}
                    INSERT INTO {{schema}}.chronica_schema_version (version, description)
                    VALUES ({step.version}, {sql.Literal(step.description).as_string(None)});
                END IF;
            END $migration$;
            """
            for step in MIGRATIONS
        )
        return Statements._compose(
            quoted,
            f"""
            SELECT pg_advisory_xact_lock({_migration_lock_key(quoted)});
            CREATE SCHEMA IF NOT EXISTS {{schema}};
            CREATE TABLE IF NOT EXISTS {{schema}}.chronica_schema_version (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now(),
                description text NOT NULL
            );
            {steps}
            """,
        )

    @staticmethod
    def _compose(quoted: str, template: str) -> bytes:
        return " ".join(template.replace("{schema}", quoted).split()).encode()
