"""The batch, listing and erasure capabilities in PostgreSQL: what the raw tables hold after an
erasure, a version-1 schema migrated to them, one round trip per batch, the listing index, and an
erasure racing with batch writers."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from chronica_postgres import LATEST_VERSION, AsyncPostgresStore, PostgresStore
from chronica_postgres.plans import Statement, Transaction, batch_parameters
from chronica_postgres.schema import CHRONICA_LISTING_INDEX, EPOCH, MIGRATIONS, VERSION_TABLE, Statements
from psycopg import sql

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    Chronicum,
    ChronicumExists,
    ChronicumNotFound,
    StoreError,
    list_backends,
    new_actum_id,
    open_store,
)
from chronica_core.capabilities import BATCH as BATCH_CAPABILITY
from chronica_core.capabilities import (
    ERASURE,
    FOLLOW,
    HISTORY,
    IDEMPOTENCY,
    LISTING,
    NATIVE,
    RETENTION,
    store_capabilities,
)
from chronica_core.erasure import owner_digest

Admin = psycopg.Connection[tuple[Any, ...]]

BATCH = 5


def new_id(label: str) -> str:
    return f"pg-cap-{label}-{uuid.uuid4().hex}"


def actum(chronicum_id: str, content: str, actor: str = "ardian") -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, actor, content, id=new_actum_id())


def batch(chronicum_id: str, label: str, size: int = BATCH) -> list[Actum]:
    return [actum(chronicum_id, f"{label} #{place}") for place in range(size)]


def seqs(admin: Admin, chronicum_id: str) -> list[int]:
    rows = admin.execute("SELECT seq FROM acta WHERE chronicum_id = %s ORDER BY seq", (chronicum_id,))
    return [row[0] for row in rows]


def in_schema(connection: Admin, schema: str) -> None:
    connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))


# -- erasure, read from the raw tables --------------------------------------------------------------


def _fill_and_remember(chronicum_id: str, owner_id: str) -> tuple[list[Actum], list[str]]:
    """The writes of the erasure tests: two plain acta, a keyed actum and a keyed batch."""
    plain = [
        actum(chronicum_id, f"secret plain {n} of {owner_id}", actor=f"actor-{owner_id}") for n in range(2)
    ]
    single = actum(chronicum_id, f"secret keyed of {owner_id}", actor=f"actor-{owner_id}")
    acta = [
        actum(chronicum_id, f"secret batch {n} of {owner_id}", actor=f"actor-{owner_id}") for n in range(3)
    ]
    return [*plain, single, *acta], [f"key-single-{owner_id}", f"key-batch-{owner_id}"]


def _assert_only_the_marker_is_left(
    admin: Admin, chronicum_id: str, owner_id: str, written: list[Actum], keys: list[str]
) -> None:
    marker = admin.execute(
        "SELECT id, owner_id, started_at, last_actum_at, last_seq, erased_owner_digest"
        " FROM chronica WHERE id = %s",
        (chronicum_id,),
    ).fetchall()
    assert marker == [(chronicum_id, None, datetime.fromisoformat(EPOCH), None, 0, owner_digest(owner_id))]
    whole_row = admin.execute(
        "SELECT row_to_json(chronica)::text FROM chronica WHERE id = %s", (chronicum_id,)
    ).fetchone()
    assert whole_row is not None
    assert owner_id not in whole_row[0]
    assert admin.execute("SELECT count(*) FROM acta WHERE chronicum_id = %s", (chronicum_id,)).fetchone() == (
        0,
    )
    # Nothing of it anywhere in either table: no content, actor, actum id, key or owner id.
    leftovers = admin.execute(
        """
        SELECT count(*) FROM acta
        WHERE id = ANY(%s) OR actor = %s OR idempotency_key = ANY(%s) OR content LIKE %s
            OR position(%s::bytea IN coalesce(content_bytes, '')) > 0
        """,
        (
            [written_actum.id for written_actum in written],
            f"actor-{owner_id}",
            keys,
            f"%{owner_id}%",
            owner_id.encode(),
        ),
    ).fetchone()
    assert leftovers == (0,)
    assert admin.execute(
        "SELECT count(*) FROM chronica WHERE owner_id = %s OR row_to_json(chronica)::text LIKE %s",
        (owner_id, f"%{owner_id}%"),
    ).fetchone() == (0,)


def test_an_erased_chronicum_leaves_only_its_id_and_owner_digest_in_the_tables(
    store: PostgresStore, admin: Admin
) -> None:
    owner_id = f"owner-{uuid.uuid4().hex}"
    chronicum_id = new_id("erase")
    store.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))
    written, keys = _fill_and_remember(chronicum_id, owner_id)
    for plain in written[:2]:
        store.record(plain)
    store.record_idempotent(written[2], keys[0])
    store.record_many(written[3:], keys[1])
    assert admin.execute("SELECT count(*) FROM acta WHERE chronicum_id = %s", (chronicum_id,)).fetchone() == (
        6,
    )

    assert store.erase(chronicum_id, owner_digest(owner_id)) == 6

    _assert_only_the_marker_is_left(admin, chronicum_id, owner_id, written, keys)
    for call in (
        lambda: store.get(chronicum_id),
        lambda: store.acta(chronicum_id, ActaQuery()),
        lambda: store.record(actum(chronicum_id, "after")),
        lambda: store.record_idempotent(actum(chronicum_id, "after"), keys[0]),
        lambda: store.record_many(batch(chronicum_id, "after"), keys[1]),
        lambda: store.erase(chronicum_id, owner_digest(owner_id)),
    ):
        with pytest.raises(ChronicumNotFound):
            call()
    with pytest.raises(ChronicumExists):
        store.create(Chronicum(chronicum_id, "someone-else", datetime.now(UTC)))
    assert store.list_chronica(owner_id, 10, None) == []
    _assert_only_the_marker_is_left(admin, chronicum_id, owner_id, written, keys)

    assert not store.reopen(
        Chronicum(chronicum_id, "someone-else", datetime.now(UTC)), owner_digest("someone-else")
    )
    fresh = Chronicum(chronicum_id, owner_id, datetime.now(UTC))
    assert store.reopen(fresh, owner_digest(owner_id))
    assert not store.reopen(fresh, owner_digest(owner_id))  # no marker any more
    assert store.get(chronicum_id) == fresh
    assert store.acta(chronicum_id, ActaQuery()) == []
    again = store.record_idempotent(actum(chronicum_id, "fresh"), keys[0])  # the old key is gone too
    assert again.content == "fresh"
    assert seqs(admin, chronicum_id) == [1]


def test_erase_owner_erases_each_live_chronicum_of_the_owner_only(store: PostgresStore, admin: Admin) -> None:
    owner_id, other_id = f"owner-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"
    mine = [new_id("mine") for _ in range(3)]
    theirs = new_id("theirs")
    for chronicum_id in mine:
        store.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))
        store.record_many(batch(chronicum_id, owner_id), None)
    store.create(Chronicum(theirs, other_id, datetime.now(UTC)))
    store.record(actum(theirs, "kept"))
    store.erase(mine[0], owner_digest(owner_id))

    assert store.erase_owner(owner_id, owner_digest(owner_id)) == 2
    assert store.erase_owner(owner_id, owner_digest(owner_id)) == 0
    rows = admin.execute(
        "SELECT id, owner_id, erased_owner_digest FROM chronica WHERE id = ANY(%s) ORDER BY id",
        ([*mine, theirs],),
    ).fetchall()
    assert sorted(rows) == sorted(
        [*((chronicum_id, None, owner_digest(owner_id)) for chronicum_id in mine), (theirs, other_id, None)]
    )
    assert admin.execute("SELECT count(*) FROM acta WHERE chronicum_id = ANY(%s)", (mine,)).fetchone() == (0,)
    assert [kept.content for kept in store.acta(theirs, ActaQuery())] == ["kept"]


def test_an_async_erasure_leaves_only_the_marker(async_store: AsyncPostgresStore, admin: Admin) -> None:
    owner_id = f"owner-{uuid.uuid4().hex}"
    chronicum_id = new_id("async-erase")
    written, keys = _fill_and_remember(chronicum_id, owner_id)

    async def scenario() -> int:
        try:
            await async_store.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))
            for plain in written[:2]:
                await async_store.record(plain)
            await async_store.record_idempotent(written[2], keys[0])
            await async_store.record_many(written[3:], keys[1])
            erased = await async_store.erase(chronicum_id, owner_digest(owner_id))
            with pytest.raises(ChronicumNotFound):
                await async_store.record_many(batch(chronicum_id, "after"), None)
            with pytest.raises(ChronicumNotFound):
                await async_store.get(chronicum_id)
            assert await async_store.erase_owner(owner_id, owner_digest(owner_id)) == 0
            return erased
        finally:
            await async_store.close()

    assert asyncio.run(scenario()) == 6
    _assert_only_the_marker_is_left(admin, chronicum_id, owner_id, written, keys)


# -- a version-1 schema --------------------------------------------------------------------------


_INSERT_VERSION_ONE_ACTUM = """
    INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, at, idempotency_key)
    VALUES (%s, %s, %s, 'message', 'human', 'ardian', %s, now(), %s)
"""


def _version_one_schema(postgres_url: str, schema: str) -> tuple[str, list[str]]:
    """A schema as chronica-postgres 1 left it (its own script), holding one chronicum of three acta."""
    quoted = sql.Identifier(schema).as_string(None)
    chronicum_id = new_id("v1")
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        with connection.transaction():
            connection.execute(MIGRATIONS[0].script.replace("{schema}", quoted).encode())
            connection.execute(
                sql.SQL(
                    "CREATE TABLE {}.{} (version integer PRIMARY KEY,"
                    " applied_at timestamptz NOT NULL DEFAULT now(), description text NOT NULL)"
                ).format(sql.Identifier(schema), sql.Identifier(VERSION_TABLE))
            )
            connection.execute(
                sql.SQL("INSERT INTO {}.{} (version, description) VALUES (1, %s)").format(
                    sql.Identifier(schema), sql.Identifier(VERSION_TABLE)
                ),
                (MIGRATIONS[0].description,),
            )
        in_schema(connection, schema)
        connection.execute(
            "INSERT INTO chronica (id, owner_id, started_at, last_actum_at, last_seq)"
            " VALUES (%s, 'ardian', now(), now(), 3)",
            (chronicum_id,),
        )
        ids = [new_actum_id() for _ in range(3)]
        for seq, actum_id in enumerate(ids, start=1):
            connection.execute(
                _INSERT_VERSION_ONE_ACTUM,
                (chronicum_id, seq, actum_id, f"old {seq}", "old-key" if seq == 2 else None),
            )
    return chronicum_id, ids


def test_a_version_one_schema_migrates_keeping_its_acta_and_gains_the_capabilities(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    chronicum_id, ids = _version_one_schema(postgres_url, fresh_schema)
    with PostgresStore(postgres_url, schema=fresh_schema, auto_migrate=False) as unmigrated:
        with pytest.raises(StoreError, match="chronica migrate --store") as raised:
            unmigrated.list_chronica("ardian", 10, None)
        assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedColumn)
        with pytest.raises(StoreError, match="chronica migrate --store"):
            unmigrated.get(chronicum_id)

    with PostgresStore(postgres_url, schema=fresh_schema) as store:  # auto_migrate
        in_schema(admin, fresh_schema)
        assert admin.execute(f"SELECT version FROM {VERSION_TABLE} ORDER BY version").fetchall() == [
            (version,) for version in range(1, LATEST_VERSION + 1)
        ]
        old = store.acta(chronicum_id, ActaQuery())
        assert [(stored.id, stored.content) for stored in old] == [(ids[n], f"old {n + 1}") for n in range(3)]
        # A key used before the migration still answers with its one actum.
        assert store.record_idempotent(actum(chronicum_id, "retry"), "old-key") == old[1]
        assert store.record_many(batch(chronicum_id, "retry"), "old-key") == [old[1]]
        added = store.record_many(batch(chronicum_id, "new"), "new-key")
        assert seqs(admin, chronicum_id) == list(range(1, 4 + BATCH))
        assert store.record_many(batch(chronicum_id, "again"), "new-key") == added
        assert store.list_chronica("ardian", 10, None) == [store.get(chronicum_id)]
        # version 3: the old chronicum was never followed; a follower's marking now lands on it
        assert admin.execute(
            "SELECT followed_until FROM chronica WHERE id = %s", (chronicum_id,)
        ).fetchone() == (None,)
        assert store._run_if_open(store.plans.follow(chronicum_id, 120.0, 60.0)) is True
        assert store.erase(chronicum_id, owner_digest("ardian")) == 3 + BATCH
        assert admin.execute("SELECT count(*) FROM acta").fetchone() == (0,)
        with pytest.raises(ChronicumNotFound):
            store.get(chronicum_id)


# -- record_many: one round trip, one batch per key -----------------------------------------------


class Counted:
    """Counts what a store sends: the operations its plans yield, and psycopg ``execute`` calls.

    Each ``execute`` with parameters is one round trip (psycopg sends Parse, Bind, Execute and
    Sync together and reads the answer once); an operation that is a :class:`Statement` is one
    ``execute``, a :class:`Transaction` several (and BEGIN, COMMIT). They are counted on the
    cursor, which ``Connection.execute`` goes through too, as the blocking store's kept cursors do.
    """

    def __init__(self) -> None:
        self.operations: list[object] = []
        self.executes = 0


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counted:
    counts = Counted()
    sync_execute, async_execute = psycopg.Cursor.execute, psycopg.AsyncCursor.execute

    def execute(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
        counts.executes += 1
        return sync_execute(cursor, *arguments, **keywords)

    async def execute_async(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
        counts.executes += 1
        return await async_execute(cursor, *arguments, **keywords)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    monkeypatch.setattr(psycopg.AsyncCursor, "execute", execute_async)
    return counts


def _count_operations(
    store: PostgresStore | AsyncPostgresStore, monkeypatch: pytest.MonkeyPatch, counts: Counted
) -> None:
    if isinstance(store, AsyncPostgresStore):
        perform_in = store._perform

        async def perform_async(pool: Any, operation: Any) -> Any:  # the running loop's pool
            counts.operations.append(operation)
            return await perform_in(pool, operation)

        monkeypatch.setattr(store, "_perform", perform_async)
    else:
        perform = store._perform

        def perform_sync(operation: Any) -> Any:
            counts.operations.append(operation)
            return perform(operation)

        monkeypatch.setattr(store, "_perform", perform_sync)


def test_a_batch_is_one_round_trip_and_a_repeat_too(
    store: PostgresStore, admin: Admin, counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicum_id = new_id("trip")
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    _count_operations(store, monkeypatch, counted)
    for key in (None, "trip-key", "trip-key"):
        counted.operations.clear()
        counted.executes = 0
        stored = store.record_many(batch(chronicum_id, f"batch {key}", 50), key)
        assert len(stored) == 50
        assert counted.executes == 1
        assert [type(operation) for operation in counted.operations] == [Statement]
        assert b";" not in counted.operations[0].sql  # type: ignore[attr-defined]
    assert seqs(admin, chronicum_id) == list(range(1, 101))
    counted.operations.clear()
    store.erase(chronicum_id, owner_digest("ardian"))
    assert [type(operation) for operation in counted.operations] == [Transaction]


def test_an_async_batch_is_one_round_trip(
    async_store: AsyncPostgresStore, counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicum_id = new_id("async-trip")

    async def scenario() -> list[Actum]:
        try:
            await async_store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            _count_operations(async_store, monkeypatch, counted)
            counted.executes = 0
            return await async_store.record_many(batch(chronicum_id, "async"), "async-key")
        finally:
            await async_store.close()

    stored = asyncio.run(scenario())
    assert [written.content for written in stored] == [f"async #{place}" for place in range(BATCH)]
    assert counted.executes == 1
    assert [type(operation) for operation in counted.operations] == [Statement]


def test_forty_concurrent_batches_with_one_key_store_one_batch(store: PostgresStore, admin: Admin) -> None:
    chronicum_id = new_id("keyed-race")
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    barrier = threading.Barrier(40)

    def attempt(index: int) -> list[Actum]:
        barrier.wait()
        return store.record_many(batch(chronicum_id, f"attempt {index}"), "one-key")

    with ThreadPoolExecutor(max_workers=40) as executor:
        returned = list(executor.map(attempt, range(40)))
    assert all(answer == returned[0] for answer in returned)
    assert len(returned[0]) == BATCH
    label = returned[0][0].content.split(" #")[0]
    assert [stored.content for stored in returned[0]] == [f"{label} #{place}" for place in range(BATCH)]
    assert seqs(admin, chronicum_id) == list(range(1, BATCH + 1))
    assert admin.execute(
        "SELECT last_seq, idempotency_key, batch_size FROM chronica JOIN acta ON chronicum_id = chronica.id"
        " WHERE chronica.id = %s AND seq = 1",
        (chronicum_id,),
    ).fetchone() == (BATCH, "one-key", BATCH)
    assert store.record_idempotent(actum(chronicum_id, "single"), "one-key") == returned[0][0]


def test_async_concurrent_batches_with_one_key_store_one_batch(
    async_store: AsyncPostgresStore, admin: Admin
) -> None:
    chronicum_id = new_id("async-keyed-race")

    async def scenario() -> list[list[Actum]]:
        try:
            await async_store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            return await asyncio.gather(
                *(async_store.record_many(batch(chronicum_id, f"task {n}"), "k") for n in range(20))
            )
        finally:
            await async_store.close()

    returned = asyncio.run(scenario())
    assert all(answer == returned[0] for answer in returned)
    assert seqs(admin, chronicum_id) == list(range(1, BATCH + 1))


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("key", [None, "used"])
def test_a_batch_reads_no_more_of_a_long_history_than_its_key_names(
    store: PostgresStore, admin: Admin, schema: str, plan_cache_mode: str, key: str | None
) -> None:
    """The batch statement stays flat as the chronicum grows: a plan that joins the chronicum's
    acta before looking at the keyed row reads the whole history on every batch."""
    chronicum_id = new_id("long")
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    store.record_many(batch(chronicum_id, "first"), "used")
    admin.execute(
        """
        INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, at)
        SELECT %s, n, md5(n::text), 'message', 'human', 'ardian', 'old', now()
        FROM generate_series(1000, 21000) AS n
        """,
        (chronicum_id,),
    )
    admin.execute("ANALYZE acta")
    given = batch(chronicum_id, "next", 3)
    parameters = batch_parameters(given, key)
    admin.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Literal(plan_cache_mode)))
    try:
        plan = "\n".join(
            row[0] for row in admin.execute(b"EXPLAIN " + Statements(schema).record_many, parameters)
        )
    finally:
        admin.execute("RESET plan_cache_mode")
    assert "Seq Scan on acta" not in plan and "Hash Join" not in plan, plan
    # the stored batch is read as a range of the primary key, bounded by the keyed row
    assert "(chronicum_id = existing.chronicum_id) AND (seq >= existing.seq)" in plan, plan


# -- listing -------------------------------------------------------------------------------------


@pytest.fixture
def crowded(postgres_url: str, fresh_schema: str) -> Iterator[tuple[PostgresStore, Admin, str]]:
    """A schema where 2,000 other owners hold 100,000 chronica (and 50 markers), the owner 30."""
    with (
        PostgresStore(postgres_url, schema=fresh_schema) as store,
        psycopg.connect(postgres_url, autocommit=True) as connection,
    ):
        in_schema(connection, fresh_schema)
        connection.execute(
            """
            INSERT INTO chronica (id, owner_id, started_at)
            SELECT 'other-' || n, 'owner-' || (n % 2000), now() - n * interval '1 second'
            FROM generate_series(1, 100000) AS n
            """
        )
        connection.execute(
            f"""
            INSERT INTO chronica (id, owner_id, started_at, erased_owner_digest)
            SELECT 'marker-' || n, NULL, '{EPOCH}', 'sha256:00' FROM generate_series(1, 50) AS n
            """
        )
        owner_id = "the-owner"
        base = datetime(2026, 1, 1, tzinfo=UTC)
        for n in range(30):  # pairs share a started_at: ties ordered by id, as code points
            store.create(Chronicum(f"mine-{n:02d}", owner_id, base + timedelta(seconds=n // 2)))
        connection.execute("ANALYZE chronica")
        yield store, connection, owner_id


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("after", [False, True])
def test_listing_uses_the_listing_index_among_many_other_owners(
    crowded: tuple[PostgresStore, Admin, str], fresh_schema: str, plan_cache_mode: str, after: bool
) -> None:
    store, connection, owner_id = crowded
    statements = Statements(fresh_schema)
    position = (datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC), "mine-14")
    statement, parameters = (
        (statements.list_chronica_after, (owner_id, *position, 11))
        if after
        else (statements.list_chronica, (owner_id, 11))
    )
    connection.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Literal(plan_cache_mode)))
    try:
        with connection.cursor() as cursor:
            cursor.execute(b"EXPLAIN " + statement, parameters)
            plan = "\n".join(row[0] for row in cursor.fetchall())
    finally:
        connection.execute("RESET plan_cache_mode")
    assert f"Index Scan using {CHRONICA_LISTING_INDEX} on chronica" in plan, plan
    assert "Seq Scan" not in plan and "Sort" not in plan, plan
    if after:
        assert "Index Cond: ((owner_id = " in plan and "ROW(started_at, id) < ROW(" in plan, plan
    listed = store.list_chronica(owner_id, 11, position if after else None)
    expected = [f"mine-{n:02d}" for n in range(29, -1, -1)]
    start = expected.index("mine-14") + 1 if after else 0
    assert [chronicum.id for chronicum in listed] == expected[start : start + 11]


def test_listing_pages_through_ties_in_code_point_order_and_skips_erased(store: PostgresStore) -> None:
    owner_id = f"owner-{uuid.uuid4().hex}"
    moment = datetime(2026, 3, 1, tzinfo=UTC)
    suffix = uuid.uuid4().hex
    names = [
        f"B-{suffix}",
        f"a-{suffix}",
        f"é-{suffix}",
        f"z-{suffix}",
        f"\U0001f600-{suffix}",
        f"Z-{suffix}",
    ]
    for name in names:
        store.create(Chronicum(name, owner_id, moment))
    store.create(Chronicum(f"older-{suffix}", owner_id, moment - timedelta(days=1)))
    store.create(Chronicum(f"gone-{suffix}", owner_id, moment + timedelta(days=1)))
    store.erase(f"gone-{suffix}", owner_digest(owner_id))
    expected = [*sorted(names, key=lambda name: name.encode(), reverse=True), f"older-{suffix}"]
    pages: list[list[str]] = []
    after = None
    while True:
        page = store.list_chronica(owner_id, 3, after)
        if not page:
            break
        pages.append([chronicum.id for chronicum in page])
        after = (page[-1].started_at, page[-1].id)
    assert pages == [expected[0:3], expected[3:6], expected[6:]]
    assert [chronicum.id for chronicum in store.list_chronica(owner_id, 10, (moment, f"a-{suffix}\x00"))] == [
        f"a-{suffix}",
        f"Z-{suffix}",
        f"B-{suffix}",
        f"older-{suffix}",
    ]
    assert store.list_chronica(f"nobody-{suffix}", 10, None) == []
    store.erase_owner(owner_id, owner_digest(owner_id))


# -- erasure racing with batch writers -------------------------------------------------------------


def _whole_batches(rows: list[tuple[int, str]]) -> list[str]:
    """The labels of ``rows`` (``(seq, content)`` in seq order); each batch must be whole and consecutive."""
    labels = []
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        label = chunk[0][1].split(" #")[0]
        assert [content for _, content in chunk] == [f"{label} #{place}" for place in range(BATCH)], rows
        assert [seq for seq, _ in chunk] == list(range(chunk[0][0], chunk[0][0] + BATCH)), rows
        labels.append(label)
    assert len(rows) % BATCH == 0, rows
    return labels


def test_an_erasure_racing_with_batch_writers_never_leaves_part_of_a_batch(
    store: PostgresStore, admin: Admin
) -> None:
    owner_id = f"owner-{uuid.uuid4().hex}"
    chronicum_id = new_id("race")
    store.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))
    stop = threading.Event()
    landed: list[str] = []
    changed = threading.Condition()

    def write(writer: int) -> None:
        number = 0
        while not stop.is_set():
            label = f"writer {writer} batch {number}"
            number += 1
            try:
                store.record_many(batch(chronicum_id, label), None)
            except ChronicumNotFound:  # erased, not reopened yet
                continue
            with changed:
                landed.append(label)
                changed.notify_all()

    def wait_for(count: int) -> None:
        with changed:
            assert changed.wait_for(lambda: len(landed) >= count, timeout=60)

    with ThreadPoolExecutor(max_workers=4) as executor:
        writers = [executor.submit(write, writer) for writer in range(4)]
        try:
            wait_for(20)
            erased = store.erase(chronicum_id, owner_digest(owner_id))
            with changed:
                returned_before = len(landed)
            assert store.reopen(Chronicum(chronicum_id, owner_id, datetime.now(UTC)), owner_digest(owner_id))
            wait_for(returned_before + 20)
        finally:
            stop.set()
            for writer in writers:
                writer.result()
    rows = admin.execute(
        "SELECT seq, content FROM acta WHERE chronicum_id = %s ORDER BY seq", (chronicum_id,)
    ).fetchall()
    kept = _whole_batches(rows)
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))  # recorded after the reopening
    assert erased % BATCH == 0
    assert erased >= BATCH * 20
    # Every batch that returned was either erased whole (it landed before) or kept whole (after).
    assert erased // BATCH + len(kept) == len(landed)
    assert len(kept) >= 20
    store.erase(chronicum_id, owner_digest(owner_id))


def test_an_async_erasure_racing_with_batch_tasks_never_leaves_part_of_a_batch(
    async_store: AsyncPostgresStore, admin: Admin
) -> None:
    owner_id = f"owner-{uuid.uuid4().hex}"
    chronicum_id = new_id("async-race")

    async def scenario() -> tuple[int, list[str]]:
        landed: list[str] = []
        stop = asyncio.Event()
        enough = asyncio.Event()

        async def write(writer: int) -> None:
            number = 0
            while not stop.is_set():
                label = f"task {writer} batch {number}"
                number += 1
                try:
                    await async_store.record_many(batch(chronicum_id, label), None)
                except ChronicumNotFound:
                    return
                landed.append(label)
                if len(landed) >= 20:
                    enough.set()

        try:
            await async_store.create(Chronicum(chronicum_id, owner_id, datetime.now(UTC)))
            tasks = [asyncio.create_task(write(writer)) for writer in range(4)]
            await enough.wait()
            erased = await async_store.erase(chronicum_id, owner_digest(owner_id))
            await asyncio.gather(*tasks)  # each stops at its first refused batch
            return erased, landed
        finally:
            await async_store.close()

    erased, landed = asyncio.run(scenario())
    assert erased == BATCH * len(landed)
    assert admin.execute("SELECT count(*) FROM acta WHERE chronicum_id = %s", (chronicum_id,)).fetchone() == (
        0,
    )


def test_the_backend_declares_every_capability_its_stores_have(
    postgres_url: str, schema: str, async_store: AsyncPostgresStore
) -> None:
    installed, _ = list_backends()
    (backend,) = [found.backend for found in installed if found.backend.name == "postgres"]
    assert backend.capabilities == (BATCH_CAPABILITY, LISTING, ERASURE, FOLLOW, NATIVE, HISTORY, RETENTION)
    every = {IDEMPOTENCY, BATCH_CAPABILITY, LISTING, ERASURE, FOLLOW, NATIVE, HISTORY, RETENTION}
    with open_store(postgres_url, schema=schema) as store:
        assert store_capabilities(store) == every
    assert store_capabilities(async_store) == every


def test_a_batch_with_one_actum_over_the_limit_sends_nothing(
    postgres_url: str, schema: str, admin: Admin, counted: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicum_id = new_id("too-large")
    with PostgresStore(postgres_url, schema=schema, max_content_bytes=12) as small:
        small.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        _count_operations(small, monkeypatch, counted)
        acta = [actum(chronicum_id, "short"), actum(chronicum_id, "é" * 7), actum(chronicum_id, "short")]
        with pytest.raises(ActumTooLarge) as raised:
            small.record_many(acta, "too-large-key")
        assert (raised.value.size, raised.value.limit) == (14, 12)
        assert counted.operations == []
    assert seqs(admin, chronicum_id) == []
    async_small = AsyncPostgresStore(postgres_url, schema=schema, max_content_bytes=12)

    async def scenario() -> None:
        try:
            with pytest.raises(ActumTooLarge):
                await async_small.record_many(acta, None)
        finally:
            await async_small.close()

    asyncio.run(scenario())
    assert seqs(admin, chronicum_id) == []
