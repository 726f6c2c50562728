"""The rules of the capabilities (batch, listing, erasure), on the memory store.

The conformance suite checks every store's side of the capabilities; these cases check what only
``Chronicarius`` decides: validation before any write, the capability checks, the cursor and the
erasure marker's digest. The JSON form is in test_json_form.py.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from test_rules import PlainStore, message

from chronica_core import (
    ActorKind,
    Actum,
    ActumKind,
    AsyncChronicarius,
    AsyncMemoryStore,
    CapabilityUnsupported,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    IdempotencyUnsupported,
    InvalidActum,
    InvalidQuery,
    MemoryStore,
    StoreError,
)
from chronica_core.capabilities import store_capabilities
from chronica_core.erasure import owner_digest
from chronica_core.listing import decode_cursor, encode_cursor
from chronica_core.rules import MAX_BATCH_SIZE


def tool_request(chronicum_id: str) -> Actum:
    return Actum(chronicum_id, ActumKind.TOOL_REQUEST, ActorKind.AGENT, "booking", "")


# --- capabilities -------------------------------------------------------------------------------


def test_memory_stores_have_every_capability_and_a_base_store_none() -> None:
    everything = {"idempotency", "batch", "listing", "erasure", "follow", "native", "history", "retention"}
    assert store_capabilities(MemoryStore()) == everything
    assert store_capabilities(AsyncMemoryStore()) == everything
    assert store_capabilities(PlainStore()) == frozenset()


def test_a_method_that_only_shares_a_capabilitys_name_is_not_the_capability() -> None:
    class OlderStore(PlainStore):
        def record_many(self, acta: list[Actum]) -> None:  # its own helper, from before batches
            raise AssertionError("never called by Chronicarius")

        def list_chronica(self, owner_id: str) -> list[Chronicum]:
            raise AssertionError("never called by Chronicarius")

    store = OlderStore()
    assert store_capabilities(store) == frozenset()
    with pytest.raises(CapabilityUnsupported) as raised:
        Chronicarius(store).record_acta("ardian", [message("c", "hi")])
    assert raised.value.capability == "batch"
    assert store.calls == []


def test_a_base_store_is_refused_each_capability_before_it_is_touched() -> None:
    store = PlainStore()
    keeper = Chronicarius(store)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("batch", lambda: keeper.record_acta("ardian", [message("c", "hi")])),
        ("listing", lambda: keeper.list_chronica("ardian")),
        ("erasure", lambda: keeper.erase_chronicum("ardian", "c")),
        ("erasure", lambda: keeper.erase_owner("ardian")),
    ]
    for capability, call in calls:
        with pytest.raises(CapabilityUnsupported) as raised:
            call()
        assert raised.value.capability == capability
        assert raised.value.store_name == "PlainStore"
        assert f"does not offer the {capability} capability" in str(raised.value)
    assert store.calls == []


def test_idempotency_unsupported_is_a_capability_error() -> None:
    with pytest.raises(CapabilityUnsupported) as raised:
        Chronicarius(PlainStore()).record_actum("ardian", message("c", "hi"), idempotency_key="k")
    assert isinstance(raised.value, IdempotencyUnsupported)
    assert raised.value.capability == "idempotency"


# --- batch --------------------------------------------------------------------------------------


def test_an_empty_batch_returns_nothing_and_creates_nothing(
    store: MemoryStore, chronicarius: Chronicarius
) -> None:
    assert chronicarius.record_acta("ardian", []) == []
    assert chronicarius.record_acta("ardian", (), idempotency_key="k") == []
    assert chronicarius.list_chronica("ardian").chronica == []


def test_a_base_store_may_take_an_empty_batch() -> None:
    assert Chronicarius(PlainStore()).record_acta("ardian", []) == []


def test_a_batch_gets_fresh_ids_in_order(chronicarius: Chronicarius) -> None:
    given = [
        Actum("c", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "one", id="mine", at=datetime.now(UTC)),
        tool_request("c"),
        message("c", "two"),
    ]
    stored = chronicarius.record_acta("ardian", given)
    assert [actum.id for actum in stored] == [f"{n:032x}" for n in (1, 2, 3)]
    assert [actum.content for actum in stored] == ["one", "", "two"]
    assert chronicarius.get_acta("ardian", "c") == stored


@pytest.mark.parametrize(
    ("acta", "field"),
    [
        ("not a list", "acta"),
        (message("c", "one actum, not a list"), "acta"),
        (b"bytes", "acta"),
        ({"a": 1}, "acta"),
        (7, "acta"),
    ],
)
def test_a_batch_that_is_not_a_list_of_acta_is_refused(
    chronicarius: Chronicarius, acta: Any, field: str
) -> None:
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_acta("ardian", acta)
    assert raised.value.field == field
    assert raised.value.index is None


def test_a_batch_over_the_limit_is_refused(chronicarius: Chronicarius) -> None:
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_acta("ardian", [message("c", "x")] * (MAX_BATCH_SIZE + 1))
    assert raised.value.field == "acta"
    assert str(MAX_BATCH_SIZE) in raised.value.reason
    assert chronicarius.list_chronica("ardian").chronica == []
    assert len(chronicarius.record_acta("ardian", [message("c", "x")] * MAX_BATCH_SIZE)) == MAX_BATCH_SIZE


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (message("c", ""), "content"),
        (Actum("c", "shout", ActorKind.HUMAN, "ardian", "hi"), "kind"),  # type: ignore[arg-type]
        (message("other", "hi"), "chronicum_id"),
        ("not an actum", "actum"),
    ],
)
def test_one_bad_actum_names_its_index_and_field_and_nothing_is_written(
    chronicarius: Chronicarius, bad: Any, field: str
) -> None:
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_acta(
            "ardian", [message("c", "one"), message("c", "two"), bad, message("c", "four")]
        )
    assert (raised.value.index, raised.value.field) == (2, field)
    assert str(raised.value).startswith(f"invalid actum at index 2: {field}: ")
    with pytest.raises(ChronicumNotFound):
        chronicarius.get_chronicum("ardian", "c")


def test_a_batch_with_a_bad_key_writes_nothing(chronicarius: Chronicarius) -> None:
    with pytest.raises(InvalidActum) as raised:
        chronicarius.record_acta("ardian", [message("c", "hi")], idempotency_key="")
    assert raised.value.field == "idempotency_key"
    assert chronicarius.list_chronica("ardian").chronica == []


def test_a_batch_over_the_content_limit_creates_nothing() -> None:
    keeper = Chronicarius(MemoryStore(max_content_bytes=4))
    with pytest.raises(InvalidActum) as raised:
        keeper.record_acta("ardian", [message("c", "ok"), message("c", "too long")])
    assert raised.value.field == "content"
    assert keeper.list_chronica("ardian").chronica == []


def test_keys_are_shared_by_single_and_batch_writes(chronicarius: Chronicarius) -> None:
    single = chronicarius.record_actum("ardian", message("c", "single"), idempotency_key="one")
    assert chronicarius.record_acta(
        "ardian", [message("c", "x"), message("c", "y")], idempotency_key="one"
    ) == [single]
    batch = chronicarius.record_acta("ardian", [message("c", "a"), message("c", "b")], idempotency_key="two")
    assert chronicarius.record_actum("ardian", message("c", "z"), idempotency_key="two") == batch[0]
    assert chronicarius.record_acta("ardian", [message("c", "again")], idempotency_key="two") == batch
    assert [actum.content for actum in chronicarius.get_acta("ardian", "c")] == ["single", "a", "b"]


def test_a_batch_into_another_owners_chronicum_is_not_found(chronicarius: Chronicarius) -> None:
    chronicarius.record_actum("ardian", message("c", "mine"))
    with pytest.raises(ChronicumNotFound):
        chronicarius.record_acta("bob", [message("c", "theirs")])
    assert len(chronicarius.get_acta("ardian", "c")) == 1


# --- listing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 1001, "5", True, 2.0, None])
def test_a_listing_limit_outside_1_to_1000_is_refused(chronicarius: Chronicarius, limit: Any) -> None:
    with pytest.raises(InvalidQuery) as raised:
        chronicarius.list_chronica("ardian", limit=limit)
    assert raised.value.field == "limit"


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not base64 !",
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(b'["x", "yesterday", "c"]').decode(),
        base64.urlsafe_b64encode(b'["x", "2026-11-30T20:00:00", "c"]').decode(),  # no offset
        base64.urlsafe_b64encode(b'["x", "2026-11-30T20:00:00Z", ""]').decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        7,
    ],
)
def test_a_malformed_cursor_is_refused(chronicarius: Chronicarius, cursor: Any) -> None:
    with pytest.raises(InvalidQuery) as raised:
        chronicarius.list_chronica("ardian", cursor=cursor)
    assert raised.value.field == "cursor"


def own_cursor(owner_id: str, started: str, chronicum_id: str) -> str:
    """A cursor as the module makes them, with any position, for ``owner_id``."""
    mark = owner_digest(owner_id).removeprefix("sha256:")[:16]
    return base64.urlsafe_b64encode(json.dumps([mark, started, chronicum_id]).encode()).decode()


@pytest.mark.parametrize(
    ("started", "chronicum_id"),
    [
        ("9999-12-31T23:59:59-05:00", "c"),  # past the last datetime once in UTC
        ("0001-01-01T00:00:00+05:00", "c"),  # before the first
        ("2026-11-30T20:00:00Z", "c\x00d"),
        ("2026-11-30T20:00:00Z", "c" * 256),
        ("2026-11-30T20:00:00Z", "a\ud800b"),
        ("2026-11-30T20:00:00Z", 7),
    ],
)
def test_a_forged_cursor_of_the_owners_own_is_refused_naming_the_cursor(
    chronicarius: Chronicarius, started: str, chronicum_id: Any
) -> None:
    assert decode_cursor("ardian", own_cursor("ardian", "2026-11-30T20:00:00Z", "c"))[1] == "c"
    with pytest.raises(InvalidQuery) as raised:
        chronicarius.list_chronica("ardian", cursor=own_cursor("ardian", started, chronicum_id))
    assert raised.value.field == "cursor"


def test_pages_walk_every_chronicum_once_and_a_cursor_serves_its_owner_only(
    store: MemoryStore, chronicarius: Chronicarius
) -> None:
    start = datetime(2026, 11, 30, 20, tzinfo=UTC)
    for index in range(7):  # two share a started_at: ties go by id, descending
        store.create(Chronicum(f"c{index}", "ardian", start + timedelta(seconds=min(index, 5))))
    store.create(Chronicum("theirs", "bob", start))
    page = chronicarius.list_chronica("ardian", limit=3)
    seen = [chronicum.id for chronicum in page.chronica]
    while page.next_cursor is not None:
        cursor = page.next_cursor
        with pytest.raises(InvalidQuery) as raised:
            chronicarius.list_chronica("bob", cursor=cursor)
        assert raised.value.field == "cursor"
        page = chronicarius.list_chronica("ardian", limit=3, cursor=cursor)
        seen += [chronicum.id for chronicum in page.chronica]
    assert seen == ["c6", "c5", "c4", "c3", "c2", "c1", "c0"]
    assert chronicarius.list_chronica("ardian", limit=7).next_cursor is None


def test_a_cursor_holds_the_position_exactly() -> None:
    last = Chronicum(
        "c/ü", "ardian", datetime(2026, 11, 30, 21, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    )
    cursor = encode_cursor("ardian", last)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_cursor("ardian", cursor) == (datetime(2026, 11, 30, 19, 0, 0, 123456, tzinfo=UTC), "c/ü")


def test_a_store_listing_another_owners_chronicum_is_a_store_error() -> None:
    class LeakyStore(MemoryStore):
        def list_chronica(self, owner_id: str, limit: int, after: Any) -> list[Chronicum]:
            return super().list_chronica("bob", limit, after)

    store = LeakyStore()
    store.create(Chronicum("theirs", "bob", datetime.now(UTC)))
    with pytest.raises(StoreError, match="another owner's chronicum"):
        Chronicarius(store).list_chronica("ardian")


# --- erasure ------------------------------------------------------------------------------------


def test_the_owner_digest_is_sha256_of_the_owner_id() -> None:
    assert owner_digest("ardian") == "sha256:" + hashlib.sha256(b"ardian").hexdigest()
    assert owner_digest("ü") == "sha256:" + hashlib.sha256("ü".encode()).hexdigest()


def test_an_erased_chronicum_reopens_for_its_owner_only_even_through_a_stale_owner_cache(
    store: MemoryStore,
) -> None:
    first, second = Chronicarius(store), Chronicarius(store)
    first.record_acta("ardian", [message("c", "one"), message("c", "two")], idempotency_key="k")
    assert second.get_acta("ardian", "c") != []  # the second now remembers the owner
    assert first.erase_chronicum("ardian", "c") == 2
    with pytest.raises(ChronicumNotFound):
        second.get_acta("ardian", "c")
    with pytest.raises(ChronicumNotFound):
        Chronicarius(store).record_actum("bob", message("c", "claim"))
    fresh = second.record_acta("ardian", [message("c", "again")], idempotency_key="k")
    assert [actum.content for actum in fresh] == ["again"]
    assert first.get_acta("ardian", "c") == fresh
    with pytest.raises(ChronicumNotFound):
        first.erase_chronicum("bob", "c")
    with pytest.raises(ChronicumNotFound):
        first.erase_chronicum("ardian", "missing")


def test_a_write_with_create_false_never_creates_a_chronicum(store: MemoryStore) -> None:
    keeper = Chronicarius(store)
    with pytest.raises(ChronicumNotFound):
        keeper.record_actum("ardian", message("c", "hi"), create=False)
    with pytest.raises(ChronicumNotFound):
        keeper.record_acta("ardian", [message("c", "hi")], idempotency_key="k", create=False)
    with pytest.raises(ChronicumNotFound):
        store.get("c")
    assert keeper.list_chronica("ardian").chronica == []


def test_a_write_with_create_false_lands_in_the_owners_existing_chronicum_only(store: MemoryStore) -> None:
    keeper = Chronicarius(store)
    first = keeper.record_actum("ardian", message("c", "one"))
    second = Chronicarius(store).record_actum("ardian", message("c", "two"), create=False)
    batch = Chronicarius(store).record_acta("ardian", [message("c", "three")], create=False)
    assert keeper.get_acta("ardian", "c") == [first, second, *batch]
    with pytest.raises(ChronicumNotFound):
        Chronicarius(store).record_actum("bob", message("c", "claim"), create=False)
    assert len(keeper.get_acta("ardian", "c")) == 3


def write_late(keeper: Chronicarius, *, batch: bool) -> None:
    """A keyed write into ``c`` with ``create=False``, as one actum or as a batch."""
    if batch:
        keeper.record_acta("ardian", [message("c", "late")], idempotency_key="k", create=False)
    else:
        keeper.record_actum("ardian", message("c", "late"), idempotency_key="k", create=False)


@pytest.mark.parametrize("batch", [False, True])
def test_a_write_with_create_false_never_reopens_an_erased_chronicum_even_through_the_owner_cache(
    store: MemoryStore, batch: bool
) -> None:
    remembering, fresh = Chronicarius(store), Chronicarius(store)
    remembering.record_actum("ardian", message("c", "one"))  # it now remembers the owner
    assert fresh.erase_chronicum("ardian", "c") == 1
    for keeper in (remembering, Chronicarius(store)):
        with pytest.raises(ChronicumNotFound):
            write_late(keeper, batch=batch)
    with pytest.raises(ChronicumNotFound):
        fresh.get_acta("ardian", "c")
    assert fresh.list_chronica("ardian").chronica == []
    # without create=False, the owner's write reopens it, fresh
    reopened = remembering.record_actum("ardian", message("c", "again"))
    assert fresh.get_acta("ardian", "c") == [reopened]


def test_a_write_with_create_false_racing_an_erasure_is_not_found_and_reopens_nothing() -> None:
    class ErasedJustBeforeTheWrite(MemoryStore):
        """Erases the chronicum right after the owner check, before the write reaches the store."""

        def record_idempotent(self, actum: Actum, key: str) -> Actum:
            self.erase(actum.chronicum_id, owner_digest("ardian"))
            return super().record_idempotent(actum, key)

    store = ErasedJustBeforeTheWrite()
    Chronicarius(store).record_actum("ardian", message("c", "one"))
    with pytest.raises(ChronicumNotFound):
        Chronicarius(store).record_actum("ardian", message("c", "late"), idempotency_key="k", create=False)
    with pytest.raises(ChronicumNotFound):
        store.get("c")


def test_the_async_twin_writes_with_create_false_like_the_blocking_one() -> None:
    async def scenario() -> None:
        store = AsyncMemoryStore()
        keeper = AsyncChronicarius(store)
        with pytest.raises(ChronicumNotFound):
            await keeper.record_actum("ardian", message("c", "hi"), create=False)
        with pytest.raises(ChronicumNotFound):
            await keeper.record_acta("ardian", [message("c", "hi")], create=False)
        first = await keeper.record_actum("ardian", message("c", "one"))
        batch = await keeper.record_acta("ardian", [message("c", "two")], create=False)
        assert await keeper.get_acta("ardian", "c") == [first, *batch]
        await keeper.erase_chronicum("ardian", "c")
        with pytest.raises(ChronicumNotFound):
            await keeper.record_actum("ardian", message("c", "late"), create=False)
        with pytest.raises(ChronicumNotFound):
            await store.get("c")

    asyncio.run(scenario())


def test_erasing_an_owner_counts_chronica_and_spares_others(chronicarius: Chronicarius) -> None:
    for chronicum_id in ("a", "b", "c"):
        chronicarius.record_actum("ardian", message(chronicum_id, "hi"))
    chronicarius.record_actum("bob", message("d", "hi"))
    assert chronicarius.erase_owner("ardian") == 3
    assert chronicarius.erase_owner("ardian") == 0
    assert chronicarius.list_chronica("ardian").chronica == []
    assert [chronicum.id for chronicum in chronicarius.list_chronica("bob").chronica] == ["d"]


def test_the_async_twin_offers_the_same_capabilities() -> None:
    async def scenario() -> None:
        keeper = AsyncChronicarius(AsyncMemoryStore())
        stored = await keeper.record_acta("ardian", [message("c", "one"), message("c", "two")])
        page = await keeper.list_chronica("ardian", limit=1)
        assert [chronicum.id for chronicum in page.chronica] == ["c"]
        assert page.next_cursor is None
        assert await keeper.erase_chronicum("ardian", "c") == len(stored) == 2
        assert await keeper.erase_owner("ardian") == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("create", ["false", "no", 0, None])
def test_a_create_that_is_not_a_bool_is_refused_and_creates_nothing(store: MemoryStore, create: Any) -> None:
    # a configuration's "false" is a true value: it would have created the chronicum
    keeper = Chronicarius(store)
    with pytest.raises(InvalidActum) as one:
        keeper.record_actum("ardian", message("c", "hi"), create=create)
    with pytest.raises(InvalidActum) as batch:
        keeper.record_acta("ardian", [message("c", "hi")], create=create)
    assert (one.value.field, batch.value.field) == ("create", "create")
    assert str(one.value) == f"invalid actum: create: must be a bool, not {type(create).__name__}"
    with pytest.raises(ChronicumNotFound):
        store.get("c")
