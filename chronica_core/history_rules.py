"""The rules of histories with a shape (forks, summaries, tool exchanges), as plans that do no I/O.

:class:`chronica_core.rules.Rules` hands these plans the calls that need a store with the
``history`` capability. They keep rule R5 (another owner's chronicum answers as a missing one)
with the owner the store's :class:`chronica_core.history.Layout` names, and check every link an
actum makes (the request a response answers, the range a summary stands for) before anything is
written. What a window holds is computed by :mod:`chronica_core.history`.

Layouts are remembered per chronicum (a bounded cache, as owners are): a fork's lineage never
changes, and a window read returns the layout's version, so a layout that did change (a new
summary, an erasure) is read again before the window is trusted. An id erased and written afresh
(by another Chronicarius) may be a fork no more: a "not found" answered over a remembered layout
is trusted only once the layout was read again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from chronica_core import clock
from chronica_core.checks import refused, text_problem, window_query
from chronica_core.errors import ActumNotFound, ChronicumNotFound, InvalidActum, StoreError
from chronica_core.history import (
    HISTORY_READS,
    Layout,
    Located,
    RangeRead,
    Segment,
    StaleLayout,
    SummaryMark,
    ToolExchanges,
    View,
    WindowQuery,
    WindowReads,
    WindowRows,
    assemble_window,
    fork_lineage,
    plan_window,
    summary_range_problem,
)
from chronica_core.model import ActaQuery, Actum, ActumKind, Chronicum, ForkPoint
from chronica_core.plans import Plan

__all__ = ["HistoryRules", "locate", "newest", "page_after"]

StoreCall = tuple[str, tuple[Any, ...]]

Done = TypeVar("Done")

_NEVER = ("no layout has this version",)
"""A layout version no store holds: a ``record_summary`` given it writes nothing."""

_NEWEST_AS_WRITTEN = WindowQuery(last_n=1, view=View.AS_WRITTEN, tool_exchanges=ToolExchanges.AS_WRITTEN)


class HistoryRules:
    """The plans of the history calls, and the layouts they remember.

    Args:
        store_name: how errors name the store.
        remember: records ``chronicum id -> owner`` in the rules' owner cache (rule R10).
        cache_size: how many layouts to remember (``0`` disables the cache).
    """

    def __init__(self, *, store_name: str, remember: Callable[[str, str], None], cache_size: int) -> None:
        self._store_name = store_name
        self._remember = remember
        self._cache_size = cache_size
        self._layouts: dict[str, Layout] = {}  # read without the lock: a dict lookup is atomic
        self._plans: dict[str, tuple[Layout, WindowQuery, WindowReads]] = {}
        """The latest window planned for each chronicum: agents ask for the same one over and over."""
        self._shaped: dict[str, None] = {}
        """Chronica whose ``acta`` answered ``StaleLayout``: read through ``window`` from then on."""
        self._lock = threading.Lock()

    # -- layouts ------------------------------------------------------------------------------

    def layout(
        self, owner_id: str, chronicum_id: str, operation: str = "a read", *, fresh: bool = False
    ) -> Plan[StoreCall, Layout]:
        """Return the chronicum's layout, remembered or read; rule R5 for ``owner_id``.

        ``operation`` names what another owner is refused (``"a read"``, ``"a write"``, ...).
        """
        layout = None if fresh else self._layouts.get(chronicum_id)
        if layout is None:
            if text_problem(chronicum_id) is not None:  # no store holds such an id
                raise ChronicumNotFound(chronicum_id)
            layout = yield from self._read_layout(chronicum_id)
        if layout.chronicum.owner_id != owner_id:
            raise refused(operation, owner_id, chronicum_id)
        return layout

    def _read_layout(self, chronicum_id: str) -> Plan[StoreCall, Layout]:
        layout: Layout = yield ("layout", (chronicum_id,))
        self._remember(chronicum_id, layout.chronicum.owner_id)
        self._keep(chronicum_id, layout)
        return layout

    def _keep(self, chronicum_id: str, layout: Layout) -> None:
        if self._cache_size <= 0:
            return
        with self._lock:
            self._layouts[chronicum_id] = layout
            while len(self._layouts) > self._cache_size:
                del self._layouts[next(iter(self._layouts))]

    def forget(self, chronicum_id: str) -> None:
        """Drop the remembered layout of ``chronicum_id`` (after a write that changed it)."""
        with self._lock:
            self._layouts.pop(chronicum_id, None)

    def shaped(self, chronicum_id: str) -> None:
        """Note that ``acta`` refused ``chronicum_id`` (``StaleLayout``): read it through ``window`` now.

        Its layout is forgotten, and it is read through ``window`` from then on, even while its
        layout shows no summary (a tool exchange names its request).
        """
        self.forget(chronicum_id)
        if self._cache_size <= 0:
            return
        with self._lock:
            self._shaped[chronicum_id] = None
            while len(self._shaped) > self._cache_size:
                del self._shaped[next(iter(self._shaped))]

    # -- reads --------------------------------------------------------------------------------

    def window(
        self,
        owner_id: str,
        chronicum_id: str,
        base: ActaQuery,
        shape: tuple[bool, View, ToolExchanges],
        before: str | None,
    ) -> Plan[StoreCall, list[Actum]]:
        """Rules R5 and R6 over a history: the window of ``base`` and ``shape``, ending before ``before``.

        ``shape`` is ``(newest_first, view, tool_exchanges)``. When the layout changed under the
        read (the version differs), the layout and the window are read again.
        """
        newest_first, view, exchanges = shape
        query = window_query(base, newest_first, view, exchanges)

        def read(layout: Layout) -> Plan[StoreCall, list[Actum]]:
            return self._window(layout, query, before)

        window: list[Actum] = yield from self._remembered_or_fresh(owner_id, chronicum_id, "a read", read)
        return window

    def _window(self, layout: Layout, query: WindowQuery, before: str | None) -> Plan[StoreCall, list[Actum]]:
        chronicum_id = layout.chronicum.id
        if before is not None:
            position = (yield from self._locate_one(layout, before)).position
            query = _with_before(query, position)
        for _ in range(HISTORY_READS):
            reads = self._plan(layout, query)
            rows: WindowRows = yield ("window", (chronicum_id, reads))
            if rows.version == layout.version:
                return assemble_window(layout, query, reads, rows)
            layout = yield from self._read_layout(chronicum_id)
        raise StoreError(
            f"{self._store_name}: read acta", "the chronicum's summaries kept changing while it was read"
        )

    def plain(self, owner_id: str, chronicum_id: str) -> bool:
        """Whether ``chronicum_id`` is remembered as ``owner_id``'s and plain: no fork, no summary.

        Such a chronicum's window is the store's own ``acta``, which answers ``StaleLayout``
        once the chronicum has a summary or a tool response naming its request.
        """
        layout = self._layouts.get(chronicum_id)
        return (
            layout is not None
            and layout.chronicum.owner_id == owner_id
            and len(layout.lineage) == 1
            and not layout.summaries
            and chronicum_id not in self._shaped
        )

    def _plan(self, layout: Layout, query: WindowQuery) -> WindowReads:
        """:func:`plan_window`, remembered for the layout and query it was made for."""
        planned = self._plans.get(layout.chronicum.id)
        if planned is not None and planned[0] is layout and planned[1] is query:
            return planned[2]
        reads = plan_window(layout, query)
        if self._cache_size > 0:
            with self._lock:
                self._plans[layout.chronicum.id] = (layout, query, reads)
                while len(self._plans) > self._cache_size:
                    del self._plans[next(iter(self._plans))]
        return reads

    def actum(self, owner_id: str, chronicum_id: str, actum_id: str) -> Plan[StoreCall, Actum]:
        """Rule R5, then the actum of the chronicum's history with the id ``actum_id``."""

        def read(layout: Layout) -> Plan[StoreCall, Located]:
            return self._locate_one(layout, actum_id)

        located: Located = yield from self._remembered_or_fresh(owner_id, chronicum_id, "a read", read)
        return located.actum

    def _remembered_or_fresh(
        self,
        owner_id: str,
        chronicum_id: str,
        operation: str,
        read: Callable[[Layout], Plan[StoreCall, Done]],
    ) -> Plan[StoreCall, Done]:
        """``read`` over the remembered layout, and once more over a fresh one if it finds nothing.

        A remembered layout may be that of a chronicum erased since (by another Chronicarius), its
        id maybe written afresh: what it names may be gone, so only a layout read now is trusted
        with "not found" (``ChronicumNotFound``, ``ActumNotFound``, or ``InvalidActum`` for a
        link to an actum the history lacks). Rule R5 is kept on each layout.
        """
        remembered = self._layouts.get(chronicum_id)
        layout = yield from self.layout(owner_id, chronicum_id, operation)
        try:
            return (yield from read(layout))
        except (ChronicumNotFound, ActumNotFound, InvalidActum):
            if layout is not remembered:
                raise
        layout = yield from self.layout(owner_id, chronicum_id, operation, fresh=True)
        return (yield from read(layout))

    def _locate_one(self, layout: Layout, actum_id: str) -> Plan[StoreCall, Located]:
        if text_problem(actum_id) is not None:  # no actum has such an id; no store can look it up
            raise ActumNotFound(layout.chronicum.id, str(actum_id))
        located = yield from locate(layout, actum_id)
        if located is None:
            raise ActumNotFound(layout.chronicum.id, actum_id)
        return located

    # -- writes -------------------------------------------------------------------------------

    def fork(
        self, owner_id: str, chronicum_id: str, at: str | None, fork_id: str
    ) -> Plan[StoreCall, Chronicum]:
        """Rule R5 on the source, then a fork sharing its history up to ``at`` (``None``: its newest)."""
        layout = yield from self.layout(owner_id, chronicum_id, "a fork", fresh=True)
        if at is None:
            position, shared = yield from newest(layout)
        else:
            located = yield from self._locate_one(layout, at)
            position, shared = located.position, located.actum
        fork = Chronicum(
            fork_id,
            owner_id,
            started_at=clock.now(),
            last_actum_at=None if shared is None else shared.at,
            forked_from=ForkPoint(chronicum_id, "" if shared is None else shared.id),
        )
        yield ("fork", (fork, fork_lineage(layout, position, fork_id)))
        self._remember(fork_id, owner_id)
        return fork

    def check_answers(
        self, owner_id: str, chronicum_id: str, answers: dict[str, list[int | None]]
    ) -> Plan[StoreCall, None]:
        """Check that each id of ``answers`` is a ``tool_request`` of the chronicum's history.

        ``answers`` maps each request id to the batch indexes of the responses naming it
        (``None`` for a single actum), for the error. A missing chronicum, or another owner's,
        is ``ChronicumNotFound`` (rule R5): a response cannot be the first write of a chronicum.
        """

        def read(layout: Layout) -> Plan[StoreCall, None]:
            return self._check_answers(layout, answers)

        yield from self._remembered_or_fresh(owner_id, chronicum_id, "a write", read)

    @staticmethod
    def _check_answers(layout: Layout, answers: dict[str, list[int | None]]) -> Plan[StoreCall, None]:
        found: dict[str, Located] = yield ("locate", (layout.lineage, tuple(answers)))
        for request_id, indexes in answers.items():
            located = found.get(request_id)
            if located is None:
                problem = f"no actum {request_id!r} in the chronicum's history"
            elif located.actum.kind is not ActumKind.TOOL_REQUEST:
                problem = f"actum {request_id!r} is a {located.actum.kind.value}, not a tool_request"
            else:
                continue
            raise InvalidActum("answers", problem, index=indexes[0])

    def record_summary(self, owner_id: str, actum: Actum, key: str | None) -> Plan[StoreCall, Actum]:
        """Check the range ``actum.summarizes`` names, then append the summary.

        A summary's range is checked against the layout it is written on: should the layout
        change before the write (another summary landed), it is read and checked again. A keyed
        summary whose range no longer passes (a wider summary landed since its first write) is
        still answered with the first write when its key was used (rule R8): the store is asked
        with a version that never matches, so it returns the keyed write or writes nothing.
        """
        assert actum.summarizes is not None  # the caller routes only summaries here
        span = actum.summarizes
        for _ in range(HISTORY_READS):
            layout = yield from self.layout(owner_id, actum.chronicum_id, "a write", fresh=True)
            found: dict[str, Located] = yield ("locate", (layout.lineage, (span.first, span.last)))
            first, last = found.get(span.first), found.get(span.last)
            problem = None
            for name, located in (("first", first), ("last", last)):
                if located is None:
                    problem = f"{name}: no actum {getattr(span, name)!r} in the chronicum's history"
            if first is not None and last is not None:
                start, end = _end(layout, first, start=True), _end(layout, last, start=False)
                problem = summary_range_problem(layout.summaries, start, end)
            if problem is not None:
                if key is not None:
                    try:  # a retry of a summary that landed: its first write (rule R8)
                        kept: Actum = yield ("record_summary", (actum, 0, 0, _NEVER, key))
                        return kept
                    except StaleLayout:
                        pass
                raise InvalidActum("summarizes", problem)
            try:
                stored: Actum = yield ("record_summary", (actum, start, end, layout.version, key))
            except StaleLayout:
                continue
            self.forget(actum.chronicum_id)
            return stored
        raise StoreError(
            f"{self._store_name}: record summary",
            "the chronicum's summaries kept changing while the summary was checked",
        )


def newest(layout: Layout) -> Plan[StoreCall, tuple[int, Actum | None]]:
    """The position and actum of the newest actum of the history; ``(its fork position, None)`` if empty."""
    rows: WindowRows = yield ("window", (layout.chronicum.id, plan_window(layout, _NEWEST_AS_WRITTEN)))
    if rows.acta:
        return max(zip(rows.positions, rows.acta, strict=True), key=lambda row: row[0])
    return layout.lineage[-1].after, None


def locate(layout: Layout, actum_id: str) -> Plan[StoreCall, Located | None]:
    """The actum of the history with the id ``actum_id`` and its position (``None``: no such actum)."""
    found: dict[str, Located] = yield ("locate", (layout.lineage, (actum_id,)))
    return found.get(actum_id)


def page_after(layout: Layout, position: int, limit: int) -> Plan[StoreCall, list[tuple[int, Actum]]]:
    """The first ``limit`` acta of the history after ``position``, as written, with their positions."""
    reads = tuple(
        RangeRead(_from(segment, position), None, None, limit, False, True)
        for segment in layout.lineage
        if segment.upto is None or segment.upto > position
    )
    rows: WindowRows = yield ("window", (layout.chronicum.id, WindowReads(reads)))
    return sorted(zip(rows.positions, rows.acta, strict=True), key=lambda row: row[0])[:limit]


def _from(segment: Segment, position: int) -> Segment:
    """``segment`` from just after ``position`` on."""
    if segment.after >= position:
        return segment
    return Segment(segment.chronicum_id, position, segment.upto)


def _end(layout: Layout, located: Located, *, start: bool) -> int:
    """The position a range endpoint stands for: its own, or, for a summary, its range's end."""
    if located.actum.summarizes is None:
        return located.position
    mark = _mark(layout.summaries, located.position)
    if mark is None:
        return located.position
    return mark.first if start else mark.last


def _mark(marks: Sequence[SummaryMark], position: int) -> SummaryMark | None:
    for mark in marks:
        if mark.position == position:
            return mark
    return None


def _with_before(query: WindowQuery, position: int) -> WindowQuery:
    return WindowQuery(
        query.actum_kinds,
        query.actor_kinds,
        query.last_n,
        position,
        query.newest_first,
        query.view,
        query.tool_exchanges,
    )
