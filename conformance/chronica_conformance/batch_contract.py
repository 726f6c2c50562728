"""The batch contract: ``record_many`` and ``Chronicarius.record_acta`` (the ``batch`` capability)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import pytest

from chronica_conformance.base import (
    TIME_TOLERANCE,
    SuiteBase,
    assert_aware_utc,
    assert_same_acta,
    ids,
    make_actum,
    new_chronicum,
    new_id,
    new_owner,
    require_capability,
)
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_conformance.size_contract import LARGEST_TESTED_LIMIT, UNLIMITED_TEST_BYTES, content_of_size
from chronica_conformance.store_contract import CONCURRENT_WRITERS
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    ChronicumNotFound,
    InvalidActum,
)
from chronica_core.capabilities import BATCH, IDEMPOTENCY

__all__ = ["BATCH_SIZE", "BatchContract", "assert_whole_batches"]

BATCH_SIZE = 3
"""How many acta each writer's batch holds in the concurrent cases."""

_HEX_ID = re.compile(r"[0-9a-f]{32}")

_INVALID: dict[str, tuple[int, str]] = {
    # case: (index of the spoilt actum in a batch of four, the field InvalidActum must name)
    "empty_message_content": (2, "content"),
    "another_chronicum": (3, "chronicum_id"),
    "unknown_kind": (1, "kind"),
    "empty_actor": (0, "actor"),
}


def _spoil(actum: Actum, case: str) -> Actum:
    if case == "empty_message_content":
        return replace(actum, kind=ActumKind.MESSAGE, content="")
    if case == "another_chronicum":
        return replace(actum, chronicum_id=new_id("other"))
    if case == "unknown_kind":
        return replace(actum, kind="memo")  # type: ignore[arg-type]
    return replace(actum, actor="")


def _batch(chronicum_id: str, label: str, size: int = BATCH_SIZE) -> list[Actum]:
    """``size`` acta for ``chronicum_id`` of every kind in turn, contents ``"<label> <index>"``."""
    kinds = tuple(ActumKind)
    actor_kinds = tuple(ActorKind)
    return [
        make_actum(
            chronicum_id,
            f"{label} {index}",
            kind=kinds[index % len(kinds)],
            actor_kind=actor_kinds[index % len(actor_kinds)],
            actor=f"actor-{index}",
        )
        for index in range(size)
    ]


def assert_whole_batches(
    read: Sequence[Actum], batches: Sequence[Sequence[str]], *, must_hold: Sequence[int] = ()
) -> list[int]:
    """Assert each batch (a list of contents) is wholly in ``read``, consecutive and in order, or absent.

    Returns the indexes of the batches present. ``must_hold`` lists batches that must be present.
    """
    contents = [actum.content for actum in read]
    present: list[int] = []
    for number, batch in enumerate(batches):
        found = [content for content in batch if content in contents]
        if not found:
            assert number not in must_hold, f"batch {number} is missing from the read"
            continue
        assert len(found) == len(batch), (
            f"only {len(found)} of batch {number}'s {len(batch)} acta were stored: {found!r}"
        )
        start = contents.index(batch[0])
        assert contents[start : start + len(batch)] == list(batch), (
            f"batch {number} is not consecutive and in order in the read: another write's actum "
            f"fell between its acta ({contents[start : start + len(batch) + 2]!r})"
        )
        present.append(number)
    return present


def _assert_at_never_decreases(acta: Sequence[Actum]) -> None:
    moments = [assert_aware_utc(actum.at, f"actum {index}'s at") for index, actum in enumerate(acta)]
    for index in range(1, len(moments)):
        assert moments[index] >= moments[index - 1], (
            f"at decreases along the order at actum {index}: {moments[index - 1]} then {moments[index]}"
        )


class BatchContract(SuiteBase):
    """A batch lands whole or not at all, its acta consecutive; a keyed batch lands once.

    Runs where the store has ``record_many`` (``BatchStore`` / ``AsyncBatchStore``); skipped,
    with the reason, elsewhere, unless the suite declares ``"batch"`` in ``declares_capabilities``
    (then it fails).
    """

    @pytest.fixture
    def batch_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the batch capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, BATCH, "the batch contract")

    @pytest.fixture
    def keyed_batch_harness(self, batch_harness: Harness) -> Harness:
        """The harness, when its store has the batch and idempotency capabilities."""
        return require_capability(batch_harness, IDEMPOTENCY, "the keyed batch cases")

    def test_batch_returns_the_acta_in_order_with_fresh_ids(self, batch_harness: Harness) -> None:
        """record_acta returns every actum in the order given, fresh ids, ``at`` never decreasing."""
        harness = batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        given = _batch(chronicum_id, "batch", 7)
        stored = harness.record_acta(owner, given)
        assert len(stored) == len(given)
        for got, want in zip(stored, given, strict=True):
            assert (got.chronicum_id, got.kind, got.actor_kind, got.actor, got.content) == (
                want.chronicum_id,
                want.kind,
                want.actor_kind,
                want.actor,
                want.content,
            )
            assert _HEX_ID.fullmatch(got.id), f"actum id {got.id!r} is not 32 lowercase hex characters"
            assert got.id != want.id, "Chronicarius must replace the id given"
        assert len(set(ids(stored))) == len(stored), "the ids of a batch are not distinct"
        _assert_at_never_decreases(stored)
        assert_same_acta(harness.get_acta(owner, chronicum_id), stored)
        assert harness.get_chronicum(owner, chronicum_id).owner_id == owner

    def test_batch_lands_consecutively_between_single_writes(self, batch_harness: Harness) -> None:
        """A write, a batch, a write: read back in that order, the batch's acta consecutive."""
        harness = batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        before = harness.record_actum(owner, make_actum(chronicum_id, "before"))
        batch = harness.record_acta(owner, _batch(chronicum_id, "middle", 4))
        after = harness.record_actum(owner, make_actum(chronicum_id, "after"))
        read = harness.get_acta(owner, chronicum_id)
        assert ids(read) == [before.id, *ids(batch), after.id]
        _assert_at_never_decreases(read)
        assert ids(harness.get_acta(owner, chronicum_id, last_n=2)) == [batch[-1].id, after.id]
        last = assert_aware_utc(harness.get_chronicum(owner, chronicum_id).last_actum_at, "last_actum_at")
        assert after.at is not None and abs(last - after.at) <= TIME_TOLERANCE

    @pytest.mark.parametrize("case", list(_INVALID))
    def test_batch_with_an_invalid_actum_writes_nothing(self, batch_harness: Harness, case: str) -> None:
        """One invalid actum: InvalidActum with its ``.index`` and ``.field``; no chronicum, no actum."""
        harness = batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        index, field = _INVALID[case]
        acta = _batch(chronicum_id, "invalid", 4)
        acta[index] = _spoil(acta[index], case)
        with pytest.raises(InvalidActum) as refused:
            harness.record_acta(owner, acta)
        assert (refused.value.index, refused.value.field) == (index, field)
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)  # not even created
        kept = harness.record_actum(owner, make_actum(chronicum_id, "kept"))
        with pytest.raises(InvalidActum) as again:
            harness.record_acta(owner, acta)
        assert (again.value.index, again.value.field) == (index, field)
        assert ids(harness.get_acta(owner, chronicum_id)) == [kept.id]

    def test_batch_with_content_over_the_limit_writes_nothing(self, batch_harness: Harness) -> None:
        """One actum over the store's limit in the middle: ActumTooLarge, nothing written, no chronicum.

        A store without a limit (``max_content_bytes()`` is ``None``) keeps a batch with 4 MiB of
        content in its middle whole instead.
        """
        harness = batch_harness
        if not hasattr(harness.store, "max_content_bytes"):
            pytest.skip(f"{harness.store_name} does not tell its content limit (no max_content_bytes)")
        limit = harness.perform(store_call("max_content_bytes"))
        owner, chronicum_id = new_owner(), new_id("batch")
        if limit is None:  # no limit: a batch with large content in its middle is kept whole
            large = _batch(chronicum_id, "large", 3)
            large[1] = replace(large[1], content=content_of_size(UNLIMITED_TEST_BYTES))
            stored = harness.record_acta(owner, large)
            assert [actum.content for actum in harness.get_acta(owner, chronicum_id)] == [
                actum.content for actum in large
            ]
            assert ids(harness.get_acta(owner, chronicum_id)) == ids(stored)
            return
        if limit > LARGEST_TESTED_LIMIT:
            pytest.skip(
                f"{harness.store_name}'s content limit is {limit} bytes: open it with a max_content_bytes "
                f"of at most {LARGEST_TESTED_LIMIT} to test a batch over it"
            )
        acta = _batch(chronicum_id, "sized", 5)
        acta[1] = replace(acta[1], content=content_of_size(limit))
        acta[2] = replace(acta[2], content=content_of_size(limit + 1))
        with pytest.raises(ActumTooLarge) as refused:
            harness.record_acta(owner, acta)
        assert refused.value.limit == limit
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)  # not even created
        kept = harness.record_actum(owner, make_actum(chronicum_id, "kept"))
        with pytest.raises(ActumTooLarge):
            harness.record_acta(owner, acta)
        with pytest.raises(ActumTooLarge):  # the store itself checks every actum before writing
            harness.perform(store_call("record_many", acta, None))
        assert ids(harness.get_acta(owner, chronicum_id)) == [kept.id]

    def test_batch_empty_returns_nothing_and_creates_nothing(self, batch_harness: Harness) -> None:
        """``record_acta(owner, [])`` returns ``[]`` and calls no store method."""
        harness = batch_harness
        watched = harness.with_chronicarius()
        assert watched.record_acta(new_owner(), []) == []
        assert watched.store_calls == []

    def test_batch_into_a_missing_chronicum_on_the_store_raises_not_found(
        self, batch_harness: Harness
    ) -> None:
        """``record_many`` into a missing chronicum raises ChronicumNotFound and creates nothing."""
        harness = batch_harness
        missing = new_id("missing")
        with pytest.raises(ChronicumNotFound):
            harness.perform(store_call("record_many", _batch(missing, "lost"), None))
        with pytest.raises(ChronicumNotFound):
            harness.get(missing)

    def test_batch_on_the_store_sets_at_and_moves_last_actum_at(self, batch_harness: Harness) -> None:
        """``record_many`` returns the acta as given with ``at`` set; the chronicum's last ``at`` moves."""
        harness = batch_harness
        created = new_chronicum()
        harness.create(created)
        given = _batch(created.id, "store", 4)
        stored = harness.perform(store_call("record_many", given, None))
        assert [replace(actum, at=None) for actum in stored] == given
        _assert_at_never_decreases(stored)
        assert_same_acta(harness.acta(created.id), stored)
        last = assert_aware_utc(harness.get(created.id).last_actum_at, "last_actum_at")
        assert stored[-1].at is not None and abs(last - stored[-1].at) <= TIME_TOLERANCE

    def test_batch_forty_concurrent_each_stay_consecutive(self, batch_harness: Harness) -> None:
        """40 concurrent batches into one chronicum: all land, each one's acta consecutive, in order."""
        harness = batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        harness.record_actum(owner, make_actum(chronicum_id, "opening"))
        batches = [_batch(chronicum_id, f"writer {writer}") for writer in range(CONCURRENT_WRITERS)]
        outcomes = harness.concurrently([rules_call("record_acta", owner, batch) for batch in batches])
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent batches failed: {failures[:3]!r}"
        read = harness.get_acta(owner, chronicum_id)
        assert len(read) == 1 + CONCURRENT_WRITERS * BATCH_SIZE
        present = assert_whole_batches(read, [[actum.content for actum in batch] for batch in batches])
        assert present == list(range(CONCURRENT_WRITERS))
        by_id = {actum.id: actum for actum in read}
        for outcome in outcomes:
            assert_same_acta([by_id[actum.id] for actum in outcome], outcome, "a batch's acta read back")
        _assert_at_never_decreases(read)

    def test_batch_keyed_retry_returns_the_first_batch(self, keyed_batch_harness: Harness) -> None:
        """A retried keyed batch (other contents, other length) returns the first batch; writes nothing."""
        harness = keyed_batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        first = harness.record_acta(owner, _batch(chronicum_id, "first", 4), idempotency_key="batch-1")
        retry = harness.record_acta(owner, _batch(chronicum_id, "retry", 2), idempotency_key="batch-1")
        assert_same_acta(retry, first, "the retry")
        assert_same_acta(harness.get_acta(owner, chronicum_id), first)
        other = harness.record_acta(owner, _batch(chronicum_id, "second", 2), idempotency_key="batch-2")
        assert ids(harness.get_acta(owner, chronicum_id)) == ids(first) + ids(other)
        on_the_store = harness.perform(store_call("record_many", _batch(chronicum_id, "store", 3), "batch-1"))
        assert_same_acta(on_the_store, first, "record_many with the key")
        assert ids(harness.acta(chronicum_id)) == ids(first) + ids(other)

    def test_batch_forty_concurrent_with_one_key_store_one(self, keyed_batch_harness: Harness) -> None:
        """40 concurrent keyed batches (into a new chronicum): one batch stored, every caller gets it."""
        harness = keyed_batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        calls = [
            rules_call("record_acta", owner, _batch(chronicum_id, f"attempt {index}"), idempotency_key="one")
            for index in range(CONCURRENT_WRITERS)
        ]
        outcomes = harness.concurrently(calls)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent batches failed: {failures[:3]!r}"
        read = harness.get_acta(owner, chronicum_id)
        assert len(read) == BATCH_SIZE, f"{len(read)} acta stored for one key"
        for outcome in outcomes:
            assert_same_acta(outcome, read, "what a caller got")
        assert len({actum.content.rsplit(" ", 1)[0] for actum in read}) == 1, "the batch mixes attempts"

    def test_batch_key_is_shared_with_single_writes(self, keyed_batch_harness: Harness) -> None:
        """A single write's key given to a batch returns ``[that actum]``; a batch's key, its first actum."""
        harness = keyed_batch_harness
        owner, chronicum_id = new_owner(), new_id("batch")
        single = harness.record_actum(owner, make_actum(chronicum_id, "single"), idempotency_key="k-single")
        batch = harness.record_acta(owner, _batch(chronicum_id, "batch"), idempotency_key="k-batch")
        retried = harness.record_acta(owner, _batch(chronicum_id, "again"), idempotency_key="k-single")
        assert_same_acta(retried, [single], "a batch with a single write's key")
        again = harness.record_actum(owner, make_actum(chronicum_id, "again"), idempotency_key="k-batch")
        assert_same_acta([again], batch[:1], "a single write with a batch's key")
        assert_same_acta(harness.get_acta(owner, chronicum_id), [single, *batch])
