"""The history contract's tool exchanges, an actum read by its id, and pages back through a history.

The window cases compare every combination of filters, ``last_n``, views and tool exchanges with
:func:`chronica_conformance.history_base.expected_window`.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from chronica_conformance.base import assert_same_acta, ids, make_actum, new_id, new_owner, require_capability
from chronica_conformance.harness import Harness, rules_call
from chronica_conformance.history_base import (
    HistoryBase,
    Shape,
    assert_exchanges_whole,
    expected_window,
    request,
    respond,
    summary,
    write,
)
from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    ActumNotFound,
    ChronicumNotFound,
    InvalidActum,
    InvalidQuery,
)
from chronica_core.capabilities import BATCH, IDEMPOTENCY

__all__ = ["ExchangeContract"]

_KIND_FILTERS = (
    None,
    (ActumKind.MESSAGE,),
    (ActumKind.TOOL_RESPONSE,),
    (ActumKind.TOOL_REQUEST,),
    (ActumKind.MESSAGE, ActumKind.TOOL_RESPONSE),
    (ActumKind.THOUGHT, ActumKind.TOOL_REQUEST),
)
_ACTOR_FILTERS = (None, (ActorKind.AGENT,), (ActorKind.SYSTEM,), (ActorKind.HUMAN, ActorKind.AGENT))
_LAST_N = (0, 1, 2, 3, 5, 20)
_EXCHANGES = ("whole", "drop_orphans", "as_written")

_ANSWERS_REFUSALS = (
    "unknown",
    "a_message",
    "a_response",
    "another_chronicum",
    "not_a_response",
    "in_a_batch",
)


def _exchanges(harness: Harness, owner_id: str, chronicum_id: str) -> list[Actum]:
    """A history of 13 acta: requests answered at once, late, twice, never; a response naming none."""
    record = harness.record_actum
    m0 = record(owner_id, make_actum(chronicum_id, "m0"))
    q1 = record(owner_id, request(chronicum_id, "q1"))
    r1 = record(owner_id, respond(chronicum_id, q1.id, "r1"))
    t3 = record(owner_id, make_actum(chronicum_id, "t3", kind=ActumKind.THOUGHT, actor_kind=ActorKind.AGENT))
    q4 = record(owner_id, request(chronicum_id, "q4"))
    m5 = record(owner_id, make_actum(chronicum_id, "m5", actor_kind=ActorKind.AGENT))
    r4a = record(owner_id, respond(chronicum_id, q4.id, "r4a"))
    r4b = record(owner_id, respond(chronicum_id, q4.id, "r4b", actor_kind=ActorKind.AGENT))
    plain = record(owner_id, respond(chronicum_id, "", "plain"))
    m9 = record(owner_id, make_actum(chronicum_id, "m9"))
    r1b = record(owner_id, respond(chronicum_id, q1.id, "r1b"))
    q11 = record(owner_id, request(chronicum_id, "q11"))
    m12 = record(owner_id, make_actum(chronicum_id, "m12", actor_kind=ActorKind.AGENT))
    return [m0, q1, r1, t3, q4, m5, r4a, r4b, plain, m9, r1b, q11, m12]


def _shaped_fork(harness: Harness, owner_id: str, source_id: str) -> tuple[str, list[Actum]]:
    """A fork of :func:`_exchanges`'s history at ``m9``, answering a request of the prefix, summarized.

    Returns the fork's id and its whole history as written.
    """
    source = _exchanges(harness, owner_id, source_id)
    fork = harness.fork_chronicum(owner_id, source_id, at=source[9].id)
    record = harness.record_actum
    own = [
        record(owner_id, respond(fork.id, source[1].id, "r1c")),
        record(owner_id, make_actum(fork.id, "tf", kind=ActumKind.THOUGHT, actor_kind=ActorKind.AGENT)),
    ]
    own.append(record(owner_id, summary(fork.id, source[0].id, source[3].id, "m0 to t3")))
    own.append(record(owner_id, make_actum(fork.id, "mf")))
    own.append(
        record(
            owner_id, summary(fork.id, source[4].id, source[5].id, "q4 and m5", actor_kind=ActorKind.SYSTEM)
        )
    )
    return fork.id, [*source[:10], *own]


def _check_grid(
    harness: Harness, owner_id: str, chronicum_id: str, history: list[Actum], views: tuple[str, ...]
) -> int:
    """Compare every window of the grid with the oracle's; return how many were compared."""
    compared = 0
    for view, kinds, actors, last_n, exchanges in itertools.product(
        views, _KIND_FILTERS, _ACTOR_FILTERS, _LAST_N, _EXCHANGES
    ):
        shape = Shape(kinds, actors, last_n, view=view, tool_exchanges=exchanges)
        window = shape.read(harness, owner_id, chronicum_id)
        what = f"the window {shape}"
        assert_same_acta(window, expected_window(history, shape), what)
        assert_exchanges_whole(window, exchanges, what)
        compared += 1
    return compared


class ExchangeContract(HistoryBase):
    """A response names its request; no window splits them; one actum by id; pages back."""

    def test_history_exchange_response_keeps_its_request(self, history_harness: Harness) -> None:
        """``answers`` is kept by every write and read; the request may be in a fork's shared prefix."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("exchange")
        call = harness.record_actum(owner, request(chronicum_id))
        answer = harness.record_actum(owner, respond(chronicum_id, call.id))
        assert answer.answers == call.id
        assert_same_acta(harness.get_acta(owner, chronicum_id), [call, answer], "an exchange")
        assert_same_acta([harness.get_actum(owner, chronicum_id, answer.id)], [answer], "a response by id")
        direct = harness.record(respond(chronicum_id, call.id, "on the store"))
        assert direct.answers == call.id
        if IDEMPOTENCY in harness.capabilities:
            keyed = harness.record_idempotent(respond(chronicum_id, call.id, "keyed"), "key-1")
            assert keyed.answers == call.id
        fork = harness.fork_chronicum(owner, chronicum_id, at=call.id)
        in_fork = harness.record_actum(owner, respond(fork.id, call.id, "in the fork"))
        assert_same_acta(harness.get_acta(owner, fork.id), [call, in_fork], "an exchange across a fork")
        later = harness.record_actum(owner, request(chronicum_id, "after the fork point"))
        with pytest.raises(InvalidActum) as refused:
            harness.record_actum(owner, respond(fork.id, later.id))
        assert refused.value.field == "answers"

    @pytest.mark.parametrize("case", _ANSWERS_REFUSALS)
    def test_history_exchange_answers_checked_at_write(self, history_harness: Harness, case: str) -> None:
        """``answers`` naming no request of the history: ``InvalidActum("answers")``, nothing written."""
        harness = history_harness
        owner, chronicum_id, elsewhere = new_owner(), new_id("exchange"), new_id("elsewhere")
        call = harness.record_actum(owner, request(chronicum_id))
        said = harness.record_actum(owner, make_actum(chronicum_id, "said"))
        answer = harness.record_actum(owner, respond(chronicum_id, call.id))
        foreign_call = harness.record_actum(owner, request(elsewhere))
        before = harness.get_acta(owner, chronicum_id, view="as_written", tool_exchanges="as_written")
        index = None
        names = {
            "unknown": "0" * 32,
            "a_message": said.id,
            "a_response": answer.id,
            "another_chronicum": foreign_call.id,
        }
        if case in names:
            call_made = rules_call("record_actum", owner, respond(chronicum_id, names[case]))
        elif case == "not_a_response":
            call_made = rules_call("record_actum", owner, replace(make_actum(chronicum_id), answers=call.id))
        else:
            if BATCH not in harness.capabilities:
                pytest.skip(f"{harness.store_name} does not have the batch capability")
            batch = [
                make_actum(chronicum_id, "plain"),
                request(chronicum_id),
                respond(chronicum_id, "0" * 32),
            ]
            call_made, index = rules_call("record_acta", owner, batch), 2
        with pytest.raises(InvalidActum) as refused:
            harness.perform(call_made)
        assert (refused.value.field, refused.value.index) == ("answers", index), str(refused.value)
        after = harness.get_acta(owner, chronicum_id, view="as_written", tool_exchanges="as_written")
        assert_same_acta(after, before, "after a refused response")

    def test_history_exchange_response_is_never_a_first_write(self, history_harness: Harness) -> None:
        """A response naming a request, into a missing chronicum: ``ChronicumNotFound``, nothing created."""
        harness = history_harness
        owner, elsewhere, missing = new_owner(), new_id("elsewhere"), new_id("missing")
        call = harness.record_actum(owner, request(elsewhere))
        with pytest.raises(ChronicumNotFound):
            harness.record_actum(owner, respond(missing, call.id))
        with pytest.raises(ChronicumNotFound):
            harness.get(missing)

    def test_history_exchange_batch_names_its_own_requests(self, history_harness: Harness) -> None:
        """In a batch, a response names an earlier request of the batch by the id the caller gave it.

        A response naming a later actum of the batch, or a batch giving one id twice, is refused
        (``InvalidActum``, fields ``answers`` and ``id``) with nothing written.
        """
        harness = require_capability(history_harness, BATCH, "exchanges in a batch")
        owner, chronicum_id = new_owner(), new_id("batch")
        earlier = harness.record_actum(owner, request(chronicum_id, "stored before"))
        batch = [
            request(chronicum_id, "first", actum_id="call-1"),
            respond(chronicum_id, "call-1", "first result"),
            request(chronicum_id, "second", actum_id="call-2"),
            respond(chronicum_id, earlier.id, "earlier result"),
            respond(chronicum_id, "call-2", "second result"),
            respond(chronicum_id, "call-1", "first again"),
        ]
        stored = harness.record_acta(owner, batch)
        assert [actum.answers for actum in stored] == [
            "",
            stored[0].id,
            "",
            earlier.id,
            stored[2].id,
            stored[0].id,
        ]
        assert_same_acta(harness.get_acta(owner, chronicum_id), [earlier, *stored], "the batch read back")
        backwards = [respond(chronicum_id, "call-9"), request(chronicum_id, actum_id="call-9")]
        with pytest.raises(InvalidActum) as refused:
            harness.record_acta(owner, backwards)
        assert (refused.value.field, refused.value.index) == ("answers", 0)
        assert_same_acta(harness.get_acta(owner, chronicum_id), [earlier, *stored], "after a refused batch")
        repeated = [
            request(chronicum_id, "first", actum_id="call-1"),
            request(chronicum_id, "second", actum_id="call-1"),
            respond(chronicum_id, "call-1"),
        ]
        with pytest.raises(InvalidActum) as refused:
            harness.record_acta(owner, repeated)
        assert (refused.value.field, refused.value.index) == ("id", 1)
        assert_same_acta(harness.get_acta(owner, chronicum_id), [earlier, *stored], "after a repeated id")

    def test_history_exchange_window_reaches_back_or_drops(self, history_harness: Harness) -> None:
        """A window whose limit or filters cut a request off: ``whole`` adds it, ``drop_orphans`` drops."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("window")
        call = harness.record_actum(owner, request(chronicum_id))
        write(harness, owner, chronicum_id, 6)
        answer = harness.record_actum(owner, respond(chronicum_id, call.id))
        for shape in ({"last_n": 1}, {"actum_kinds": ["tool_response"]}, {"actor_kinds": ["system"]}):
            whole = harness.get_acta(owner, chronicum_id, **shape)
            assert_same_acta(whole, [call, answer], f"whole {shape}")
            dropped = harness.get_acta(owner, chronicum_id, tool_exchanges="drop_orphans", **shape)
            assert dropped == [], f"drop_orphans {shape} kept {ids(dropped)}"
            kept = harness.get_acta(owner, chronicum_id, tool_exchanges="as_written", **shape)
            assert_same_acta(kept, [answer], f"as_written {shape}")

    def test_history_exchange_windows_match_the_oracle(self, history_harness: Harness) -> None:
        """Every filter, limit and tool-exchange mode over a history of exchanges, against the oracle."""
        harness = history_harness
        owner, chronicum_id = new_owner(), new_id("grid")
        history = _exchanges(harness, owner, chronicum_id)
        assert _check_grid(harness, owner, chronicum_id, history, ("summarized",)) == 432

    def test_history_summary_windows_match_the_oracle(self, history_harness: Harness) -> None:
        """The same grid over a fork with summaries and an exchange across them, in both views."""
        harness = history_harness
        owner = new_owner()
        fork_id, history = _shaped_fork(harness, owner, new_id("source"))
        assert _check_grid(harness, owner, fork_id, history, ("summarized", "as_written")) == 864

    def test_history_page_windows_match_the_oracle(self, history_harness: Harness) -> None:
        """``before`` and ``newest_first`` with filters, limits and both views, against the oracle."""
        harness = history_harness
        owner = new_owner()
        fork_id, history = _shaped_fork(harness, owner, new_id("source"))
        befores = [history[index].id for index in (0, 2, 4, 9, 10, 12, 13, 14)]  # 12 and 14: summaries
        for before, view, kinds, last_n, exchanges, newest_first in itertools.product(
            befores, ("summarized", "as_written"), _KIND_FILTERS[:3], (0, 2, 3), _EXCHANGES, (False, True)
        ):
            shape = Shape(kinds, None, last_n, before, newest_first, view, exchanges)
            window = shape.read(harness, owner, fork_id)
            what = f"the page {shape}"
            assert_same_acta(window, expected_window(history, shape), what)
            assert_exchanges_whole(window[::-1] if newest_first else window, exchanges, what)

    def test_history_actum_by_id_is_owner_checked(self, history_harness: Harness) -> None:
        """``get_actum``: any actum of the history; another owner's chronicum answers as a missing one."""
        harness = history_harness
        owner, other = new_owner(), new_owner("bunga")
        chronicum_id, elsewhere = new_id("by-id"), new_id("elsewhere")
        acta = write(harness, owner, chronicum_id, 3)
        stranger = write(harness, owner, elsewhere, 1)
        for actum in acta:
            assert_same_acta([harness.get_actum(owner, chronicum_id, actum.id)], [actum], "an actum by id")
        for missing in ("0" * 32, stranger[0].id, "", "\ud800", "a" * 300):  # a lone surrogate, too long
            with pytest.raises(ActumNotFound) as refused:
                harness.get_actum(owner, chronicum_id, missing)
            assert (refused.value.chronicum_id, refused.value.actum_id) == (chronicum_id, missing)
        absent_id = new_id("missing")
        with pytest.raises(ChronicumNotFound) as foreign:
            harness.get_actum(other, chronicum_id, acta[0].id)
        with pytest.raises(ChronicumNotFound) as absent:
            harness.get_actum(owner, absent_id, acta[0].id)
        assert str(foreign.value).replace(chronicum_id, "<id>") == str(absent.value).replace(
            absent_id, "<id>"
        )
        with pytest.raises(ChronicumNotFound):
            harness.with_chronicarius(owner_cache_size=100).get_actum(other, chronicum_id, acta[0].id)

    def test_history_before_and_at_name_an_actum_or_are_refused_naming_them(
        self, history_harness: Harness
    ) -> None:
        """A ``before`` or ``at`` naming no actum is ``ActumNotFound``; empty or not a str, ``InvalidQuery``.

        Another chronicum's actum, and an id no actum can have, name none.
        """
        harness = history_harness
        owner, chronicum_id, elsewhere = new_owner(), new_id("positions"), new_id("positions-other")
        written = write(harness, owner, chronicum_id, 2)
        foreign = write(harness, owner, elsewhere, 1)[0].id
        for unknown in ("0" * 32, foreign, "a" * 300, "a\x00b", "\ud800"):
            with pytest.raises(ActumNotFound) as page:
                harness.get_acta(owner, chronicum_id, before=unknown)
            with pytest.raises(ActumNotFound) as fork:
                harness.fork_chronicum(owner, chronicum_id, at=unknown)
            for refused in (page.value, fork.value):
                assert (refused.chronicum_id, refused.actum_id) == (chronicum_id, unknown)
        for bad in ("", 42):
            with pytest.raises(InvalidQuery) as bad_page:
                harness.get_acta(owner, chronicum_id, before=bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidQuery) as bad_fork:
                harness.fork_chronicum(owner, chronicum_id, at=bad)  # type: ignore[arg-type]
            assert (bad_page.value.field, bad_fork.value.field) == ("before", "at")
        assert_same_acta(harness.get_acta(owner, chronicum_id), written, "the chronicum")

    @pytest.mark.parametrize("page", [1, 7])
    def test_history_page_walk_sees_every_actum_once(self, history_harness: Harness, page: int) -> None:
        """Pages back from the newest, by ``before``, oldest or newest first: every actum once, in order."""
        harness = history_harness
        owner, source_id = new_owner(), new_id("pages")
        source = write(harness, owner, source_id, 23)
        fork = harness.fork_chronicum(owner, source_id, at=source[15].id)
        own = write(harness, owner, fork.id, 9, "fork")
        write(harness, owner, source_id, 4, "source-later")
        for chronicum_id, history in (
            (source_id, harness.get_acta(owner, source_id)),
            (fork.id, [*source[:16], *own]),
        ):
            for newest_first in (False, True):
                seen: list[Actum] = []
                window = harness.get_acta(owner, chronicum_id, last_n=page, newest_first=newest_first)
                for _ in range(len(history) + 1):  # a page back never repeats: the walk ends
                    if not window:
                        break
                    oldest_first = window[::-1] if newest_first else window
                    seen = [*oldest_first, *seen]
                    window = harness.get_acta(
                        owner, chronicum_id, last_n=page, before=oldest_first[0].id, newest_first=newest_first
                    )
                assert window == [], f"pages back through {chronicum_id} never ended: {ids(window)}"
                assert_same_acta(seen, history, f"pages of {page} back through {chronicum_id}")
            assert harness.get_acta(owner, chronicum_id, before=history[0].id) == []
            with pytest.raises(ActumNotFound):
                harness.get_acta(owner, chronicum_id, before="0" * 32)
        with pytest.raises(ActumNotFound):  # after the fork point: not in the fork's history
            harness.get_acta(owner, fork.id, before=source[16].id)
        with pytest.raises(ChronicumNotFound):
            harness.get_acta(new_owner("bunga"), fork.id, before=own[0].id)
