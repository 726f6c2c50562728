"""The Chronicarius rules R1–R9 (``docs/contract.md``), run through a Chronicarius over the store under test.

R10 (ownership never changes, so an owner cache stays right) is the erasure contract's: it is
the only operation that could break it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from chronica_conformance.base import SuiteBase, assert_aware_utc, ids, make_actum, new_id, new_owner
from chronica_conformance.harness import Harness, rules_call
from chronica_conformance.store_contract import CONCURRENT_WRITERS
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ChronicumNotFound,
    EmptyOwnerID,
    IdempotencyUnsupported,
    InvalidActum,
)
from chronica_core.story import DINNER_STORY

__all__ = ["RulesContract"]

_HEX_ID = re.compile(r"[0-9a-f]{32}")

_INVALID: dict[str, tuple[Callable[[Actum], Actum], str | None, str]] = {
    # case name: (how to spoil a valid message, idempotency key, the field InvalidActum must name)
    "empty_chronicum_id": (lambda actum: replace(actum, chronicum_id=""), None, "chronicum_id"),
    "empty_actor": (lambda actum: replace(actum, actor=""), None, "actor"),
    "unknown_kind_string": (lambda actum: replace(actum, kind="memo"), None, "kind"),  # type: ignore[arg-type]
    "unknown_actor_kind": (lambda actum: replace(actum, actor_kind="robot"), None, "actor_kind"),  # type: ignore[arg-type]
    "empty_message_content": (lambda actum: replace(actum, content=""), None, "content"),
    "empty_thought_content": (
        lambda actum: replace(actum, kind=ActumKind.THOUGHT, content=""),
        None,
        "content",
    ),
    "bytes_content": (lambda actum: replace(actum, content=b"bytes"), None, "content"),  # type: ignore[arg-type]
    "none_content": (lambda actum: replace(actum, content=None), None, "content"),  # type: ignore[arg-type]
    "lone_surrogate_content": (
        lambda actum: replace(actum, content="half \ud83c of an emoji"),
        None,
        "content",
    ),
    "empty_idempotency_key": (lambda actum: actum, "", "idempotency_key"),
}


def _record_dinner_story(harness: Harness, owner: str, chronicum_id: str) -> list[Actum]:
    """Record the dinner story into ``chronicum_id`` for ``owner``; return the stored acta."""
    return [harness.record_actum(owner, replace(actum, chronicum_id=chronicum_id)) for actum in DINNER_STORY]


def _not_found_like_missing(error: BaseException, chronicum_id: str) -> None:
    """Assert ``error`` is exactly what a missing ``chronicum_id`` gives (rule R5)."""
    assert type(error) is ChronicumNotFound, f"expected ChronicumNotFound, got {error!r}"
    assert str(error) == str(ChronicumNotFound(chronicum_id)), (
        "the refusal differs from a missing chronicum's"
    )


class RulesContract(SuiteBase):
    """R1–R9 through a Chronicarius over the store under test: what an app sees."""

    def test_r1_empty_owner_is_refused_before_anything(self, chronica_harness: Harness) -> None:
        """An empty owner (``""`` or ``None``) fails with EmptyOwnerID on every call; nothing is created."""
        chronicum_id = new_id()
        for empty in ("", None):
            owner: Any = empty
            with pytest.raises(EmptyOwnerID):
                chronica_harness.record_actum(owner, make_actum(chronicum_id))
            with pytest.raises(EmptyOwnerID):
                chronica_harness.get_acta(owner, chronicum_id)
            with pytest.raises(EmptyOwnerID):
                chronica_harness.get_chronicum(owner, chronicum_id)
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(chronicum_id)

    @pytest.mark.parametrize("case", list(_INVALID))
    def test_r2_invalid_actum_names_the_field(self, chronica_harness: Harness, case: str) -> None:
        """Each invalid input raises InvalidActum naming its field, and nothing is created."""
        spoil, key, field = _INVALID[case]
        owner, chronicum_id = new_owner(), new_id()
        with pytest.raises(InvalidActum) as raised:
            chronica_harness.record_actum(owner, spoil(make_actum(chronicum_id)), idempotency_key=key)
        assert raised.value.field == field, f"InvalidActum names {raised.value.field!r}, not {field!r}"
        assert field in str(raised.value)
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get_chronicum(owner, chronicum_id)
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(chronicum_id)

    def test_r2_tool_acta_may_be_empty_and_kinds_may_be_strings(self, chronica_harness: Harness) -> None:
        """Empty tool requests and responses are valid; kinds and actor kinds may be their string values."""
        owner, chronicum_id = new_owner(), new_id()
        request = Actum(chronicum_id, "tool_request", "agent", "search", "")  # type: ignore[arg-type]
        response = Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, "search", "")
        stored = [
            chronica_harness.record_actum(owner, request),
            chronica_harness.record_actum(owner, response),
        ]
        assert [(actum.kind, actum.actor_kind, actum.content) for actum in stored] == [
            (ActumKind.TOOL_REQUEST, ActorKind.AGENT, ""),
            (ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM, ""),
        ]
        read = chronica_harness.get_acta(owner, chronicum_id, actum_kinds=["tool_request"])
        assert ids(read) == [stored[0].id]
        assert read[0].kind is ActumKind.TOOL_REQUEST

    def test_r3_every_actum_gets_a_fresh_id(self, chronica_harness: Harness) -> None:
        """Ids are 32 lowercase hex characters, fresh for each actum, replacing the caller's."""
        owner, chronicum_id = new_owner(), new_id()
        sent = [make_actum(chronicum_id, f"message {index}", actum_id="caller-chosen") for index in range(5)]
        stored = [chronica_harness.record_actum(owner, actum) for actum in sent]
        for actum in stored:
            assert _HEX_ID.fullmatch(actum.id), f"id {actum.id!r} is not 32 lowercase hex characters"
        assert len(set(ids(stored))) == 5
        assert ids(chronica_harness.get_acta(owner, chronicum_id)) == ids(stored)

    def test_r4_first_write_creates_the_chronicum_for_its_owner(self, chronica_harness: Harness) -> None:
        """The first record_actum creates the chronicum for that owner; the returned actum is complete."""
        owner, chronicum_id = new_owner(), new_id()
        sent = make_actum(chronicum_id, "Find us a quiet table.")
        stored = chronica_harness.record_actum(owner, sent)
        assert (stored.chronicum_id, stored.kind, stored.actor_kind, stored.actor, stored.content) == (
            chronicum_id,
            ActumKind.MESSAGE,
            ActorKind.HUMAN,
            "ardian",
            "Find us a quiet table.",
        )
        assert_aware_utc(stored.at, "actum.at")
        chronicum = chronica_harness.get_chronicum(owner, chronicum_id)
        assert (chronicum.id, chronicum.owner_id) == (chronicum_id, owner)
        assert_aware_utc(chronicum.started_at, "started_at")
        assert_aware_utc(chronicum.last_actum_at, "last_actum_at")

    def test_r4_racing_first_writes_by_one_owner_both_land(self, chronica_harness: Harness) -> None:
        """Two first writes by one owner race to create; the loser re-reads and its actum lands too."""
        owner, chronicum_id = new_owner(), new_id()
        racing = chronica_harness.with_chronicarius(gate_first_reads=2)
        sent = [make_actum(chronicum_id, "from the first"), make_actum(chronicum_id, "from the second")]
        outcomes = racing.concurrently([rules_call("record_actum", owner, actum) for actum in sent])
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"a first write by the same owner failed: {failures!r}"
        stored = chronica_harness.get_acta(owner, chronicum_id)
        assert sorted(ids(stored)) == sorted(outcome.id for outcome in outcomes)
        assert sorted(actum.content for actum in stored) == ["from the first", "from the second"]

    def test_r4_racing_first_writes_by_two_owners_one_is_refused(self, chronica_harness: Harness) -> None:
        """Two owners race to create one chronicum: one wins, the other gets ChronicumNotFound."""
        chronicum_id = new_id()
        owners = [new_owner("ardian"), new_owner("rafa")]
        racing = chronica_harness.with_chronicarius(gate_first_reads=2)
        calls = [
            rules_call("record_actum", owner, make_actum(chronicum_id, f"by {owner}")) for owner in owners
        ]
        outcomes = racing.concurrently(calls)
        winners = [index for index, outcome in enumerate(outcomes) if isinstance(outcome, Actum)]
        assert len(winners) == 1, f"expected exactly one winner, got {outcomes!r}"
        winner, loser = owners[winners[0]], owners[1 - winners[0]]
        _not_found_like_missing(outcomes[1 - winners[0]], chronicum_id)
        assert chronica_harness.get_chronicum(winner, chronicum_id).owner_id == winner
        assert [actum.content for actum in chronica_harness.get_acta(winner, chronicum_id)] == [
            f"by {winner}"
        ]
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get_acta(loser, chronicum_id)

    def test_r4_forty_concurrent_first_writes_all_land_once(self, chronica_harness: Harness) -> None:
        """40 concurrent record_actum calls into a new chronicum (all racing to create it) all land once."""
        owner, chronicum_id = new_owner(), new_id()
        racing = chronica_harness.with_chronicarius(gate_first_reads=CONCURRENT_WRITERS)
        sent = [make_actum(chronicum_id, f"writer {index}") for index in range(CONCURRENT_WRITERS)]
        outcomes = racing.concurrently([rules_call("record_actum", owner, actum) for actum in sent])
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent first writes failed: {failures[:3]!r}"
        stored = chronica_harness.get_acta(owner, chronicum_id)
        assert sorted(ids(stored)) == sorted(outcome.id for outcome in outcomes)
        assert sorted(actum.content for actum in stored) == sorted(actum.content for actum in sent)

    def test_r5_another_owners_chronicum_answers_like_a_missing_one(self, chronica_harness: Harness) -> None:
        """Reads and writes by another owner get ChronicumNotFound with a missing chronicum's message."""
        owner, chronicum_id = new_owner("ardian"), new_id("dinner-friday")
        _record_dinner_story(chronica_harness, owner, chronicum_id)
        for harness in (chronica_harness, chronica_harness.with_chronicarius(owner_cache_size=0)):
            for call in (
                rules_call("get_chronicum", "rafa", chronicum_id),
                rules_call("get_acta", "rafa", chronicum_id, last_n=3),
                rules_call("record_actum", "rafa", make_actum(chronicum_id, "mine now")),
            ):
                with pytest.raises(ChronicumNotFound) as raised:
                    harness.perform(call)
                _not_found_like_missing(raised.value, chronicum_id)
        assert len(chronica_harness.get_acta(owner, chronicum_id)) == len(DINNER_STORY)

    def test_r5_missing_chronicum_is_not_found_for_reads(self, chronica_harness: Harness) -> None:
        """get_acta and get_chronicum of a chronicum nobody wrote raise ChronicumNotFound."""
        owner, missing = new_owner(), new_id("missing")
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get_acta(owner, missing)
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get_acta(owner, missing, actum_kinds=[ActumKind.MESSAGE], last_n=3)
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get_chronicum(owner, missing)

    def test_r6_last_three_messages_with_thoughts_and_tools_between(self, chronica_harness: Harness) -> None:
        """The dinner story: the booking agent's window is the last three messages, oldest first."""
        owner, chronicum_id = new_owner("ardian"), new_id("dinner-friday")
        stored = _record_dinner_story(chronica_harness, owner, chronicum_id)
        window = chronica_harness.get_acta(owner, chronicum_id, actum_kinds=[ActumKind.MESSAGE], last_n=3)
        assert [actum.content for actum in window] == [actum.content for actum in DINNER_STORY[-3:]]
        assert ids(window) == ids(stored[-3:])

    def test_r6_filters_apply_before_the_limit(self, chronica_harness: Harness) -> None:
        """Kinds and actor kinds (strings or enums) filter first, then last_n keeps the newest."""
        owner, chronicum_id = new_owner(), new_id()
        stored = _record_dinner_story(chronica_harness, owner, chronicum_id)

        def expected(kinds: set[str], actor_kinds: set[str], last_n: int) -> list[str]:
            kept = [a.id for a in stored if a.kind in kinds and a.actor_kind in actor_kinds]
            return kept[-last_n:] if last_n > 0 else kept

        every_kind = {kind.value for kind in ActumKind}
        every_actor_kind = {kind.value for kind in ActorKind}
        cases: list[tuple[list[str] | None, list[str] | None, int, set[str], set[str]]] = [
            (None, None, 0, every_kind, every_actor_kind),
            (None, None, -2, every_kind, every_actor_kind),
            (["message"], ["human"], 1, {"message"}, {"human"}),
            (["thought", "tool_request"], None, 5, {"thought", "tool_request"}, every_actor_kind),
            (None, ["agent"], 2, every_kind, {"agent"}),
            ([], [], 3, every_kind, every_actor_kind),
            (["tool_response"], ["human"], 0, {"tool_response"}, {"human"}),
        ]
        for kinds, actor_kinds, last_n, want_kinds, want_actor_kinds in cases:
            got = chronica_harness.get_acta(
                owner, chronicum_id, actum_kinds=kinds, actor_kinds=actor_kinds, last_n=last_n
            )
            assert ids(got) == expected(want_kinds, want_actor_kinds, last_n), (kinds, actor_kinds, last_n)

    def test_r7_order_is_the_order_of_the_calls(self, chronica_harness: Harness) -> None:
        """200 acta recorded back to back (many in the same instant) come back in call order."""
        owner, chronicum_id = new_owner(), new_id()
        stored = [
            chronica_harness.record_actum(owner, make_actum(chronicum_id, f"message {index}"))
            for index in range(200)
        ]
        assert ids(chronica_harness.get_acta(owner, chronicum_id)) == ids(stored)
        assert ids(chronica_harness.get_acta(owner, chronicum_id, last_n=7)) == ids(stored[-7:])

    def test_r7_concurrent_writes_keep_one_order(self, chronica_harness: Harness) -> None:
        """After 40 concurrent writes every read agrees on one order, and later writes come after it."""
        owner, chronicum_id = new_owner(), new_id()
        first = chronica_harness.record_actum(owner, make_actum(chronicum_id, "first"))
        calls = [
            rules_call("record_actum", owner, make_actum(chronicum_id, f"writer {index}"))
            for index in range(CONCURRENT_WRITERS)
        ]
        outcomes = chronica_harness.concurrently(calls)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent records failed: {failures[:3]!r}"
        last = chronica_harness.record_actum(owner, make_actum(chronicum_id, "last"))
        order = ids(chronica_harness.get_acta(owner, chronicum_id))
        assert order[0] == first.id
        assert order[-1] == last.id
        assert sorted(order[1:-1]) == sorted(outcome.id for outcome in outcomes)
        assert ids(chronica_harness.get_acta(owner, chronicum_id)) == order
        assert ids(chronica_harness.get_acta(owner, chronicum_id, last_n=10)) == order[-10:]

    def test_r9_key_on_a_store_that_is_not_idempotent(self, chronica_harness: Harness) -> None:
        """A key given to a store that is not idempotent raises IdempotencyUnsupported; nothing is created."""
        plain = chronica_harness.with_chronicarius(idempotent=False)
        owner, chronicum_id = new_owner(), new_id()
        with pytest.raises(IdempotencyUnsupported):
            plain.record_actum(owner, make_actum(chronicum_id), idempotency_key="key-1")
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(chronicum_id)
        plain.record_actum(owner, make_actum(chronicum_id, "without a key"))
        with pytest.raises(IdempotencyUnsupported):
            plain.record_actum(owner, make_actum(chronicum_id), idempotency_key="key-1")
        assert [actum.content for actum in chronica_harness.get_acta(owner, chronicum_id)] == [
            "without a key"
        ]
