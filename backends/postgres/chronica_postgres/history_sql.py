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


RangeShape = tuple[bool, bool, bool, bool, bool]
"""What the statement of a range read depends on: whether it filters kinds, filters actor kinds,
has a limit, reads the newest (else the oldest), and reads summaries too."""

ReadShape = RangeShape | None
"""A range read's shape, or ``None`` for a read of positions."""

WindowShape = tuple[tuple[ReadShape, ...], int]
"""The shape of a window statement: its reads' shapes, and how many segments it finds requests in."""

SHAPES_KEPT = 512
"""How many window and locate statements a store keeps composed (an app asks for a few shapes)."""


def _range_read(place: int, shape: RangeShape) -> str:
    """The range read numbered ``place``: matching acta of a segment, the newest or oldest first.

    Parameters: chronicum id, after, upto, then the kinds, the actor kinds (as ``text[]``
    literals) and the limit, where the shape has them.
    """
    kinds, actor_kinds, limited, newest, summaries = shape
    filters = "".join(
        condition
        for wanted, condition in (
            (kinds, " AND a.kind = ANY(%s::text[])"),
            (actor_kinds, " AND a.actor_kind = ANY(%s::text[])"),
            (not summaries, " AND a.summary_first IS NULL"),
        )
        if wanted
    )
    order = " DESC" if newest else ""
    limit = " LIMIT %s" if limited else ""
    return f"""
        (SELECT {place}::bigint AS place, {_ROW} FROM {{schema}}.acta AS a
        WHERE a.chronicum_id = %s AND a.seq > %s AND a.seq <= %s{filters}
        ORDER BY a.seq{order}{limit})
        """


def _positions_read(place: int) -> str:
    """The read numbered ``place`` of the acta at some positions. Parameters: chronicum id, positions."""
    return f"""
        (SELECT {place}::bigint AS place, {_ROW} FROM {{schema}}.acta AS a
        WHERE a.chronicum_id = %s AND a.seq = ANY(%s::bigint[]))
        """


def _window(shape: WindowShape) -> str:
    """The window statement of one shape (see :meth:`HistoryStatements.window`)."""
    reads, segments = shape
    branches = [
        _positions_read(place) if read is None else _range_read(place, read)
        for place, read in enumerate(reads, 1)
    ] or [f"(SELECT 0::bigint AS place, {_ROW} FROM {{schema}}.acta AS a WHERE false)"]
    # driven by the ids wanted (none, usually: then no index is read), each found by its id
    answered = " UNION ALL ".join(
        f"""
        SELECT found.* FROM wanted CROSS JOIN LATERAL (
            SELECT * FROM ({_by_id("wanted.answers")}) AS a WHERE a.seq > %s AND a.seq <= %s
        ) AS found
        """
        for _ in range(segments)
    )
    finding = (
        f"""
        , wanted AS (
            SELECT DISTINCT answers FROM read WHERE answers IS NOT NULL
        ), answered AS ({answered})
        """
        if segments
        else ""
    )
    found = f" UNION ALL SELECT 2, NULL, NULL, NULL, {ACTUM_COLUMNS} FROM answered" if segments else ""
    return f"""
        WITH chronicum AS (
            SELECT started_at, summaries FROM {{schema}}.chronica WHERE id = %s AND {_LIVE}
        ), read AS ({" UNION ALL ".join(branches)}){finding}
        SELECT 0, NULL::bigint, started_at, summaries, {_NO_ACTUM} FROM chronicum
        UNION ALL
        SELECT 1, place, NULL, NULL, {ACTUM_COLUMNS} FROM read{found}
        ORDER BY 1, 2, 6
        """


def _by_id(ids: str) -> str:
    """The acta of one chronicum (a parameter) whose id is ``ids``, found by the index of acta by id.

    The bounds of a segment are checked around it: inside, the planner could take them for a
    range of the primary key and read the whole segment (``OFFSET 0`` keeps them out).
    """
    return f"SELECT {_ROW} FROM {{schema}}.acta AS a WHERE a.chronicum_id = %s AND a.id = {ids} OFFSET 0"


def _locate(segments: int) -> str:
    """The statement finding acta by id in ``segments`` segments (see :meth:`HistoryStatements.locate`)."""
    return " UNION ALL ".join(
        f"SELECT * FROM ({_by_id('ANY(%s::text[])')}) AS a WHERE a.seq > %s AND a.seq <= %s"
        for _ in range(segments)
    )


class HistoryStatements:
    """The history statements for one schema, composed once.

    Args:
        statements: the store's statements (for the schema's quoted name and the channel).
    """

    def __init__(self, statements: Statements) -> None:
        self._statements = statements
        self._windows: dict[WindowShape, bytes] = {}
        self._locates: dict[int, bytes] = {}
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
        # Parameters: chronicum id, key (NULL: none), now, the layout version (started_at, summary
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

    def window(self, shape: WindowShape) -> bytes:
        """The statement of a window of ``shape``: its reads, and the requests they answer, in one.

        Parameters: the chronicum id; each read's (see :func:`_range_read`, :func:`_positions_read`);
        then chronicum id, after and upto of each segment to find requests in. Rows: none when
        the chronicum is missing or erased; else ``(0, NULL, started_at, summaries, NULLs...)``,
        then ``(1, read number, NULL, NULL, actum row)`` for each actum read, by read number and
        position, then ``(2, NULL, NULL, NULL, actum row)`` for each request found. Each read is
        a range of an index (the primary key, or the index of acta by id for the requests).
        """
        statement = self._windows.get(shape)
        if statement is None:
            if len(self._windows) >= SHAPES_KEPT:
                self._windows.clear()
            statement = self._windows[shape] = self._statements.compose(_window(shape))
        return statement

    def locate(self, segments: int) -> bytes:
        """The statement finding acta by id in a lineage of ``segments`` segments.

        Parameters: chronicum id, the ids (a list), after and upto, for each segment. Rows: the
        actum rows found (the position is ``seq``).
        """
        statement = self._locates.get(segments)
        if statement is None:
            if len(self._locates) >= SHAPES_KEPT:
                self._locates.clear()
            statement = self._locates[segments] = self._statements.compose(_locate(segments))
        return statement
