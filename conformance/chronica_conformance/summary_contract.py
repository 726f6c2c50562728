"""The history contract's summaries: append-only compaction that never loses what it stands for."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from chronica_conformance.base import (
    assert_same_acta,
    ids,
    make_actum,
    new_id,
    new_owner,
    require_capability,
)
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_conformance.history_base import (
    HistoryBase,
    expected_window,
    request,
    respond,
    summary,
    write,
    write_mixed,
)
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ChronicumNotFound,
    InvalidActum,
    Span,
)
from chronica_core.capabilities import BATCH, ERASURE, IDEMPOTENCY
from chronica_core.history import Layout, RangeRead, StaleLayout, WindowReads

__all__ = ["CONTENDING_SUMMARIES", "RACING_WRITERS", "SummaryContract"]

RACING_WRITERS = 30
"""How many writers record an actum each while summaries are written."""

CONTENDING_SUMMARIES = 6
"""How many summaries over partly overlapping ranges are checked against one layout at once."""

# case -> how the refused summary (or write) is made from the chronicum's acta
_REFUSALS = (
    "missing_first",
    "missing_last",
    "another_chronicum",
    "first_after_last",
    "partly_overlapping",
    "inside_another",
    "in_a_batch",
    "not_a_message",
)


def _as_written(harness: Harness, owner_id: str, chronicum_id: str) -> list[Actum]:
    return harness.get_acta(owner_id, chronicum_id, view="as_written", tool_exchanges="as_written")


def _layout(harness: Harness, chronicum_id: str) -> Layout:
    layout: Layout = harness.perform(store_call("layout", chronicum_id))
    return layout


def _assert_nested_or_apart(layout: Layout) -> None:
    """No two summaries of the layout stand for partly overlapping ranges."""
    marks = layout.summaries
    for index, one in enumerate(marks):
        for other in marks[index + 1 :]:
            apart = one.last < other.first or other.last < one.first
            nested = (one.first <= other.first and other.last <= one.last) or (
                other.first <= one.first and one.last <= other.last
            )
            assert apart or nested, f"the store keeps partly overlapping summaries: {one} and {other}"


def _assert_views(harness: Harness, owner_id: str, chronicum_id: str, what: str) -> list[Actum]:
    """Both views of the chronicum agree with the oracle over what it holds as written; return that."""
    written = _as_written(harness, owner_id, chronicum_id)
    assert_same_acta(
        harness.get_acta(owner_id, chronicum_id), expected_window(written), f"{what}, summarized"
    )
    return written


class SummaryContract(HistoryBase):
    """A summary stands in its range's place; the record keeps everything; ranges never cross."""

    def test_history_summary_stands_in_its_ranges_place(self, history_harness: Harness) -> None:
        """The summarized view shows the summary where its range was; ``as_written`` shows everything."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("summary")
        acta = write(harness, owner, chronicum_id, 6)
        stored = harness.record_actum(owner, summary(chronicum_id, acta[1].id, acta[3].id, "m1 to m3"))
        assert stored.summarizes == Span(acta[1].id, acta[3].id)
        assert (stored.kind, stored.content, stored.chronicum_id) == (
            ActumKind.MESSAGE,
            "m1 to m3",
            chronicum_id,
        )
        assert_same_acta(
            harness.get_acta(owner, chronicum_id), [acta[0], stored, acta[4], acta[5]], "summarized"
        )
        assert_same_acta(_as_written(harness, owner, chronicum_id), [*acta, stored], "as written")
        later = write(harness, owner, chronicum_id, 1, "later")
        assert_same_acta(
            harness.get_acta(owner, chronicum_id), [acta[0], stored, acta[4], acta[5], *later], "summarized"
        )
        assert_same_acta([harness.get_actum(owner, chronicum_id, stored.id)], [stored], "the summary by id")
        assert_same_acta(
            [harness.get_actum(owner, chronicum_id, acta[2].id)], [acta[2]], "a summarized actum by id"
        )

    def test_history_summary_counts_as_one_message_of_its_actor_kind(self, history_harness: Harness) -> None:
        """``last_n`` and the filters count a summary as one ``message`` of its actor kind."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("summary-count")
        acta = write_mixed(harness, owner, chronicum_id, 6, "a")
        short = harness.record_actum(
            owner, summary(chronicum_id, acta[1].id, acta[3].id, actor_kind=ActorKind.SYSTEM)
        )
        cases: list[tuple[dict[str, Any], list[Actum]]] = [
            ({"last_n": 2}, [acta[4], acta[5]]),
            ({"last_n": 3}, [short, acta[4], acta[5]]),
            ({"actum_kinds": ["thought"]}, []),
            ({"actum_kinds": ["message"]}, [acta[0], short, acta[4], acta[5]]),
            ({"actum_kinds": ["tool_request", "tool_response"]}, []),
            ({"actor_kinds": ["system"]}, [short]),
            ({"actor_kinds": ["agent"]}, [acta[4]]),
            ({"actum_kinds": ["message"], "actor_kinds": ["system"], "last_n": 1}, [short]),
            ({"view": "as_written", "actum_kinds": ["message"], "last_n": 2}, [acta[5], short]),
            ({"view": "as_written", "actor_kinds": ["system"]}, [acta[3], short]),
        ]
        for shape, expected in cases:
            assert_same_acta(harness.get_acta(owner, chronicum_id, **shape), expected, f"the window {shape}")

    def test_history_summary_of_a_range_holding_a_summary(self, history_harness: Harness) -> None:
        """A range endpoint that is a summary stands for its range; inner summaries are not shown."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("nested")
        acta = write(harness, owner, chronicum_id, 6)
        inner = harness.record_actum(owner, summary(chronicum_id, acta[1].id, acta[2].id, "inner"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [acta[0], inner, *acta[3:]], "one summary")
        outer = harness.record_actum(owner, summary(chronicum_id, acta[0].id, inner.id, "outer"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [outer, *acta[3:]], "a summary holding one")
        widest = harness.record_actum(owner, summary(chronicum_id, outer.id, acta[4].id, "widest"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [widest, acta[5]], "three levels")
        with pytest.raises(InvalidActum) as inside:
            harness.record_actum(owner, summary(chronicum_id, acta[1].id, inner.id, "inside the outer"))
        assert inside.value.field == "summarizes"
        later = write(harness, owner, chronicum_id, 1, "later")
        assert_same_acta(harness.get_acta(owner, chronicum_id), [widest, acta[5], *later], "then a write")
        written = _as_written(harness, owner, chronicum_id)
        assert_same_acta(written, [*acta, inner, outer, widest, *later], "as written")
        assert_same_acta(harness.get_acta(owner, chronicum_id), expected_window(written), "the oracle's")
        assert_same_acta(harness.get_acta(owner, chronicum_id, last_n=1), later, "the newest")

    def test_history_summary_equal_ranges_newest_wins(self, history_harness: Harness) -> None:
        """Of summaries over the very same range, the newest is shown; the record keeps them all."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("equal")
        acta = write(harness, owner, chronicum_id, 4)
        summaries = [
            harness.record_actum(owner, summary(chronicum_id, acta[1].id, acta[2].id, f"take {take}"))
            for take in range(3)
        ]
        assert_same_acta(harness.get_acta(owner, chronicum_id), [acta[0], summaries[-1], acta[3]], "newest")
        assert_same_acta(_as_written(harness, owner, chronicum_id), [*acta, *summaries], "as written")
        assert len(_layout(harness, chronicum_id).summaries) == 3

    @pytest.mark.parametrize("case", _REFUSALS)
    def test_history_summary_refused_writes_nothing(self, history_harness: Harness, case: str) -> None:
        """A range not in the history, backwards, or crossing another: ``InvalidActum("summarizes")``."""
        harness = history_harness
        owner, chronicum_id, elsewhere = new_owner(), new_id("refused"), new_id("elsewhere")
        acta = write(harness, owner, chronicum_id, 6)
        other = write(harness, owner, elsewhere, 1)
        existing = harness.record_actum(owner, summary(chronicum_id, acta[2].id, acta[3].id))
        before = _as_written(harness, owner, chronicum_id)
        version = _layout(harness, chronicum_id).version
        spans = {
            "missing_first": ("0" * 32, acta[1].id),
            "missing_last": (acta[0].id, "0" * 32),
            "another_chronicum": (acta[0].id, other[0].id),
            "first_after_last": (acta[4].id, acta[1].id),
            "partly_overlapping": (acta[1].id, acta[2].id),
            "inside_another": (acta[3].id, acta[3].id),
        }
        index = None
        if case in spans:
            first, last = spans[case]
            call = rules_call("record_actum", owner, summary(chronicum_id, first, last))
        elif case == "in_a_batch":
            if BATCH not in harness.capabilities:
                pytest.skip(f"{harness.store_name} does not have the batch capability")
            batch = [make_actum(chronicum_id, "plain"), summary(chronicum_id, acta[0].id, acta[1].id)]
            call, index = rules_call("record_acta", owner, batch), 1
        else:
            thought = summary(chronicum_id, acta[0].id, acta[1].id, kind=ActumKind.THOUGHT)
            call = rules_call("record_actum", owner, thought)
        with pytest.raises(InvalidActum) as refused:
            harness.perform(call)
        assert (refused.value.field, refused.value.index) == ("summarizes", index), str(refused.value)
        assert_same_acta(_as_written(harness, owner, chronicum_id), before, "after a refused summary")
        assert _layout(harness, chronicum_id).version == version
        assert_same_acta(
            harness.get_acta(owner, chronicum_id), [*acta[:2], existing, *acta[4:]], "the summarized view"
        )

    def test_history_summary_of_a_missing_or_foreign_chronicum(self, history_harness: Harness) -> None:
        """A summary is never a first write, nor written into another owner's chronicum."""
        harness = history_harness
        owner, other, chronicum_id = new_owner(), new_owner("bunga"), new_id("summary")
        acta = write(harness, owner, chronicum_id, 2)
        missing = new_id("missing")
        with pytest.raises(ChronicumNotFound):
            harness.record_actum(owner, summary(missing, acta[0].id, acta[1].id))
        with pytest.raises(ChronicumNotFound):
            harness.get(missing)
        with pytest.raises(ChronicumNotFound):
            harness.record_actum(other, summary(chronicum_id, acta[0].id, acta[1].id))
        assert_same_acta(_as_written(harness, owner, chronicum_id), acta, "another owner's chronicum")

    def test_history_summary_with_an_idempotency_key(self, history_harness: Harness) -> None:
        """A retried summary returns the first and writes nothing; the key is shared with other writes."""
        harness = require_capability(history_harness, IDEMPOTENCY, "keyed summaries")
        owner, chronicum_id = new_owner(), new_id("keyed")
        acta = write(harness, owner, chronicum_id, 5)
        first = harness.record_actum(
            owner, summary(chronicum_id, acta[0].id, acta[1].id, "first"), idempotency_key="sum-1"
        )
        retry = harness.record_actum(
            owner, summary(chronicum_id, acta[0].id, acta[2].id, "retry"), idempotency_key="sum-1"
        )
        assert_same_acta([retry], [first], "the retried summary")
        again = harness.record_actum(owner, make_actum(chronicum_id, "plain"), idempotency_key="sum-1")
        assert_same_acta([again], [first], "a plain write with a summary's key")
        plain = harness.record_actum(owner, make_actum(chronicum_id, "plain"), idempotency_key="plain-1")
        keyed = harness.record_actum(
            owner, summary(chronicum_id, acta[3].id, acta[4].id), idempotency_key="plain-1"
        )
        assert_same_acta([keyed], [plain], "a summary with a plain write's key")
        assert_same_acta(_as_written(harness, owner, chronicum_id), [*acta, first, plain], "as written")
        assert len(_layout(harness, chronicum_id).summaries) == 1

    def test_history_summary_racing_writers_lose_nothing(self, history_harness: Harness) -> None:
        """Writers racing summarizers: every actum lands, and each one after a range stays in the window."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("raced")
        acta = write(harness, owner, chronicum_id, 10)
        calls = [
            rules_call("record_actum", owner, make_actum(chronicum_id, f"writer-{index}"))
            for index in range(RACING_WRITERS)
        ]
        calls.insert(5, rules_call("record_actum", owner, summary(chronicum_id, acta[0].id, acta[4].id)))
        calls.insert(20, rules_call("record_actum", owner, summary(chronicum_id, acta[5].id, acta[9].id)))
        outcomes = harness.concurrently(calls)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert failures == [], f"{len(failures)} writes failed while summaries were written: {failures[:3]!r}"
        short_first, short_second = outcomes[5], outcomes[20]
        written = _assert_views(harness, owner, chronicum_id, "after racing writers")
        assert len(written) == 10 + RACING_WRITERS + 2
        window = harness.get_acta(owner, chronicum_id)
        assert ids(window[:2]) == [short_first.id, short_second.id]
        writers = {outcome.id for index, outcome in enumerate(outcomes) if index not in (5, 20)}
        assert writers <= set(ids(window)), "an actum written while a summary was written left the window"
        assert len(window) == 2 + RACING_WRITERS

    def test_history_summary_contenders_never_store_partly_overlapping_ranges(
        self, history_harness: Harness
    ) -> None:
        """Summaries checked against one layout, all partly overlapping: exactly one lands."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("contended")
        acta = write(harness, owner, chronicum_id, 2 * CONTENDING_SUMMARIES)
        width = CONTENDING_SUMMARIES - 1  # every range holds the middle actum; none holds another
        contenders = harness.with_chronicarius(gate_summaries=CONTENDING_SUMMARIES)
        calls = [
            rules_call("record_actum", owner, summary(chronicum_id, acta[start].id, acta[start + width].id))
            for start in range(CONTENDING_SUMMARIES)
        ]
        outcomes = contenders.concurrently(calls)
        landed = [outcome for outcome in outcomes if isinstance(outcome, Actum)]
        refused = [outcome for outcome in outcomes if isinstance(outcome, InvalidActum)]
        assert len(landed) == 1, f"{len(landed)} partly overlapping summaries landed: {outcomes!r}"
        assert len(refused) == CONTENDING_SUMMARIES - 1, f"the others did not all fail cleanly: {outcomes!r}"
        assert {error.field for error in refused} == {"summarizes"}
        layout = _layout(harness, chronicum_id)
        assert len(layout.summaries) == 1
        _assert_views(harness, owner, chronicum_id, "after contending summaries")
        # wider and equal ranges hold the narrower ones: whatever lands, the ranges never cross
        chronicum_id = new_id("contended")
        acta = write(harness, owner, chronicum_id, 12)
        calls = [
            rules_call("record_actum", owner, summary(chronicum_id, acta[first].id, acta[last].id))
            for first, last in ((0, 11), (0, 11), (0, 3), (2, 8), (6, 11), (1, 10))
        ]
        outcomes = harness.with_chronicarius(gate_summaries=len(calls)).concurrently(calls)
        for outcome in outcomes:
            assert isinstance(outcome, Actum) or (
                isinstance(outcome, InvalidActum) and outcome.field == "summarizes"
            ), f"a contending summary answered {outcome!r}"
        assert sum(isinstance(outcome, Actum) for outcome in outcomes) >= 2  # the two widest always fit
        _assert_nested_or_apart(_layout(harness, chronicum_id))
        _assert_views(harness, owner, chronicum_id, "after contending summaries")

    def test_history_summary_in_forks(self, history_harness: Harness) -> None:
        """A fork shares the summaries written in its shared prefix, and only those; its own stay its own."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 4, "source")
        inherited = harness.record_actum(owner, summary(source_id, source[0].id, source[1].id, "inherited"))
        source.extend(write(harness, owner, source_id, 2, "source-more"))
        before_it = harness.fork_chronicum(owner, source_id, at=source[3].id)
        assert_same_acta(harness.get_acta(owner, before_it.id), source[:4], "a fork made before the summary")
        fork = harness.fork_chronicum(owner, source_id, at=source[4].id)
        assert_same_acta(
            harness.get_acta(owner, fork.id), [inherited, *source[2:5]], "a fork of a summarized prefix"
        )
        own = write(harness, owner, fork.id, 1, "fork")
        across = harness.record_actum(owner, summary(fork.id, source[2].id, own[0].id, "across"))
        assert_same_acta(
            harness.get_acta(owner, fork.id), [inherited, across], "a range across the fork point"
        )
        late = harness.record_actum(owner, summary(source_id, source[2].id, source[3].id, "late"))
        assert_same_acta(harness.get_acta(owner, fork.id), [inherited, across], "the source's later summary")
        assert_same_acta(
            harness.get_acta(owner, source_id), [inherited, late, source[4], source[5]], "the source"
        )
        for first, last in ((source[0].id, source[5].id), (source[1].id, source[2].id)):
            with pytest.raises(InvalidActum) as refused:  # past the fork point; partly over `inherited`
                harness.record_actum(owner, summary(fork.id, first, last))
            assert refused.value.field == "summarizes"
        _assert_views(harness, owner, fork.id, "the fork")
        # a fork made after a summary inherits it when the summary lies in the shared prefix
        later_fork = harness.fork_chronicum(owner, fork.id)
        assert_same_acta(harness.get_acta(owner, later_fork.id), [inherited, across], "a fork of a fork")

    def test_history_summary_layout_version_changes(self, history_harness: Harness) -> None:
        """The layout version: stable while nothing changes, new with each summary, read by ``window``."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("version")
        acta = write(harness, owner, chronicum_id, 4)
        layout = _layout(harness, chronicum_id)
        assert _layout(harness, chronicum_id).version == layout.version
        whole = WindowReads((RangeRead(layout.lineage[-1], None, None, 0, True, True),))
        assert harness.perform(store_call("window", chronicum_id, whole)).version == layout.version
        harness.record_actum(owner, summary(chronicum_id, acta[0].id, acta[1].id))
        summarized = _layout(harness, chronicum_id)
        assert summarized.version != layout.version, "a summary left the layout version as it was"
        assert harness.perform(store_call("window", chronicum_id, whole)).version == summarized.version
        found = harness.perform(store_call("locate", summarized.lineage, (acta[2].id, acta[3].id)))
        first, last = found[acta[2].id].position, found[acta[3].id].position
        stale = summary(chronicum_id, acta[2].id, acta[3].id)
        with pytest.raises(StaleLayout):
            harness.perform(store_call("record_summary", stale, first, last, layout.version, None))
        assert len(_as_written(harness, owner, chronicum_id)) == 5, "a stale summary was written"
        assert _layout(harness, chronicum_id).version == summarized.version
        if IDEMPOTENCY in harness.capabilities:
            keyed = harness.perform(
                store_call("record_summary", stale, first, last, summarized.version, "sum-key")
            )
            retried = harness.perform(
                store_call(
                    "record_summary", replace(stale, id=new_id("x")), first, last, layout.version, "sum-key"
                )
            )
            assert_same_acta([retried], [keyed], "a summary retried with its key, on a stale version")
            assert len(_as_written(harness, owner, chronicum_id)) == 6
        if ERASURE in harness.capabilities:
            latest = _layout(harness, chronicum_id).version
            harness.erase_chronicum(owner, chronicum_id)
            write(harness, owner, chronicum_id, 4, "again")
            assert _layout(harness, chronicum_id).version != latest, (
                "an erased id written again kept its version"
            )

    def test_history_summary_store_acta_raises_stale_layout(self, history_harness: Harness) -> None:
        """``acta`` answers for a plain chronicum only; the Chronicarius then reads through ``window``."""
        harness = history_harness
        owner, chronicum_id, exchanged, unlinked = new_owner(), new_id("plain"), new_id("paired"), new_id("u")
        acta = write(harness, owner, chronicum_id, 4)
        cached = harness.with_chronicarius(owner_cache_size=100)
        assert_same_acta(cached.get_acta(owner, chronicum_id), acta, "a plain chronicum")
        assert_same_acta(harness.acta(chronicum_id), acta, "acta of a plain chronicum")
        short = harness.record_actum(owner, summary(chronicum_id, acta[0].id, acta[1].id))
        with pytest.raises(StaleLayout):
            harness.acta(chronicum_id)
        assert_same_acta(
            cached.get_acta(owner, chronicum_id), [short, *acta[2:]], "read by one that knew it plain"
        )
        call = harness.record_actum(owner, request(exchanged))
        harness.record_actum(owner, respond(exchanged, call.id))
        with pytest.raises(StaleLayout):
            harness.acta(exchanged)
        harness.record_actum(owner, request(unlinked))
        harness.record_actum(owner, respond(unlinked, ""))
        assert len(harness.acta(unlinked)) == 2, "a response naming no request is plain"
