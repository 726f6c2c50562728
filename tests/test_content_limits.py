"""Content size: the shared check, the memory store's ``max_content_bytes``, and Chronicarius."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from chronica_conformance import SizeContract
from chronica_conformance.size_contract import content_of_size

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    AsyncChronicarius,
    AsyncMemoryStore,
    Chronicarius,
    ChronicumNotFound,
    InvalidActum,
    InvalidOption,
    MemoryStore,
    open_async_store,
    open_store,
)
from chronica_core.limits import check_content_size, content_limit_option, content_size

LIMIT = 1000


class TestLimitedMemoryStore(SizeContract):
    """The size contract on memory:// opened with a limit (without one it has none)."""

    @pytest.fixture
    def store(self) -> Iterator[MemoryStore]:
        with open_store("memory://", max_content_bytes=LIMIT) as store:
            assert isinstance(store, MemoryStore)
            yield store

    @pytest.fixture
    def async_store(self) -> AsyncMemoryStore:
        store = open_async_store("memory://", max_content_bytes=str(LIMIT))
        assert isinstance(store, AsyncMemoryStore)
        return store


def test_size_is_utf8_bytes() -> None:
    assert content_size("") == 0
    assert content_size("hello") == 5
    assert content_size("é") == 2
    assert content_size("\U0001f37d") == 4
    assert content_size("\x00") == 1
    for size in (0, 1, 3, 4, 5, 1000, 1001):
        assert content_size(content_of_size(size)) == size


def test_the_check_counts_bytes_not_characters() -> None:
    check_content_size("x" * 8, 8)
    check_content_size("\U0001f37d" * 2, 8)
    check_content_size("anything", None)
    for content in ("x" * 9, "x" * 5 + "\U0001f37d", "é" * 5):
        with pytest.raises(ActumTooLarge) as raised:
            check_content_size(content, 8)
        assert (raised.value.size, raised.value.limit) == (content_size(content), 8)
        assert isinstance(raised.value, InvalidActum)
        assert raised.value.field == "content"
        assert f"{content_size(content)} bytes" in str(raised.value)
    with pytest.raises(ActumTooLarge):
        check_content_size("x", 0)
    check_content_size("", 0)


@pytest.mark.parametrize("value", [-1, "-1", 1.5, "1e3", "lots", True, None, [], 2**63])
def test_the_option_is_a_whole_number_within_bounds(value: object) -> None:
    with pytest.raises(InvalidOption) as raised:
        content_limit_option("memory", value, 2**62)
    assert raised.value.option == "max_content_bytes"
    assert "from 0 to 4611686018427387904" in raised.value.reason


@pytest.mark.parametrize(("value", "expected"), [(0, 0), ("0", 0), (" 12 ", 12), (2**62, 2**62)])
def test_the_option_accepts(value: object, expected: int) -> None:
    assert content_limit_option("memory", value, 2**62) == expected


def test_memory_has_no_limit_unless_given() -> None:
    assert MemoryStore().max_content_bytes() is None
    assert MemoryStore(max_content_bytes=5).max_content_bytes() == 5
    with pytest.raises(InvalidOption) as raised:
        open_store("memory://", max_content_bytes="-5")
    assert raised.value.option == "max_content_bytes"
    with pytest.raises(InvalidOption) as unknown:
        open_store("memory://", colour="blue")
    assert unknown.value.option == "colour"
    with pytest.raises(InvalidOption):
        AsyncMemoryStore(store=MemoryStore(), max_content_bytes=5)


def _big(chronicum_id: str, size: int) -> Actum:
    return Actum(chronicum_id, ActumKind.TOOL_RESPONSE, ActorKind.AGENT, "search", content_of_size(size))


def test_a_first_write_too_large_creates_no_chronicum() -> None:
    store = MemoryStore(max_content_bytes=LIMIT)
    keeper = Chronicarius(store)
    with pytest.raises(ActumTooLarge) as raised:
        keeper.record_actum("ardian", _big("dinner-friday", LIMIT + 1))
    assert (raised.value.size, raised.value.limit) == (LIMIT + 1, LIMIT)
    with pytest.raises(ActumTooLarge):
        keeper.record_actum("ardian", _big("dinner-friday", LIMIT + 1), idempotency_key="k")
    with pytest.raises(ChronicumNotFound):
        store.get("dinner-friday")
    stored = keeper.record_actum("ardian", _big("dinner-friday", LIMIT))
    assert keeper.get_acta("ardian", "dinner-friday") == [stored]


def test_a_first_async_write_too_large_creates_no_chronicum() -> None:
    async def scenario() -> None:
        store = AsyncMemoryStore(max_content_bytes=LIMIT)
        keeper = AsyncChronicarius(store)
        with pytest.raises(ActumTooLarge):
            await keeper.record_actum("ardian", _big("dinner-friday", LIMIT + 1), idempotency_key="k")
        with pytest.raises(ChronicumNotFound):
            await store.get("dinner-friday")
        stored = await keeper.record_actum("ardian", _big("dinner-friday", LIMIT))
        assert await store.acta("dinner-friday", ActaQuery()) == [stored]

    asyncio.run(scenario())


def test_a_store_that_tells_no_limit_still_works() -> None:
    """A third-party store without max_content_bytes: Chronicarius asks nothing more of it."""

    class Plain(MemoryStore):
        max_content_bytes = None  # type: ignore[assignment]

    keeper = Chronicarius(Plain())
    stored = keeper.record_actum("ardian", _big("dinner-friday", LIMIT * 10))
    assert keeper.get_acta("ardian", "dinner-friday") == [stored]
