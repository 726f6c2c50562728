"""The history capability in PostgreSQL: its plans, and the store mixins that run them.

The statements, and where positions, lineages and summaries are kept, are in
:mod:`chronica_postgres.history_sql`. Every operation here is one statement: ``layout``,
``window`` (all of a :class:`chronica_core.history.WindowReads` in one snapshot), ``locate``,
``fork`` and ``record_summary``.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors

from chronica_core import ActorKind, Actum, Chronicum, ChronicumExists, ChronicumNotFound
from chronica_core.history import (
    Layout,
    Located,
    RangeRead,
    Segment,
    StaleLayout,
    SummaryMark,
    WindowReads,
    WindowRows,
)
from chronica_core.limits import check_actum_size
from chronica_core.plans import Plan
from chronica_core.rows import check_row, check_rows
from chronica_postgres.history_sql import NO_BOUND, HistoryStatements, ReadShape
from chronica_postgres.plans import (
    BULKY_CONTENT_CHARS,
    INSERTED_AT,
    Operation,
    Plans,
    Statement,
    acta_of,
    chronicum_of,
    names_constraint,
    record_parameters,
    stored_at,
    text_array,
    translate,
    written_chars,
)
from chronica_postgres.schema import ACTA_IDEMPOTENCY_INDEX

__all__ = ["AsyncPostgresHistory", "HistoryPlans", "PostgresHistory"]

Result = TypeVar("Result")

_ACTOR_KINDS = {kind.value: kind for kind in ActorKind}


def _bounds(segment: Segment) -> tuple[str, int, int]:
    """A segment as a range read's first parameters: chronicum id, after, upto (:data:`NO_BOUND`: none)."""
    return segment.chronicum_id, segment.after, NO_BOUND if segment.upto is None else segment.upto


def _segments(segments: tuple[Segment, ...]) -> tuple[list[str], list[int], list[int | None]]:
    """``segments`` as the three arrays the statements take: chronicum ids, after, upto."""
    return (
        [segment.chronicum_id for segment in segments],
        [segment.after for segment in segments],
        [segment.upto for segment in segments],
    )


def _once(statement: Statement) -> Plan[Operation, list[tuple[Any, ...]]]:
    """Perform ``statement`` once (a write whose fate is unknown after a lost connection)."""
    rows: list[tuple[Any, ...]] = yield statement
    return rows


def _version(version: Hashable) -> tuple[datetime | None, int | None]:
    """A layout version as ``record_summary``'s parameters; ``(None, None)``, matching none, if not one."""
    if (
        isinstance(version, tuple)
        and len(version) == 2
        and isinstance(version[0], datetime)
        and isinstance(version[1], int)
    ):
        return version[0], version[1]
    return None, None


class HistoryPlans:
    """The plans of the history operations (see :class:`chronica_core.HistoryStore`).

    Args:
        plans: the store's plans (their statements and error handling).
    """

    def __init__(self, plans: Plans) -> None:
        self._plans = plans
        self._statements = HistoryStatements(plans.statements)

    def layout(self, chronicum_id: str) -> Plan[Operation, Layout]:
        """The chronicum, its lineage, every summary mark of its history and its version; one query.

        The version is ``(started_at, the count of its own summaries)``. Raises
        ``ChronicumNotFound`` (missing or erased), ``StoreError``.
        """
        if "\x00" in chronicum_id:
            raise ChronicumNotFound(chronicum_id)
        statement = Statement(self._statements.layout, (chronicum_id,))
        rows = yield from self._plans.read(statement, "read layout", chronicum_id)
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        check_rows("postgres: read layout", "chronicum id", chronicum_id, rows)
        head = rows[0]
        ids, afters, uptos, summaries = head[6:10]
        lineage = (
            (Segment(chronicum_id, 0, None),)
            if ids is None
            else tuple(Segment(*segment) for segment in zip(ids, afters, uptos, strict=True))
        )
        marks = tuple(
            SummaryMark(row[10], row[11], row[12], _ACTOR_KINDS[row[13]])
            for row in rows
            if row[10] is not None
        )
        return Layout(chronicum_of(head[:6]), lineage, marks, (head[2], summaries))

    def window(self, chronicum_id: str, reads: WindowReads) -> Plan[Operation, WindowRows]:
        """Every read of ``reads``, the requests they reach back for and the version; one query.

        Raises ``ChronicumNotFound`` (missing or erased), ``StoreError``.
        """
        if "\x00" in chronicum_id:
            raise ChronicumNotFound(chronicum_id)
        shapes: list[ReadShape] = []
        parameters: list[Any] = [chronicum_id]
        for read in reads.reads:
            if isinstance(read, RangeRead):
                kinds, actor_kinds, limit = read.actum_kinds, read.actor_kinds, read.limit
                shapes.append(
                    (kinds is not None, actor_kinds is not None, limit > 0, read.newest, read.summaries)
                )
                parameters.extend(_bounds(read.segment))
                if kinds is not None:
                    parameters.append(text_array(kinds))
                if actor_kinds is not None:
                    parameters.append(text_array(actor_kinds))
                if limit > 0:
                    parameters.append(limit)
            else:
                shapes.append(None)
                parameters.extend((read.chronicum_id, list(read.positions)))
        answered_in = reads.answered_in or ()
        for segment in answered_in:
            parameters.extend(_bounds(segment))
        sql = self._statements.window((tuple(shapes), len(answered_in)))
        rows = yield from self._plans.read(Statement(sql, tuple(parameters)), "read window", chronicum_id)

        if not rows or rows[0][0] != 0:
            raise ChronicumNotFound(chronicum_id)
        version = (rows[0][2], rows[0][3])
        read_rows = [row[4:] for row in rows if row[0] == 1]
        found_rows = [row[4:] for row in rows if row[0] == 2]
        found = [Located(row[1], actum) for row, actum in zip(found_rows, acta_of(found_rows), strict=True)]
        return WindowRows(acta_of(read_rows), [row[1] for row in read_rows], found, version)

    def locate(
        self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]
    ) -> Plan[Operation, dict[str, Located]]:
        """The acta of ``lineage`` with these ids, by id (those not found left out); one query.

        Raises ``StoreError``.
        """
        wanted = [actum_id for actum_id in actum_ids if "\x00" not in actum_id]  # none stored holds NUL
        if not wanted or not lineage:
            return {}
        parameters: list[Any] = []
        for segment in lineage:
            chronicum_id, after, upto = _bounds(segment)
            parameters.extend((chronicum_id, wanted, after, upto))
        statement = Statement(self._statements.locate(len(lineage)), tuple(parameters))
        rows = yield from self._plans.read(statement, "locate acta", lineage[-1].chronicum_id)
        return {actum.id: Located(row[1], actum) for row, actum in zip(rows, acta_of(rows), strict=True)}

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> Plan[Operation, None]:
        """Insert the fork ``chronicum`` with ``lineage`` if its source and ancestors are live; one statement.

        Its own acta take positions after ``lineage[-1].after``. Raises ``ChronicumNotFound``
        (the source, or a chronicum of the lineage, missing or erased; nothing saved),
        ``ChronicumExists`` (the id taken, or an erasure marker), ``StoreError``.
        """
        forked_from = chronicum.forked_from
        if forked_from is None:
            raise ValueError("fork needs a chronicum with forked_from set")
        source = forked_from.chronicum_id
        if "\x00" in source:
            raise ChronicumNotFound(source)
        if "\x00" in chronicum.id:
            raise ChronicumExists(chronicum.id)
        ancestors = list(dict.fromkeys([source, *(segment.chronicum_id for segment in lineage[:-1])]))
        parameters = (
            ancestors,
            chronicum.id,
            chronicum.owner_id,
            chronicum.started_at,
            chronicum.last_actum_at,
            lineage[-1].after,
            source,
            forked_from.actum_id,
            *_segments(lineage),
            len(ancestors),
        )
        rows = yield from self._plans.write(
            Statement(self._statements.fork, parameters), "fork chronicum", chronicum.id
        )
        live, inserted = rows[0]
        if live != len(ancestors):
            raise ChronicumNotFound(source)
        if not inserted:
            raise ChronicumExists(chronicum.id)

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Plan[Operation, Actum]:
        """Append the summary ``actum`` for positions ``first`` to ``last`` if the version still holds.

        One statement (a second after losing a race on ``key``, as ``record_idempotent``).
        Raises ``StaleLayout`` (nothing written), ``ActumTooLarge``, ``ChronicumNotFound``,
        ``StoreError``.
        """
        chronicum_id = actum.chronicum_id
        if "\x00" in chronicum_id:
            raise ChronicumNotFound(chronicum_id)
        check_actum_size(actum, self._plans.max_content_bytes)
        span = actum.summarizes
        if span is None:
            raise ValueError("record_summary needs an actum with summarizes set")
        # record's parameters but its first three (now, whether it answers a request, chronicum id)
        now, *_ = written = record_parameters(actum, key)
        parameters = (
            chronicum_id,
            key,
            now,
            *_version(version),
            chronicum_id,
            *written[3:],
            span.first,
            span.last,
            first,
            last,
            chronicum_id,
        )
        statement = Statement(
            self._statements.record_summary, parameters, bulky=written_chars(actum) > BULKY_CONTENT_CHARS
        )
        plans = self._plans
        try:
            rows = yield from (plans.again_if_lost(statement) if key is not None else _once(statement))
        except errors.UniqueViolation as error:
            if key is None or not names_constraint(error, ACTA_IDEMPOTENCY_INDEX):
                raise translate(error, "record summary", chronicum_id) from error
            stored = yield from plans.read_keyed_write(chronicum_id, key, "record summary", error)
            return stored[0]
        except psycopg.Error as error:
            yield from plans.discard_if_lost(error)
            raise translate(error, "record summary", chronicum_id) from error
        if not rows:
            raise ChronicumNotFound(chronicum_id)
        tag, row_chronicum = rows[0][:2]
        check_row("postgres: record summary", "chronicum id", chronicum_id, row_chronicum)
        if tag == 1:
            check_row("postgres: record summary", "actum id", actum.id, rows[0][3])
            return stored_at(actum, rows[0][INSERTED_AT])
        if tag == 2:
            return acta_of((rows[0][1:],))[0]
        raise StaleLayout(chronicum_id)


class PostgresHistory:
    """The ``history`` capability of :class:`chronica_postgres.PostgresStore` (a mixin)."""

    plans: Plans

    if TYPE_CHECKING:  # PlannedStore's, which the store inherits after this mixin

        def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    @functools.cached_property
    def _history(self) -> HistoryPlans:
        return HistoryPlans(self.plans)

    def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`chronica_core.HistoryStore.layout`: one query."""
        return self._run_if_open(self._history.layout(chronicum_id))

    def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`chronica_core.HistoryStore.window`: one query, so one snapshot."""
        return self._run_if_open(self._history.window(chronicum_id, reads))

    def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`chronica_core.HistoryStore.locate`: one query on the index of acta by id."""
        return self._run_if_open(self._history.locate(lineage, actum_ids))

    def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`chronica_core.HistoryStore.fork`: one statement; nothing of the source is copied."""
        self._run_if_open(self._history.fork(chronicum, lineage))

    def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`chronica_core.HistoryStore.record_summary`: one statement."""
        return self._run_if_open(self._history.record_summary(actum, first, last, version, key))


class AsyncPostgresHistory:
    """The ``history`` capability of :class:`chronica_postgres.AsyncPostgresStore` (a mixin)."""

    plans: Plans

    if TYPE_CHECKING:  # AsyncPlannedStore's, which the store inherits after this mixin

        async def _run_if_open(self, plan: Plan[Any, Result]) -> Result: ...

    @functools.cached_property
    def _history(self) -> HistoryPlans:
        return HistoryPlans(self.plans)

    async def layout(self, chronicum_id: str) -> Layout:
        """See :meth:`chronica_core.HistoryStore.layout`."""
        return await self._run_if_open(self._history.layout(chronicum_id))

    async def window(self, chronicum_id: str, reads: WindowReads) -> WindowRows:
        """See :meth:`chronica_core.HistoryStore.window`."""
        return await self._run_if_open(self._history.window(chronicum_id, reads))

    async def locate(self, lineage: tuple[Segment, ...], actum_ids: tuple[str, ...]) -> dict[str, Located]:
        """See :meth:`chronica_core.HistoryStore.locate`."""
        return await self._run_if_open(self._history.locate(lineage, actum_ids))

    async def fork(self, chronicum: Chronicum, lineage: tuple[Segment, ...]) -> None:
        """See :meth:`chronica_core.HistoryStore.fork`."""
        await self._run_if_open(self._history.fork(chronicum, lineage))

    async def record_summary(
        self, actum: Actum, first: int, last: int, version: Hashable, key: str | None
    ) -> Actum:
        """See :meth:`chronica_core.HistoryStore.record_summary`."""
        return await self._run_if_open(self._history.record_summary(actum, first, last, version, key))
