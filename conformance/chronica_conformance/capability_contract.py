"""A call needing a capability the store lacks is refused before the store is touched.

Runs for every store: the Chronicarius of each case talks to the store through a view that
hides the capability (as a store without it would look) and records every store call.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from chronica_conformance.base import SuiteBase, assert_same_acta, ids, make_actum, new_id, new_owner
from chronica_conformance.harness import Call, Harness, rules_call
from chronica_core import (
    ActorKind,
    ActumKind,
    CapabilityUnsupported,
    ChronicumNotFound,
    IdempotencyUnsupported,
    Native,
    Span,
)
from chronica_core.capabilities import BATCH, ERASURE, HISTORY, IDEMPOTENCY, LISTING, NATIVE

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

    def test_capability_native_missing_refuses_before_the_store(self, chronica_harness: Harness) -> None:
        """An actum with a native form without the native capability: refused, no store call."""
        owner, chronicum_id, fresh = new_owner(), new_id("no-native"), new_id("no-native")
        kept = chronica_harness.record_actum(owner, make_actum(chronicum_id, "kept"))
        plain = chronica_harness.with_chronicarius(hidden=(NATIVE,))
        native = Native("openai-agents.item", '{"role": "user"}')
        calls = [
            rules_call("record_actum", owner, replace(make_actum(chronicum_id), native=native)),
            rules_call("record_actum", owner, replace(make_actum(fresh), native=native)),
            rules_call("record_acta", owner, [make_actum(fresh), replace(make_actum(fresh), native=native)]),
        ]
        for call in calls:
            with pytest.raises(CapabilityUnsupported) as refused:
                plain.perform(call)
            assert refused.value.capability == NATIVE
        assert plain.store_calls == [], "the store was called before the refusal"
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(fresh)  # nothing created
        assert ids(chronica_harness.get_acta(owner, chronicum_id)) == [kept.id]

    def test_capability_history_missing_refuses_before_the_store(self, chronica_harness: Harness) -> None:
        """Fork, ``get_actum``, ``before``, summary, ``answers`` without history: refused, no store call."""
        owner, chronicum_id = new_owner(), new_id("no-history")
        written = [
            chronica_harness.record_actum(owner, make_actum(chronicum_id, "said")),
            chronica_harness.record_actum(
                owner,
                make_actum(chronicum_id, "call", kind=ActumKind.TOOL_REQUEST, actor_kind=ActorKind.AGENT),
            ),
        ]
        plain = chronica_harness.with_chronicarius(hidden=(HISTORY,))
        response = make_actum(
            chronicum_id, "result", kind=ActumKind.TOOL_RESPONSE, actor_kind=ActorKind.SYSTEM
        )
        summary = replace(make_actum(chronicum_id, "in short"), summarizes=Span(written[0].id, written[1].id))
        calls: list[Call] = [
            rules_call("fork_chronicum", owner, chronicum_id),
            rules_call("get_actum", owner, chronicum_id, written[0].id),
            rules_call("get_acta", owner, chronicum_id, before=written[1].id),
            rules_call("record_actum", owner, summary),
            rules_call("record_actum", owner, replace(response, answers=written[1].id)),
            rules_call("record_acta", owner, [replace(response, answers=written[1].id)]),
        ]
        for call in calls:
            with pytest.raises(CapabilityUnsupported) as refused:
                plain.perform(call)
            assert refused.value.capability == HISTORY, f"{call.method}: {refused.value}"
        assert plain.store_calls == [], "the store was called before the refusal"
        assert_same_acta(chronica_harness.get_acta(owner, chronicum_id), written, "after the refusals")
        newest_first = plain.get_acta(owner, chronicum_id, newest_first=True)  # works on every store
        assert_same_acta(newest_first, written[::-1], "newest first")
