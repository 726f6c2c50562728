"""The size contract: content up to the store's limit is kept, one byte more is refused whole."""

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
from chronica_conformance.harness import Harness, store_call
from chronica_core import ActorKind, ActumKind, ActumTooLarge, ChronicumNotFound

__all__ = ["LARGEST_TESTED_LIMIT", "UNLIMITED_TEST_BYTES", "SizeContract", "content_of_size"]

LARGEST_TESTED_LIMIT = 32 * 1024 * 1024
"""The largest limit the suite writes content at (32 MiB); above it a case would need gigabytes.

A store with a larger limit (PostgreSQL's is about 512 MiB, SQLite's about 1 GB) is held to this
contract by opening it with a lower ``max_content_bytes``, as the backends' own tests do."""

UNLIMITED_TEST_BYTES = 4 * 1024 * 1024
"""What a store without a limit is shown to keep (4 MiB)."""

_HARD_TO_SEND = "'\\\x00\""  # quote, backslash, NUL, double quote: what SQL drivers escape to two bytes
_FOUR_BYTES = "\U0001f37d"  # one character, four bytes of UTF-8


def content_of_size(size: int) -> str:
    """Content of exactly ``size`` bytes of UTF-8, as hard to send as content gets.

    Characters a driver escapes (quotes, backslash, NUL), ended by a four-byte character when
    ``size`` allows, so that a limit counted in characters instead of bytes shows.
    """
    tail = _FOUR_BYTES if size >= len(_FOUR_BYTES.encode()) else ""
    body = size - len(tail.encode())
    return (_HARD_TO_SEND * (body // len(_HARD_TO_SEND) + 1))[:body] + tail


def _one_byte_over(limit: int) -> str:
    """``limit + 1`` bytes in fewer than ``limit`` characters: its last character crosses the limit."""
    return content_of_size(limit + 1)


class SizeContract(SuiteBase):
    """A store that tells its limit (``max_content_bytes()``) keeps it exactly.

    Content of exactly the limit, in bytes of UTF-8, is stored and read back whole; one byte more
    raises ``ActumTooLarge`` (``.size``, ``.limit``) from ``record`` and ``record_idempotent``,
    with nothing written and the store working on; through Chronicarius, a first write that is
    too large creates no chronicum. A store whose limit is ``None`` (it has none) must keep
    :data:`UNLIMITED_TEST_BYTES`; one without ``max_content_bytes``, or with a limit above
    :data:`LARGEST_TESTED_LIMIT`, skips the group and says so.
    """

    @pytest.fixture
    def content_limit(self, chronica_harness: Harness) -> int | None:
        """The store's limit (``None``: it has none); skips when it is too large to write at."""
        name = chronica_harness.store_name
        if not hasattr(chronica_harness.store, "max_content_bytes"):
            pytest.skip(f"{name} does not tell its content limit (it has no max_content_bytes)")
        limit = chronica_harness.perform(store_call("max_content_bytes"))
        if limit is None:
            return None
        assert isinstance(limit, int) and limit >= 0, f"max_content_bytes() returned {limit!r}"
        if limit > LARGEST_TESTED_LIMIT:
            pytest.skip(
                f"{name}'s content limit is {limit} bytes, above the {LARGEST_TESTED_LIMIT} this suite "
                "writes at: open it with a lower max_content_bytes to test it"
            )
        return limit

    def test_content_of_the_limit_is_kept_and_one_byte_more_refused(
        self, chronica_harness: Harness, content_limit: int | None
    ) -> None:
        """Exactly the limit round-trips; limit + 1 is ActumTooLarge, nothing written, store fine.

        A store without a limit keeps :data:`UNLIMITED_TEST_BYTES` instead.
        """
        harness = chronica_harness
        created = new_chronicum()
        harness.create(created)
        size = UNLIMITED_TEST_BYTES if content_limit is None else content_limit
        largest = make_actum(created.id, content_of_size(size), kind=ActumKind.TOOL_RESPONSE)
        stored = harness.record(largest)
        (read,) = harness.acta(created.id)
        assert read.content == largest.content, f"content of {size} bytes did not round-trip"
        assert_same_actum(read, largest, at=stored.at)
        if content_limit is None:
            return
        too_large = make_actum(created.id, _one_byte_over(content_limit), kind=ActumKind.TOOL_RESPONSE)
        with pytest.raises(ActumTooLarge) as raised:
            harness.record(too_large)
        assert (raised.value.size, raised.value.limit) == (content_limit + 1, content_limit)
        if harness.idempotent:
            with pytest.raises(ActumTooLarge) as keyed:
                harness.record_idempotent(too_large, "too-large")
            assert (keyed.value.size, keyed.value.limit) == (content_limit + 1, content_limit)
        assert ids(harness.acta(created.id)) == [largest.id]
        assert harness.get(created.id).last_actum_at == stored.at
        after = harness.record(make_actum(created.id, "after"))
        assert ids(harness.acta(created.id)) == [largest.id, after.id]
        if harness.idempotent:  # the refused key was never taken
            keyed_after = harness.record_idempotent(make_actum(created.id, "keyed"), "too-large")
            assert ids(harness.acta(created.id)) == [largest.id, after.id, keyed_after.id]

    def test_a_first_write_too_large_creates_no_chronicum(
        self, chronica_harness: Harness, content_limit: int | None
    ) -> None:
        """Through Chronicarius, a refused first write leaves no chronicum behind, keyed or not."""
        harness = chronica_harness.with_chronicarius()
        owner, chronicum_id = new_owner(), new_id()
        if content_limit is None:  # nothing is too large: a large first write creates the chronicum
            large = make_actum(chronicum_id, content_of_size(UNLIMITED_TEST_BYTES))
            stored = harness.record_actum(owner, large)
            assert ids(harness.get_acta(owner, chronicum_id)) == [stored.id]
            return
        too_large = make_actum(chronicum_id, _one_byte_over(content_limit), actor_kind=ActorKind.AGENT)
        with pytest.raises(ActumTooLarge):
            harness.record_actum(owner, too_large)
        if harness.idempotent:
            with pytest.raises(ActumTooLarge):
                harness.record_actum(owner, too_large, idempotency_key="first")
        with pytest.raises(ChronicumNotFound):
            harness.get_chronicum(owner, chronicum_id)
        with pytest.raises(ChronicumNotFound):
            harness.get(chronicum_id)
        stored = harness.record_actum(owner, make_actum(chronicum_id, "small enough"))
        assert ids(harness.get_acta(owner, chronicum_id)) == [stored.id]
