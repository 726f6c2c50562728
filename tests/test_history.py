"""chronica_core.history's pure functions, on hand-made layouts and a store simulated in a few lines.

The conformance suite checks windows end to end on every store; these cases pin the shaping
itself: which summaries show, which ranges a summary may take, a fork's lineage, and what
``plan_window`` asks a store for and ``assemble_window`` makes of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from chronica_core import ActorKind, Actum, ActumKind, Chronicum, ForkPoint, Span
from chronica_core.history import (
    Layout,
    Located,
    PositionsRead,
    RangeRead,
    Segment,
    SummaryMark,
    ToolExchanges,
    View,
    WindowQuery,
    WindowReads,
    WindowRows,
    assemble_window,
    fork_lineage,
    outer_summaries,
    plan_window,
    segment_of,
    summary_range_problem,
)

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def mark(position: int, first: int, last: int, actor_kind: ActorKind = ActorKind.AGENT) -> SummaryMark:
    return SummaryMark(position, first, last, actor_kind)


def layout(
    chronicum_id: str, lineage: tuple[Segment, ...], summaries: Sequence[SummaryMark] = (), version: int = 1
) -> Layout:
    return Layout(Chronicum(chronicum_id, "ardian", NOW), lineage, tuple(summaries), version)


# --- outer_summaries -------------------------------------------------------------------------


def test_outer_summaries_of_apart_ranges_are_all_shown_in_range_order() -> None:
    marks = [mark(9, 5, 6), mark(4, 1, 2)]
    assert outer_summaries(marks) == [mark(4, 1, 2), mark(9, 5, 6)]


def test_outer_summaries_hide_the_summaries_a_wider_range_holds() -> None:
    inner, outer, widest = mark(5, 2, 3), mark(6, 1, 3), mark(8, 1, 7)
    assert outer_summaries([inner, outer]) == [outer]
    assert outer_summaries([inner, outer, widest]) == [widest]
    assert outer_summaries([widest, mark(9, 8, 8)]) == [widest, mark(9, 8, 8)]


def test_outer_summaries_of_equal_ranges_show_the_newest() -> None:
    assert outer_summaries([mark(5, 1, 3), mark(9, 1, 3), mark(7, 1, 3)]) == [mark(9, 1, 3)]


def test_outer_summaries_leave_out_a_partly_overlapping_range() -> None:
    assert outer_summaries([mark(8, 3, 6), mark(7, 1, 4)]) == [mark(7, 1, 4)]


def test_outer_summaries_of_none() -> None:
    assert outer_summaries([]) == []


# --- summary_range_problem -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last"),
    [(1, 1), (6, 9), (1, 2), (2, 5), (1, 9), (3, 4)],  # apart, holding, or equal to an existing range
)
def test_summary_range_problem_accepts_ranges_apart_from_or_holding_the_others(first: int, last: int) -> None:
    assert summary_range_problem([mark(5, 3, 4)], first, last) is None


def test_summary_range_problem_refuses_a_range_running_backwards() -> None:
    assert summary_range_problem([], 4, 3) == "its first actum comes after its last"


@pytest.mark.parametrize(("first", "last"), [(2, 3), (4, 6), (1, 4), (5, 7)])
def test_summary_range_problem_refuses_a_range_cutting_through_another(first: int, last: int) -> None:
    problem = summary_range_problem([mark(9, 3, 5)], first, last)
    assert problem == "overlaps partly the range another summary stands for"


@pytest.mark.parametrize(("first", "last"), [(4, 4), (3, 4), (4, 5)])
def test_summary_range_problem_refuses_a_range_inside_another(first: int, last: int) -> None:
    problem = summary_range_problem([mark(9, 3, 5)], first, last)
    assert problem is not None and problem.startswith("lies inside the range another summary stands for")


# --- segments and fork_lineage ----------------------------------------------------------------


def test_segment_holds_positions_after_its_start_up_to_its_end() -> None:
    assert [position for position in range(8) if Segment("c", 2, 5).holds(position)] == [3, 4, 5]
    assert Segment("c", 2, None).holds(10**9) and not Segment("c", 2, None).holds(2)
    lineage = (Segment("a", 0, 4), Segment("b", 4, None))
    assert segment_of(lineage, 4) == Segment("a", 0, 4)
    assert segment_of(lineage, 5) == Segment("b", 4, None)
    assert segment_of(lineage, 0) is None


def test_fork_lineage_of_a_plain_chronicum() -> None:
    source = layout("a", (Segment("a", 0, None),))
    assert fork_lineage(source, 7, "f") == (Segment("a", 0, 7), Segment("f", 7, None))


def test_fork_lineage_of_an_empty_chronicum_shares_nothing() -> None:
    source = layout("a", (Segment("a", 0, None),))
    assert fork_lineage(source, 0, "f") == (Segment("f", 0, None),)


def test_fork_lineage_of_a_fork_at_its_own_acta_and_in_its_prefix() -> None:
    source = layout("f", (Segment("a", 0, 4), Segment("f", 4, None)))
    assert fork_lineage(source, 6, "g") == (Segment("a", 0, 4), Segment("f", 4, 6), Segment("g", 6, None))
    assert fork_lineage(source, 4, "g") == (Segment("a", 0, 4), Segment("g", 4, None))
    assert fork_lineage(source, 2, "g") == (Segment("a", 0, 2), Segment("g", 2, None))


# --- plan_window and assemble_window ----------------------------------------------------------


def actum(chronicum_id: str, name: str, kind: ActumKind = ActumKind.MESSAGE, **links: object) -> Actum:
    actor_kind = {
        ActumKind.MESSAGE: ActorKind.HUMAN,
        ActumKind.THOUGHT: ActorKind.AGENT,
        ActumKind.TOOL_REQUEST: ActorKind.AGENT,
        ActumKind.TOOL_RESPONSE: ActorKind.SYSTEM,
    }[kind]
    made = Actum(chronicum_id, kind, actor_kind, "someone", name, name, NOW)
    return replace(made, **links)  # type: ignore[arg-type]


class SimulatedStore:
    """Each chronicum's own acta by position: what ``HistoryStore.window`` reads, done plainly."""

    def __init__(self) -> None:
        self.acta: dict[str, dict[int, Actum]] = {}

    def add(self, chronicum_id: str, position: int, actum: Actum) -> None:
        self.acta.setdefault(chronicum_id, {})[position] = actum

    def window(self, reads: WindowReads, version: int = 1) -> WindowRows:
        positions: list[int] = []
        acta: list[Actum] = []
        for read in reads.reads:
            if isinstance(read, PositionsRead):
                held = sorted(p for p in read.positions if p in self.acta.get(read.chronicum_id, {}))
                rows = [(p, self.acta[read.chronicum_id][p]) for p in held]
            else:
                rows = [
                    (p, a)
                    for p, a in sorted(self.acta.get(read.segment.chronicum_id, {}).items())
                    if read.segment.holds(p)
                    and (read.actum_kinds is None or a.kind in read.actum_kinds)
                    and (read.actor_kinds is None or a.actor_kind in read.actor_kinds)
                    and (read.summaries or a.summarizes is None)
                ]
                if read.limit > 0:
                    rows = rows[-read.limit :] if read.newest else rows[: read.limit]
            positions.extend(p for p, _ in rows)
            acta.extend(a for _, a in rows)
        answered: list[Located] = []
        if reads.answered_in is not None:
            wanted = {a.answers for a in acta if a.answers}
            for segment in reads.answered_in:
                for p, a in self.acta.get(segment.chronicum_id, {}).items():
                    if segment.holds(p) and a.id in wanted:
                        answered.append(Located(p, a))
        return WindowRows(acta, positions, answered, version)


def shaped(store: SimulatedStore, lay: Layout, query: WindowQuery) -> list[str]:
    reads = plan_window(lay, query)
    return [a.content for a in assemble_window(lay, query, reads, store.window(reads))]


@pytest.fixture
def forked() -> tuple[SimulatedStore, Layout]:
    """``a`` holds m1..m6 (positions 1-6); the fork ``f`` shares up to 4 and holds m5f..m7f."""
    store = SimulatedStore()
    for position in range(1, 7):
        store.add("a", position, actum("a", f"m{position}"))
    for position in range(5, 8):
        store.add("f", position, actum("f", f"m{position}f"))
    return store, layout("f", (Segment("a", 0, 4), Segment("f", 4, None)))


def test_a_plain_window_is_one_range_read(forked: tuple[SimulatedStore, Layout]) -> None:
    store, _ = forked
    plain = layout("a", (Segment("a", 0, None),))
    query = WindowQuery(last_n=2, tool_exchanges=ToolExchanges.AS_WRITTEN)
    assert plan_window(plain, query) == WindowReads(
        (RangeRead(Segment("a", 0, None), None, None, 2, True, False),), None
    )
    assert shaped(store, plain, query) == ["m5", "m6"]


def test_a_fork_window_reads_each_segment_and_keeps_the_newest(forked: tuple[SimulatedStore, Layout]) -> None:
    store, fork = forked
    reads = plan_window(fork, WindowQuery(last_n=5))
    assert [read.segment for read in reads.reads if isinstance(read, RangeRead)] == list(fork.lineage)
    assert reads.answered_in == fork.lineage
    assert shaped(store, fork, WindowQuery(last_n=5)) == ["m3", "m4", "m5f", "m6f", "m7f"]
    assert shaped(store, fork, WindowQuery()) == ["m1", "m2", "m3", "m4", "m5f", "m6f", "m7f"]
    assert shaped(store, fork, WindowQuery(last_n=2, newest_first=True)) == ["m7f", "m6f"]
    assert shaped(store, fork, WindowQuery(before=6)) == ["m1", "m2", "m3", "m4", "m5f"]
    assert shaped(store, fork, WindowQuery(before=3, last_n=1)) == ["m2"]


def test_a_summary_stands_at_its_ranges_first_place(forked: tuple[SimulatedStore, Layout]) -> None:
    store, fork = forked
    store.add("f", 8, actum("f", "s2-5", summarizes=Span("m2", "m5f")))
    lay = replace(fork, summaries=(mark(8, 2, 5),))
    reads = plan_window(lay, WindowQuery())
    assert PositionsRead("f", (8,)) in reads.reads
    assert [read.segment for read in reads.reads if isinstance(read, RangeRead)] == [
        Segment("a", 0, 1),
        Segment("f", 5, None),
    ]
    assert shaped(store, lay, WindowQuery()) == ["m1", "s2-5", "m6f", "m7f"]
    assert shaped(store, lay, WindowQuery(last_n=3)) == ["s2-5", "m6f", "m7f"]
    as_written = WindowQuery(view=View.AS_WRITTEN)
    assert shaped(store, lay, as_written) == ["m1", "m2", "m3", "m4", "m5f", "m6f", "m7f", "s2-5"]
    assert shaped(store, lay, WindowQuery(actum_kinds=(ActumKind.THOUGHT,))) == []
    assert shaped(store, lay, WindowQuery(actor_kinds=(ActorKind.AGENT,))) == ["s2-5"]  # the mark's kind


def test_a_page_before_a_summary_ends_at_its_place(forked: tuple[SimulatedStore, Layout]) -> None:
    store, fork = forked
    store.add("f", 8, actum("f", "s2-5", summarizes=Span("m2", "m5f")))
    lay = replace(fork, summaries=(mark(8, 2, 5),))
    assert shaped(store, lay, WindowQuery(before=8)) == ["m1"]
    assert shaped(store, lay, WindowQuery(before=6)) == ["m1", "s2-5"]
    assert shaped(store, lay, WindowQuery(before=3)) == ["m1", "s2-5"]  # inside the range: its summary
    assert shaped(store, lay, WindowQuery(before=8, view=View.AS_WRITTEN, last_n=2)) == ["m6f", "m7f"]


def test_nested_and_equal_summaries_show_the_outer_newest(forked: tuple[SimulatedStore, Layout]) -> None:
    store, fork = forked
    store.add("f", 8, actum("f", "inner", summarizes=Span("m2", "m3")))
    store.add("f", 9, actum("f", "outer", summarizes=Span("m1", "inner")))
    store.add("f", 10, actum("f", "outer again", summarizes=Span("m1", "m3")))
    lay = replace(fork, summaries=(mark(8, 2, 3), mark(9, 1, 3), mark(10, 1, 3)))
    assert shaped(store, lay, WindowQuery()) == ["outer again", "m4", "m5f", "m6f", "m7f"]


def test_tool_exchanges_whole_drop_orphans_and_as_written() -> None:
    store = SimulatedStore()
    store.add("a", 1, actum("a", "q1", ActumKind.TOOL_REQUEST))
    store.add("a", 2, actum("a", "m2"))
    store.add("a", 3, actum("a", "m3"))
    store.add("a", 4, actum("a", "r1", ActumKind.TOOL_RESPONSE, answers="q1"))
    store.add("a", 5, actum("a", "m5"))
    lay = layout("a", (Segment("a", 0, None),))
    assert shaped(store, lay, WindowQuery(last_n=2)) == ["q1", "r1", "m5"]
    assert shaped(store, lay, WindowQuery(last_n=2, tool_exchanges=ToolExchanges.DROP_ORPHANS)) == ["m5"]
    assert shaped(store, lay, WindowQuery(last_n=2, tool_exchanges=ToolExchanges.AS_WRITTEN)) == ["r1", "m5"]
    responses = (ActumKind.TOOL_RESPONSE,)
    assert shaped(store, lay, WindowQuery(actum_kinds=responses)) == ["q1", "r1"]
    assert plan_window(lay, WindowQuery(tool_exchanges=ToolExchanges.DROP_ORPHANS)).answered_in is None


def test_a_response_whose_request_a_summary_stands_for_brings_it_back(
    forked: tuple[SimulatedStore, Layout],
) -> None:
    store, fork = forked
    store.acta["a"][2] = actum("a", "q2", ActumKind.TOOL_REQUEST)
    store.add("f", 8, actum("f", "r2", ActumKind.TOOL_RESPONSE, answers="q2"))
    store.add("f", 9, actum("f", "s1-4", summarizes=Span("m1", "m4")))
    lay = replace(fork, summaries=(mark(9, 1, 4),))
    assert shaped(store, lay, WindowQuery(last_n=1)) == ["q2", "r2"]
    assert shaped(store, lay, WindowQuery()) == ["s1-4", "q2", "m5f", "m6f", "m7f", "r2"]
    dropped = WindowQuery(tool_exchanges=ToolExchanges.DROP_ORPHANS)
    assert shaped(store, lay, dropped) == ["s1-4", "m5f", "m6f", "m7f"]


def test_fork_point_json_and_layout_chronicum_carry_forked_from() -> None:
    fork = Chronicum("f", "ardian", NOW, None, ForkPoint("a", ""))
    assert Chronicum.from_dict(fork.to_dict()) == fork
    assert fork.to_dict()["forked_from"] == {"chronicum_id": "a", "actum_id": ""}
