"""A call needing a capability the store lacks is refused before the store is touched.

Runs for every store: the Chronicarius of each case talks to the store through a view that
hides the capability (as a store without it would look) and records every store call.
"""

from __future__ import annotations

import pytest

from chronica_conformance.base import SuiteBase, ids, make_actum, new_id, new_owner
from chronica_conformance.harness import Harness
from chronica_core import CapabilityUnsupported, ChronicumNotFound, IdempotencyUnsupported
from chronica_core.capabilities import BATCH, ERASURE, IDEMPOTENCY, LISTING

__all__ = ["CapabilityContract"]


class CapabilityContract(SuiteBase):
    """``CapabilityUnsupported`` (``.capability`` naming it) before any store call, nothing written."""

    def test_capability_batch_missing_refuses_before_the_store(self, chronica_harness: Harness) -> None:
        """record_acta without the batch capability: CapabilityUnsupported("batch"), no store call."""
        plain = chronica_harness.with_chronicarius(hidden=(BATCH,))
        owner, chronicum_id = new_owner(), new_id("no-batch")
        acta = [make_actum(chronicum_id, "one"), make_actum(chronicum_id, "two")]
        with pytest.raises(CapabilityUnsupported) as refused:
            plain.record_acta(owner, acta)
        assert refused.value.capability == BATCH
        assert plain.store_calls == [], "the store was called before the refusal"
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(chronicum_id)  # nothing created
        assert plain.record_acta(owner, []) == []  # an empty batch needs no store at all

    def test_capability_batch_key_without_idempotency_refuses_before_the_store(
        self, chronica_harness: Harness
    ) -> None:
        """A keyed batch on a store that is not idempotent: IdempotencyUnsupported, no store call."""
        plain = chronica_harness.with_chronicarius(hidden=(IDEMPOTENCY,))
        owner, chronicum_id = new_owner(), new_id("no-key")
        with pytest.raises(CapabilityUnsupported) as refused:
            plain.record_acta(owner, [make_actum(chronicum_id)], idempotency_key="key-1")
        assert refused.value.capability in (IDEMPOTENCY, BATCH)
        if refused.value.capability == IDEMPOTENCY:
            assert isinstance(refused.value, IdempotencyUnsupported)
        assert plain.store_calls == [], "the store was called before the refusal"
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(chronicum_id)

    def test_capability_listing_missing_refuses_before_the_store(self, chronica_harness: Harness) -> None:
        """list_chronica without the listing capability: CapabilityUnsupported("listing"), no store call."""
        plain = chronica_harness.with_chronicarius(hidden=(LISTING,))
        with pytest.raises(CapabilityUnsupported) as refused:
            plain.list_chronica(new_owner(), limit=10)
        assert refused.value.capability == LISTING
        assert plain.store_calls == [], "the store was called before the refusal"

    def test_capability_erasure_missing_refuses_before_the_store(self, chronica_harness: Harness) -> None:
        """erase_chronicum / erase_owner without erasure: CapabilityUnsupported("erasure"), nothing erased."""
        owner, chronicum_id = new_owner(), new_id("no-erasure")
        kept = chronica_harness.record_actum(owner, make_actum(chronicum_id, "kept"))
        plain = chronica_harness.with_chronicarius(hidden=(ERASURE,))
        with pytest.raises(CapabilityUnsupported) as refused:
            plain.erase_chronicum(owner, chronicum_id)
        assert refused.value.capability == ERASURE
        with pytest.raises(CapabilityUnsupported) as refused_owner:
            plain.erase_owner(owner)
        assert refused_owner.value.capability == ERASURE
        assert plain.store_calls == [], "the store was called before the refusal"
        assert ids(chronica_harness.get_acta(owner, chronicum_id)) == [kept.id]
