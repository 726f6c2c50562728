"""The idempotent contract: S10 on the store and R8 through the Chronicarius."""

from __future__ import annotations

import pytest

from chronica_conformance.base import (
    SuiteBase,
    assert_same_actum,
    ids,
    make_actum,
    new_chronicum,
    new_id,
    new_owner,
)
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_conformance.store_contract import CONCURRENT_WRITERS
from chronica_core import ActorKind, ActumKind, ChronicumNotFound

__all__ = ["IdempotentContract"]


class IdempotentContract(SuiteBase):
    """S10 and R8: a retried write with the same idempotency key lands once.

    A store that is not idempotent skips this group with the reason, unless the suite sets
    ``declares_idempotent = True``; then every case fails instead.
    """

    @pytest.fixture
    def idempotent_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store is idempotent; skips (or fails, if declared) otherwise."""
        if not chronica_harness.idempotent:
            protocol = "IdempotentStore" if chronica_harness.flavour == "sync" else "AsyncIdempotentStore"
            reason = (
                f"{chronica_harness.store_name} is not an {protocol} (it has no record_idempotent), "
                "so the idempotent contract (S10, R8) does not apply"
            )
            if chronica_harness.declares_idempotent:
                pytest.fail(f"the suite declares the store idempotent, but {reason}", pytrace=False)
            pytest.skip(reason)
        return chronica_harness

    # -- S10 on the store ----------------------------------------------------------------------

    def test_s10_same_key_returns_the_first(self, idempotent_harness: Harness) -> None:
        """Same key returns the first actum; the chronicum holds it once."""
        harness = idempotent_harness
        created = new_chronicum()
        harness.create(created)
        first = make_actum(created.id, "Rumah Teduh.")
        stored = harness.record_idempotent(first, "key-1")
        assert_same_actum(stored, first)
        again = harness.record_idempotent(make_actum(created.id, "Rumah Teduh."), "key-1")
        assert_same_actum(again, first, at=stored.at)
        assert ids(harness.acta(created.id)) == [first.id]

    def test_s10_stored_actum_wins_over_a_reworded_retry(self, idempotent_harness: Harness) -> None:
        """The stored actum wins over a reworded retry (other content, kind and actor)."""
        harness = idempotent_harness
        created = new_chronicum()
        harness.create(created)
        first = make_actum(created.id, "Booked Rumah Teduh for four at 7pm.", actor_kind=ActorKind.AGENT)
        stored = harness.record_idempotent(first, "booking-reply-1")
        reworded = make_actum(created.id, "Your table at Rumah Teduh is booked.", kind=ActumKind.THOUGHT)
        retry = harness.record_idempotent(reworded, "booking-reply-1")
        assert_same_actum(retry, first, at=stored.at)
        (only,) = harness.acta(created.id)
        assert_same_actum(only, first, at=stored.at)

    def test_s10_forty_concurrent_calls_with_one_key(self, idempotent_harness: Harness) -> None:
        """40 concurrent calls with one key store one actum and all return it."""
        harness = idempotent_harness
        created = new_chronicum()
        harness.create(created)
        attempts = [make_actum(created.id, f"attempt {index}") for index in range(CONCURRENT_WRITERS)]
        outcomes = harness.concurrently(
            [store_call("record_idempotent", actum, "one-key") for actum in attempts]
        )
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent calls failed: {failures[:3]!r}"
        stored = harness.acta(created.id)
        assert len(stored) == 1, f"{len(stored)} acta stored for one key"
        assert {outcome.id for outcome in outcomes} == {stored[0].id}, (
            "the calls did not all return the stored actum"
        )
        assert stored[0].id in ids(attempts)

    def test_s10_same_key_in_two_chronica_stores_two(self, idempotent_harness: Harness) -> None:
        """The same key in another chronicum is another actum."""
        harness = idempotent_harness
        first, second = new_chronicum(), new_chronicum()
        harness.create(first)
        harness.create(second)
        in_first = harness.record_idempotent(make_actum(first.id, "same words"), "shared-key")
        in_second = harness.record_idempotent(make_actum(second.id, "same words"), "shared-key")
        assert in_first.id != in_second.id
        assert ids(harness.acta(first.id)) == [in_first.id]
        assert ids(harness.acta(second.id)) == [in_second.id]

    def test_s10_keyed_and_plain_writes_keep_write_order(self, idempotent_harness: Harness) -> None:
        """Keyed and plain writes interleave in write order; distinct keys store distinct acta."""
        harness = idempotent_harness
        created = new_chronicum()
        harness.create(created)
        expected: list[str] = []
        for index in range(6):
            expected.append(harness.record(make_actum(created.id, f"plain {index}")).id)
            expected.append(
                harness.record_idempotent(make_actum(created.id, f"keyed {index}"), f"key-{index}").id
            )
        harness.record_idempotent(make_actum(created.id, "retry of key-2"), "key-2")
        assert ids(harness.acta(created.id)) == expected

    def test_s2_record_idempotent_into_a_missing_chronicum_raises_not_found(
        self, idempotent_harness: Harness
    ) -> None:
        """record_idempotent on a missing chronicum raises ChronicumNotFound and creates nothing."""
        missing = new_id("missing")
        with pytest.raises(ChronicumNotFound):
            idempotent_harness.record_idempotent(make_actum(missing), "key-1")
        with pytest.raises(ChronicumNotFound):
            idempotent_harness.get(missing)

    # -- R8 through the Chronicarius ---------------------------------------------------------

    def test_r8_retry_returns_the_first_actum(self, idempotent_harness: Harness) -> None:
        """The dinner story: the booking reply retried with reworded content is stored once."""
        harness = idempotent_harness
        owner, chronicum_id = new_owner(), new_id("dinner-friday")
        harness.record_actum(owner, make_actum(chronicum_id, "Rumah Teduh."))
        reply = make_actum(chronicum_id, "Booked Rumah Teduh for four at 7pm.", actor_kind=ActorKind.AGENT)
        first = harness.record_actum(owner, reply, idempotency_key="booking-reply-1")
        reworded = make_actum(chronicum_id, "Your table is booked.", actor_kind=ActorKind.AGENT)
        retry = harness.record_actum(owner, reworded, idempotency_key="booking-reply-1")
        assert retry.id == first.id
        assert retry.content == "Booked Rumah Teduh for four at 7pm."
        acta = harness.get_acta(owner, chronicum_id)
        assert len(acta) == 2
        assert acta[-1].id == first.id

    def test_r8_forty_concurrent_record_actum_with_one_key(self, idempotent_harness: Harness) -> None:
        """40 concurrent record_actum calls with one key (into a new chronicum) store one actum."""
        harness = idempotent_harness
        owner, chronicum_id = new_owner(), new_id()
        calls = [
            rules_call(
                "record_actum", owner, make_actum(chronicum_id, f"attempt {index}"), idempotency_key="k"
            )
            for index in range(CONCURRENT_WRITERS)
        ]
        outcomes = harness.concurrently(calls)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent calls failed: {failures[:3]!r}"
        stored = harness.get_acta(owner, chronicum_id)
        assert len(stored) == 1, f"{len(stored)} acta stored for one key"
        assert {outcome.id for outcome in outcomes} == {stored[0].id}

    def test_r8_same_key_in_another_chronicum_is_another_actum(self, idempotent_harness: Harness) -> None:
        """The same key in two chronica of one owner stores two acta."""
        harness = idempotent_harness
        owner = new_owner()
        first_id, second_id = new_id(), new_id()
        first = harness.record_actum(owner, make_actum(first_id, "hi"), idempotency_key="same")
        second = harness.record_actum(owner, make_actum(second_id, "hi"), idempotency_key="same")
        assert first.id != second.id
        assert ids(harness.get_acta(owner, first_id)) == [first.id]
        assert ids(harness.get_acta(owner, second_id)) == [second.id]
