"""The erasure contract: ``erase``, ``erase_owner``, ``reopen`` and the Chronicarius calls over them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from chronica_conformance.base import (
    SuiteBase,
    assert_same_acta,
    ids,
    make_actum,
    new_chronicum,
    new_id,
    new_owner,
    require_capability,
)
from chronica_conformance.batch_contract import BATCH_SIZE, assert_whole_batches
from chronica_conformance.harness import INJECTED_FAILURE, Harness, rules_call, store_call
from chronica_conformance.loop_contract import async_only
from chronica_conformance.store_contract import CLOCK_SKEW
from chronica_core import (
    ActaQuery,
    Actum,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
)
from chronica_core.capabilities import BATCH, ERASURE, HISTORY, IDEMPOTENCY, LISTING
from chronica_core.erasure import owner_digest

__all__ = ["ErasureContract"]

RACING_BATCHES = 20
"""How many batches race with one erasure."""


def _write(
    harness: Harness, owner_id: str, chronicum_id: str, count: int, label: str = "said"
) -> list[Actum]:
    return [
        harness.record_actum(owner_id, make_actum(chronicum_id, f"{label} {index}")) for index in range(count)
    ]


def _assert_gone(harness: Harness, owner_id: str, chronicum_id: str) -> None:
    """Every read and write of an erased chronicum, on the store and through the Chronicarius, is refused."""
    for call in (
        store_call("get", chronicum_id),
        store_call("acta", chronicum_id, ActaQuery()),
        store_call("record", make_actum(chronicum_id, "into a marker")),
        rules_call("get_chronicum", owner_id, chronicum_id),
        rules_call("get_acta", owner_id, chronicum_id),
    ):
        with pytest.raises(ChronicumNotFound):
            harness.perform(call)
    with pytest.raises(ChronicumNotFound):
        harness.perform(store_call("erase", chronicum_id, owner_digest(owner_id)))
    with pytest.raises(ChronicumExists):  # the marker keeps the id
        harness.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))


class ErasureContract(SuiteBase):
    """An erased chronicum's acta, keys and fields are gone; only its id stays, for its owner alone.

    Runs where the store has ``erase``, ``erase_owner`` and ``reopen`` (``ErasableStore`` /
    ``AsyncErasableStore``); skipped, with the reason, elsewhere, unless the suite declares
    ``"erasure"`` in ``declares_capabilities`` (then it fails).
    """

    @pytest.fixture
    def erasure_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the erasure capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, ERASURE, "the erasure contract")

    def test_erasure_returns_the_count_and_the_chronicum_is_gone(self, erasure_harness: Harness) -> None:
        """erase_chronicum returns how many acta it erased; every read and write is then refused."""
        harness = erasure_harness
        owner, chronicum_id = new_owner(), new_id("erased")
        _write(harness, owner, chronicum_id, 4)
        assert harness.erase_chronicum(owner, chronicum_id) == 4
        _assert_gone(harness, owner, chronicum_id)
        with pytest.raises(ChronicumNotFound):
            harness.erase_chronicum(owner, chronicum_id)

    def test_erasure_of_an_empty_chronicum_returns_zero(self, erasure_harness: Harness) -> None:
        """A chronicum without acta erases to 0 and is gone like any other."""
        harness = erasure_harness
        created = new_chronicum()
        harness.create(created)
        assert harness.perform(store_call("erase", created.id, owner_digest(created.owner_id))) == 0
        _assert_gone(harness, created.owner_id, created.id)

    def test_erasure_another_owner_cannot_claim_the_id(self, erasure_harness: Harness) -> None:
        """After an erasure, another owner's write is refused (ChronicumNotFound) and creates nothing."""
        harness = erasure_harness
        owner, chronicum_id = new_owner(), new_id("erased")
        _write(harness, owner, chronicum_id, 2)
        harness.erase_chronicum(owner, chronicum_id)
        for other in (harness.with_chronicarius(), harness.with_chronicarius(owner_cache_size=100)):
            with pytest.raises(ChronicumNotFound):
                other.record_actum(new_owner("bunga"), make_actum(chronicum_id, "mine now?"))
        intruder = new_owner("bunga")
        assert not harness.perform(
            store_call("reopen", Chronicum(chronicum_id, intruder, datetime.now(UTC)), owner_digest(intruder))
        ), "reopen accepted another owner's digest"
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)  # nothing created: still only the marker

    def test_erasure_same_owner_writes_into_a_fresh_empty_chronicum(self, erasure_harness: Harness) -> None:
        """The owner writing to an erased id again gets a fresh chronicum holding only the new actum."""
        harness = erasure_harness
        owner, chronicum_id = new_owner(), new_id("erased")
        _write(harness, owner, chronicum_id, 3)
        harness.erase_chronicum(owner, chronicum_id)
        erased_at = datetime.now(UTC)
        fresh = harness.with_chronicarius().record_actum(owner, make_actum(chronicum_id, "fresh start"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [fresh])
        reopened = harness.get_chronicum(owner, chronicum_id)
        assert reopened.owner_id == owner
        assert reopened.started_at >= erased_at - CLOCK_SKEW, "the reopened chronicum kept its old start"
        assert harness.perform(store_call("acta", chronicum_id, ActaQuery())) == harness.get_acta(
            owner, chronicum_id
        )

    def test_erasure_reopen_on_the_store(self, erasure_harness: Harness) -> None:
        """reopen: True for the marker's own digest (the chronicum saved as given, no acta), else False."""
        harness = erasure_harness
        created = new_chronicum()
        harness.create(created)
        harness.record(make_actum(created.id, "before"))
        digest = owner_digest(created.owner_id)
        live = Chronicum(created.id, created.owner_id, datetime.now(UTC))
        assert not harness.perform(store_call("reopen", live, digest)), "reopen replaced a live chronicum"
        assert not harness.perform(store_call("reopen", new_chronicum(), digest)), "reopen of a missing id"
        assert harness.perform(store_call("erase", created.id, digest)) == 1
        started = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
        assert harness.perform(store_call("reopen", Chronicum(created.id, created.owner_id, started), digest))
        reopened = harness.get(created.id)
        assert (reopened.owner_id, reopened.last_actum_at) == (created.owner_id, None)
        assert abs(reopened.started_at - started) <= timedelta(milliseconds=1)
        assert harness.acta(created.id) == []
        assert not harness.perform(
            store_call("reopen", Chronicum(created.id, created.owner_id, started), digest)
        )

    def test_erasure_forgets_idempotency_keys(self, erasure_harness: Harness) -> None:
        """A key used before the erasure writes a new actum after it."""
        harness = require_capability(erasure_harness, "idempotency", "erasing idempotency keys")
        owner, chronicum_id = new_owner(), new_id("erased")
        before = harness.record_actum(owner, make_actum(chronicum_id, "before"), idempotency_key="key-1")
        harness.erase_chronicum(owner, chronicum_id)
        after = harness.record_actum(owner, make_actum(chronicum_id, "after"), idempotency_key="key-1")
        assert after.id != before.id
        assert after.content == "after"
        assert_same_acta(harness.get_acta(owner, chronicum_id), [after])

    def test_erasure_of_another_owners_or_a_missing_chronicum_is_refused(
        self, erasure_harness: Harness
    ) -> None:
        """Erasing someone else's chronicum, or a missing id, raises ChronicumNotFound; nothing is erased."""
        harness = erasure_harness
        owner, chronicum_id = new_owner(), new_id("kept")
        written = _write(harness, owner, chronicum_id, 2)
        for eraser in (harness, harness.with_chronicarius()):
            with pytest.raises(ChronicumNotFound):
                eraser.erase_chronicum(new_owner("bunga"), chronicum_id)
            with pytest.raises(ChronicumNotFound):
                eraser.erase_chronicum(owner, new_id("missing"))
        with pytest.raises(ChronicumNotFound):
            harness.perform(store_call("erase", new_id("missing"), owner_digest(owner)))
        assert_same_acta(harness.get_acta(owner, chronicum_id), written)

    def test_erasure_of_an_owner_leaves_other_owners_intact(self, erasure_harness: Harness) -> None:
        """erase_owner erases every chronicum of the owner, returns how many, and touches no one else's."""
        harness = erasure_harness
        ardian, bunga = new_owner("ardian"), new_owner("bunga")
        ardians = [new_id("ardian") for _ in range(3)]
        for chronicum_id in ardians:
            _write(harness, ardian, chronicum_id, 2)
        bungas: dict[str, list[Actum]] = {}
        for _ in range(2):
            chronicum_id = new_id("bunga")
            bungas[chronicum_id] = _write(harness, bunga, chronicum_id, 2)
        assert harness.erase_owner(ardian) == 3
        for chronicum_id in ardians:
            _assert_gone(harness, ardian, chronicum_id)
        for chronicum_id, written in bungas.items():
            assert_same_acta(harness.get_acta(bunga, chronicum_id), written)
        assert harness.erase_owner(ardian) == 0
        assert harness.erase_owner(new_owner("nobody")) == 0

    def test_erasure_seen_by_a_second_chronicarius_with_the_owner_cached(
        self, erasure_harness: Harness
    ) -> None:
        """A Chronicarius that cached the owner before another one erased still works for that owner only."""
        harness = erasure_harness
        owner, chronicum_id = new_owner(), new_id("erased")
        second = harness.with_chronicarius(owner_cache_size=100)
        second.record_actum(owner, make_actum(chronicum_id, "cached"))  # the second one caches the owner
        harness.erase_chronicum(owner, chronicum_id)
        with pytest.raises(ChronicumNotFound):
            second.get_acta(owner, chronicum_id)
        again = second.record_actum(owner, make_actum(chronicum_id, "written again"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [again])
        for other in (second, harness.with_chronicarius()):
            with pytest.raises(ChronicumNotFound):
                other.record_actum(new_owner("bunga"), make_actum(chronicum_id, "mine?"))
        harness.erase_chronicum(
            owner, chronicum_id
        )  # the first one erases again: the second one writes again
        if BATCH in harness.capabilities:
            batch = second.record_acta(
                owner, [make_actum(chronicum_id, f"batch {index}") for index in range(3)]
            )
            assert_same_acta(harness.get_acta(owner, chronicum_id), batch)
        else:
            single = second.record_actum(owner, make_actum(chronicum_id, "single"))
            assert_same_acta(harness.get_acta(owner, chronicum_id), [single])

    def test_erasure_racing_batches_leaves_only_whole_batches(self, erasure_harness: Harness) -> None:
        """An erasure racing batch writers: afterwards only whole, consecutive batches, or nothing."""
        harness = require_capability(erasure_harness, BATCH, "erasure racing batches")
        owner, chronicum_id = new_owner(), new_id("raced")
        opening = _write(harness, owner, chronicum_id, 2, "opening")
        batches = [
            [make_actum(chronicum_id, f"writer {writer} actum {index}") for index in range(BATCH_SIZE)]
            for writer in range(RACING_BATCHES)
        ]
        calls = [rules_call("record_acta", owner, batch) for batch in batches]
        calls.insert(RACING_BATCHES // 2, rules_call("erase_chronicum", owner, chronicum_id))
        outcomes = harness.concurrently(calls)
        erased = outcomes.pop(RACING_BATCHES // 2)
        assert isinstance(erased, int), f"the erasure failed: {erased!r}"
        assert erased >= len(opening) and (erased - len(opening)) % BATCH_SIZE == 0, (
            f"the erasure erased {erased} acta: not the opening {len(opening)} plus whole batches"
        )
        for outcome in outcomes:
            assert isinstance(outcome, (list, ChronicumNotFound)), (
                f"a batch racing an erasure raised {outcome!r}"
            )
        try:
            read = harness.get_acta(owner, chronicum_id)
        except ChronicumNotFound:
            read = []
        assert not set(ids(read)) & set(ids(opening)), "acta written before the erasure survived it"
        contents = [[actum.content for actum in batch] for batch in batches]
        present = assert_whole_batches(read, contents)
        assert len(read) == BATCH_SIZE * len(present), "the chronicum holds acta of no batch"
        for number in present:
            assert isinstance(outcomes[number], list), f"batch {number} is stored but its call failed"
        stored_batches = sum(isinstance(outcome, list) for outcome in outcomes)
        assert (erased - len(opening)) // BATCH_SIZE + len(present) == stored_batches, (
            "the batches stored before the erasure and those after it do not add up to the successful calls"
        )

    # -- withdraw: a failed first write leaves no empty chronicum ----------------------------

    def test_erasure_withdraw_on_the_store(self, erasure_harness: Harness) -> None:
        """withdraw: True and the marker for an empty chronicum; False, nothing changed, otherwise."""
        harness = _withdrawing(erasure_harness)
        empty, written = new_chronicum(), new_chronicum()
        harness.create(empty)
        harness.create(written)
        kept = harness.record(make_actum(written.id, "kept"))
        digest = owner_digest(empty.owner_id)
        assert harness.perform(store_call("withdraw", written.id, owner_digest(written.owner_id))) is False
        assert_same_acta(harness.acta(written.id), [kept])
        assert harness.get(written.id).owner_id == written.owner_id
        assert harness.perform(store_call("withdraw", new_id("missing"), digest)) is False
        assert harness.perform(store_call("withdraw", empty.id, digest)) is True
        _assert_gone(harness, empty.owner_id, empty.id)
        assert harness.perform(store_call("withdraw", empty.id, digest)) is False, "withdrew a marker"
        assert not harness.perform(
            store_call("reopen", Chronicum(empty.id, "bunga", datetime.now(UTC)), owner_digest("bunga"))
        ), "the withdrawn id reopened for another owner"
        assert harness.perform(
            store_call("reopen", Chronicum(empty.id, empty.owner_id, datetime.now(UTC)), digest)
        )
        assert harness.acta(empty.id) == []

    def test_erasure_withdraw_racing_writers_keeps_every_landed_actum(self, erasure_harness: Harness) -> None:
        """A withdraw racing writes: withdrawn with none of them landed, or kept with every one that did."""
        harness = _withdrawing(erasure_harness)
        chronicum = new_chronicum()
        harness.create(chronicum)
        writes = [make_actum(chronicum.id, f"racing {index}") for index in range(8)]
        calls = [store_call("record", actum) for actum in writes]
        calls.insert(len(calls) // 2, store_call("withdraw", chronicum.id, owner_digest(chronicum.owner_id)))
        outcomes = harness.concurrently(calls)
        withdrawn = outcomes.pop(len(calls) // 2)
        assert isinstance(withdrawn, bool), f"withdraw raised {withdrawn!r}"
        for outcome in outcomes:
            assert isinstance(outcome, (Actum, ChronicumNotFound)), (
                f"a write racing withdraw raised {outcome!r}"
            )
        landed = [outcome.id for outcome in outcomes if isinstance(outcome, Actum)]
        if withdrawn:
            assert not landed, f"withdraw removed a chronicum while {len(landed)} writes landed in it"
            _assert_gone(harness, chronicum.owner_id, chronicum.id)
        else:
            assert landed, "withdraw kept a chronicum no write landed in"
            assert sorted(ids(harness.acta(chronicum.id))) == sorted(landed), (
                "the kept chronicum does not hold exactly the writes that landed"
            )

    @pytest.mark.parametrize("write", ["record", "record_idempotent", "record_many"])
    def test_erasure_a_failed_first_write_leaves_no_chronicum(
        self, erasure_harness: Harness, write: str
    ) -> None:
        """A first write that fails after creating its chronicum withdraws it; the id stays the owner's."""
        harness = _withdrawing(erasure_harness)
        needs = {"record_idempotent": IDEMPOTENCY, "record_many": BATCH}.get(write)
        if needs is not None:
            require_capability(harness, needs, f"a failed first write by {write}")
        owner, chronicum_id = new_owner(), new_id("failed")
        failing = harness.with_chronicarius(failing_writes="alone", owner_cache_size=100)
        with pytest.raises(StoreError) as raised:
            _first_write(failing, write, owner, chronicum_id, "lost")
        assert raised.value.where == INJECTED_FAILURE, f"the write raised {raised.value!r}, not its own error"
        assert failing.store_calls[-2:] == [write, "withdraw"]
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)
        if LISTING in harness.capabilities:
            assert chronicum_id not in [chronicum.id for chronicum in harness.list_chronica(owner).chronica]
        with pytest.raises(ChronicumNotFound):  # ownership never changes: the id stays the owner's
            harness.with_chronicarius().record_actum(new_owner("bunga"), make_actum(chronicum_id, "mine?"))
        fresh = harness.with_chronicarius().record_actum(owner, make_actum(chronicum_id, "again"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [fresh])

    @async_only
    @pytest.mark.parametrize("cancelled", ["create", "record", "record_idempotent", "record_many"])
    def test_erasure_a_cancelled_first_write_leaves_no_chronicum(
        self, erasure_harness: Harness, cancelled: str
    ) -> None:
        """An asyncio first write cancelled once its chronicum exists (create or write) withdraws it."""
        harness = _withdrawing(erasure_harness)
        write = "record" if cancelled == "create" else cancelled
        needs = {"record_idempotent": IDEMPOTENCY, "record_many": BATCH}.get(write)
        if needs is not None:
            require_capability(harness, needs, f"a cancelled first write by {write}")
        owner, chronicum_id = new_owner(), new_id("cancelled")
        cancelling = harness.with_chronicarius(
            failing_writes="cancelled_after_create" if cancelled == "create" else "cancelled",
            owner_cache_size=100,
        )
        with pytest.raises(asyncio.CancelledError):
            _first_write(cancelling, write, owner, chronicum_id, "cancelled")
        assert cancelling.store_calls[-1] == "withdraw", f"no withdraw: {cancelling.store_calls}"
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)
        if LISTING in harness.capabilities:
            assert chronicum_id not in [chronicum.id for chronicum in harness.list_chronica(owner).chronica]
        fresh = harness.with_chronicarius().record_actum(owner, make_actum(chronicum_id, "again"))
        assert_same_acta(harness.get_acta(owner, chronicum_id), [fresh])

    def test_erasure_a_failed_first_write_keeps_what_another_writer_recorded(
        self, erasure_harness: Harness
    ) -> None:
        """An actum that landed in the new chronicum before its first write failed keeps the chronicum."""
        harness = _withdrawing(erasure_harness)
        owner, chronicum_id = new_owner(), new_id("failed")
        failing = harness.with_chronicarius(failing_writes="after_landing")
        with pytest.raises(StoreError) as raised:
            failing.record_actum(owner, make_actum(chronicum_id, "landed"))
        assert raised.value.where == INJECTED_FAILURE
        assert "withdraw" in failing.store_calls
        assert harness.get(chronicum_id).owner_id == owner
        assert [actum.content for actum in harness.get_acta(owner, chronicum_id)] == ["landed"]

    def test_erasure_a_failed_write_into_an_existing_chronicum_withdraws_nothing(
        self, erasure_harness: Harness
    ) -> None:
        """Only the write that created the chronicum withdraws it: an empty one created before stays."""
        harness = _withdrawing(erasure_harness)
        created = new_chronicum()
        harness.create(created)
        failing = harness.with_chronicarius(failing_writes="alone")
        with pytest.raises(StoreError):
            failing.record_actum(created.owner_id, make_actum(created.id, "lost"))
        assert "withdraw" not in failing.store_calls
        assert harness.get(created.id).owner_id == created.owner_id
        assert harness.acta(created.id) == []

    def test_erasure_a_fork_of_a_withdrawn_chronicum_stays(self, erasure_harness: Harness) -> None:
        """A fork made of the empty chronicum before it was withdrawn stays, as for an erasure."""
        harness = require_capability(_withdrawing(erasure_harness), HISTORY, "forks of a withdrawn chronicum")
        created = new_chronicum()
        harness.create(created)
        fork = harness.fork_chronicum(created.owner_id, created.id)
        assert harness.perform(store_call("withdraw", created.id, owner_digest(created.owner_id))) is True
        written = harness.record_actum(created.owner_id, make_actum(fork.id, "in the fork"))
        assert_same_acta(harness.get_acta(created.owner_id, fork.id), [written])


def _withdrawing(harness: Harness) -> Harness:
    """``harness`` when its store can withdraw an empty chronicum (``withdraw``); else skip."""
    if not callable(getattr(harness.store, "withdraw", None)):
        pytest.skip(f"{harness.store_name} cannot withdraw an empty chronicum (no withdraw)")
    return harness


def _first_write(harness: Harness, write: str, owner_id: str, chronicum_id: str, content: str) -> None:
    """A first write into ``chronicum_id`` by the Chronicarius call that makes the store call ``write``."""
    if write == "record":
        harness.record_actum(owner_id, make_actum(chronicum_id, content))
    elif write == "record_idempotent":
        harness.record_actum(owner_id, make_actum(chronicum_id, content), idempotency_key="key-1")
    else:
        harness.record_acta(owner_id, [make_actum(chronicum_id, f"{content} {index}") for index in range(3)])
