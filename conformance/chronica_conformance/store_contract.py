"""The store contract S1–S9, checked directly on the store under test.

Also: ``at`` and the order agree under concurrent writers, and a closed store refuses every
operation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from chronica_conformance.base import (
    TIME_TOLERANCE,
    SuiteBase,
    Target,
    assert_aware_utc,
    assert_same_actum,
    ids,
    make_actum,
    new_chronicum,
    new_id,
)
from chronica_conformance.harness import AsyncHarness, Harness, SyncHarness, store_call
from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    AsyncStore,
    ChronicumExists,
    ChronicumNotFound,
    Store,
    StoreError,
)

__all__ = ["StoreContract"]

CONCURRENT_WRITERS = 40
"""How many calls the concurrency cases start at once."""

ORDER_WRITERS = 8
"""How many writers the order-and-time case runs at once, each recording :data:`ACTA_PER_WRITER`."""

ACTA_PER_WRITER = 50
"""How many acta each writer of the order-and-time case records, one after the other."""

MIB = 1024 * 1024

CLOCK_SKEW = timedelta(minutes=5)
"""How far a store's clock (a database server's) may be from the test's when it sets ``at``."""

_EVERY_PLANE = "中" + "".join(chr(plane * 0x10000 + 0x101) for plane in range(1, 17))
"""One character from each of the 17 Unicode planes (assigned, unassigned and private use)."""


def _one_mebibyte() -> str:
    """Return text of exactly 1 MiB in UTF-8, mixing one-, two-, three- and four-byte characters."""
    unit = "Chronica \u00e9 \u4e2d \U0001f37d\n"  # 21 bytes in UTF-8
    encoded_unit = len(unit.encode("utf-8"))
    text = unit * (MIB // encoded_unit)
    return text + "x" * (MIB - len(text.encode("utf-8")))


CONTENTS: dict[str, str] = {
    "empty": "",
    "multi_line": "first line\nsecond line\r\nthird\ttabbed\n\n  indented\n",
    "every_plane": _EVERY_PLANE,
    "emoji": "🍽️👨‍👩‍👧‍👦🇮🇩 table for four 🙂",
    "nul": "before\x00after\x00",
    "combining_and_rtl": "e\u0301 (e + U+0301), \ufdfd, \u05e9\u05dc\u05d5\u05dd \u202eRTL override",
    "one_mebibyte": _one_mebibyte(),
}
"""Contents that must round-trip exactly (S7); the key names the case."""

KINDS = tuple(ActumKind)
ACTOR_KINDS = tuple(ActorKind)


def _subsets(values: Sequence[ActumKind] | Sequence[ActorKind]) -> list[tuple[object, ...] | None]:
    """``None`` and every non-empty subset of ``values`` (as stores receive them: sorted tuples)."""
    found: list[tuple[object, ...] | None] = [None]
    for size in range(1, len(values) + 1):
        found.extend(itertools.combinations(sorted(values), size))
    return found


def _reference_window(acta: Sequence[Actum], query: ActaQuery) -> list[Actum]:
    """What ``acta(query)`` must return: filter by kinds and actor kinds, then keep the newest ``last_n``."""
    kept = [
        actum
        for actum in acta
        if (query.actum_kinds is None or actum.kind in query.actum_kinds)
        and (query.actor_kinds is None or actum.actor_kind in query.actor_kinds)
    ]
    return kept[-query.last_n :] if query.last_n > 0 else kept


def _mixed_history(chronicum_id: str) -> list[Actum]:
    """Twelve acta of every kind and actor kind, in an irregular pattern."""
    pattern = [
        (ActumKind.MESSAGE, ActorKind.HUMAN),
        (ActumKind.THOUGHT, ActorKind.AGENT),
        (ActumKind.TOOL_REQUEST, ActorKind.AGENT),
        (ActumKind.TOOL_RESPONSE, ActorKind.SYSTEM),
        (ActumKind.MESSAGE, ActorKind.AGENT),
        (ActumKind.MESSAGE, ActorKind.HUMAN),
        (ActumKind.THOUGHT, ActorKind.AGENT),
        (ActumKind.MESSAGE, ActorKind.SYSTEM),
        (ActumKind.TOOL_REQUEST, ActorKind.AGENT),
        (ActumKind.TOOL_RESPONSE, ActorKind.AGENT),
        (ActumKind.MESSAGE, ActorKind.AGENT),
        (ActumKind.THOUGHT, ActorKind.HUMAN),
    ]
    return [
        make_actum(
            chronicum_id, f"actum {index}", kind=kind, actor_kind=actor_kind, actor=f"actor-{index % 3}"
        )
        for index, (kind, actor_kind) in enumerate(pattern)
    ]


class StoreContract(SuiteBase):
    """S1–S9: what every store promises, checked on the store itself (no Chronicarius).

    Subclass it (or :class:`~chronica_conformance.ConformanceSuite`) and supply a ``store``
    and/or an ``async_store`` fixture; see :class:`~chronica_conformance.base.SuiteBase`.
    """

    # -- S1 ----------------------------------------------------------------------------------

    def test_s1_get_returns_the_stored_owner(self, chronica_harness: Harness) -> None:
        """Get returns the stored owner (and the rest of the chronicum as created)."""
        created = new_chronicum()
        chronica_harness.create(created)
        got = chronica_harness.get(created.id)
        assert got.id == created.id
        assert got.owner_id == created.owner_id
        started = assert_aware_utc(got.started_at, "started_at")
        assert abs(started - created.started_at) <= TIME_TOLERANCE
        assert got.last_actum_at is None

    def test_s1_create_of_a_taken_id_raises_chronicum_exists(self, chronica_harness: Harness) -> None:
        """Create of a taken id; the first owner stays."""
        first = new_chronicum()
        chronica_harness.create(first)
        with pytest.raises(ChronicumExists):
            chronica_harness.create(new_chronicum(first.id, owner_id="someone-else"))
        assert chronica_harness.get(first.id).owner_id == first.owner_id

    # -- S2 ----------------------------------------------------------------------------------

    def test_s2_get_of_a_missing_id_raises_not_found(self, chronica_harness: Harness) -> None:
        """Get of a missing id."""
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(new_id("missing"))

    def test_s2_record_into_a_missing_chronicum_raises_not_found(self, chronica_harness: Harness) -> None:
        """Record into a missing chronicum; nothing is created by it."""
        missing = new_id("missing")
        with pytest.raises(ChronicumNotFound):
            chronica_harness.record(make_actum(missing))
        with pytest.raises(ChronicumNotFound):
            chronica_harness.get(missing)

    def test_s2_acta_of_a_missing_chronicum_raises_not_found(self, chronica_harness: Harness) -> None:
        """Acta of a missing chronicum is ChronicumNotFound for every query, never []."""
        missing = new_id("missing")
        queries = [
            ActaQuery(),
            ActaQuery(last_n=20),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3),
            ActaQuery(actor_kinds=(ActorKind.HUMAN,)),
        ]
        for query in queries:
            with pytest.raises(ChronicumNotFound):
                chronica_harness.acta(missing, query)

    def test_s2_acta_of_an_empty_chronicum_is_an_empty_list(self, chronica_harness: Harness) -> None:
        """An existing chronicum with no acta answers ``[]`` (not ChronicumNotFound)."""
        created = new_chronicum()
        chronica_harness.create(created)
        assert chronica_harness.acta(created.id) == []
        assert chronica_harness.acta(created.id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3)) == []

    # -- S3 ----------------------------------------------------------------------------------

    def test_s3_record_returns_the_full_actum(self, chronica_harness: Harness) -> None:
        """Record returns the full actum, its id kept as given and ``at`` set in UTC."""
        created = new_chronicum()
        chronica_harness.create(created)
        sent = make_actum(
            created.id, "Find us a quiet table", kind=ActumKind.THOUGHT, actor_kind=ActorKind.AGENT
        )
        before = datetime.now(UTC)
        stored = chronica_harness.record(sent)
        assert_same_actum(stored, sent)
        assert stored.at is not None
        assert_same_actum(chronica_harness.acta(created.id)[0], sent, at=stored.at)
        assert abs(stored.at - before) <= CLOCK_SKEW, (
            f"actum.at {stored.at} is not the moment of writing ({before})"
        )

    def test_s3_last_actum_time_moves(self, chronica_harness: Harness) -> None:
        """Last-actum time moves with every record."""
        created = new_chronicum()
        chronica_harness.create(created)
        previous: datetime | None = None
        for index in range(3):
            stored = chronica_harness.record(make_actum(created.id, f"message {index}"))
            assert stored.at is not None
            last = assert_aware_utc(chronica_harness.get(created.id).last_actum_at, "last_actum_at")
            assert abs(last - stored.at) <= TIME_TOLERANCE, (
                f"last_actum_at {last} is not the new at {stored.at}"
            )
            if previous is not None:
                assert last >= previous, "last_actum_at went backwards"
            previous = last
        assert chronica_harness.get(created.id).owner_id == created.owner_id

    # -- S4 ----------------------------------------------------------------------------------

    def test_s4_order_of_1000(self, chronica_harness: Harness) -> None:
        """1,000 acta in sequence come back in sequence."""
        created = new_chronicum()
        chronica_harness.create(created)
        sent = [make_actum(created.id, f"actum {index}") for index in range(1000)]
        for actum in sent:
            chronica_harness.record(actum)
        assert ids(chronica_harness.acta(created.id)) == ids(sent)
        assert ids(chronica_harness.acta(created.id, ActaQuery(last_n=20))) == ids(sent[-20:])

    def test_s4_write_order_not_id_or_time_order(self, chronica_harness: Harness) -> None:
        """Acta written in the same instant keep write order; neither ``at`` nor ``id`` decides it."""
        created = new_chronicum()
        chronica_harness.create(created)
        descending = [f"{value:032x}" for value in range(0xFFFF, 0xFFFF - 60, -1)]
        sent = [
            make_actum(created.id, f"actum {index}", actum_id=actum_id)
            for index, actum_id in enumerate(descending)
        ]
        for actum in sent:
            chronica_harness.record(actum)
        assert ids(chronica_harness.acta(created.id)) == descending
        assert ids(chronica_harness.acta(created.id, ActaQuery(last_n=5))) == descending[-5:]

    # -- S5 ----------------------------------------------------------------------------------

    def test_s5_forty_concurrent_appends_all_land_once(self, chronica_harness: Harness) -> None:
        """40 concurrent appends into one chronicum all land, each exactly once."""
        created = new_chronicum()
        chronica_harness.create(created)
        sent = [make_actum(created.id, f"writer {index}") for index in range(CONCURRENT_WRITERS)]
        outcomes = chronica_harness.concurrently([store_call("record", actum) for actum in sent])
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} concurrent records failed: {failures[:3]!r}"
        stored = chronica_harness.acta(created.id)
        assert sorted(ids(stored)) == sorted(ids(sent)), (
            f"{len(stored)} acta stored for {len(sent)} concurrent records"
        )
        assert ids(chronica_harness.acta(created.id)) == ids(stored), "two reads disagree on the order"

    # -- S6 ----------------------------------------------------------------------------------

    def test_s6_filter_then_limit(self, chronica_harness: Harness) -> None:
        """Filter then limit; the last three messages, with thoughts and tools between them."""
        created = new_chronicum()
        chronica_harness.create(created)
        history = _mixed_history(created.id)
        for actum in history:
            chronica_harness.record(actum)
        messages = [actum for actum in history if actum.kind == ActumKind.MESSAGE]
        window = chronica_harness.acta(created.id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=3))
        assert ids(window) == ids(messages[-3:])

    def test_s6_actor_kind_filter(self, chronica_harness: Harness) -> None:
        """Actor-kind filter (alone, with a limit, and with a kind filter)."""
        created = new_chronicum()
        chronica_harness.create(created)
        history = _mixed_history(created.id)
        for actum in history:
            chronica_harness.record(actum)
        humans = [actum for actum in history if actum.actor_kind == ActorKind.HUMAN]
        assert ids(chronica_harness.acta(created.id, ActaQuery(actor_kinds=(ActorKind.HUMAN,)))) == ids(
            humans
        )
        assert ids(
            chronica_harness.acta(created.id, ActaQuery(actor_kinds=(ActorKind.HUMAN,), last_n=1))
        ) == [humans[-1].id]
        agent_messages = [
            a for a in history if a.actor_kind == ActorKind.AGENT and a.kind == ActumKind.MESSAGE
        ]
        query = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), actor_kinds=(ActorKind.AGENT,))
        assert ids(chronica_harness.acta(created.id, query)) == ids(agent_messages)

    def test_s6_every_combination_of_filters_and_limits(self, chronica_harness: Harness) -> None:
        """Every kinds subset x actor-kinds subset x last_n (0, negative, 1, exact, larger)."""
        created = new_chronicum()
        chronica_harness.create(created)
        history = _mixed_history(created.id)
        for actum in history:
            chronica_harness.record(actum)
        for actum_kinds, actor_kinds in itertools.product(_subsets(KINDS), _subsets(ACTOR_KINDS)):
            unlimited = ActaQuery(actum_kinds=actum_kinds, actor_kinds=actor_kinds)  # type: ignore[arg-type]
            count = len(_reference_window(history, unlimited))
            for last_n in sorted({0, -1, 1, count, count + 5}):
                query = ActaQuery(actum_kinds=actum_kinds, actor_kinds=actor_kinds, last_n=last_n)  # type: ignore[arg-type]
                expected = ids(_reference_window(history, query))
                assert ids(chronica_harness.acta(created.id, query)) == expected, f"acta({query})"

    # -- S7 ----------------------------------------------------------------------------------

    @pytest.mark.parametrize("content_name", list(CONTENTS))
    def test_s7_content_round_trips(self, chronica_harness: Harness, content_name: str) -> None:
        """Content comes back exactly: empty, multi-line, every Unicode plane, emoji, NUL, 1 MiB."""
        content = CONTENTS[content_name]
        created = new_chronicum()
        chronica_harness.create(created)
        kind = ActumKind.TOOL_RESPONSE if not content else ActumKind.MESSAGE
        sent = make_actum(created.id, content, kind=kind, actor_kind=ActorKind.AGENT, actor="search")
        stored = chronica_harness.record(sent)
        assert_same_actum(stored, sent)
        (read,) = chronica_harness.acta(created.id)
        assert read.content == content, f"{content_name} content did not round-trip"
        assert_same_actum(read, sent, at=stored.at)

    # -- S8 ----------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("family", "stored_suffixes", "other_suffixes"),
        [
            (
                "like_wildcards",
                ["a_c", "a%", "a%c", "a*", "a.c", "a?"],
                ["abc", "ab", "axc", "a", "a%%", "aXc"],
            ),
            ("quotes", ["a'b", 'a"b', "a`b", "a';--", "a\\'b"], ["ab", "a''b", 'a""b', "a'", "a\\"]),
            (
                "backslashes",
                ["a\\b", "a\\\\b", "a\\_c", "a\\%", "a\\"],
                ["ab", "a\\\\\\b", "a_c", "a%", "a\\\\"],
            ),
            ("spaces_and_case", ["a b", "ab ", " ab", "AB", "a\tb"], ["ab", "a  b", "Ab", "aB", "a_b"]),
            (
                "non_ascii",
                ["äb", "中文", "🍽", "ǅ", "ﬃ", "e\u0301"],
                ["ab", "Äb", "中", "ffi", "é", "dž", "Ǆ"],
            ),
        ],
    )
    def test_s8_ids_are_data(
        self,
        chronica_harness: Harness,
        family: str,
        stored_suffixes: list[str],
        other_suffixes: list[str],
    ) -> None:
        """Ids with quotes, %, _, backslashes, spaces and non-ASCII work and never match other ids."""
        prefix = new_id(family)
        stored_ids = [prefix + suffix for suffix in stored_suffixes]
        written: dict[str, Actum] = {}
        for chronicum_id in stored_ids:
            created = new_chronicum(chronicum_id)
            chronica_harness.create(created)
            assert chronica_harness.get(chronicum_id).owner_id == created.owner_id, repr(chronicum_id)
            written[chronicum_id] = chronica_harness.record(make_actum(chronicum_id, f"in {chronicum_id!r}"))
        for chronicum_id in stored_ids:
            assert chronica_harness.get(chronicum_id).id == chronicum_id
            assert ids(chronica_harness.acta(chronicum_id)) == [written[chronicum_id].id], (
                f"acta of {chronicum_id!r} are not exactly its own"
            )
        for suffix in other_suffixes:
            other = prefix + suffix
            if other in written:
                continue
            with pytest.raises(ChronicumNotFound):
                chronica_harness.get(other)
            with pytest.raises(ChronicumNotFound):
                chronica_harness.acta(other)
            with pytest.raises(ChronicumNotFound):
                chronica_harness.record(make_actum(other))

    # -- S9 ----------------------------------------------------------------------------------

    def test_s9_chronica_are_isolated(self, chronica_harness: Harness) -> None:
        """Acta of one chronicum never appear in another (even one whose id is a prefix of it)."""
        first = new_chronicum()
        second = new_chronicum(first.id + "1")
        third = new_chronicum(first.id[:-1])
        for created in (first, second, third):
            chronica_harness.create(created)
        written: dict[str, list[str]] = {first.id: [], second.id: [], third.id: []}
        for index in range(5):
            for created in (first, second, third):
                stored = chronica_harness.record(make_actum(created.id, f"{index} in {created.id}"))
                written[created.id].append(stored.id)
        for created in (first, second, third):
            assert ids(chronica_harness.acta(created.id)) == written[created.id]
            assert ids(chronica_harness.acta(created.id, ActaQuery(last_n=2))) == written[created.id][-2:]

    # -- Order and time agree ----------------------------------------------------------------

    def test_at_never_decreases_along_the_order_under_concurrent_writers(
        self, chronica_harness: Harness
    ) -> None:
        """8 writers x 50 acta into one chronicum while a reader polls ``get``.

        Read back in order, ``at`` never decreases; ``last_actum_at`` is the newest actum's ``at``;
        the reader never saw ``last_actum_at`` decrease; ``record`` returned the ``at`` stored.
        """
        created = new_chronicum()
        chronica_harness.create(created)
        batches = [
            [make_actum(created.id, f"writer {writer} actum {index}") for index in range(ACTA_PER_WRITER)]
            for writer in range(ORDER_WRITERS)
        ]
        outcomes, seen = chronica_harness.write_while_polling(batches, created.id)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        assert not failures, f"{len(failures)} of {len(batches)} writers failed: {failures[:3]!r}"
        stored = chronica_harness.acta(created.id)
        assert sorted(ids(stored)) == sorted(actum.id for batch in batches for actum in batch)
        moments = [assert_aware_utc(actum.at, "actum.at") for actum in stored]
        backwards = [(before, after) for before, after in itertools.pairwise(moments) if after < before]
        assert not backwards, (
            f"`at` went backwards {len(backwards)} times along the order of {len(stored)} acta "
            f"(by up to {max(before - after for before, after in backwards)}); it must be taken where "
            "the order is decided and never be earlier than the chronicum's last_actum_at"
        )
        returned = {actum.id: actum.at for outcome in outcomes for actum in outcome}
        for actum in stored:
            got = returned[actum.id]
            assert got is not None and actum.at is not None and abs(got - actum.at) <= TIME_TOLERANCE, (
                f"record returned at {got} for actum {actum.id}, but {actum.at} was stored"
            )
        last = chronica_harness.get(created.id).last_actum_at
        assert last == moments[-1], f"last_actum_at {last} is not the newest actum's at {moments[-1]}"
        polled = [moment for moment in seen if moment is not None]
        drops = [(before, after) for before, after in itertools.pairwise(polled) if after < before]
        assert not drops, (
            f"a reader saw last_actum_at decrease {len(drops)} times in {len(polled)} reads, "
            f"e.g. from {drops[0][0]} to {drops[0][1]}"
        )
        assert seen[-1] == moments[-1], f"the reader's last read {seen[-1]} is not the newest at"

    # -- Closing -----------------------------------------------------------------------------

    @pytest.fixture
    def closing_harness(self, request: pytest.FixtureRequest, chronica_target: Target) -> Iterator[Harness]:
        """A harness over ``store_to_close`` / ``async_store_to_close``, for the case to close."""
        harness: Harness
        if chronica_target.flavour == "sync":
            store: Store = request.getfixturevalue("store_to_close")
            harness = SyncHarness(store)
        else:
            async_store: AsyncStore = request.getfixturevalue("async_store_to_close")
            harness = AsyncHarness(async_store)
        try:
            yield harness
        finally:
            harness.close()

    def test_a_closed_store_refuses_every_operation(
        self, closing_harness: Harness, request: pytest.FixtureRequest
    ) -> None:
        """After ``close()``, create, get, record, record_idempotent and acta raise ``StoreError``.

        Nothing is written by them (read through the ``store`` fixture when it is another store);
        closing again is harmless.
        """
        harness = closing_harness
        existing = new_chronicum()
        harness.create(existing)
        before = harness.record(make_actum(existing.id, "before closing"))
        harness.close_store()
        fresh = new_chronicum()
        attempts: dict[str, Callable[[], object]] = {
            "create": lambda: harness.create(fresh),
            "get": lambda: harness.get(existing.id),
            "record": lambda: harness.record(make_actum(existing.id, "after closing")),
            "acta": lambda: harness.acta(existing.id),
        }
        if harness.idempotent:
            attempts["record_idempotent"] = lambda: harness.record_idempotent(
                make_actum(existing.id, "after closing, with a key"), "after-closing"
            )
        for name, attempt in attempts.items():
            try:
                attempt()
            except StoreError:
                continue
            except Exception as error:
                raise AssertionError(f"{name} after close raised {error!r}, not StoreError") from error
            raise AssertionError(f"{name} after close worked; a closed store must raise StoreError")
        harness.close_store()
        witness = _another_store(request, harness.store)
        if witness is None:
            return
        with pytest.raises(ChronicumNotFound):
            witness.get(fresh.id)
        try:
            kept = witness.acta(existing.id, ActaQuery())
        except ChronicumNotFound:  # the witness holds other data (another memory store, say)
            return
        assert ids(kept) == [before.id], f"acta written after close: {kept!r}"


def _another_store(request: pytest.FixtureRequest, closed: object) -> Store | None:
    """The suite's ``store`` fixture, if it has one and it is not the store that was closed."""
    try:
        store: Store = request.getfixturevalue("store")
    except pytest.FixtureLookupError:
        return None
    return None if store is closed else store
