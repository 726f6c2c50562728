"""The retention contract: ``idle_chronica``, ``erase_idle`` and ``Chronicarius.erase_idle``.

Every case erases one fresh owner's chronica only: a store-wide retention call would erase
whatever else shares the database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from chronica_conformance.base import SuiteBase, ids, make_actum, new_id, new_owner, require_capability
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_conformance.store_contract import CLOCK_SKEW
from chronica_core import ActaQuery, Actum, Chronicum, ChronicumNotFound, InvalidQuery
from chronica_core.capabilities import HISTORY, RETENTION
from chronica_core.erasure import owner_digest
from chronica_core.retention import last_activity

__all__ = ["RetentionContract"]

RACING_WRITES = 8
"""How many chronica are written to while retention erases them."""


def _moment_after_writes() -> datetime:
    """A moment every write made so far is older than, whatever the store's clock skew."""
    return datetime.now(UTC) + CLOCK_SKEW


def _cutoff_after(actum: Actum) -> datetime:
    """A moment just after ``actum`` was written, on the store's own clock."""
    assert actum.at is not None
    return actum.at + timedelta(microseconds=1)


def _written_after(harness: Harness, owner: str, chronicum_id: str, moment: datetime) -> Actum:
    """Write into ``chronicum_id`` until the store's clock puts the write at ``moment`` or later.

    A store keeping milliseconds may give writes of the same millisecond one time.
    """
    for _ in range(10_000):
        written = harness.record_actum(owner, make_actum(chronicum_id, "today"))
        if written.at is not None and written.at >= moment:
            return written
    raise AssertionError(f"the store's clock did not pass {moment} in 10,000 writes")


class RetentionContract(SuiteBase):
    """Idle chronica are found through an index, oldest first, and erased whole, one step each.

    Runs where the store has ``idle_chronica`` and ``erase_idle`` (``RetentionStore`` /
    ``AsyncRetentionStore``); skipped, with the reason, elsewhere, unless the suite declares
    ``"retention"`` in ``declares_capabilities`` (then it fails).
    """

    @pytest.fixture
    def retention_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the retention capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, RETENTION, "the retention contract")

    def test_retention_erases_the_idle_chronica_of_an_owner(self, retention_harness: Harness) -> None:
        """erase_idle erases what was idle before the moment and keeps what was written to after it."""
        harness = retention_harness
        owner, other = new_owner(), new_owner("rafa")
        idle = [new_id("idle") for _ in range(3)]
        for chronicum_id in idle:
            harness.record_actum(owner, make_actum(chronicum_id, "long ago"))
        last = harness.record_actum(other, make_actum(new_id("other"), "another owner's"))
        cutoff = _cutoff_after(last)
        active = new_id("active")
        _written_after(harness, owner, active, cutoff)
        _written_after(harness, owner, idle[0], cutoff)  # active once more
        assert harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner, dry_run=True)) == 2
        assert len(harness.get_acta(owner, idle[1])) == 1  # a dry run erases nothing
        assert harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner)) == 2
        for chronicum_id in idle[1:]:
            with pytest.raises(ChronicumNotFound):
                harness.get_acta(owner, chronicum_id)
        assert {actum.content for actum in harness.get_acta(owner, active)} == {"today"}
        assert harness.get_acta(owner, idle[0])[0].content == "long ago"
        assert len(harness.get_acta(other, harness.list_chronica(other).chronica[0].id)) == 1

    def test_retention_finds_chronica_written_to_several_times_on_the_first_call(
        self, retention_harness: Harness
    ) -> None:
        """Chronica with several acta each, written in quick succession: the first call finds them all."""
        harness = retention_harness
        owner = new_owner()
        chatty = [new_id("chatty") for _ in range(3)]
        for chronicum_id in chatty:
            for number in range(3):
                harness.record_actum(owner, make_actum(chronicum_id, f"said {number}"))
        cutoff = _moment_after_writes()
        found = harness.perform(store_call("idle_chronica", cutoff, owner, None, 10))
        assert sorted(chronicum.id for chronicum in found) == sorted(chatty)
        assert harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner, dry_run=True)) == 3
        assert harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner)) == 3
        for chronicum_id in chatty:
            with pytest.raises(ChronicumNotFound):
                harness.get_acta(owner, chronicum_id)

    def test_retention_finds_the_oldest_first_in_keyset_pages(self, retention_harness: Harness) -> None:
        """idle_chronica pages through an owner's idle chronica by last activity, then id, none twice."""
        harness = retention_harness
        owner = new_owner()
        written = []
        for number in range(7):
            chronicum_id = new_id(f"page{number}")
            harness.record_actum(owner, make_actum(chronicum_id, "said"))
            written.append(chronicum_id)
        cutoff = _moment_after_writes()
        seen: list[Chronicum] = []
        after = None
        while True:
            page = harness.perform(store_call("idle_chronica", cutoff, owner, after, 3))
            assert len(page) <= 3
            seen.extend(page)
            if len(page) < 3:
                break
            after = (last_activity(page[-1]), page[-1].id)
        assert sorted(chronicum.id for chronicum in seen) == sorted(written)
        keys = [(last_activity(chronicum), chronicum.id) for chronicum in seen]
        assert keys == sorted(keys), "idle chronica must come oldest first, ties by id"
        assert all(chronicum.owner_id == owner for chronicum in seen)
        assert (
            harness.perform(store_call("idle_chronica", datetime(2000, 1, 1, tzinfo=UTC), owner, None, 10))
            == []
        )

    def test_retention_keeps_a_chronicum_written_to_after_it_was_found_whole(
        self, retention_harness: Harness
    ) -> None:
        """Found idle, then written to: erase_idle keeps it (0) with every actum."""
        harness = retention_harness
        owner, chronicum_id = new_owner(), new_id("raced")
        before = harness.record_actum(owner, make_actum(chronicum_id, "before"))
        cutoff = _cutoff_after(before)
        [found] = harness.perform(store_call("idle_chronica", cutoff, owner, None, 10))
        assert found.id == chronicum_id
        _written_after(harness, owner, chronicum_id, cutoff)
        assert harness.perform(store_call("erase_idle", chronicum_id, cutoff, owner_digest(owner))) == 0
        contents = [actum.content for actum in harness.acta(chronicum_id)]
        assert contents[0] == "before" and set(contents[1:]) == {"today"}

    def test_retention_leaves_an_erased_id_its_owner_s(self, retention_harness: Harness) -> None:
        """After retention, the id refuses another owner; its owner starts it afresh."""
        harness = retention_harness
        owner, chronicum_id = new_owner(), new_id("kept-id")
        harness.record_actum(owner, make_actum(chronicum_id, "old"))
        assert harness.perform(rules_call("erase_idle", before=_moment_after_writes(), owner_id=owner)) == 1
        with pytest.raises(ChronicumNotFound):
            harness.record_actum(new_owner("rafa"), make_actum(chronicum_id, "mine now?"))
        harness.record_actum(owner, make_actum(chronicum_id, "fresh"))
        assert [actum.content for actum in harness.get_acta(owner, chronicum_id)] == ["fresh"]
        assert harness.perform(store_call("erase_idle", new_id("nobody"), _moment_after_writes(), "x")) == 0

    def test_retention_keeps_a_source_with_an_active_fork(self, retention_harness: Harness) -> None:
        """With forks: a source is erased only when it and all its forks are idle, then with them."""
        harness = require_capability(retention_harness, HISTORY, "the retention of forks")
        owner, source = new_owner(), new_id("source")
        shared = harness.record_actum(owner, make_actum(source, "shared"))
        fork = harness.perform(rules_call("fork_chronicum", owner, source))
        cutoff = max(_cutoff_after(shared), fork.started_at + timedelta(microseconds=1))
        _written_after(harness, owner, fork.id, cutoff)
        erased = harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner))
        assert erased == 0
        assert harness.get_acta(owner, fork.id)[0].content == "shared"
        assert harness.perform(rules_call("erase_idle", before=_moment_after_writes(), owner_id=owner)) == 2
        for chronicum_id in (source, fork.id):
            with pytest.raises(ChronicumNotFound):
                harness.get_acta(owner, chronicum_id)

    def test_retention_keeps_a_fresh_fork_of_an_idle_chronicum(self, retention_harness: Harness) -> None:
        """A fork is active from when it is forked: a fresh fork of an idle chronicum keeps both.

        Its ``last_actum_at`` stays the shared actum's ``at`` (its newest actum), before its
        ``started_at``; its last activity is its ``started_at``.
        """
        harness = require_capability(retention_harness, HISTORY, "the retention of forks")
        owner, source = new_owner(), new_id("idle-source")
        harness.record_actum(owner, make_actum(source, "long ago"))
        shared = harness.record_actum(owner, make_actum(source, "shared"))
        fork = harness.perform(rules_call("fork_chronicum", owner, source))
        cutoff = fork.started_at  # after the shared actum, not after the fork
        assert shared.at is not None and shared.at < cutoff
        kept = harness.get_chronicum(owner, fork.id)
        assert (kept.started_at, kept.last_actum_at) == (fork.started_at, shared.at)
        assert fork.last_actum_at == shared.at
        assert last_activity(kept) == fork.started_at
        found = harness.perform(store_call("idle_chronica", cutoff, owner, None, 10))
        assert [chronicum.id for chronicum in found] == [source]
        assert harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner, dry_run=True)) == 1
        assert harness.perform(rules_call("erase_idle", before=cutoff, owner_id=owner)) == 0
        assert harness.perform(store_call("erase_idle", source, cutoff, owner_digest(owner))) == 0
        for chronicum_id in (source, fork.id):
            assert [actum.content for actum in harness.get_acta(owner, chronicum_id)] == [
                "long ago",
                "shared",
            ]
        assert harness.perform(rules_call("erase_idle", before=_moment_after_writes(), owner_id=owner)) == 2

    def test_retention_racing_writers_lose_nothing_half_way(self, retention_harness: Harness) -> None:
        """Each chronicum written to while retention erases is erased whole or kept whole."""
        harness = retention_harness
        owner = new_owner()
        chronica = [new_id("race") for _ in range(RACING_WRITES)]
        for chronicum_id in chronica:
            harness.record_actum(owner, make_actum(chronicum_id, "first"))
        calls = [rules_call("erase_idle", before=_moment_after_writes(), owner_id=owner)]
        calls += [store_call("record", make_actum(chronicum_id, "second")) for chronicum_id in chronica]
        outcomes = harness.concurrently(calls)
        assert not isinstance(outcomes[0], BaseException), outcomes[0]
        gone = 0
        for chronicum_id, written in zip(chronica, outcomes[1:], strict=True):
            try:
                contents = [actum.content for actum in harness.acta(chronicum_id, ActaQuery())]
            except ChronicumNotFound:
                gone += 1  # erased whole: a write after it met the marker, one before it was erased too
                assert written is None or isinstance(written, (ChronicumNotFound, Actum)), written
                continue
            assert contents == ["first", "second"], f"kept, but not whole: {contents!r}"
        assert outcomes[0] == gone

    def test_retention_refuses_a_moment_without_a_time_zone(self, retention_harness: Harness) -> None:
        """A naive ``before`` is InvalidQuery(field="before"), before anything is erased."""
        harness = retention_harness
        owner, chronicum_id = new_owner(), new_id("naive")
        harness.record_actum(owner, make_actum(chronicum_id, "kept"))
        naive = datetime.now() + timedelta(days=1)
        with pytest.raises(InvalidQuery) as refused:
            harness.perform(rules_call("erase_idle", before=naive, owner_id=owner))
        assert refused.value.field == "before"
        assert ids(harness.get_acta(owner, chronicum_id)) != []

    @pytest.mark.parametrize(
        "before",
        [
            datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
            datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),
        ],
        ids=["before-year-1-in-utc", "after-year-9999-in-utc"],
    )
    def test_retention_refuses_a_moment_outside_the_utc_range(
        self, retention_harness: Harness, before: datetime
    ) -> None:
        """A ``before`` with no UTC ``datetime`` is InvalidQuery(field="before"), nothing erased."""
        harness = retention_harness
        owner, chronicum_id = new_owner(), new_id("out-of-range")
        harness.record_actum(owner, make_actum(chronicum_id, "kept"))
        for dry_run in (True, False):
            with pytest.raises(InvalidQuery) as refused:
                harness.perform(rules_call("erase_idle", before=before, owner_id=owner, dry_run=dry_run))
            assert refused.value.field == "before"
        assert [actum.content for actum in harness.get_acta(owner, chronicum_id)] == ["kept"]
