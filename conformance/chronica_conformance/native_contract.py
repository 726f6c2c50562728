"""The native contract: an actum's native form kept beside its content (the ``native`` capability)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronica_conformance.base import (
    SuiteBase,
    assert_same_acta,
    ids,
    make_actum,
    new_id,
    new_owner,
    require_capability,
)
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_conformance.json_contract import bounded_settings
from chronica_conformance.size_contract import LARGEST_TESTED_LIMIT, UNLIMITED_TEST_BYTES, content_of_size
from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    ChronicumNotFound,
    Native,
    Span,
)
from chronica_core.capabilities import BATCH, FOLLOW, HISTORY, IDEMPOTENCY, NATIVE

__all__ = ["NATIVE_FORMS", "NativeContract"]

NATIVE_FORMS = (
    Native("openai-agents.item", '{"type": "message", "role": "user", "content": "Book for five"}'),
    Native("pydantic-ai.message", ""),
    Native("x", "'\\\x00\"\n\u4e2d\U0001f37d\u202e"),
    Native("f" * 255, "[1, 2, 3]"),
)
"""Native forms every store keeps exactly: JSON, empty data, what drivers escape, the longest format."""

_FORMAT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=60)
_DATA = st.text(st.characters(codec="utf-8"), max_size=300)


def _with(actum: Actum, native: Native | None) -> Actum:
    return replace(actum, native=native)


def _sized(chronicum_id: str, content: int, data: int) -> Actum:
    """A tool response (its content may be empty) of ``content`` bytes and ``data`` bytes of native data."""
    actum = make_actum(
        chronicum_id,
        content_of_size(content),
        kind=ActumKind.TOOL_RESPONSE,
        actor_kind=ActorKind.SYSTEM,
    )
    return _with(actum, Native("sized", content_of_size(data)))


def _round_trips(actum: Actum) -> None:
    form = actum.to_dict()
    assert ("native" in form) == (actum.native is not None), f"the JSON form of {actum!r}: {form!r}"
    back = Actum.from_dict(json.loads(json.dumps(form)))
    assert back == actum, f"Actum.from_dict(json) gave {back!r} for {actum!r}"


class NativeContract(SuiteBase):
    """Every write keeps ``Actum.native``, every read returns it; its data counts against the limit.

    Runs where the store has ``keeps_native`` (``NativeStore`` / ``AsyncNativeStore``); skipped,
    with the reason, elsewhere, unless the suite declares ``"native"`` (then it fails).
    """

    @pytest.fixture
    def native_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the native capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, NATIVE, "the native contract")

    def test_native_kept_by_record_and_every_read(self, native_harness: Harness) -> None:
        """``record`` keeps each native form exactly; windows, the store's ``acta`` and JSON return it."""
        harness = native_harness
        owner, chronicum_id = new_owner(), new_id("native")
        plain = harness.record_actum(owner, make_actum(chronicum_id, "written without one"))
        written = [
            harness.record_actum(owner, _with(make_actum(chronicum_id, f"native {index}"), native))
            for index, native in enumerate(NATIVE_FORMS)
        ]
        assert [actum.native for actum in written] == list(NATIVE_FORMS)
        after = harness.record_actum(owner, make_actum(chronicum_id, "and after, without one"))
        assert plain.native is None and after.native is None
        read = harness.get_acta(owner, chronicum_id)
        assert_same_acta(read, [plain, *written, after], "acta with and without native forms")
        assert_same_acta(
            harness.get_acta(owner, chronicum_id, last_n=2), [written[-1], after], "the newest 2"
        )
        assert_same_acta(harness.acta(chronicum_id), read, "the store's acta")
        for actum in read:
            _round_trips(actum)
        direct = harness.record(_with(make_actum(chronicum_id, "on the store"), NATIVE_FORMS[2]))
        assert direct.native == NATIVE_FORMS[2]
        assert harness.acta(chronicum_id, ActaQuery(last_n=1))[0].native == NATIVE_FORMS[2]

    def test_native_kept_by_a_retried_write(self, native_harness: Harness) -> None:
        """A retry with the key returns the first write's native form, whatever the retry carries."""
        harness = require_capability(native_harness, IDEMPOTENCY, "native forms of keyed writes")
        owner, chronicum_id = new_owner(), new_id("native-key")
        first = harness.record_actum(
            owner, _with(make_actum(chronicum_id, "first"), NATIVE_FORMS[0]), idempotency_key="k"
        )
        for retried in (NATIVE_FORMS[1], None):
            retry = harness.record_actum(
                owner, _with(make_actum(chronicum_id, "retry"), retried), idempotency_key="k"
            )
            assert_same_acta([retry], [first], "a retried write")
        on_the_store = harness.record_idempotent(_with(make_actum(chronicum_id), NATIVE_FORMS[3]), "k")
        assert_same_acta([on_the_store], [first], "record_idempotent with the key")
        fresh = harness.record_idempotent(_with(make_actum(chronicum_id), NATIVE_FORMS[3]), "k2")
        assert fresh.native == NATIVE_FORMS[3]
        assert_same_acta(harness.get_acta(owner, chronicum_id), [first, fresh], "keyed writes read back")

    def test_native_kept_by_a_batch(self, native_harness: Harness) -> None:
        """``record_many`` keeps each actum's native form (or none), through the rules and on the store."""
        harness = require_capability(native_harness, BATCH, "native forms in a batch")
        owner, chronicum_id = new_owner(), new_id("native-batch")
        natives = [NATIVE_FORMS[0], None, NATIVE_FORMS[2], NATIVE_FORMS[3]]
        batch = [
            _with(make_actum(chronicum_id, f"batch {index}"), native) for index, native in enumerate(natives)
        ]
        stored = harness.record_acta(owner, batch)
        assert [actum.native for actum in stored] == natives
        assert_same_acta(harness.get_acta(owner, chronicum_id), stored, "a batch read back")
        again = [
            _with(make_actum(chronicum_id, f"store {index}"), native) for index, native in enumerate(natives)
        ]
        on_the_store = harness.perform(store_call("record_many", again, None))
        assert [actum.native for actum in on_the_store] == natives
        assert_same_acta(harness.acta(chronicum_id), [*stored, *on_the_store], "batches on the store")
        if IDEMPOTENCY in harness.capabilities:
            keyed = harness.record_acta(owner, batch, idempotency_key="b")
            retry = harness.record_acta(owner, [_with(actum, None) for actum in batch], idempotency_key="b")
            assert_same_acta(retry, keyed, "a retried batch")
            assert [actum.native for actum in retry] == natives

    def test_native_followed_and_read_by_id(self, native_harness: Harness) -> None:
        """Followers (woken or polling) and ``get_actum`` return the native form too."""
        harness = native_harness
        owner, chronicum_id = new_owner(), new_id("native-follow")
        start = harness.record_actum(owner, make_actum(chronicum_id, "start"))
        natives = [NATIVE_FORMS[0], None, NATIVE_FORMS[3]]
        calls = [
            rules_call("record_actum", owner, _with(make_actum(chronicum_id, f"said {index}"), native))
            for index, native in enumerate(natives)
        ]
        followers = [harness]
        if FOLLOW in harness.capabilities:
            followers.append(harness.with_chronicarius(owner_cache_size=100, hidden=(FOLLOW,)))
        for follower in followers:
            before = harness.get_acta(owner, chronicum_id)
            run = follower.follow_during(owner, chronicum_id, len(calls), calls, after=before[-1].id)
            by_id = {actum.id: actum for actum in run.outcomes}
            assert_same_acta(run.acta, [by_id[actum_id] for actum_id in ids(run.acta)], "what was followed")
            assert sorted(str(actum.native) for actum in run.acta) == sorted(
                str(native) for native in natives
            )
        if HISTORY in harness.capabilities:
            for actum in harness.get_acta(owner, chronicum_id):
                assert_same_acta(
                    [harness.get_actum(owner, chronicum_id, actum.id)], [actum], "an actum by id"
                )
        assert harness.get_acta(owner, chronicum_id)[0].id == start.id

    def test_native_json_form_round_trips(self, native_harness: Harness) -> None:
        """A hypothesis property: any format and data, stored and read back, round-trip through JSON."""
        harness = native_harness
        owner, chronicum_id = new_owner(), new_id("native-json")

        @bounded_settings()
        @given(native_format=_FORMAT, data=_DATA)
        def stored_native_round_trips(native_format: str, data: str) -> None:
            native = Native(native_format, data)
            stored = harness.record_actum(owner, _with(make_actum(chronicum_id, "x"), native))
            assert stored.native == native
            read = harness.get_acta(owner, chronicum_id, last_n=1)
            assert_same_acta(read, [stored], "the newest actum")
            _round_trips(read[0])

        stored_native_round_trips()

    def test_native_counts_against_the_content_limit(self, native_harness: Harness) -> None:
        """Content and native data together up to the limit are kept; one byte more writes nothing."""
        harness = native_harness
        if not hasattr(harness.store, "max_content_bytes"):
            pytest.skip(f"{harness.store_name} does not tell its content limit (no max_content_bytes)")
        limit = harness.perform(store_call("max_content_bytes"))
        owner, chronicum_id = new_owner(), new_id("native-size")
        if limit is None:  # no limit: large native data is kept whole
            large = _sized(chronicum_id, 1, UNLIMITED_TEST_BYTES)
            stored = harness.record_actum(owner, large)
            assert harness.get_acta(owner, chronicum_id)[0].native == large.native
            assert stored.native == large.native
            return
        if limit > LARGEST_TESTED_LIMIT:
            pytest.skip(
                f"{harness.store_name}'s content limit is {limit} bytes: open it with a max_content_bytes "
                f"of at most {LARGEST_TESTED_LIMIT} to test native data against it"
            )
        half = limit // 2
        over = _sized(chronicum_id, half, limit - half + 1)
        with pytest.raises(ActumTooLarge) as refused:
            harness.record_actum(owner, over)
        assert (refused.value.size, refused.value.limit) == (limit + 1, limit)
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)  # a refused first write creates nothing
        exact = harness.record_actum(owner, _sized(chronicum_id, half, limit - half))
        assert_same_acta(
            harness.get_acta(owner, chronicum_id), [exact], "content and native data at the limit"
        )
        refusals = [
            rules_call("record_actum", owner, over),
            rules_call("record_actum", owner, _sized(chronicum_id, 0, limit + 1)),
            store_call("record", over),
        ]
        if IDEMPOTENCY in harness.capabilities:
            refusals.append(store_call("record_idempotent", over, "key"))
        if BATCH in harness.capabilities:
            refusals.append(rules_call("record_acta", owner, [make_actum(chronicum_id, "fits"), over]))
            refusals.append(store_call("record_many", [make_actum(chronicum_id, "fits"), over], None))
        if HISTORY in harness.capabilities:
            short = replace(
                over, kind=ActumKind.MESSAGE, content=over.content or "x", summarizes=Span(exact.id, exact.id)
            )
            refusals.append(rules_call("record_actum", owner, short))
        for call in refusals:
            with pytest.raises(ActumTooLarge):
                harness.perform(call)
        assert_same_acta(harness.get_acta(owner, chronicum_id), [exact], "after refused writes")
