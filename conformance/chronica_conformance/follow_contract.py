"""The follow contract: ``Chronicarius.follow`` on every store, and the ``follow`` capability.

``follow`` works on every store (a store without the capability is polled through ``acta``), so
the follower's cases run for every store, once as the store is and once with the capability
hidden (the polling a third-party store gets). The store's own ``acta_after`` runs where the
store has the capability.
"""

from __future__ import annotations

from collections import Counter

import pytest

from chronica_conformance.base import SuiteBase, ids, make_actum, new_id, new_owner, require_capability
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_core import ActorKind, ActumKind, ActumNotFound, ChronicumNotFound, InvalidQuery, StoreError
from chronica_core.capabilities import ERASURE, FOLLOW
from chronica_core.follow import FOLLOW_PAGE

__all__ = ["FollowContract"]

_WRITERS = 8
_EACH = 6


def _write(harness: Harness, owner: str, chronicum_id: str, count: int, label: str = "m") -> list[str]:
    return [
        harness.record_actum(owner, make_actum(chronicum_id, f"{label}-{index}")).id for index in range(count)
    ]


class FollowContract(SuiteBase):
    """Acta in write order after a position, no gaps, no duplicates, owners kept apart."""

    @pytest.fixture(params=["as-is", "polled"])
    def follow_harness(self, request: pytest.FixtureRequest, chronica_harness: Harness) -> Harness:
        """The harness as it is, and one whose Chronicarius sees no ``follow`` capability (polling)."""
        if request.param == "as-is":
            return chronica_harness
        return chronica_harness.with_chronicarius(owner_cache_size=10_000, hidden=(FOLLOW,))

    @pytest.fixture
    def follow_store_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the follow capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, FOLLOW, "the follow capability's store contract")

    def test_follow_yields_in_order_after_the_given_actum(self, follow_harness: Harness) -> None:
        """From just after ``after``: the acta already there, then the ones written while following."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow")
        before = _write(harness, owner, chronicum_id, 4, "before")
        calls = [
            rules_call("record_actum", owner, make_actum(chronicum_id, f"during-{index}"))
            for index in range(3)
        ]
        run = harness.follow_during(owner, chronicum_id, 5, calls, after=before[1])
        assert ids(run.acta) == ids(harness.get_acta(owner, chronicum_id))[2:]
        assert [actum.content for actum in run.acta][:2] == ["before-2", "before-3"]

    def test_follow_without_after_yields_only_what_comes_next(self, follow_harness: Harness) -> None:
        """``after=None``: nothing recorded before the follower started, everything after."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-now")
        _write(harness, owner, chronicum_id, 3, "old")
        calls = [rules_call("record_actum", owner, make_actum(chronicum_id, "new"))]
        run = harness.follow_during(owner, chronicum_id, 1, calls)
        assert [actum.content for actum in run.acta] == ["new"]
        assert run.acta[0].id == run.outcomes[0].id

    def test_follow_concurrent_writers_no_gaps_no_duplicates(self, follow_harness: Harness) -> None:
        """Many writers at once: the follower sees each actum exactly once, in the chronicum's order."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-many")
        first = _write(harness, owner, chronicum_id, 1, "first")
        calls = [
            rules_call("record_actum", owner, make_actum(chronicum_id, f"w{writer}-{index}"))
            for writer in range(_WRITERS)
            for index in range(_EACH)
        ]
        run = harness.follow_during(owner, chronicum_id, _WRITERS * _EACH, calls, after=first[0])
        failures = [outcome for outcome in run.outcomes if isinstance(outcome, BaseException)]
        assert failures == []
        duplicates = [actum_id for actum_id, seen in Counter(ids(run.acta)).items() if seen > 1]
        assert duplicates == [], "the follower yielded an actum twice"
        assert ids(run.acta) == ids(harness.get_acta(owner, chronicum_id))[1:], (
            "the follower missed acta or saw them out of the chronicum's order"
        )

    def test_follow_more_than_a_page_at_once(self, follow_harness: Harness) -> None:
        """More acta waiting than one read takes: every one of them, in order, once."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-page")
        written = _write(harness, owner, chronicum_id, FOLLOW_PAGE * 2 + 5)
        run = harness.follow_during(owner, chronicum_id, len(written) - 1, after=written[0])
        assert ids(run.acta) == written[1:]

    def test_follow_resumes_after_the_last_actum_it_yielded(self, follow_harness: Harness) -> None:
        """A follower that stopped and starts again from its last actum misses nothing, repeats nothing."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-resume")
        written = _write(harness, owner, chronicum_id, 8)
        first = harness.follow_during(owner, chronicum_id, 3, after=written[0])
        more = [rules_call("record_actum", owner, make_actum(chronicum_id, "later"))]
        second = harness.follow_during(owner, chronicum_id, 5, more, after=first.acta[-1].id)
        assert ids(first.acta) + ids(second.acta) == ids(harness.get_acta(owner, chronicum_id))[1:]

    def test_follow_filters_kinds_and_actor_kinds(self, follow_harness: Harness) -> None:
        """Only matching acta are yielded; the ones passed over never come back later."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-kinds")
        start = _write(harness, owner, chronicum_id, 1)
        plan = [
            (ActumKind.THOUGHT, ActorKind.AGENT),
            (ActumKind.MESSAGE, ActorKind.AGENT),
            (ActumKind.MESSAGE, ActorKind.HUMAN),
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT),
            (ActumKind.MESSAGE, ActorKind.AGENT),
        ]
        for index, (kind, actor_kind) in enumerate(plan):
            harness.record_actum(
                owner, make_actum(chronicum_id, f"x{index}", kind=kind, actor_kind=actor_kind)
            )
        run = harness.follow_during(
            owner, chronicum_id, 2, after=start[0], actum_kinds=["message"], actor_kinds=[ActorKind.AGENT]
        )
        assert [actum.content for actum in run.acta] == ["x1", "x4"]

    def test_follow_missing_or_foreign_chronicum_is_not_found_at_once(self, follow_harness: Harness) -> None:
        """Another owner's chronicum answers exactly like a missing one, before any waiting."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-owned")
        _write(harness, owner, chronicum_id, 1)
        with pytest.raises(ChronicumNotFound) as foreign:
            harness.follow_during(new_owner("rafa"), chronicum_id, 1)
        with pytest.raises(ChronicumNotFound) as by_get_acta:
            harness.get_acta(new_owner("rafa"), chronicum_id)
        assert str(foreign.value) == str(by_get_acta.value)
        missing = new_id("follow-missing")
        with pytest.raises(ChronicumNotFound) as absent:
            harness.follow_during(owner, missing, 1)
        assert missing in str(absent.value)

    def test_follow_owners_are_isolated(self, follow_harness: Harness) -> None:
        """A follower sees its own chronicum's acta only, while another owner writes next door."""
        harness = follow_harness
        owner, other = new_owner(), new_owner("rafa")
        mine, theirs = new_id("follow-mine"), new_id("follow-theirs")
        start = _write(harness, owner, mine, 1)
        _write(harness, other, theirs, 1)
        calls = [
            rules_call("record_actum", other, make_actum(theirs, f"theirs-{index}")) for index in range(5)
        ]
        calls.append(rules_call("record_actum", owner, make_actum(mine, "mine")))
        run = harness.follow_during(owner, mine, 1, calls, after=start[0])
        assert [actum.content for actum in run.acta] == ["mine"]
        assert {actum.chronicum_id for actum in run.acta} == {mine}

    def test_follow_after_that_is_not_an_actum_of_the_chronicum_is_actum_not_found(
        self, follow_harness: Harness
    ) -> None:
        """An unknown ``after`` is ``ActumNotFound``, as ``before``; empty or not a str, ``InvalidQuery``.

        Another chronicum's actum, and an id no actum can have, are unknown.
        """
        harness = follow_harness
        owner, chronicum_id, elsewhere = new_owner(), new_id("follow-after"), new_id("follow-other")
        _write(harness, owner, chronicum_id, 2)
        foreign_actum = _write(harness, owner, elsewhere, 1)[0]
        for after in ("0" * 32, foreign_actum, "a" * 300, "a\x00b", "\ud800"):
            with pytest.raises(ActumNotFound) as refused:
                harness.follow_during(owner, chronicum_id, 1, after=after)
            assert (refused.value.chronicum_id, refused.value.actum_id) == (chronicum_id, after)
        for bad in ("", 42):
            with pytest.raises(InvalidQuery) as not_text:
                harness.follow_during(owner, chronicum_id, 1, after=bad)  # type: ignore[arg-type]
            assert not_text.value.field == "after"

    def test_follow_of_an_erased_chronicum_ends_not_found(self, follow_harness: Harness) -> None:
        """Erasing the chronicum while it is followed ends the follower with ``ChronicumNotFound``."""
        harness = require_capability(follow_harness, ERASURE, "following an erased chronicum")
        owner, chronicum_id = new_owner(), new_id("follow-erased")
        start = _write(harness, owner, chronicum_id, 2)
        with pytest.raises(ChronicumNotFound):
            harness.follow_during(
                owner, chronicum_id, 1, [rules_call("erase_chronicum", owner, chronicum_id)], after=start[1]
            )

    def test_follow_ends_when_its_store_is_closed(self, closing_harness: Harness) -> None:
        """Closing the store while it is followed ends the follower with ``StoreError`` at once."""
        harness = closing_harness
        owner, chronicum_id = new_owner(), new_id("follow-closed")
        start = _write(harness, owner, chronicum_id, 1)
        with pytest.raises(StoreError):
            harness.follow_during(owner, chronicum_id, 1, [store_call("close")], after=start[0])

    def test_follow_stopped_leaves_nothing_behind(self, follow_harness: Harness) -> None:
        """A follower stopped while it waits leaves no thread or task of its own running."""
        harness = follow_harness
        owner, chronicum_id = new_owner(), new_id("follow-stop")
        start = _write(harness, owner, chronicum_id, 1)
        assert harness.follow_left_behind(owner, chronicum_id, start[0]) == []
        # and the chronicum still takes writes and reads
        later = _write(harness, owner, chronicum_id, 1)
        assert ids(harness.get_acta(owner, chronicum_id)) == start + later

    def test_follow_store_acta_after(self, follow_store_harness: Harness) -> None:
        """``acta_after``: unfiltered, in write order, from a position, at most ``limit``; else ``None``."""
        harness = follow_store_harness
        owner, chronicum_id = new_owner(), new_id("acta-after")
        _write(harness, owner, chronicum_id, 1)
        harness.record_actum(
            owner, make_actum(chronicum_id, "t", kind=ActumKind.THOUGHT, actor_kind=ActorKind.AGENT)
        )
        _write(harness, owner, chronicum_id, 3)
        everything = ids(harness.acta(chronicum_id))
        assert ids(harness.perform(store_call("acta_after", chronicum_id, None, 100))) == everything
        assert (
            ids(harness.perform(store_call("acta_after", chronicum_id, everything[0], 2))) == everything[1:3]
        )
        assert harness.perform(store_call("acta_after", chronicum_id, everything[-1], 100)) == []
        assert harness.perform(store_call("acta_after", chronicum_id, "0" * 32, 100)) is None
        with pytest.raises(ChronicumNotFound):
            harness.perform(store_call("acta_after", new_id("missing"), None, 100))
        # a wait with news returns at once, and one without ends by its timeout
        harness.perform(store_call("wait_for_acta", chronicum_id, everything[0], 30.0))
        harness.perform(store_call("wait_for_acta", chronicum_id, everything[-1], 0.05))
