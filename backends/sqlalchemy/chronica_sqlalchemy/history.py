"""The ``history`` capability as plans: layouts, windows, ``locate`` and forks, each read one statement.

An actum's position is its ``seq``: a fork's counter starts at the position it branched at, so
its own acta follow the shared history and nothing is renumbered or copied. A fork's shared
history is its rows in ``lineages``; its own acta are its rows in ``acta``.

- :meth:`HistoryPlans.layout` is one ``UNION ALL`` of the chronicum's row, its lineage and the
  summaries of every segment (its own, and its ancestors' up to where it shares them).
- :meth:`HistoryPlans.window` is one statement: each read a derived table (a range of one
  chronicum's acta along its primary key, newest or oldest first, limited; or the summaries at
  given positions), the chronicum's row for its layout version and, for tool exchanges, the
  requests the responses read name, looked up from each response through ``acta_by_id`` in each
  segment of the lineage (the form a database plans so: ``StoreDialect.answered``).
  One statement is one snapshot, and one round trip.
- :meth:`HistoryPlans.fork` inserts the fork's row and lineage in one transaction, counting the
  fork in its source's ``forked`` meanwhile (see :mod:`chronica_sqlalchemy.erasure`).

``record_summary`` is an append (see :meth:`chronica_sqlalchemy.plans.Plans.record_summary`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CursorResult,
    Dialect,
    Executable,
    Integer,
    Select,
    and_,
    bindparam,
    insert,
    literal_column,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy.exc import IntegrityError

from chronica_core.errors import ChronicumExists, ChronicumNotFound
from chronica_core.history import (
    Layout,
    Located,
    PositionsRead,
    RangeRead,
    Segment,
    SummaryMark,
    WindowReads,
    WindowRows,
)
from chronica_core.model import ActorKind, Chronicum
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_core.rows import check_row
from chronica_sqlalchemy.acta_rows import (
    ACTUM_COLUMNS,
    actum_columns,
    actum_of,
    chronicum_columns,
    chronicum_of,
)
from chronica_sqlalchemy.dialects import StoreDialect
from chronica_sqlalchemy.schema import Tables
from chronica_sqlalchemy.steps import COMMIT, ROLLBACK, Step, execute

__all__ = ["HistoryPlans"]

_ACTA, _ANSWERED, _ITSELF = 0, 1, 2  # the parts of a window's rows
_CHRONICUM, _LINEAGE, _SUMMARY = 0, 1, 2  # the parts of a layout's rows


_Shape = tuple[Any, ...]
"""What a read's statement depends on (not the values it binds)."""

_SHAPES = 256
"""How many window and ``locate`` statements a store keeps built."""


_NO_BOUND = 2**62
"""The ``upto`` bound of a segment without one: a bound either way keeps PostgreSQL's generic
plan of a range read on the primary key, backwards, instead of sorting the whole chronicum."""


def _segment_shape(name: str, segment: Segment, parameters: dict[str, Any]) -> _Shape:
    """Bind ``segment`` as ``<name>_c``, ``<name>_after`` and ``<name>_upto``; return its shape."""
    parameters[f"{name}_c"], parameters[f"{name}_after"] = segment.chronicum_id, segment.after
    parameters[f"{name}_upto"] = _NO_BOUND if segment.upto is None else segment.upto
    return ("segment",)


def _read_shape(index: int, read: RangeRead | PositionsRead, parameters: dict[str, Any]) -> _Shape:
    """Bind ``read`` as the parameters ``r<index>_...``; return its shape."""
    name = f"r{index}"
    if isinstance(read, PositionsRead):
        parameters[f"{name}_c"], parameters[f"{name}_p"] = read.chronicum_id, list(read.positions)
        return ("positions",)
    _segment_shape(name, read.segment, parameters)
    if read.actum_kinds is not None:
        parameters[f"{name}_k"] = [kind.value for kind in read.actum_kinds]
    if read.actor_kinds is not None:
        parameters[f"{name}_a"] = [kind.value for kind in read.actor_kinds]
    if read.limit > 0:
        parameters[f"{name}_l"] = read.limit
    return (
        "range",
        read.actum_kinds is not None,
        read.actor_kinds is not None,
        read.limit > 0,
        read.newest,
        read.summaries,
    )


def _part(number: int) -> Any:
    return literal_column(str(number)).label("part")


class HistoryPlans:
    """The history plans of one store (see the module).

    Args:
        tables: the store's tables.
        rules: the store's dialect room.
        dialect: the engine's SQLAlchemy dialect.
        read_autocommit: whether its one-statement reads ask for autocommit (see ``Plans``).
    """

    def __init__(self, tables: Tables, rules: StoreDialect, dialect: Dialect, read_autocommit: bool) -> None:
        self.tables, self.rules, self.dialect = tables, rules, dialect
        self.read_autocommit = read_autocommit
        chronica, lineages, summaries = tables.chronica, tables.lineages, tables.summaries
        by_id = chronica.c.id == bindparam("chronicum_id")
        live = chronica.c.owner_digest.is_(None)
        self._itself = select(chronica.c.id).where(by_id, live)
        self._source = update(chronica).where(by_id, live).values(forked=chronica.c.forked + 1)
        c = chronica.c
        itself = select(
            _part(_CHRONICUM),
            *chronicum_columns(chronica),
            c.base,
            c.layout_version,
            null(),
            null(),
        ).where(by_id, live)
        lineage = select(
            _part(_LINEAGE),
            lineages.c.source_id,
            null(),
            null(),
            null(),
            null(),
            null(),
            lineages.c.ordinal,
            lineages.c.after_position,
            lineages.c.upto_position,
            null(),
        ).where(lineages.c.chronicum_id == bindparam("chronicum_id"))
        marks = (
            summaries.c.position,
            summaries.c.first_position,
            summaries.c.last_position,
            summaries.c.actor_kind,
        )
        own = select(_part(_SUMMARY), *(null() for _ in range(6)), *marks).where(
            summaries.c.chronicum_id == bindparam("chronicum_id")
        )
        shared = (
            select(_part(_SUMMARY), *(null() for _ in range(6)), *marks)
            .select_from(
                lineages.join(
                    summaries,
                    and_(
                        summaries.c.chronicum_id == lineages.c.source_id,
                        summaries.c.position > lineages.c.after_position,
                        summaries.c.position <= lineages.c.upto_position,
                    ),
                )
            )
            .where(lineages.c.chronicum_id == bindparam("chronicum_id"))
        )
        self._layout = union_all(itself, lineage, own, shared)
        self._statements: dict[Hashable, Executable] = {}

    # --- layout ---------------------------------------------------------------------------

    def layout(self, chronicum_id: str) -> Plan[Step, Layout]:
        """The chronicum's layout, in one statement; ``ChronicumNotFound`` for a missing one."""
        result: CursorResult[Any] = yield execute(
            self._layout, {"chronicum_id": chronicum_id}, autocommit=self.read_autocommit
        )
        rows: list[Any] = list(result.all())
        itself = [row for row in rows if row[0] == _CHRONICUM]
        if not itself:
            raise ChronicumNotFound(chronicum_id)
        row = itself[0]
        check_row("sqlalchemy: layout", "chronicum id", chronicum_id, row[1])
        chronicum = chronicum_of(row[1:])
        shared = sorted(
            (int(r[7]), Segment(str(r[1]), int(r[8]), int(r[9]))) for r in rows if r[0] == _LINEAGE
        )
        lineage = (*(segment for _, segment in shared), Segment(chronicum_id, int(row[7]), None))
        marks = sorted(
            (
                SummaryMark(int(r[7]), int(r[8]), int(r[9]), ActorKind(r[10]))
                for r in rows
                if r[0] == _SUMMARY
            ),
            key=lambda mark: mark.position,
        )
        return Layout(chronicum, lineage, tuple(marks), int(row[8]))

    # --- window ---------------------------------------------------------------------------

    def window(self, chronicum_id: str, reads: WindowReads) -> Plan[Step, WindowRows]:
        """Perform ``reads`` in one statement (see the module); ``ChronicumNotFound`` if it is missing."""
        parameters: dict[str, Any] = {"chronicum_id": chronicum_id}
        shapes = tuple(_read_shape(index, read, parameters) for index, read in enumerate(reads.reads))
        answered_in = reads.answered_in if reads.reads else None
        lookups = None
        if answered_in is not None:
            lookups = tuple(_segment_shape(f"s{index}", s, parameters) for index, s in enumerate(answered_in))
        statement = self._cached(("window", shapes, lookups), lambda: self._window(shapes, lookups))
        result: CursorResult[Any] = yield execute(statement, parameters, autocommit=self.read_autocommit)
        rows: list[Any] = list(result.all())
        itself = next((row for row in rows if row[0] == _ITSELF), None)
        if itself is None:
            raise ChronicumNotFound(chronicum_id)
        check_row("sqlalchemy: window", "chronicum id", chronicum_id, itself[3])
        picked_rows = sorted((row for row in rows if row[0] == _ACTA), key=lambda row: (row[1], row[2]))
        answered: dict[str, Located] = {}
        for row in rows:
            if row[0] == _ANSWERED:
                answered[row[4]] = Located(int(row[2]), actum_of(str(row[3]), row[4:]))
        return WindowRows(
            [actum_of(str(row[3]), row[4:]) for row in picked_rows],
            [int(row[2]) for row in picked_rows],
            list(answered.values()),
            int(itself[2]),
        )

    def _cached(self, key: Hashable, build: Callable[[], Executable]) -> Executable:
        """The statement of ``key``'s shape, built once (the last :data:`_SHAPES` kept)."""
        statement = self._statements.get(key)
        if statement is None:
            if len(self._statements) >= _SHAPES:
                self._statements.clear()
            statement = self._statements[key] = build()
        return statement

    def _window(self, shapes: tuple[_Shape, ...], lookups: tuple[_Shape, ...] | None) -> Executable:
        """The statement of a window's shape: its reads, the lookups of requests, the chronicum's row."""
        acta, chronica = self.tables.acta, self.tables.chronica
        branches = [self._read(index, shape) for index, shape in enumerate(shapes)]
        parts: list[Select[Any]] = []
        if lookups is None:
            parts.extend(branches)
        elif branches:
            picked: Any = union_all(*branches).cte("picked")
            parts.append(select(*picked.c))
            columns = (acta.c.seq, acta.c.chronicum_id, *actum_columns(acta))
            for index in range(len(lookups)):
                segment = [
                    acta.c.chronicum_id == bindparam(f"s{index}_c"),
                    *self._within(f"s{index}", by_id=True),
                ]
                parts.append(self.rules.answered(picked, (_part(_ANSWERED), null()), columns, segment))
        empty = (null() for _ in range(len(ACTUM_COLUMNS)))
        itself = select(_part(_ITSELF), null(), chronica.c.layout_version, chronica.c.id, *empty).where(
            chronica.c.id == bindparam("chronicum_id"), chronica.c.owner_digest.is_(None)
        )
        return union_all(*parts, itself) if parts else itself

    def _read(self, index: int, shape: _Shape) -> Select[Any]:
        """One read's rows ``(part, index, seq, chronicum id, *ACTUM_COLUMNS)``, a derived table.

        Parameters ``r<index>_...`` (see :func:`_read_shape`).
        """
        acta, name = self.tables.acta, f"r{index}"
        columns = (acta.c.seq, acta.c.chronicum_id, *actum_columns(acta))
        where: list[ColumnElement[bool]] = [acta.c.chronicum_id == bindparam(f"{name}_c")]
        if shape[0] == "positions":
            where.append(acta.c.seq.in_(bindparam(f"{name}_p", expanding=True)))
            chosen = select(*columns).where(*where)
        else:
            _, kinds, actor_kinds, limited, newest, summaries = shape
            where.extend(self._within(name))
            if kinds:
                where.append(acta.c.kind.in_(bindparam(f"{name}_k", expanding=True)))
            if actor_kinds:
                where.append(acta.c.actor_kind.in_(bindparam(f"{name}_a", expanding=True)))
            if not summaries:
                where.append(acta.c.summary_first_id.is_(None))
            chosen = select(*columns).where(*where).order_by(acta.c.seq.desc() if newest else acta.c.seq)
            if limited:
                chosen = chosen.limit(bindparam(f"{name}_l", type_=Integer()))
        derived = chosen.subquery(f"read_{index}")
        return select(_part(_ACTA), literal_column(str(index)).label("read"), *derived.c)

    def _within(self, name: str, by_id: bool = False) -> list[ColumnElement[bool]]:
        """The positions of a segment: after ``<name>_after``, up to ``<name>_upto``.

        ``by_id``: the acta are found by id (``acta_by_id``), and their positions only checked:
        written ``seq + 0``, which no index serves, so the database never prefers a scan of the
        segment along the primary key to the lookup of a few ids.
        """
        seq: Any = self.tables.acta.c.seq
        if by_id:
            seq = seq + 0
        return [
            seq > bindparam(f"{name}_after", type_=BigInteger()),
            seq <= bindparam(f"{name}_upto", type_=BigInteger()),
        ]

    # --- locate ---------------------------------------------------------------------------

    def locate(self, lineage: Sequence[Segment], actum_ids: Sequence[str]) -> Plan[Step, dict[str, Located]]:
        """The acta of ``lineage`` with these ids, by id, through ``acta_by_id``; one statement."""
        if not lineage or not actum_ids:
            return {}
        parameters: dict[str, Any] = {"ids": sorted(set(actum_ids))}
        shapes = tuple(_segment_shape(f"s{index}", s, parameters) for index, s in enumerate(lineage))
        statement = self._cached(("locate", shapes), lambda: self._locate(shapes))
        result: CursorResult[Any] = yield execute(statement, parameters, autocommit=self.read_autocommit)
        found: dict[str, Located] = {}
        rows: list[Any] = list(result.all())
        for row in rows:
            found[row[2]] = Located(int(row[0]), actum_of(str(row[1]), row[2:]))
        return found

    def _locate(self, shapes: tuple[_Shape, ...]) -> Executable:
        acta = self.tables.acta
        ids: Any = bindparam("ids", expanding=True)
        branches = [
            select(acta.c.seq, acta.c.chronicum_id, *actum_columns(acta)).where(
                acta.c.chronicum_id == bindparam(f"s{index}_c"),
                acta.c.id.in_(ids),
                *self._within(f"s{index}", by_id=True),
            )
            for index, shape in enumerate(shapes)
        ]
        return branches[0] if len(branches) == 1 else union_all(*branches)

    # --- fork -----------------------------------------------------------------------------

    def fork(self, chronicum: Chronicum, lineage: Sequence[Segment]) -> Plan[Step, None]:
        """Insert the fork and its lineage, counting it in its source's row; one transaction.

        Raises ``ChronicumExists`` (the id is taken, or an erasure marker), ``ChronicumNotFound``
        (the source is missing or erased); nothing is saved then.
        """
        assert chronicum.forked_from is not None
        source, own = chronicum.forked_from.chronicum_id, lineage[-1]
        row = {
            "id": chronicum.id,
            "owner_id": chronicum.owner_id,
            "started_at": chronicum.started_at,
            "last_actum_at": chronicum.last_actum_at,
            "last_seq": own.after,  # its own acta's positions follow the one it branched at
            "last_active": last_activity(chronicum),
            "base": own.after,
            "forked_from_id": source,
            "forked_from_actum": chronicum.forked_from.actum_id,
        }
        try:
            yield execute(insert(self.tables.chronica), row, write=True)
        except IntegrityError:
            yield ROLLBACK
            raise ChronicumExists(chronicum.id) from None
        held: CursorResult[Any] = yield execute(self._source, {"chronicum_id": source})
        if held.rowcount != 1:
            yield ROLLBACK
            raise ChronicumNotFound(source)
        shared = [
            {
                "chronicum_id": chronicum.id,
                "ordinal": ordinal,
                "source_id": segment.chronicum_id,
                "after_position": segment.after,
                "upto_position": segment.upto,
            }
            for ordinal, segment in enumerate(lineage[:-1])
        ]
        if shared:
            yield execute(insert(self.tables.lineages), shared)
        yield COMMIT
