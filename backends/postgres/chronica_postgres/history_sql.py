"""The statements of the history capability in PostgreSQL: forks, summaries, windows, acta by id.

Where things are (the columns are added by migration 4, see :mod:`chronica_postgres.schema`):

- **Positions** are ``acta.seq``. A fork's row starts with ``last_seq`` at the position it
  branched at, so its own acta take the positions after it; a plain chronicum's start at 1.
- **Lineage**: a fork's ``chronica`` row holds its segments as three arrays, ``lineage_ids``,
  ``lineage_after`` and ``lineage_upto`` (NULL: no bound), its own segment last; a plain
  chronicum's are NULL (one segment, its own acta). A GIN index on ``lineage_ids`` finds the
  forks whose lineage names a chronicum (for erasure); ``forked_from_id`` and
  ``forked_from_actum`` hold its :class:`chronica_core.ForkPoint`. A fork copies no actum: its
  shared history is read from its ancestors' rows, by primary key ranges.
- **Summaries**: ``acta.summarizes_first`` / ``summarizes_last`` hold the ids of the range (the
  :class:`chronica_core.Span`), ``summary_first`` / ``summary_last`` its positions; a partial index
  on ``(chronicum_id, seq)`` of the summaries serves the layout. ``chronica.summaries`` counts a
  chronicum's own summaries: with ``started_at`` (new for an id erased and started again) it is
  the layout version that ``record_summary`` checks under the row lock.
- **Tool exchanges**: ``acta.answers`` names the request; the index on ``(chronicum_id, id)``
  finds an actum by its id. ``chronica.shaped`` is set by the first summary or tool response
  naming its request: the store's plain ``acta`` read then answers ``StaleLayout``.

Every read is one statement, so one snapshot: a window reads every range, every summary shown
and every request reached back for, with the layout version, in one round trip.
"""

from __future__ import annotations

from chronica_postgres.schema import ACTUM_COLUMNS, CHRONICA_COLUMNS, INSERTED_ROW, NEXT_AT, Statements

__all__ = ["NO_BOUND", "HistoryStatements"]

NO_BOUND = 9223372036854775807
"""The largest ``bigint``: the upper bound of a segment without one."""

_LIVE = "erased_owner_digest IS NULL"

_ROW = ACTUM_COLUMNS.replace(", ", ", a.").join(("a.", ""))
""":data:`ACTUM_COLUMNS` of the ``acta`` row named ``a``."""

_NO_ACTUM = ", ".join(["NULL"] * len(ACTUM_COLUMNS.split(", ")))
"""An actum row of NULLs."""


def _in_segment(segment: str) -> str:
    """The condition that the actum ``a`` lies in the segment ``segment`` (chronicum_id, after, upto)."""
    return (
        f"a.chronicum_id = {segment}.chronicum_id AND a.seq > {segment}.after"
        f" AND a.seq <= coalesce({segment}.upto, {NO_BOUND})"
    )


def _range_read(*, newest: bool) -> str:
    """One branch of a range read: the newest (or oldest) ``r.lim`` matching acta of segment ``r``."""
    order = "DESC" if newest else ""
    gate = "r.newest" if newest else "NOT r.newest"
    return f"""
        (SELECT {_ROW} FROM {{schema}}.acta AS a
        WHERE {_in_segment("r")} AND {gate}
            AND (r.kinds IS NULL OR a.kind = ANY(r.kinds::text[]))
            AND (r.actor_kinds IS NULL OR a.actor_kind = ANY(r.actor_kinds::text[]))
            AND (r.summaries OR a.summary_first IS NULL)
        ORDER BY a.seq {order} LIMIT CASE WHEN r.lim > 0 THEN r.lim END)
        """


class HistoryStatements:
    """The history statements for one schema, composed once.

    Args:
        statements: the store's statements (for the schema's quoted name and the channel).
    """

    def __init__(self, statements: Statements) -> None:
        segments = "unnest(%s::text[], %s::bigint[], %s::bigint[]) AS {name} (chronicum_id, after, upto)"
        # Parameters: chronicum id. Rows: none when the chronicum is missing or erased; else its
        # columns, its lineage's three arrays and its summary count, then the position, range and
        # actor kind of one summary of its history (NULLs when it has none), in position order.
        self.layout = statements.compose(
            f"""
            SELECT {CHRONICA_COLUMNS.replace(", ", ", c.").join(("c.", ""))},
                c.lineage_ids, c.lineage_after, c.lineage_upto, c.summaries,
                mark.seq, mark.summary_first, mark.summary_last, mark.actor_kind
            FROM {{schema}}.chronica AS c
            LEFT JOIN LATERAL (
                SELECT a.seq, a.summary_first, a.summary_last, a.actor_kind
                FROM unnest(
                    coalesce(c.lineage_ids, ARRAY[c.id]),
                    coalesce(c.lineage_after, ARRAY[0::bigint]),
                    coalesce(c.lineage_upto, ARRAY[NULL::bigint])
                ) AS segment (chronicum_id, after, upto)
                JOIN {{schema}}.acta AS a ON {_in_segment("segment")} AND a.summary_first IS NOT NULL
            ) AS mark ON true
            WHERE c.id = %s AND c.{_LIVE}
            ORDER BY mark.seq
            """
        )
        # Parameters: chronicum id; the range reads as nine arrays (read number, segment chronicum
        # ids, after, upto, kinds and actor kinds as text[] literals or NULL, limits, newest,
        # summaries); the position reads as three arrays (read number, chronicum id, position);
        # the segments to find answered requests in, as three arrays (empty: none). Rows: none when
        # the chronicum is missing or erased; else (0, NULL, started_at, summaries, NULLs...),
        # then (1, read number, NULL, NULL, actum row) for each actum read, by read number and
        # position, then (2, NULL, NULL, NULL, actum row) for each request found.
        self.window = statements.compose(
            f"""
            WITH chronicum AS (
                SELECT started_at, summaries FROM {{schema}}.chronica WHERE id = %s AND {_LIVE}
            ), ranges AS (
                SELECT * FROM unnest(
                    %s::bigint[], %s::text[], %s::bigint[], %s::bigint[], %s::text[], %s::text[],
                    %s::bigint[], %s::boolean[], %s::boolean[]
                ) AS r (place, chronicum_id, after, upto, kinds, actor_kinds, lim, newest, summaries)
            ), read AS (
                SELECT r.place, found.* FROM chronicum CROSS JOIN ranges AS r CROSS JOIN LATERAL (
                    {_range_read(newest=True)}
                    UNION ALL
                    {_range_read(newest=False)}
                ) AS found
                UNION ALL
                SELECT p.place, {_ROW}
                FROM chronicum
                CROSS JOIN unnest(%s::bigint[], %s::text[], %s::bigint[]) AS p (place, chronicum_id, seq)
                JOIN {{schema}}.acta AS a ON a.chronicum_id = p.chronicum_id AND a.seq = p.seq
            ), answered AS (
                SELECT {_ROW}
                FROM (SELECT DISTINCT answers FROM read WHERE answers IS NOT NULL) AS wanted
                CROSS JOIN {segments.format(name="segment")}
                JOIN {{schema}}.acta AS a ON a.id = wanted.answers AND {_in_segment("segment")}
            )
            SELECT 0, NULL::bigint, started_at, summaries, {_NO_ACTUM} FROM chronicum
            UNION ALL
            SELECT 1, place, NULL, NULL, {ACTUM_COLUMNS} FROM read
            UNION ALL
            SELECT 2, NULL, NULL, NULL, {ACTUM_COLUMNS} FROM answered
            ORDER BY 1, 2, 6
            """
        )
        # Parameters: the lineage as three arrays, the actum ids. Rows: the actum rows of the
        # lineage's acta with those ids (the position is `seq`).
        self.locate = statements.compose(
            f"""
            SELECT {_ROW} FROM {segments.format(name="segment")}
            JOIN {{schema}}.acta AS a ON a.id = ANY(%s::text[]) AND {_in_segment("segment")}
            """
        )
        # Parameters: the ids of the source and of the lineage's other chronica (each once); the
        # fork's id, owner id, started_at, last_actum_at, first own position minus one, source id,
        # source actum id, lineage as three arrays; how many ids the first array holds. One row:
        # how many of those chronica are live (share-locked until the fork commits, so that an
        # erasure of any of them, which locks their rows first, waits for the fork and erases it
        # too, or the fork waits for it and finds it gone), and whether the fork was inserted.
        self.fork = statements.compose(
            f"""
            WITH locked AS (
                SELECT id FROM {{schema}}.chronica WHERE id = ANY(%s::text[]) AND {_LIVE}
                ORDER BY id FOR KEY SHARE
            ), inserted AS (
                INSERT INTO {{schema}}.chronica
                    (id, owner_id, started_at, last_actum_at, last_seq, forked_from_id, forked_from_actum,
                     lineage_ids, lineage_after, lineage_upto)
                SELECT %s::text, %s::text, %s::timestamptz, %s::timestamptz, %s::bigint, %s::text, %s::text,
                    %s::text[], %s::bigint[], %s::bigint[]
                WHERE (SELECT count(*) FROM locked) = %s::bigint
                ON CONFLICT (id) DO NOTHING
                RETURNING id
            )
            SELECT (SELECT count(*) FROM locked), EXISTS (SELECT FROM inserted)
            """
        )
        # Parameters: chronicum id, key (NULL: none), the layout version (started_at, summary
        # count; NULLs match nothing), chronicum id, then the actum's id, kind, actor kind, actor,
        # content (two), key, native format, native data (two), answers, the span's ids, the
        # range's positions, then the chronicum id again. Rows: (1, inserted row: ids and at) when
        # written; (2, the actum row) when the key was used before; (3, chronicum id, NULLs...)
        # when the chronicum is live (with neither: its layout changed); none when it is missing.
        # A writer racing on the same key fails on the unique index.
        self.record_summary = statements.compose(
            f"""
            WITH existing AS (
                SELECT {ACTUM_COLUMNS} FROM {{schema}}.acta
                WHERE chronicum_id = %s AND idempotency_key = %s
            ), chronicum AS (
                UPDATE {{schema}}.chronica
                SET last_seq = last_seq + 1, last_actum_at = {NEXT_AT}, summaries = summaries + 1,
                    shaped = true
                WHERE started_at = %s::timestamptz AND summaries = %s::integer
                    AND id = %s AND {_LIVE} AND NOT EXISTS (SELECT FROM existing)
                RETURNING id, last_seq, last_actum_at{statements.append_notification}
            ), inserted AS (
                INSERT INTO {{schema}}.acta
                    (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,
                     idempotency_key, native_format, native_data, native_data_bytes, answers,
                     summarizes_first, summarizes_last, summary_first, summary_last)
                SELECT chronicum.id, chronicum.last_seq, %s, %s, %s, %s, %s::text, %s::bytea,
                    chronicum.last_actum_at, %s::text, %s::text, %s::text, %s::bytea, %s::text,
                    %s::text, %s::text, %s::bigint, %s::bigint
                FROM chronicum
                RETURNING chronicum_id, seq, id, at
            )
            SELECT 1, {INSERTED_ROW} FROM inserted
            UNION ALL
            SELECT 2, {ACTUM_COLUMNS} FROM existing
            UNION ALL
            SELECT 3, id, {_NO_ACTUM.split(", ", 1)[1]} FROM {{schema}}.chronica WHERE id = %s AND {_LIVE}
            ORDER BY 1
            """
        )
