"""The history contract's forks: a chronicum sharing another's history up to an actum, then its own."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from chronica_conformance.base import (
    TIME_TOLERANCE,
    assert_same_acta,
    ids,
    make_actum,
    new_chronicum,
    new_id,
    new_owner,
    require_capability,
)
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_conformance.history_base import HistoryBase, Shape, expected_window, write, write_mixed
from chronica_core import (
    ActaQuery,
    ActorKind,
    ActumKind,
    ActumNotFound,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    ForkPoint,
    InvalidQuery,
)
from chronica_core.capabilities import BATCH, ERASURE, FOLLOW, LISTING
from chronica_core.erasure import owner_digest
from chronica_core.history import RangeRead, Segment, WindowReads, WindowRows

__all__ = ["LONG_PREFIX", "ForkContract"]

LONG_PREFIX = 300
"""How many acta the source of the case that checks a fork copies nothing holds."""

RACING_FORKS = 10
"""How many forks race with one erasure of their source."""

_HEX_ID = re.compile(r"[0-9a-f]{32}")


def _assert_at(moment: datetime | None, expected: datetime | None, what: str) -> None:
    assert (moment is None) == (expected is None), f"{what} is {moment}, expected {expected}"
    if moment is not None and expected is not None:
        assert abs(moment - expected) <= TIME_TOLERANCE, f"{what} is {moment}, expected {expected}"


def _assert_erased(harness: Harness, owner_id: str, chronicum_id: str, prefix_actum: str) -> None:
    """Nothing of an erased chronicum (a fork's or a source's) is readable, and its id stays taken."""
    for call in (
        store_call("get", chronicum_id),
        store_call("acta", chronicum_id, ActaQuery()),
        store_call("layout", chronicum_id),
        rules_call("get_chronicum", owner_id, chronicum_id),
        rules_call("get_acta", owner_id, chronicum_id),
        rules_call("get_acta", owner_id, chronicum_id, view="as_written"),
        rules_call("get_actum", owner_id, chronicum_id, prefix_actum),
        rules_call("fork_chronicum", owner_id, chronicum_id),
    ):
        with pytest.raises(ChronicumNotFound):
            harness.perform(call)
    with pytest.raises(ChronicumExists):  # the marker keeps the id
        harness.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))


class ForkContract(HistoryBase):
    """A fork shares its source's history up to an actum, copies nothing, and goes on on its own."""

    def test_history_fork_shares_the_prefix_then_goes_its_own_way(self, history_harness: Harness) -> None:
        """The fork reads the source's acta up to ``at``, then its own; the source never sees them."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 5, "source")
        fork = harness.fork_chronicum(owner, source_id, at=source[2].id)
        assert fork.owner_id == owner
        assert fork.forked_from == ForkPoint(source_id, source[2].id)
        assert _HEX_ID.fullmatch(fork.id), f"the default fork id {fork.id!r} is not 32 lowercase hex"
        _assert_at(fork.last_actum_at, source[2].at, "the fork's last_actum_at")
        assert_same_acta(harness.get_acta(owner, fork.id), source[:3], "the fork's history")
        own = write(harness, owner, fork.id, 2, "fork")
        later = write(harness, owner, source_id, 2, "later")
        assert {actum.chronicum_id for actum in own} == {fork.id}
        assert_same_acta(harness.get_acta(owner, fork.id), [*source[:3], *own], "the fork's history")
        assert_same_acta(harness.get_acta(owner, source_id), [*source, *later], "the source's history")
        for read in (harness.get_chronicum(owner, fork.id), harness.get(fork.id)):
            assert (read.id, read.owner_id, read.forked_from) == (fork.id, owner, fork.forked_from)
            _assert_at(read.last_actum_at, own[-1].at, "the fork's last_actum_at")
        unchanged = harness.get_chronicum(owner, source_id)
        assert unchanged.forked_from is None
        _assert_at(unchanged.last_actum_at, later[-1].at, "the source's last_actum_at")

    def test_history_fork_at_the_newest_by_default(self, history_harness: Harness) -> None:
        """``at=None`` shares every actum the source has now; each fork gets its own fresh id."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 3)
        first, second = (harness.fork_chronicum(owner, source_id) for _ in range(2))
        assert first.id != second.id
        for fork in (first, second):
            assert fork.forked_from == ForkPoint(source_id, source[-1].id)
            assert_same_acta(harness.get_acta(owner, fork.id), source, "a fork at the newest")
        later = write(harness, owner, source_id, 1, "later")
        assert_same_acta(harness.get_acta(owner, first.id), source, "a fork after its source went on")
        named = harness.fork_chronicum(owner, source_id, fork_id=new_id("named"))
        assert named.id.startswith("conformance-named-")
        assert harness.get_chronicum(owner, named.id).forked_from == ForkPoint(source_id, later[0].id)
        assert_same_acta(harness.get_acta(owner, named.id), [*source, *later], "a fork at the newest")

    def test_history_fork_of_an_empty_chronicum(self, history_harness: Harness) -> None:
        """A fork of a chronicum without acta shares nothing (``actum_id`` ``""``) and goes on alone."""
        harness = history_harness
        owner = new_owner()
        empty = new_chronicum(owner_id=owner)
        harness.create(empty)
        fork = harness.fork_chronicum(owner, empty.id)
        assert fork.forked_from == ForkPoint(empty.id, "")
        assert fork.last_actum_at is None
        assert harness.get_acta(owner, fork.id) == []
        with pytest.raises(ActumNotFound):
            harness.fork_chronicum(owner, empty.id, at="0" * 32)
        own = write(harness, owner, fork.id, 2, "fork")
        later = write(harness, owner, empty.id, 1, "source")
        assert_same_acta(harness.get_acta(owner, fork.id), own, "the fork's history")
        assert_same_acta(harness.get_acta(owner, empty.id), later, "the source's history")

    def test_history_fork_of_a_fork(self, history_harness: Harness) -> None:
        """Forks of forks, at an actum of either part of the history, each read their own lineage."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 4, "source")
        first = harness.fork_chronicum(owner, source_id, at=source[1].id)
        first_own = write(harness, owner, first.id, 3, "first")
        second = harness.fork_chronicum(owner, first.id, at=first_own[0].id)
        assert second.forked_from == ForkPoint(first.id, first_own[0].id)
        second_own = write(harness, owner, second.id, 2, "second")
        in_the_prefix = harness.fork_chronicum(owner, first.id, at=source[0].id)
        assert in_the_prefix.forked_from == ForkPoint(first.id, source[0].id)
        newest = harness.fork_chronicum(owner, second.id)
        write(harness, owner, source_id, 2, "source-later")
        first_later = write(harness, owner, first.id, 1, "first-later")
        expected = {
            first.id: [*source[:2], *first_own, *first_later],
            second.id: [*source[:2], first_own[0], *second_own],
            in_the_prefix.id: source[:1],
            newest.id: [*source[:2], first_own[0], *second_own],
        }
        for chronicum_id, history in expected.items():
            assert_same_acta(harness.get_acta(owner, chronicum_id), history, f"the history of {chronicum_id}")
        assert_same_acta(
            harness.get_acta(owner, newest.id, last_n=3), [first_own[0], *second_own], "the newest 3"
        )

    def test_history_fork_windows_filters_and_last_n(self, history_harness: Harness) -> None:
        """Filters, ``last_n`` and ``newest_first`` over a fork count its shared prefix, nothing after."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write_mixed(harness, owner, source_id, 7, "source")
        fork = harness.fork_chronicum(owner, source_id, at=source[3].id)
        own = write_mixed(harness, owner, fork.id, 6, "fork")
        write_mixed(harness, owner, source_id, 5, "later")  # after the fork point: never in the fork
        history = [*source[:4], *own]
        kind_filters = (None, (ActumKind.MESSAGE,), (ActumKind.THOUGHT, ActumKind.TOOL_REQUEST))
        for actum_kinds in (*kind_filters, (ActumKind.TOOL_RESPONSE,)):
            for actor_kinds in (None, (ActorKind.AGENT,), (ActorKind.HUMAN, ActorKind.SYSTEM)):
                for last_n in (0, 1, 2, 3, 5, 100):
                    for newest_first in (False, True):
                        shape = Shape(actum_kinds, actor_kinds, last_n, newest_first=newest_first)
                        expected = expected_window(history, shape)
                        what = f"the fork's window {shape}"
                        assert_same_acta(shape.read(harness, owner, fork.id), expected, what)

    def test_history_fork_reads_an_actum_by_id_within_its_history(self, history_harness: Harness) -> None:
        """``get_actum`` through a fork finds its shared acta and its own, and nothing else."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 4, "source")
        fork = harness.fork_chronicum(owner, source_id, at=source[1].id)
        own = write(harness, owner, fork.id, 1, "fork")
        elsewhere = write(harness, owner, new_id("elsewhere"), 1, "elsewhere")
        for actum in (*source[:2], *own):
            assert_same_acta([harness.get_actum(owner, fork.id, actum.id)], [actum], "an actum by id")
        for missing in (source[2].id, source[3].id, elsewhere[0].id, "0" * 32):
            with pytest.raises(ActumNotFound) as refused:
                harness.get_actum(owner, fork.id, missing)
            assert (refused.value.chronicum_id, refused.value.actum_id) == (fork.id, missing)
        with pytest.raises(ActumNotFound):
            harness.get_actum(owner, source_id, own[0].id)

    def test_history_fork_followed_from_its_shared_prefix(self, history_harness: Harness) -> None:
        """A follower of a fork reads its shared acta, then its own, never what the source writes after."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 4, "source")
        fork = harness.fork_chronicum(owner, source_id, at=source[2].id)
        calls = []
        for index in range(3):
            calls.append(rules_call("record_actum", owner, make_actum(source_id, f"source-later-{index}")))
            calls.append(rules_call("record_actum", owner, make_actum(fork.id, f"fork-{index}")))
        run = harness.follow_during(owner, fork.id, 5, calls, after=source[0].id)
        assert [outcome for outcome in run.outcomes if isinstance(outcome, BaseException)] == []
        history = harness.get_acta(owner, fork.id)
        assert ids(history[:3]) == ids(source[:3])
        assert ids(run.acta) == ids(history[1:]), "the follower of a fork left its history"
        # from the newest of a fork without acta of its own: only what the fork writes next
        later = harness.fork_chronicum(owner, source_id, at=source[1].id)
        calls = [
            rules_call("record_actum", owner, make_actum(source_id, "source-again")),
            rules_call("record_actum", owner, make_actum(later.id, "later-own")),
        ]
        run = harness.follow_during(owner, later.id, 1, calls)
        assert [actum.content for actum in run.acta] == ["later-own"]
        # a fork of a chronicum without acta, followed from its start
        empty = new_chronicum(owner_id=owner)
        harness.create(empty)
        bare = harness.fork_chronicum(owner, empty.id)
        calls = [
            rules_call("record_actum", owner, make_actum(empty.id, "in the source")),
            rules_call("record_actum", owner, make_actum(bare.id, "in the fork")),
        ]
        run = harness.follow_during(owner, bare.id, 1, calls)
        assert [actum.content for actum in run.acta] == ["in the fork"]

    def test_history_fork_listed_with_its_forked_from(self, history_harness: Harness) -> None:
        """``list_chronica`` lists a fork like any chronicum, with its ``forked_from``."""
        harness = require_capability(history_harness, LISTING, "listing forks")
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 2)
        fork = harness.fork_chronicum(owner, source_id, at=source[0].id)
        listed = {chronicum.id: chronicum for chronicum in harness.list_chronica(owner, limit=10).chronica}
        assert set(listed) == {source_id, fork.id}
        assert listed[fork.id].forked_from == ForkPoint(source_id, source[0].id)
        assert listed[source_id].forked_from is None

    def test_history_fork_refusals_create_nothing(self, history_harness: Harness) -> None:
        """Another owner's or a missing source, a taken ``fork_id``, an ``at`` outside the history."""
        harness = history_harness
        owner, other = new_owner(), new_owner("bunga")
        source_id, theirs, mine = new_id("source"), new_id("theirs"), new_id("mine")
        source = write(harness, owner, source_id, 3)
        their_acta = write(harness, other, theirs, 1)
        my_acta = write(harness, owner, mine, 1)
        attempts: list[str] = []

        def attempt(error: type[Exception], owner_id: str, chronicum_id: str, **kwargs: object) -> Exception:
            fork_id = kwargs.pop("fork_id", None)
            if fork_id is None:
                fork_id = new_id("refused")
                attempts.append(fork_id)
            with pytest.raises(error) as refused:
                harness.fork_chronicum(owner_id, chronicum_id, fork_id=fork_id, **kwargs)  # type: ignore[arg-type]
            return refused.value

        missing = new_id("missing")
        foreign = attempt(ChronicumNotFound, other, source_id)
        absent = attempt(ChronicumNotFound, owner, missing)
        assert str(foreign).replace(source_id, "<id>") == str(absent).replace(missing, "<id>"), (
            "another owner's source must answer exactly like a missing one"
        )
        attempt(ChronicumNotFound, owner, theirs)
        for taken in (source_id, theirs, mine):
            attempt(ChronicumExists, owner, source_id, fork_id=taken)
        for outside in ("0" * 32, their_acta[0].id, my_acta[0].id, "\ud800", "a" * 300):
            refused = attempt(ActumNotFound, owner, source_id, at=outside)
            assert isinstance(refused, ActumNotFound) and refused.actum_id == outside
        for bad_id in ("", "a\x00b"):
            bad = attempt(InvalidQuery, owner, source_id, fork_id=bad_id)
            assert isinstance(bad, InvalidQuery) and bad.field == "fork_id"
        bad_at = attempt(InvalidQuery, owner, source_id, at=42)
        assert isinstance(bad_at, InvalidQuery) and bad_at.field == "at"
        for fork_id in attempts:
            with pytest.raises(ChronicumNotFound):
                harness.get(fork_id)  # nothing created
        assert_same_acta(harness.get_acta(owner, source_id), source, "the source")
        assert_same_acta(harness.get_acta(other, theirs), their_acta, "another owner's chronicum")
        assert_same_acta(harness.get_acta(owner, mine), my_acta, "a chronicum whose id was asked for")
        if LISTING in harness.capabilities:
            listed = {chronicum.id for chronicum in harness.list_chronica(owner, limit=10).chronica}
            assert listed == {source_id, mine}

    def test_history_fork_on_the_store(self, history_harness: Harness) -> None:
        """``fork`` saves the lineage it is given; a taken id or a missing source saves nothing."""
        harness = history_harness
        created = new_chronicum()
        harness.create(created)
        stored = [harness.record(make_actum(created.id, f"m-{index}")) for index in range(3)]
        layout = harness.perform(store_call("layout", created.id))
        found = harness.perform(store_call("locate", layout.lineage, (stored[1].id,)))
        position = found[stored[1].id].position
        fork_id = new_id("fork")
        lineage = (Segment(created.id, 0, position), Segment(fork_id, position, None))
        fork = Chronicum(
            fork_id, created.owner_id, datetime.now(UTC), stored[1].at, ForkPoint(created.id, stored[1].id)
        )
        harness.perform(store_call("fork", fork, lineage))
        saved = harness.perform(store_call("layout", fork_id))
        assert saved.lineage == lineage, "the store changed the lineage it was given"
        assert saved.chronicum.forked_from == fork.forked_from
        assert harness.get(fork_id).forked_from == fork.forked_from
        for taken in (fork_id, created.id):
            with pytest.raises(ChronicumExists):
                harness.perform(store_call("fork", Chronicum(taken, *_rest(fork)), lineage))
        orphan_id = new_id("orphan")
        orphan = Chronicum(
            orphan_id, created.owner_id, datetime.now(UTC), None, ForkPoint(new_id("gone"), "")
        )
        with pytest.raises(ChronicumNotFound):
            harness.perform(store_call("fork", orphan, (Segment(orphan_id, 0, None),)))
        with pytest.raises(ChronicumNotFound):
            harness.get(orphan_id)
        if ERASURE in harness.capabilities:
            digest = owner_digest(created.owner_id)
            assert harness.perform(store_call("erase", created.id, digest)) == 3
            late_id = new_id("late")
            late = Chronicum(late_id, *_rest(fork))
            with pytest.raises(ChronicumNotFound):
                harness.perform(store_call("fork", late, (lineage[0], Segment(late_id, position, None))))
            for gone in (late_id, fork_id):
                with pytest.raises(ChronicumNotFound):
                    harness.get(gone)

    def test_history_fork_copies_nothing(self, history_harness: Harness) -> None:
        """A fork of a long chronicum holds no acta of its own: its shared history is read from the source."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("long")
        if BATCH in harness.capabilities:
            source = []
            for start in range(0, LONG_PREFIX, 100):
                batch = [make_actum(source_id, f"m-{index}") for index in range(start, start + 100)]
                source.extend(harness.record_acta(owner, batch))
        else:
            source = write(harness, owner, source_id, LONG_PREFIX)
        fork = harness.fork_chronicum(owner, source_id)
        layout = harness.perform(store_call("layout", fork.id))
        shared, own = layout.lineage
        assert (shared.chronicum_id, shared.after, own.chronicum_id, own.upto) == (
            source_id,
            0,
            fork.id,
            None,
        )
        assert own.after == shared.upto, f"the fork's own acta do not follow its fork point: {layout.lineage}"
        read_own = RangeRead(own, None, None, 0, True, True)
        rows: WindowRows = harness.perform(store_call("window", fork.id, WindowReads((read_own,))))
        assert list(rows.acta) == [], (
            f"the fork holds {len(rows.acta)} acta of its own: the store copied them"
        )
        assert harness.acta(fork.id) == [], "acta(fork) must answer for the fork's own acta only"
        if FOLLOW in harness.capabilities:
            assert harness.perform(store_call("acta_after", fork.id, None, 100)) == []
        read_shared = RangeRead(shared, None, None, 3, True, True)
        rows = harness.perform(store_call("window", fork.id, WindowReads((read_shared,))))
        assert ids(rows.acta) == ids(source[-3:])
        assert list(rows.positions) == sorted(rows.positions) and rows.positions[-1] == shared.upto
        assert_same_acta(harness.get_acta(owner, fork.id, last_n=5), source[-5:], "the fork's newest 5")
        assert len(harness.get_acta(owner, fork.id)) == LONG_PREFIX

    def test_history_fork_erasing_the_source_erases_its_forks(self, history_harness: Harness) -> None:
        """Forks, forks of forks included, go with their source: nothing readable, ids kept for the owner."""
        harness = require_capability(history_harness, ERASURE, "erasing forks")
        owner, other = new_owner(), new_owner("bunga")
        source_id, kept_id = new_id("source"), new_id("kept")
        source = write(harness, owner, source_id, 3, "source")
        first = harness.fork_chronicum(owner, source_id, at=source[1].id)
        write(harness, owner, first.id, 2, "first")
        second = harness.fork_chronicum(owner, first.id)
        write(harness, owner, second.id, 1, "second")
        bare = harness.fork_chronicum(owner, source_id, at=source[0].id)
        kept = write(harness, owner, kept_id, 1, "kept")
        cached = harness.with_chronicarius(owner_cache_size=100)
        assert len(cached.get_acta(owner, second.id)) == 5  # the second Chronicarius knows the fork now
        assert harness.erase_chronicum(owner, source_id) == 3 + 2 + 1
        for chronicum_id in (source_id, first.id, second.id, bare.id):
            _assert_erased(harness, owner, chronicum_id, source[0].id)
            with pytest.raises(ChronicumNotFound):
                cached.get_acta(owner, chronicum_id)
            with pytest.raises(ChronicumNotFound):
                cached.get_actum(owner, chronicum_id, source[0].id)
            with pytest.raises(ChronicumNotFound):
                harness.with_chronicarius().record_actum(other, make_actum(chronicum_id, "mine now?"))
        assert_same_acta(harness.get_acta(owner, kept_id), kept, "another chronicum of the owner")
        # the owner writing to a fork's id again starts a chronicum of its own, holding only that
        fresh = cached.record_actum(owner, make_actum(second.id, "fresh start"))
        calls = [rules_call("record_actum", owner, make_actum(second.id, "followed"))]
        run = cached.follow_during(owner, second.id, 1, calls, after=fresh.id)  # it knew a fork there
        assert [actum.content for actum in run.acta] == ["followed"]
        fresh_acta = [fresh, *run.outcomes]
        for reader in (harness, cached):
            assert reader.get_chronicum(owner, second.id).forked_from is None
            assert_same_acta(reader.get_acta(owner, second.id), fresh_acta, "a fork's id written again")
            assert_same_acta([reader.get_actum(owner, second.id, fresh.id)], [fresh], "its actum by id")
            with pytest.raises(ActumNotFound):
                reader.get_actum(owner, second.id, source[0].id)

    def test_history_fork_erasing_a_fork_leaves_its_source(self, history_harness: Harness) -> None:
        """Erasing a fork erases it and its own forks, counting their acta; the source stays whole."""
        harness = require_capability(history_harness, ERASURE, "erasing forks")
        owner, source_id = new_owner(), new_id("source")
        source = write(harness, owner, source_id, 3, "source")
        fork = harness.fork_chronicum(owner, source_id, at=source[1].id)
        write(harness, owner, fork.id, 2, "fork")
        deeper = harness.fork_chronicum(owner, fork.id)
        write(harness, owner, deeper.id, 1, "deeper")
        assert harness.erase_chronicum(owner, fork.id) == 2 + 1
        for chronicum_id in (fork.id, deeper.id):
            _assert_erased(harness, owner, chronicum_id, source[0].id)
        assert_same_acta(harness.get_acta(owner, source_id), source, "the source of an erased fork")
        assert_same_acta([harness.get_actum(owner, source_id, source[1].id)], [source[1]], "its fork point")

    def test_history_fork_erase_owner_erases_forks(self, history_harness: Harness) -> None:
        """``erase_owner`` erases the owner's forks like any chronicum, and no one else's."""
        harness = require_capability(history_harness, ERASURE, "erasing forks")
        owner, other = new_owner(), new_owner("bunga")
        source_id, theirs = new_id("source"), new_id("theirs")
        source = write(harness, owner, source_id, 2)
        fork = harness.fork_chronicum(owner, source_id, at=source[0].id)
        write(harness, owner, fork.id, 1)
        deeper = harness.fork_chronicum(owner, fork.id)
        their_acta = write(harness, other, theirs, 2)
        their_fork = harness.fork_chronicum(other, theirs)
        assert harness.erase_owner(owner) == 3
        for chronicum_id in (source_id, fork.id, deeper.id):
            _assert_erased(harness, owner, chronicum_id, source[0].id)
        assert_same_acta(harness.get_acta(other, theirs), their_acta, "another owner's chronicum")
        assert_same_acta(harness.get_acta(other, their_fork.id), their_acta, "another owner's fork")

    def test_history_fork_racing_an_erasure_leaves_no_fork_behind(self, history_harness: Harness) -> None:
        """Forks racing their source's erasure: each is refused, or made and then erased with it."""
        harness = require_capability(history_harness, ERASURE, "forks racing an erasure")
        owner, source_id = new_owner(), new_id("raced")
        source = write(harness, owner, source_id, 3)
        calls = [rules_call("fork_chronicum", owner, source_id) for _ in range(RACING_FORKS)]
        calls.insert(RACING_FORKS // 2, rules_call("erase_chronicum", owner, source_id))
        outcomes = harness.concurrently(calls)
        erased = outcomes.pop(RACING_FORKS // 2)
        assert isinstance(erased, int) and erased == len(source), f"the erasure answered {erased!r}"
        for outcome in outcomes:
            assert isinstance(outcome, (Chronicum, ChronicumNotFound)), (
                f"a fork racing an erasure: {outcome!r}"
            )
            if isinstance(outcome, Chronicum):
                _assert_erased(harness, owner, outcome.id, source[0].id)


def _rest(fork: Chronicum) -> tuple[str, datetime, datetime | None, ForkPoint | None]:
    """Every field of ``fork`` but its id."""
    return fork.owner_id, fork.started_at, fork.last_actum_at, fork.forked_from
