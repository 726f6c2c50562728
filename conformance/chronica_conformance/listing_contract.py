"""The listing contract: ``list_chronica`` and ``Chronicarius.list_chronica`` (the ``listing`` capability)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chronica_conformance.base import (
    TIME_TOLERANCE,
    SuiteBase,
    make_actum,
    new_id,
    new_owner,
    require_capability,
)
from chronica_conformance.harness import Harness, rules_call, store_call
from chronica_core import ChronicaPage, Chronicum, InvalidQuery
from chronica_core.capabilities import ERASURE, LISTING

__all__ = ["ListingContract", "walk"]

_BASE_TIME = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
"""When the listed chronica of the ordering cases started (whole seconds, kept by every store)."""

_TIED_SUFFIXES = ("B", "a", "\u00e9", "\u4e2d", "\uff5e", "\U0001f37d", "Z-0")
"""Id endings of chronica started at one moment: their order is code point order ("B" < "a":
binary, not a case-insensitive collation; U+FF5E < U+1F37D: code points, not UTF-16 units)."""

_MALFORMED_CURSORS: dict[str, Any] = {
    "empty": "",
    "words": "not a cursor",
    "not_base64": "!!!!",
    "base64_of_garbage": base64.urlsafe_b64encode(b"{garbage").decode(),
    "base64_of_an_object": base64.urlsafe_b64encode(b'{"at": 1}').decode(),
    "naive_time": base64.urlsafe_b64encode(
        json.dumps(["0" * 16, "2026-11-30T12:00:00", "x"]).encode()
    ).decode(),
    "empty_id": base64.urlsafe_b64encode(
        json.dumps(["0" * 16, "2026-11-30T12:00:00Z", ""]).encode()
    ).decode(),
    "non_ascii": "curs\u00f6r",
    "an_int": 5,
    "bytes": b"cursor",
    "a_list": ["cursor"],
}


def walk(harness: Harness, owner_id: str, limit: int, expected_at_most: int) -> list[Chronicum]:
    """Follow ``next_cursor`` from the first page; return every chronicum seen, in order.

    Fails when a page holds more than ``limit``, when a page before the last holds fewer, or
    when the walk takes more than ``expected_at_most // limit + 2`` pages (a store ignoring
    ``after`` would loop forever).
    """
    seen: list[Chronicum] = []
    cursor: str | None = None
    for _ in range(expected_at_most // limit + 2):
        page = harness.list_chronica(owner_id, limit=limit, cursor=cursor)
        assert isinstance(page, ChronicaPage), f"list_chronica returned {page!r}"
        assert len(page.chronica) <= limit, f"a page of limit {limit} holds {len(page.chronica)}"
        seen.extend(page.chronica)
        if page.next_cursor is None:
            return seen
        assert len(page.chronica) == limit, "a page before the last holds fewer than its limit"
        cursor = page.next_cursor
    pytest.fail(
        f"the walk with limit {limit} did not end after {expected_at_most // limit + 2} pages: "
        f"{len(seen)} chronica seen for {expected_at_most}"
    )


def _create(harness: Harness, owner_id: str, started_at: datetime, label: str = "listed") -> Chronicum:
    chronicum = Chronicum(new_id(label), owner_id, started_at)
    harness.create(chronicum)
    return chronicum


def _ties(harness: Harness, owner_id: str) -> list[Chronicum]:
    """Create chronica of ``owner_id``; return them in the listing's order, newest first.

    Some start at one moment (their ids differ in their endings), some before and after it.
    """
    prefix = new_id("tie")
    created = [Chronicum(f"{prefix}-{suffix}", owner_id, _BASE_TIME) for suffix in _TIED_SUFFIXES]
    created += [
        Chronicum(new_id("later"), owner_id, _BASE_TIME + timedelta(seconds=1)),
        Chronicum(new_id("earlier"), owner_id, _BASE_TIME - timedelta(seconds=1)),
        Chronicum(new_id("earliest"), owner_id, _BASE_TIME - timedelta(days=400)),
    ]
    for chronicum in reversed(created):  # neither creation order nor its reverse is the listing's
        harness.create(chronicum)
    return sorted(created, key=lambda chronicum: (chronicum.started_at, chronicum.id), reverse=True)


def _ids(chronica: Sequence[Chronicum]) -> list[str]:
    return [chronicum.id for chronicum in chronica]


class ListingContract(SuiteBase):
    """An owner's chronica, newest ``started_at`` first (ties by id), a keyset page at a time.

    Runs where the store has ``list_chronica`` (``ListingStore`` / ``AsyncListingStore``);
    skipped, with the reason, elsewhere, unless the suite declares ``"listing"`` in
    ``declares_capabilities`` (then it fails).
    """

    @pytest.fixture
    def listing_harness(self, chronica_harness: Harness) -> Harness:
        """The harness, when its store has the listing capability (else skip, or fail if declared)."""
        return require_capability(chronica_harness, LISTING, "the listing contract")

    def test_listing_is_newest_first_ties_by_id_descending(self, listing_harness: Harness) -> None:
        """Newest ``started_at`` first; chronica started at one moment by id, descending, in code points."""
        harness = listing_harness
        owner = new_owner()
        expected = _ties(harness, owner)
        page = harness.list_chronica(owner, limit=100)
        assert _ids(page.chronica) == _ids(expected)
        assert page.next_cursor is None
        for listed, created in zip(page.chronica, expected, strict=True):
            assert listed.owner_id == owner
            assert abs(listed.started_at - created.started_at) <= TIME_TOLERANCE
            assert listed.started_at.utcoffset() == timedelta(0), "started_at is not UTC"

    @pytest.mark.parametrize("limit", [1, 2, 3])
    def test_listing_page_walk_sees_every_chronicum_once(self, listing_harness: Harness, limit: int) -> None:
        """Following ``next_cursor`` with limit 1, 2, 3 sees every chronicum exactly once, in order."""
        harness = listing_harness
        owner = new_owner()
        expected = _ties(harness, owner)
        assert _ids(walk(harness, owner, limit, len(expected))) == _ids(expected)

    def test_listing_last_page_has_no_cursor(self, listing_harness: Harness) -> None:
        """A page that ends the listing, even exactly full, has ``next_cursor`` None; so has an empty one."""
        harness = listing_harness
        owner = new_owner()
        assert harness.list_chronica(owner, limit=5) == ChronicaPage([], None)
        chronica = [_create(harness, owner, _BASE_TIME + timedelta(seconds=second)) for second in range(4)]
        first = harness.list_chronica(owner, limit=2)
        assert _ids(first.chronica) == _ids(chronica[::-1][:2])
        assert first.next_cursor is not None
        second = harness.list_chronica(owner, limit=2, cursor=first.next_cursor)
        assert _ids(second.chronica) == _ids(chronica[::-1][2:])
        assert second.next_cursor is None
        exact = harness.list_chronica(owner, limit=4)
        assert len(exact.chronica) == 4 and exact.next_cursor is None

    def test_listing_walk_during_concurrent_creates_sees_each_existing_once(
        self, listing_harness: Harness
    ) -> None:
        """Chronica created by the same owner while a walk runs: every earlier one is seen exactly once."""
        harness = listing_harness
        owner = new_owner()
        now = datetime.now(UTC)
        existing = [_create(harness, owner, now - timedelta(minutes=minute)) for minute in range(1, 11)]
        seen: list[Chronicum] = []
        cursor: str | None = None
        for _ in range(2 * len(existing)):
            creates = [rules_call("record_actum", owner, make_actum(new_id("new"))) for _ in range(5)]
            outcomes = harness.concurrently(
                [rules_call("list_chronica", owner, limit=2, cursor=cursor), *creates]
            )
            failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
            assert not failures, f"{len(failures)} calls failed: {failures[:3]!r}"
            page: ChronicaPage = outcomes[0]
            seen.extend(page.chronica)
            cursor = page.next_cursor
            if cursor is None:
                break
        seen_ids = _ids(seen)
        assert len(seen_ids) == len(set(seen_ids)), "the walk saw a chronicum twice"
        for chronicum in existing:
            assert seen_ids.count(chronicum.id) == 1, f"the walk missed {chronicum.id}"

    def test_listing_shows_only_the_owners_chronica(self, listing_harness: Harness) -> None:
        """Two owners with chronica started at the same moments each list only their own."""
        harness = listing_harness
        ardian, bunga = new_owner("ardian"), new_owner("bunga")
        theirs = {
            owner: [_create(harness, owner, _BASE_TIME + timedelta(seconds=second)) for second in range(3)]
            for owner in (ardian, bunga)
        }
        for owner, created in theirs.items():
            page = harness.list_chronica(owner, limit=10)
            assert _ids(page.chronica) == _ids(created[::-1])
            assert {chronicum.owner_id for chronicum in page.chronica} == {owner}
        on_the_store = harness.perform(store_call("list_chronica", ardian, 10, None))
        assert _ids(on_the_store) == _ids(theirs[ardian][::-1])

    def test_listing_another_owners_cursor_shows_nothing_of_theirs(self, listing_harness: Harness) -> None:
        """A cursor of one owner's walk given by another: InvalidQuery("cursor") or none of the first's."""
        harness = listing_harness
        ardian, bunga = new_owner("ardian"), new_owner("bunga")
        ardians = [_create(harness, ardian, _BASE_TIME + timedelta(seconds=second)) for second in range(3)]
        cursor = harness.list_chronica(ardian, limit=1).next_cursor
        assert cursor is not None
        outcome = harness.concurrently([rules_call("list_chronica", bunga, limit=10, cursor=cursor)])[0]
        if isinstance(outcome, InvalidQuery):
            assert outcome.field == "cursor"
        else:
            assert isinstance(outcome, ChronicaPage), f"another owner's cursor gave {outcome!r}"
            assert not set(_ids(outcome.chronica)) & set(_ids(ardians)), "another owner's cursor listed them"

    @pytest.mark.parametrize("limit", [0, -1, 1001, "5", True, 2.0, None])
    def test_listing_refuses_a_bad_limit(self, listing_harness: Harness, limit: object) -> None:
        """A limit that is not an int from 1 to 1000: InvalidQuery naming ``limit``."""
        watched = listing_harness.with_chronicarius()
        with pytest.raises(InvalidQuery) as refused:
            watched.list_chronica(new_owner(), limit=limit)
        assert refused.value.field == "limit"
        assert watched.store_calls == []

    @pytest.mark.parametrize("case", list(_MALFORMED_CURSORS))
    def test_listing_refuses_a_malformed_cursor(self, listing_harness: Harness, case: str) -> None:
        """A cursor no page made: InvalidQuery naming ``cursor``, before any store call."""
        watched = listing_harness.with_chronicarius()
        with pytest.raises(InvalidQuery) as refused:
            watched.list_chronica(new_owner(), limit=5, cursor=_MALFORMED_CURSORS[case])
        assert refused.value.field == "cursor"
        assert watched.store_calls == []

    def test_listing_refuses_a_truncated_cursor(self, listing_harness: Harness) -> None:
        """A real cursor cut short: InvalidQuery naming ``cursor``."""
        harness = listing_harness
        owner = new_owner()
        for second in range(3):
            _create(harness, owner, _BASE_TIME + timedelta(seconds=second))
        cursor = harness.list_chronica(owner, limit=1).next_cursor
        assert cursor is not None
        with pytest.raises(InvalidQuery) as refused:
            harness.list_chronica(owner, limit=1, cursor=cursor[: len(cursor) // 2])
        assert refused.value.field == "cursor"

    def test_listing_on_the_store_keeps_limit_and_after(self, listing_harness: Harness) -> None:
        """``list_chronica(owner, limit, after)`` on the store: at most ``limit``, after ``after``."""
        harness = listing_harness
        owner = new_owner()
        expected = _ties(harness, owner)
        assert _ids(harness.perform(store_call("list_chronica", owner, 3, None))) == _ids(expected[:3])
        for index in (0, 2, 5):
            after = (expected[index].started_at, expected[index].id)
            listed = harness.perform(store_call("list_chronica", owner, 4, after))
            assert _ids(listed) == _ids(expected[index + 1 : index + 5]), f"after position {index}"
        last = expected[-1]
        assert harness.perform(store_call("list_chronica", owner, 4, (last.started_at, last.id))) == []
        assert harness.perform(store_call("list_chronica", new_owner(), 4, None)) == []

    def test_listing_leaves_erased_chronica_out(self, listing_harness: Harness) -> None:
        """An erased chronicum is not listed; the owner's others are."""
        harness = require_capability(listing_harness, ERASURE, "listing erased chronica")
        owner = new_owner()
        chronica = [_create(harness, owner, _BASE_TIME + timedelta(seconds=second)) for second in range(3)]
        assert harness.erase_chronicum(owner, chronica[1].id) == 0
        assert _ids(harness.list_chronica(owner, limit=10).chronica) == [chronica[2].id, chronica[0].id]
        assert _ids(walk(harness, owner, 1, 2)) == [chronica[2].id, chronica[0].id]
        harness.erase_owner(owner)
        assert harness.list_chronica(owner, limit=10) == ChronicaPage([], None)
