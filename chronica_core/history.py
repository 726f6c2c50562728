"""The shape of a chronicum's history: forks, summaries and tool exchanges, computed once for every store.

A store with the ``history`` capability (:class:`chronica_core.HistoryStore`) only saves and
reads; what a context window holds is decided here, from the chronicum's :class:`Layout`, and
the store reads the ranges this module asks for.

- **Positions.** Every actum of such a store has a position: a whole number that grows along its
  chronicum's write order. A fork's own acta take positions after the position it branched at,
  so positions grow along a fork's whole history, the shared prefix included.
- **Lineage.** A chronicum's history is a tuple of :class:`Segment`, oldest first: for a fork, the
  ranges of its ancestors' acta it shares, then its own acta. A chronicum that is not a fork has
  one segment, its own acta.
- **Summaries.** A summary is a ``message`` that stands for a range of positions (its
  :class:`SummaryMark`). The summarized view shows each *outer* summary (one no other summary's
  range contains) in its range's place, instead of the acta of that range; the view as written
  shows every actum at its own position, summaries included.
- **Tool exchanges.** A ``tool_response`` may name the ``tool_request`` it answers. A window that
  holds a response and not its request either reaches back for the request (``WHOLE``) or leaves
  the response out (``DROP_ORPHANS``), so no window ever hands a model a tool result without its call.

:func:`plan_window` turns a layout and a :class:`WindowQuery` into the :class:`WindowReads` a
store performs in one operation; :func:`assemble_window` turns what it read into the window.
Nothing here does I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from chronica_core.model import ActorKind, Actum, ActumKind, Chronicum

__all__ = [
    "HISTORY_READS",
    "Layout",
    "Located",
    "PositionsRead",
    "RangeRead",
    "Segment",
    "StaleLayout",
    "SummaryMark",
    "ToolExchanges",
    "View",
    "WindowQuery",
    "WindowReads",
    "WindowRows",
    "assemble_window",
    "fork_lineage",
    "outer_summaries",
    "plan_window",
    "segment_of",
    "summary_range_problem",
]

HISTORY_READS: Final = 5
"""How many times a read is planned again when the chronicum's layout changed under it."""


class View(StrEnum):
    """How a context window shows summaries."""

    SUMMARIZED = "summarized"
    """Each outer summary in its range's place, instead of the acta it stands for (the default)."""
    AS_WRITTEN = "as_written"
    """Every actum at its own position, summaries included: the record as it was written."""


class ToolExchanges(StrEnum):
    """What a context window does with a tool response whose request it does not hold."""

    WHOLE = "whole"
    """Reach back for the request, which then stands at its own place (the default)."""
    DROP_ORPHANS = "drop_orphans"
    """Leave the response out."""
    AS_WRITTEN = "as_written"
    """Nothing: the window holds what the filters and the limit chose."""


class StaleLayout(Exception):
    """A store's answer to ``record_summary`` when the chronicum's layout is no longer the given version.

    The rules read the layout again, check the summary again and retry; apps never see it.
    """


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of one chronicum's own acta: positions after ``after``, up to ``upto`` included.

    Attributes:
        chronicum_id: the chronicum whose acta these are.
        after: the run starts just after this position (``0``: at the chronicum's first actum;
            for a fork's own acta, the position it branched at).
        upto: the last position of the run; ``None``: no bound (the chronicum's own acta, for
            the chronicum whose lineage this is).
    """

    chronicum_id: str
    after: int
    upto: int | None

    def holds(self, position: int) -> bool:
        """Whether ``position`` lies in this run."""
        return self.after < position and (self.upto is None or position <= self.upto)


@dataclass(frozen=True, slots=True)
class SummaryMark:
    """Where a summary stands and what it stands for, as a layout lists it.

    Attributes:
        position: the summary's own position (where it was written).
        first: the first position of the range it stands for.
        last: the last position of that range (``first <= last < position``).
        actor_kind: the summary's actor kind (its kind is always ``message``), for the filters.
    """

    position: int
    first: int
    last: int
    actor_kind: ActorKind


@dataclass(frozen=True, slots=True)
class Layout:
    """What a store tells of a chronicum's history: its lineage, its summaries and their version.

    Attributes:
        chronicum: the chronicum itself (its owner, and ``forked_from`` for a fork).
        lineage: the :class:`Segment` of its history, oldest first; the last is its own acta.
        summaries: a mark for every summary in the history (ancestors' in the shared prefix
            included), in position order.
        version: changes whenever the layout may have: a new summary, or the chronicum erased
            and written to afresh. Compared for equality only.
    """

    chronicum: Chronicum
    lineage: tuple[Segment, ...]
    summaries: tuple[SummaryMark, ...]
    version: Hashable


@dataclass(frozen=True, slots=True)
class RangeRead:
    """Read the newest (or oldest) ``limit`` acta of a segment that match the filters.

    Attributes:
        segment: where to read.
        actum_kinds: kinds to keep (``None``: all), as in :class:`chronica_core.ActaQuery`.
        actor_kinds: actor kinds to keep (``None``: all).
        limit: how many to read at most; ``0``: all of them.
        newest: ``True`` reads the newest ``limit``, ``False`` the oldest ``limit``.
        summaries: whether summaries are read too (``False``: acta with ``summarizes`` are skipped).
    """

    segment: Segment
    actum_kinds: tuple[ActumKind, ...] | None
    actor_kinds: tuple[ActorKind, ...] | None
    limit: int
    newest: bool
    summaries: bool


@dataclass(frozen=True, slots=True)
class PositionsRead:
    """Read the acta at ``positions`` of one chronicum's own acta (summaries to show in their place)."""

    chronicum_id: str
    positions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class WindowReads:
    """What one ``HistoryStore.window`` call reads.

    Attributes:
        reads: the ranges and positions to read.
        answered_in: when set, also every ``tool_request`` that a ``tool_response`` read by
            ``reads`` names in ``answers``, looked for by id in these segments (the lineage).
    """

    reads: tuple[RangeRead | PositionsRead, ...]
    answered_in: tuple[Segment, ...] | None = None


@dataclass(frozen=True, slots=True)
class WindowRows:
    """What ``HistoryStore.window`` read.

    Attributes:
        acta: every actum the reads matched: each read's in position order, the reads one after
            the other in the order they were given.
        positions: the position of each of ``acta``, in the same order.
        answered: the requests found for ``answered_in`` (any order).
        version: the chronicum's layout version, read in the same snapshot as the acta.
    """

    acta: Sequence[Actum]
    positions: Sequence[int]
    answered: Sequence[Located]
    version: Hashable


@dataclass(frozen=True, slots=True)
class Located:
    """An actum found by its id: its position in the history and the actum."""

    position: int
    actum: Actum


@dataclass(frozen=True, slots=True)
class WindowQuery:
    """A context window over a history, as ``Chronicarius.get_acta`` asks for it.

    Attributes:
        actum_kinds: kinds to keep (``None``: all); a summary counts as a ``message``.
        actor_kinds: actor kinds to keep (``None``: all).
        last_n: keep the newest ``last_n`` of what the filters left; ``0``: all.
        before: keep only what stands before the place of the actum at this position (a shown
            summary's place is its range's first position); ``None``: no bound.
        newest_first: return the window newest first instead of oldest first.
        view: how summaries show (:class:`View`).
        tool_exchanges: what to do with a response whose request the window lacks.
    """

    actum_kinds: tuple[ActumKind, ...] | None = None
    actor_kinds: tuple[ActorKind, ...] | None = None
    last_n: int = 0
    before: int | None = None
    newest_first: bool = False
    view: View = View.SUMMARIZED
    tool_exchanges: ToolExchanges = ToolExchanges.WHOLE


def segment_of(lineage: Sequence[Segment], position: int) -> Segment | None:
    """Return the segment of ``lineage`` that holds ``position`` (``None``: no segment does)."""
    for segment in lineage:
        if segment.holds(position):
            return segment
    return None


def fork_lineage(source: Layout, position: int, fork_id: str) -> tuple[Segment, ...]:
    """The lineage of a fork of ``source`` that shares its history up to ``position`` included.

    The source's segments are cut at ``position``; the fork's own acta follow it.
    """
    shared = [
        Segment(
            segment.chronicum_id,
            segment.after,
            position if segment.upto is None else min(segment.upto, position),
        )
        for segment in source.lineage
        if segment.after < position
    ]
    return (*shared, Segment(fork_id, position, None))


def outer_summaries(marks: Iterable[SummaryMark]) -> list[SummaryMark]:
    """The summaries a summarized view shows: those whose range no other summary's range contains.

    Of summaries over the very same range, the newest (highest position) is shown. Returned in
    range order. A mark whose range overlaps a shown one only partly (which the rules never let a
    store keep) is left out.
    """
    shown: list[SummaryMark] = []
    reach = 0  # the last position a shown summary covers
    for mark in sorted(marks, key=lambda m: (m.first, -m.last, -m.position)):
        if mark.first > reach:
            shown.append(mark)
            reach = mark.last
    return shown


def summary_range_problem(marks: Iterable[SummaryMark], first: int, last: int) -> str | None:
    """Why a summary cannot stand for positions ``first`` to ``last``, or ``None`` when it can.

    A range must run forwards, and every existing summary's range must lie wholly outside it or
    wholly inside it (then the new summary stands for that one too): a range that cuts through
    another summary's range, or lies inside one, is refused.
    """
    if first > last:
        return "its first actum comes after its last"
    for mark in marks:
        if mark.last < first or mark.first > last:
            continue
        if first <= mark.first and mark.last <= last:
            continue
        if mark.first <= first and last <= mark.last:
            return (
                "lies inside the range another summary stands for: "
                "summarize that summary's whole range, or more"
            )
        return "overlaps partly the range another summary stands for"
    return None


def _gaps(lineage: Sequence[Segment], hidden: Sequence[SummaryMark]) -> list[Segment]:
    """The parts of ``lineage`` that no summary in ``hidden`` (in range order) stands for."""
    gaps: list[Segment] = []
    for segment in lineage:
        start = segment.after  # the gap being cut runs after `start`
        for mark in hidden:
            if mark.last <= start:
                continue
            if segment.upto is not None and mark.first > segment.upto:
                break
            if mark.first - 1 > start:
                gaps.append(Segment(segment.chronicum_id, start, mark.first - 1))
            start = mark.last
        if segment.upto is None or start < segment.upto:
            gaps.append(Segment(segment.chronicum_id, start, segment.upto))
    return gaps


def _place(shown: Sequence[SummaryMark], position: int | None) -> int | None:
    """Where the actum at ``position`` stands: a shown summary at its range's first position."""
    for mark in shown:
        if mark.position == position:
            return mark.first
    return position


def _before(segments: list[Segment], before: int | None) -> list[Segment]:
    """``segments`` cut to the positions before ``before``."""
    if before is None:
        return segments
    return [
        Segment(s.chronicum_id, s.after, before - 1 if s.upto is None else min(s.upto, before - 1))
        for s in segments
        if s.after < before - 1
    ]


def _wanted(mark: SummaryMark, query: WindowQuery) -> bool:
    return (query.actum_kinds is None or ActumKind.MESSAGE in query.actum_kinds) and (
        query.actor_kinds is None or mark.actor_kind in query.actor_kinds
    )


def _shown_summaries(layout: Layout, query: WindowQuery) -> list[SummaryMark]:
    if query.view is View.AS_WRITTEN or not layout.summaries:
        return []
    return outer_summaries(layout.summaries)


def plan_window(layout: Layout, query: WindowQuery) -> WindowReads:
    """The reads that hold the window ``query`` asks for over the history ``layout`` describes.

    One :class:`RangeRead` per run of acta the window may show (at most ``last_n`` from each),
    one :class:`PositionsRead` per chronicum for the summaries it may show, and, with
    :attr:`ToolExchanges.WHOLE`, the requests the responses read answer.
    """
    shown = _shown_summaries(layout, query)
    summarized = query.view is View.SUMMARIZED
    before = _place(shown, query.before)
    runs = _before(_gaps(layout.lineage, shown) if shown else list(layout.lineage), before)
    reads: list[RangeRead | PositionsRead] = [
        RangeRead(run, query.actum_kinds, query.actor_kinds, query.last_n, True, not summarized)
        for run in runs
    ]
    candidates = [mark for mark in shown if _wanted(mark, query) and (before is None or mark.first < before)]
    if query.last_n > 0:
        candidates = candidates[-query.last_n :]
    by_chronicum: dict[str, list[int]] = {}
    for mark in candidates:
        segment = segment_of(layout.lineage, mark.position)
        if segment is not None:
            by_chronicum.setdefault(segment.chronicum_id, []).append(mark.position)
    reads.extend(
        PositionsRead(chronicum_id, tuple(positions)) for chronicum_id, positions in by_chronicum.items()
    )
    answered_in = layout.lineage if query.tool_exchanges is ToolExchanges.WHOLE else None
    return WindowReads(tuple(reads), answered_in)


def assemble_window(layout: Layout, query: WindowQuery, reads: WindowReads, read: WindowRows) -> list[Actum]:
    """The window ``query`` asks for, from what the store read for ``reads`` (:func:`plan_window`'s).

    Summaries stand at their range's first position, every other actum at its own; the newest
    ``last_n`` are kept, tool exchanges completed or orphans dropped, oldest first (newest
    first with ``query.newest_first``).
    """
    shown = _shown_summaries(layout, query)
    if not shown and len(reads.reads) == 1:  # one run in position order: the window is its tail
        window = list(read.acta[-query.last_n :] if query.last_n > 0 else read.acta)
        if query.tool_exchanges is not ToolExchanges.AS_WRITTEN and any(map(_ANSWERS, window)):
            positions = read.positions[-len(window) :] if window else ()
            rows = _paired(
                list(zip(positions, window, strict=True)), read.answered, query.tool_exchanges, _POSITION
            )
            window = list(map(_ACTUM, rows))
    else:
        if shown:
            places = {mark.position: mark.first for mark in shown}

            def place(row: tuple[int, Actum]) -> tuple[int, int]:
                return places.get(row[0], row[0]), row[0]

            key: Callable[[tuple[int, Actum]], tuple[int, int] | int] = place
        else:
            key = _POSITION
        rows = sorted(zip(read.positions, read.acta, strict=True), key=key)
        if query.last_n > 0:
            rows = rows[-query.last_n :]
        if query.tool_exchanges is not ToolExchanges.AS_WRITTEN:
            rows = _paired(rows, read.answered, query.tool_exchanges, key)
        window = list(map(_ACTUM, rows))
    if query.newest_first:
        window.reverse()
    return window


_POSITION: Callable[[tuple[int, Actum]], int] = operator.itemgetter(0)
_ACTUM: Callable[[tuple[int, Actum]], Actum] = operator.itemgetter(1)
_ANSWERS: Callable[[Actum], str] = operator.attrgetter("answers")


def _paired(
    rows: list[tuple[int, Actum]],
    answered: Sequence[Located],
    mode: ToolExchanges,
    key: Callable[[tuple[int, Actum]], tuple[int, int] | int],
) -> list[tuple[int, Actum]]:
    """``rows`` with each response's request: reached back for (``WHOLE``), or the response dropped."""
    named = {actum.answers for _, actum in rows if actum.answers and actum.kind is ActumKind.TOOL_RESPONSE}
    missing = named - {actum.id for _, actum in rows}
    if not missing:
        return rows
    if mode is ToolExchanges.WHOLE:
        found = {request.actum.id: (request.position, request.actum) for request in answered}
        reached = [found[request_id] for request_id in missing if request_id in found]
        rows = sorted([*rows, *reached], key=key)
        missing -= set(found)
        if not missing:
            return rows
    return [row for row in rows if not (row[1].kind is ActumKind.TOOL_RESPONSE and row[1].answers in missing)]
