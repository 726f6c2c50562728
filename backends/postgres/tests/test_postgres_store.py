"""What is particular to the PostgreSQL store: schema, migrations, plans of queries, order under
concurrency, NUL content, lost connections, pools given by the caller, registration."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import chronica_postgres
import chronica_postgres.store
import psycopg
import pytest
from chronica_postgres import LATEST_VERSION, AsyncPostgresStore, PostgresStore, migrate
from chronica_postgres.plans import text_array
from chronica_postgres.schema import Statements
from chronica_postgres.store import split_schema
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    InvalidOption,
    StoreError,
    list_backends,
    new_actum_id,
    new_chronicum_id,
    open_async_store,
    open_store,
)

Admin = psycopg.Connection[tuple[Any, ...]]

ALL_VERSIONS = [(version,) for version in range(1, LATEST_VERSION + 1)]
"""The rows of ``chronica_schema_version`` in a schema at the latest version: one per migration."""


def new_chronicum(store: PostgresStore, label: str = "c") -> str:
    chronicum_id = f"pg-{label}-{uuid.uuid4().hex}"
    store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    return chronicum_id


def message(chronicum_id: str, content: str = "hello", kind: ActumKind = ActumKind.MESSAGE) -> Actum:
    return Actum(chronicum_id, kind, ActorKind.HUMAN, "ardian", content, id=new_actum_id())


def seqs(admin: Admin, chronicum_id: str) -> list[int]:
    rows = admin.execute("SELECT seq FROM acta WHERE chronicum_id = %s ORDER BY seq", (chronicum_id,))
    return [row[0] for row in rows]


# -- schema and migrations ---------------------------------------------------------------------


def test_schema_has_the_promised_keys_and_indexes(store: PostgresStore, admin: Admin, schema: str) -> None:
    indexes: dict[str, str] = dict(
        admin.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = 'acta'",
            (schema,),
        ).fetchall()
    )
    assert indexes["acta_pkey"].endswith("USING btree (chronicum_id, seq)")
    assert indexes["acta_idempotency_key"].endswith(
        "USING btree (chronicum_id, idempotency_key) WHERE (idempotency_key IS NOT NULL)"
    )
    assert indexes["acta_idempotency_key"].startswith("CREATE UNIQUE INDEX")
    assert not [name for name, definition in indexes.items() if "(seq" in definition]
    listing = admin.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = 'chronica_owner_listing'",
        (schema,),
    ).fetchone()
    assert listing is not None
    assert listing[0].endswith(
        "USING btree (owner_id, started_at DESC, id DESC) WHERE (erased_owner_digest IS NULL)"
    )
    versions = admin.execute("SELECT version FROM chronica_schema_version ORDER BY version").fetchall()
    assert versions == ALL_VERSIONS


def test_ten_concurrent_auto_migrations_of_an_empty_schema_all_succeed(
    postgres_url: str, fresh_schema: str
) -> None:
    barrier = threading.Barrier(10)

    def open_and_write(index: int) -> int:
        barrier.wait()
        with PostgresStore(postgres_url, schema=fresh_schema, min_size=1, max_size=1) as store:
            chronicum_id = new_chronicum(store, f"migrate-{index}")
            store.record(message(chronicum_id))
            return len(store.acta(chronicum_id, ActaQuery()))

    with ThreadPoolExecutor(max_workers=10) as executor:
        results = list(executor.map(open_and_write, range(10)))
    assert results == [1] * 10
    with psycopg.connect(postgres_url) as connection:
        versions = connection.execute(
            sql.SQL("SELECT version FROM {}.chronica_schema_version ORDER BY version").format(
                sql.Identifier(fresh_schema)
            )
        ).fetchall()
    assert versions == ALL_VERSIONS


def test_migrate_function_creates_the_schema_once(postgres_url: str, fresh_schema: str) -> None:
    assert migrate(postgres_url, schema=fresh_schema) == LATEST_VERSION
    assert migrate(postgres_url, schema=fresh_schema) == LATEST_VERSION
    with PostgresStore(postgres_url, schema=fresh_schema, auto_migrate="false") as store:
        assert store.migrate() == LATEST_VERSION
        chronicum_id = new_chronicum(store)
        assert store.get(chronicum_id).owner_id == "ardian"


def test_an_unmigrated_schema_says_how_to_migrate(postgres_url: str, fresh_schema: str) -> None:
    with (
        PostgresStore(postgres_url, schema=fresh_schema, auto_migrate=False) as store,
        pytest.raises(StoreError, match="chronica migrate --store") as raised,
    ):
        store.get("anything")
    assert raised.value.where == "postgres: get chronicum"
    assert isinstance(
        raised.value.__cause__, psycopg.errors.InvalidSchemaName | psycopg.errors.UndefinedTable
    )


def test_a_schema_newer_than_the_package_is_refused(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    migrate(postgres_url, schema=fresh_schema)
    table = sql.Identifier(fresh_schema, "chronica_schema_version")
    admin.execute(sql.SQL("INSERT INTO {} (version, description) VALUES (99, 'future')").format(table))
    with pytest.raises(StoreError, match="version 99"):
        PostgresStore(postgres_url, schema=fresh_schema)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://h/db", ("postgresql://h/db", None)),
        ("postgresql://h/db?schema=app", ("postgresql://h/db", "app")),
        (
            "postgresql://h/db?sslmode=disable&schema=my%20app&options=-c%20x%3Dy",
            ("postgresql://h/db?sslmode=disable&options=-c%20x%3Dy", "my app"),
        ),
        ("postgresql://h/db?sslmode=disable", ("postgresql://h/db?sslmode=disable", None)),
    ],
)
def test_a_schema_in_the_url_is_taken_out_for_libpq(url: str, expected: tuple[str, str | None]) -> None:
    assert split_schema(url) == expected


def test_the_schema_can_come_with_the_url(postgres_url: str, schema: str) -> None:
    with open_store(f"{postgres_url}?schema={schema}", auto_migrate=False) as store:
        assert isinstance(store, PostgresStore)
        assert store.options.schema == schema
        chronicum_id = new_chronicum(store)
        assert store.get(chronicum_id).owner_id == "ardian"


def test_odd_schema_names_are_quoted(postgres_url: str) -> None:
    name = f'Odd "schema"; {uuid.uuid4().hex[:8]}'
    try:
        with PostgresStore(postgres_url, schema=name) as store:
            chronicum_id = new_chronicum(store)
            store.record(message(chronicum_id, "in an odd schema"))
            assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == ["in an odd schema"]
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


# -- order and sequence --------------------------------------------------------------------------


def test_an_id_with_nul_names_no_chronicum_in_any_operation(store: PostgresStore) -> None:
    nul_id = "dinner\x00friday"  # text cannot hold NUL: no such chronicum can exist
    for operation in (
        lambda: store.get(nul_id),
        lambda: store.record(message(nul_id)),
        lambda: store.record_idempotent(message(nul_id), "key"),
        lambda: store.acta(nul_id, ActaQuery()),
    ):
        with pytest.raises(ChronicumNotFound) as raised:
            operation()
        assert raised.value.chronicum_id == nul_id


def test_forty_concurrent_records_get_gapless_sequence_numbers(store: PostgresStore, admin: Admin) -> None:
    chronicum_id = new_chronicum(store)
    with ThreadPoolExecutor(max_workers=40) as executor:
        stored = list(executor.map(lambda index: store.record(message(chronicum_id, f"m{index}")), range(40)))
    assert seqs(admin, chronicum_id) == list(range(1, 41))
    newest = admin.execute(
        "SELECT last_seq, last_actum_at FROM chronica WHERE id = %s", (chronicum_id,)
    ).fetchone()
    assert newest is not None
    assert newest[0] == 40
    by_seq = store.acta(chronicum_id, ActaQuery())
    assert {actum.id for actum in by_seq} == {actum.id for actum in stored}
    assert by_seq[-1].at == newest[1]


def test_readers_never_see_an_actum_before_those_ordered_earlier(store: PostgresStore, admin: Admin) -> None:
    chronicum_id = new_chronicum(store)
    writing = threading.Event()
    writing.set()
    seen: list[list[int]] = []

    def write(index: int) -> None:
        for number in range(25):
            store.record(message(chronicum_id, f"writer {index} actum {number}"))

    def read() -> None:
        while writing.is_set():
            seen.append(seqs(admin, chronicum_id))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with ThreadPoolExecutor(max_workers=8) as executor:
            list(executor.map(write, range(8)))
    finally:
        writing.clear()
        reader.join()
    assert len(seen) > 1
    for visible in seen:
        assert visible == list(range(1, len(visible) + 1))
    assert seqs(admin, chronicum_id) == list(range(1, 201))


def test_concurrent_retries_with_one_key_leave_no_gap(store: PostgresStore, admin: Admin) -> None:
    chronicum_id = new_chronicum(store)
    barrier = threading.Barrier(40)

    def retry(index: int) -> Actum:
        barrier.wait()
        return store.record_idempotent(message(chronicum_id, f"attempt {index}"), "one-key")

    with ThreadPoolExecutor(max_workers=40) as executor:
        returned = list(executor.map(retry, range(40)))
    assert len({actum.id for actum in returned}) == 1
    assert len({(actum.content, actum.at) for actum in returned}) == 1
    assert seqs(admin, chronicum_id) == [1]
    assert admin.execute("SELECT last_seq FROM chronica WHERE id = %s", (chronicum_id,)).fetchone() == (1,)


# -- the context-window query --------------------------------------------------------------------


def _plan(admin: Admin, statement: bytes, values: tuple[Any, ...], *, generic: bool) -> str:
    """The plan of ``statement`` with ``values``: the generic plan of it prepared, or a custom one.

    ``EXPLAIN`` of a statement with its values bound plans it for those values, whatever
    ``plan_cache_mode`` says; a generic plan is seen only by ``EXPLAIN EXECUTE`` of a prepared
    statement under ``force_generic_plan``.
    """
    if not generic:
        with admin.cursor() as cursor:
            cursor.execute(b"EXPLAIN " + statement, values)
            return "\n".join(row[0] for row in cursor.fetchall())
    numbers = iter(range(1, len(values) + 1))
    prepared = re.sub(rb"%s", lambda _: b"$%d" % next(numbers), statement)
    admin.execute("SET plan_cache_mode = force_generic_plan")
    admin.execute(b"PREPARE chronica_plan AS " + prepared)
    try:
        arguments = sql.SQL(", ").join(sql.Literal(value) for value in values)
        rows = admin.execute(sql.SQL("EXPLAIN EXECUTE chronica_plan({})").format(arguments)).fetchall()
    finally:
        admin.execute("DEALLOCATE chronica_plan")
        admin.execute("RESET plan_cache_mode")
    return "\n".join(str(row[0]) for row in rows)


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_context_window_uses_the_primary_key_on_a_large_chronicum(
    store: PostgresStore, admin: Admin, schema: str, generic: bool
) -> None:
    chronicum_id = _large_chronicum(store, admin)
    window = Statements(schema).window(kinds=True, actor_kinds=False, limited=True)
    plan = _plan(admin, window, (chronicum_id, ["message"], 20, chronicum_id), generic=generic)
    assert "Index Scan Backward using acta_pkey on acta" in plan, plan
    assert "Seq Scan on acta" not in plan, plan
    assert ("$1" in plan) is generic, plan  # a generic plan keeps its parameters
    window_acta = store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=20))
    assert [actum.content for actum in window_acta] == [
        f"actum {number}" for number in range(99_961, 100_001, 2)
    ]


@pytest.mark.parametrize("prepared", ["true", "false"])
def test_a_window_reads_the_newest_acta_along_the_primary_key_on_tables_never_analyzed(
    make_store: Callable[..., PostgresStore], postgres_url: str, fresh_schema: str, prepared: str
) -> None:
    """Without statistics the planner estimates a chronicum's acta below the window's limit; the
    window still walks the primary key backward and stops at the limit, in the plan each mode
    runs: a generic one with prepared statements, one made for the call's values without."""
    store = make_store(schema=fresh_schema, max_size=1, prepared_statements=prepared)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(fresh_schema)))
        admin.execute("ALTER TABLE acta SET (autovacuum_enabled = false)")  # never analyzed
        rules, short, chronicum_id = Chronicarius(store), new_chronicum_id(), new_chronicum_id()
        rules.record_acta("ardian", [message(short, str(number)) for number in range(100)])
        for start in range(0, 10_000, 1000):
            batch = range(start, start + 1000)
            rules.record_acta("ardian", [message(chronicum_id, str(number)) for number in batch])
        for _ in range(10):  # psycopg prepares a statement on its fifth run on a connection
            window = rules.get_acta("ardian", chronicum_id, last_n=20)
        assert [actum.content for actum in window] == [str(number) for number in range(9_980, 10_000)]
        statement = Statements(fresh_schema).window(kinds=False, actor_kinds=False, limited=True)
        plan = _plan(admin, statement, (chronicum_id, 20, chronicum_id), generic=prepared == "true")
    assert "Index Scan Backward using acta_pkey on acta" in plan, plan
    assert "acta.seq DESC" not in plan, plan  # no sort of the chronicum's acta


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
def test_reading_after_no_position_skips_the_position_s_lookup_on_a_large_chronicum(
    store: PostgresStore, admin: Admin, schema: str, generic: bool
) -> None:
    # Without the condition on the position itself, the generic plan walked the chronicum's
    # 100,000 acta back to front for an id that is NULL.
    chronicum_id = _large_chronicum(store, admin)
    statement = Statements(schema).acta_after
    plan = _plan(admin, statement, (chronicum_id, None, chronicum_id, None, None, 5), generic=generic)
    assert "One-Time Filter: ($2 IS NOT NULL)" in plan or "One-Time Filter: false" in plan, plan
    assert [actum.content for actum in store.acta_after(chronicum_id, None, 3) or []] == [
        "actum 1",
        "actum 2",
        "actum 3",
    ]


@pytest.mark.parametrize(
    ("actum_kinds", "numbers"),
    [((ActumKind.MESSAGE,), range(99_961, 100_001, 2)), (None, range(99_981, 100_001))],
)
def test_a_context_window_is_planned_once_per_connection_on_analyzed_tables(
    store: PostgresStore,
    admin: Admin,
    make_store: Callable[..., PostgresStore],
    schema: str,
    actum_kinds: tuple[ActumKind, ...] | None,
    numbers: range,
) -> None:
    # With statistics, PostgreSQL's own choice would plan every read of a window again (its
    # LIMIT parameter makes the generic plan look costlier than a custom one for LIMIT 20).
    chronicum_id = _large_chronicum(store, admin)  # analyzed
    reader = make_store(schema=schema, min_size=1, max_size=1)
    query = ActaQuery(actum_kinds=actum_kinds, last_n=20)
    for _ in range(20):
        window_acta = reader.acta(chronicum_id, query)
    assert [actum.content for actum in window_acta] == [f"actum {number}" for number in numbers]
    with reader._pool.connection() as connection:  # the one connection that read
        plans = connection.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%ORDER BY seq DESC LIMIT%%'"
        ).fetchall()
        setting = connection.execute("SHOW plan_cache_mode").fetchone()
    assert len(plans) == 1, plans
    generic, custom = plans[0]
    assert custom == 0 and generic >= 10, plans
    assert setting == ("force_generic_plan",)


def test_a_plan_cache_mode_the_url_asks_for_is_kept(postgres_url: str, schema: str) -> None:
    separator = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{separator}options=-c%20plan_cache_mode%3Dforce_custom_plan"
    with PostgresStore(url, schema=schema, max_size=1) as store, store._pool.connection() as connection:
        assert connection.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)


def test_an_async_store_keeps_generic_plans_too(postgres_url: str, schema: str) -> None:
    async def scenario() -> tuple[Any, ...] | None:
        store = AsyncPostgresStore(postgres_url, schema=schema, max_size=1)
        try:
            chronicum_id = f"plans-{uuid.uuid4().hex}"
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            assert await store.acta(chronicum_id, ActaQuery(last_n=20)) == []
            pool = (await store._pools.get()).pool
            async with pool.connection() as connection:
                cursor = await connection.execute("SHOW plan_cache_mode")
                return await cursor.fetchone()
        finally:
            await store.close()

    assert asyncio.run(scenario()) == ("force_generic_plan",)


_LARGE: dict[str, str] = {}


def _large_chronicum(store: PostgresStore, admin: Admin) -> str:
    """A chronicum of 100,000 acta (odd seq: messages, even: thoughts), beside 200 small ones."""
    if "id" in _LARGE:
        return _LARGE["id"]
    chronicum_id = new_chronicum(store, "large")
    admin.execute(
        """
        INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, at)
        SELECT %s, n, md5(n::text), CASE WHEN n %% 2 = 1 THEN 'message' ELSE 'thought' END,
            'agent', 'search', 'actum ' || n, now()
        FROM generate_series(1, 100000) AS n
        """,
        (chronicum_id,),
    )
    admin.execute("UPDATE chronica SET last_seq = 100000 WHERE id = %s", (chronicum_id,))
    for _ in range(200):
        small = new_chronicum(store, "small")
        for number in range(3):
            store.record(message(small, f"small {number}"))
    admin.execute("ANALYZE acta")
    _LARGE["id"] = chronicum_id
    return chronicum_id


def test_missing_and_empty_chronica_are_told_apart(store: PostgresStore) -> None:
    chronicum_id = new_chronicum(store)
    assert store.acta(chronicum_id, ActaQuery()) == []
    assert store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.THOUGHT,), last_n=3)) == []
    store.record(message(chronicum_id))
    assert store.acta(chronicum_id, ActaQuery(actum_kinds=(ActumKind.THOUGHT,), last_n=3)) == []
    with pytest.raises(ChronicumNotFound):
        store.acta(f"{chronicum_id}-missing", ActaQuery(last_n=3))


def test_kinds_are_sent_as_a_text_array_literal_that_keeps_every_value(admin: Admin) -> None:
    values = ["message", 'q"uote', "back\\slash", "a,b", "{brace}", "NULL", "", "with space"]
    row = admin.execute("SELECT %s::text[]", (text_array(values),)).fetchone()
    assert row == (values,)


# -- content ---------------------------------------------------------------------------------


def test_content_with_nul_is_kept_as_bytes_and_the_rest_as_text(store: PostgresStore, admin: Admin) -> None:
    chronicum_id = new_chronicum(store)
    contents = ["plain", "with\x00nul", "\x00", "emoji \U0001f37d\x00 and \U0010ffff"]
    for content in contents:
        store.record(message(chronicum_id, content))
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == contents
    stored = admin.execute(
        "SELECT content, content_bytes FROM acta WHERE chronicum_id = %s ORDER BY seq", (chronicum_id,)
    ).fetchall()
    assert stored[0] == ("plain", None)
    assert [row[0] for row in stored[1:]] == [None, None, None]
    assert [bytes(row[1]).decode() for row in stored[1:]] == contents[1:]


def test_idempotent_retry_returns_nul_content_as_stored(store: PostgresStore) -> None:
    chronicum_id = new_chronicum(store)
    first = store.record_idempotent(message(chronicum_id, "first\x00try"), "key-nul")
    again = store.record_idempotent(message(chronicum_id, "second"), "key-nul")
    assert again == first
    assert again.content == "first\x00try"


# -- lost connections ------------------------------------------------------------------------


def test_a_keyed_write_whose_connection_is_killed_is_tried_again_and_lands_once(
    store: PostgresStore, postgres_url: str, admin: Admin, schema: str
) -> None:
    chronicum_id = new_chronicum(store)
    store.record(message(chronicum_id, "before"))
    attempt = message(chronicum_id, "the write that gets killed")
    # A second session inserts, uncommitted, a row with the same idempotency key: the store's
    # statement then takes the chronicum's row and its next seq, and waits on the unique index.
    with psycopg.connect(postgres_url) as blocker:
        blocker.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        blocker.execute(
            "INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, at, idempotency_key)"
            " VALUES (%s, -1, 'blocker', 'message', 'system', 'test', 'x', now(), 'retry-key')",
            (chronicum_id,),
        )
        outcome: dict[str, BaseException | Actum] = {}

        def write() -> None:
            try:
                outcome["result"] = store.record_idempotent(attempt, "retry-key")
            except BaseException as error:  # noqa: BLE001 - inspected below
                outcome["result"] = error

        writer = threading.Thread(target=write)
        writer.start()
        blocked_pid = _wait_for_backend_blocked_by(admin, blocker.info.backend_pid)
        state = admin.execute(
            "SELECT backend_xid IS NOT NULL, wait_event FROM pg_stat_activity WHERE pid = %s", (blocked_pid,)
        ).fetchone()
        # It holds a transaction id (it has written: the chronicum's row) and waits on the blocker's.
        assert state == (True, "transactionid")
        admin.execute("SELECT pg_terminate_backend(%s)", (blocked_pid,))
        # The killed statement wrote nothing; the store tries the keyed write once more, on another
        # connection, which waits on the blocker in its turn.
        _wait_for_backend_blocked_by(admin, blocker.info.backend_pid, other_than=blocked_pid)
        blocker.rollback()
        writer.join()
    stored = outcome["result"]
    assert isinstance(stored, Actum), stored
    assert stored.content == "the write that gets killed"
    again = store.record_idempotent(message(chronicum_id, "reworded"), "retry-key")
    assert again == stored
    assert [actum.content for actum in store.acta(chronicum_id, ActaQuery())] == [
        "before",
        "the write that gets killed",
    ]
    assert seqs(admin, chronicum_id) == [1, 2]


def _wait_for_backend_blocked_by(admin: Admin, blocker_pid: int, other_than: int = 0) -> int:
    """Poll (no fixed sleep) until a backend but ``other_than`` waits on ``blocker_pid``; return its pid."""
    for _ in range(10_000):
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid)) AND pid <> %s",
            (blocker_pid, other_than),
        ).fetchone()
        if row is not None:
            return int(row[0])
        admin.execute("SELECT pg_sleep(0.005)")
    raise AssertionError("the store's statement never waited on the blocking session")


CLOSED_PORT_URL = "postgresql://postgres@127.0.0.1:1/test"
REFUSED = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
BAD_PARAMETER_URL = "postgresql://postgres@127.0.0.1:5432/test?sslmode=bogus"
BAD_PARAMETER = 'invalid sslmode value: "bogus"'


def open_async_and_call(url: str, **options: Any) -> None:
    """Construct an asyncio store on ``url`` and make its first call (which opens it)."""
    store = AsyncPostgresStore(url, **options)

    async def first_call() -> None:
        try:
            await store.get("anything")
        finally:
            await store.close()

    asyncio.run(first_call())


@pytest.mark.parametrize(
    ("url", "message"),
    [(CLOSED_PORT_URL, REFUSED), (BAD_PARAMETER_URL, BAD_PARAMETER)],
    ids=["refused", "url"],
)
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_refused_connection_or_bad_url_fails_at_once_with_the_drivers_message(
    url: str, message: str, flavour: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Not after pool_timeout (30 s by default) of pool warnings: the direct connection tells."""
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    opening: Callable[[str], object] = PostgresStore if flavour == "sync" else open_async_and_call
    with pytest.raises(StoreError) as raised:
        opening(url)
    elapsed = time.monotonic() - started
    assert raised.value.where == "postgres: open"
    assert message in raised.value.detail
    assert isinstance(raised.value.__cause__, psycopg.Error)
    assert message in str(raised.value.__cause__)
    assert elapsed < 5, f"took {elapsed:.1f} s"
    assert [record for record in caplog.records if record.name.startswith("psycopg.pool")] == []


def test_open_store_and_migrate_report_a_refused_connection_as_open_errors() -> None:
    with pytest.raises(StoreError) as raised:
        open_store(CLOSED_PORT_URL)
    assert raised.value.where == "postgres: open"
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    with pytest.raises(StoreError) as raised:
        migrate(BAD_PARAMETER_URL)
    assert raised.value.where == "postgres: open"
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)


def test_async_migrate_reports_a_refused_connection_as_an_open_error() -> None:
    store = AsyncPostgresStore(CLOSED_PORT_URL, auto_migrate=False)

    async def scenario() -> None:
        try:
            await store.migrate()
        finally:
            await store.close()

    with pytest.raises(StoreError) as raised:
        asyncio.run(scenario())
    assert raised.value.where == "postgres: open"
    assert REFUSED in raised.value.detail


def test_a_malformed_url_is_left_to_libpq_to_name() -> None:
    assert split_schema("postgresql://[::1/test?schema=x") == ("postgresql://[::1/test?schema=x", None)
    with pytest.raises(StoreError) as raised:
        PostgresStore("postgresql://[::1/test")
    assert raised.value.where == "postgres: open"
    assert "IPv6 host address" in raised.value.detail
    assert isinstance(raised.value.__cause__, psycopg.ProgrammingError)


def test_a_pool_given_by_the_caller_is_used_without_a_direct_connection(
    postgres_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The direct check is only for a pool the store opens itself."""

    def no_direct_connection(*arguments: object) -> None:
        raise AssertionError("the store connected directly although it was given a pool")

    monkeypatch.setattr(chronica_postgres.store, "_check_connection", no_direct_connection)
    monkeypatch.setattr(chronica_postgres.store, "_check_connection_async", no_direct_connection)

    async def through_async_pool() -> int:
        async with AsyncConnectionPool(postgres_url, min_size=1, max_size=1, open=False) as pool:
            return await AsyncPostgresStore(pool=pool, schema=schema).migrate()

    with ConnectionPool(postgres_url, min_size=1, max_size=1, open=True) as pool:
        with PostgresStore(pool=pool, schema=schema) as store:
            assert store.migrate() == LATEST_VERSION
        assert not pool.closed
    assert asyncio.run(through_async_pool()) == LATEST_VERSION


def test_async_migrate_opens_the_pool_itself(postgres_url: str, fresh_schema: str) -> None:
    store = AsyncPostgresStore(postgres_url, schema=fresh_schema, auto_migrate=False)

    async def scenario() -> tuple[int, list[Actum]]:
        try:
            version = await store.migrate()
            chronicum_id = f"pg-async-migrate-{uuid.uuid4().hex}"
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            return version, await store.acta(chronicum_id, ActaQuery())
        finally:
            await store.close()

    assert asyncio.run(scenario()) == (LATEST_VERSION, [])


# -- options, pools given by the caller, registration ------------------------------------------


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"pool_size": "3"}, "pool_size"),
        ({"max_size": "many"}, "max_size"),
        ({"min_size": 5, "max_size": 2}, "max_size"),
        ({"auto_migrate": "perhaps"}, "auto_migrate"),
        ({"schema": ""}, "schema"),
        ({"prepared_statements": "sometimes"}, "prepared_statements"),
        ({"listen": " "}, "listen"),
    ],
)
def test_bad_options_are_named(postgres_url: str, options: dict[str, object], option: str) -> None:
    with pytest.raises(InvalidOption) as raised:
        PostgresStore(postgres_url, **options)  # type: ignore[arg-type]
    assert (raised.value.backend, raised.value.option) == ("postgres", option)
    assert str(raised.value).startswith(f"postgres: option {option}: ")
    with pytest.raises(InvalidOption) as raised_async:
        AsyncPostgresStore(postgres_url, **options)  # type: ignore[arg-type]
    assert (raised_async.value.backend, raised_async.value.option) == ("postgres", option)


def test_an_unknown_option_names_the_known_ones_and_is_the_cores_error() -> None:
    with pytest.raises(InvalidOption) as raised:
        open_store(CLOSED_PORT_URL, pool_size=3)  # refused before any connection is tried
    assert str(raised.value) == (
        "postgres: option pool_size: unknown option "
        "(known: schema, auto_migrate, min_size, max_size, max_idle, connect_timeout, pool_timeout, "
        "max_content_bytes, operation_timeout, check_idle_after, notify, prepared_statements, listen)"
    )
    assert isinstance(raised.value, ValueError)
    assert "InvalidOption" not in chronica_postgres.__all__
    assert not hasattr(chronica_postgres, "InvalidOption")


def test_a_pool_given_by_the_caller_is_used_and_left_open(postgres_url: str, schema: str) -> None:
    with ConnectionPool(postgres_url, min_size=1, max_size=2, open=True) as pool:  # not autocommit
        with PostgresStore(pool=pool, schema=schema) as store:
            chronicum_id = new_chronicum(store)
            store.record(message(chronicum_id, "through a given pool"))
        with pool.connection() as connection:
            rows = connection.execute(
                sql.SQL("SELECT content FROM {} WHERE chronicum_id = %s").format(
                    sql.Identifier(schema, "acta")
                ),
                (chronicum_id,),
            ).fetchall()
    assert rows == [("through a given pool",)]


def test_an_async_pool_given_by_the_caller_is_used_and_left_open(postgres_url: str, schema: str) -> None:
    async def scenario() -> list[str]:
        async with AsyncConnectionPool(postgres_url, min_size=1, max_size=2, open=False) as pool:
            store = AsyncPostgresStore(pool=pool, schema=schema)
            chronicum_id = f"pg-async-pool-{uuid.uuid4().hex}"
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            await store.record(message(chronicum_id, "through a given async pool"))
            await store.close()
            async with pool.connection() as connection:
                cursor = await connection.execute("SELECT 1")
                assert await cursor.fetchone() == (1,)
            reopened = AsyncPostgresStore(pool=pool, schema=schema, auto_migrate=False)
            return [actum.content for actum in await reopened.acta(chronicum_id, ActaQuery())]

    assert asyncio.run(scenario()) == ["through a given async pool"]


def test_async_store_opens_lazily_in_its_loop_and_forty_tasks_share_a_chronicum(
    postgres_url: str, schema: str, admin: Admin
) -> None:
    store = AsyncPostgresStore(postgres_url, schema=schema, max_size=5)  # no loop yet, no I/O

    async def scenario() -> str:
        chronicum_id = f"pg-async-{uuid.uuid4().hex}"
        try:
            await store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
            await asyncio.gather(*(store.record(message(chronicum_id, f"task {n}")) for n in range(40)))
            keyed = await asyncio.gather(
                *(store.record_idempotent(message(chronicum_id, f"keyed {n}"), "k") for n in range(40))
            )
            assert len({actum.id for actum in keyed}) == 1
        finally:
            await store.close()
        return chronicum_id

    chronicum_id = asyncio.run(scenario())
    assert seqs(admin, chronicum_id) == list(range(1, 42))


def test_a_store_is_done_once_closed_and_an_async_one_serves_a_second_loop_meanwhile(
    async_store: AsyncPostgresStore, postgres_url: str, schema: str
) -> None:
    with PostgresStore(postgres_url, schema=schema) as blocking:
        pass
    with pytest.raises(StoreError, match=r"^postgres: store: the store is closed$"):
        blocking.get("any")
    chronicum = Chronicum(f"pg-loop-{uuid.uuid4().hex}", "ardian", datetime.now(UTC))
    with asyncio.Runner() as first_loop:
        first_loop.run(async_store.create(chronicum))
        assert asyncio.run(async_store.get(chronicum.id)) == chronicum  # a pool of its own
        assert asyncio.run(async_store.migrate()) >= 1
        assert first_loop.run(async_store.get(chronicum.id)) == chronicum  # the first loop's pool is intact
        first_loop.run(async_store.close())
        with pytest.raises(StoreError, match=r"^postgres: async store: the store is closed$"):
            first_loop.run(async_store.get(chronicum.id))  # not reopened behind the caller's back
        with pytest.raises(StoreError, match=r"^postgres: async store: the store is closed$"):
            first_loop.run(async_store.migrate())
        with pytest.raises(StoreError, match=r"^postgres: async store: the store is closed$"):
            asyncio.run(async_store.get(chronicum.id))


def test_the_backend_is_registered_for_both_schemes(postgres_url: str, schema: str) -> None:
    installed, _ = list_backends()
    backend = next(item.backend for item in installed if item.backend.name == "postgres")
    assert backend.schemes == ("postgresql", "postgres")
    assert backend.idempotent
    assert backend.install == "chronica-postgres[binary]"
    short_url = postgres_url.replace("postgresql://", "postgres://", 1)
    with open_store(short_url, schema=schema, auto_migrate="false") as store:
        assert isinstance(store, PostgresStore)
        chronicum_id = new_chronicum(store)
        assert store.get(chronicum_id).id == chronicum_id
    async_store = open_async_store(postgres_url, schema=schema)
    assert isinstance(async_store, AsyncPostgresStore)

    async def read() -> Chronicum:
        try:
            return await async_store.get(chronicum_id)
        finally:
            await async_store.close()

    assert asyncio.run(read()).owner_id == "ardian"


@pytest.mark.parametrize("keyed", [False, True])
def test_at_is_never_earlier_than_the_last_actum_at(store: PostgresStore, admin: Admin, keyed: bool) -> None:
    """A last_actum_at ahead of the server's clock (a failover to a server whose clock is behind)
    is the floor of the next actum's ``at``."""
    chronicum_id = new_chronicum(store)
    store.record(message(chronicum_id, "first"))
    ahead = admin.execute(
        "UPDATE chronica SET last_actum_at = last_actum_at + interval '1 hour' WHERE id = %s"
        " RETURNING last_actum_at",
        (chronicum_id,),
    ).fetchone()
    assert ahead is not None
    sent = message(chronicum_id, "second")
    stored = store.record_idempotent(sent, "second") if keyed else store.record(sent)
    assert stored.at == ahead[0]
    assert [actum.at for actum in store.acta(chronicum_id, ActaQuery())][-1] == ahead[0]
    assert store.get(chronicum_id).last_actum_at == ahead[0]


def test_an_async_store_closed_from_another_loop_raises_and_logs_nothing(
    async_store: AsyncPostgresStore, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The loop that used it has closed, its pool with it; close() from a new loop logs nothing."""
    chronicum = Chronicum(f"pg-other-loop-{uuid.uuid4().hex}", "ardian", datetime.now(UTC))
    asyncio.run(async_store.create(chronicum))
    capfd.readouterr()
    with caplog.at_level(logging.DEBUG):
        asyncio.run(async_store.close())
        gc.collect()
    assert [record for record in caplog.records if record.exc_info or record.levelno >= logging.WARNING] == []
    assert "Traceback" not in capfd.readouterr().err
    with pytest.raises(StoreError, match=r"^postgres: async store: the store is closed$"):
        asyncio.run(async_store.get(chronicum.id))
