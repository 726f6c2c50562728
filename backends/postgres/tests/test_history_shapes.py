"""Native forms, histories with a shape and retention in PostgreSQL, read from the raw tables too.

A schema of version 3 (before these capabilities) migrates keeping its acta readable as before;
a window of any shape is one round trip; with ``encryption_keys`` neither content nor native
data reach the tables in plaintext; idle chronica are found through their index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from hashlib import md5
from typing import Any

import psycopg
import pytest
from chronica_postgres import PostgresStore
from chronica_postgres import schema as schema_module
from chronica_postgres.history import HistoryPlans
from chronica_postgres.plans import Statement
from chronica_postgres.retention import RetentionStatements
from chronica_postgres.schema import LATEST_VERSION, MIGRATIONS, VERSION_TABLE, Statements
from conftest import TEST_POOL_SIZE
from psycopg import sql

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Chronicum,
    Native,
    Span,
    new_actum_id,
    new_chronicum_id,
    open_store,
)
from chronica_core.encryption import MemoryKeys
from chronica_core.history import Layout, RangeRead, Segment, WindowQuery, WindowReads, plan_window

Admin = psycopg.Connection[tuple[Any, ...]]

OWNER = "ardian"


def message(chronicum_id: str, content: str, kind: ActumKind = ActumKind.MESSAGE) -> Actum:
    actor_kind = ActorKind.HUMAN if kind is ActumKind.MESSAGE else ActorKind.AGENT
    return Actum(chronicum_id, kind, actor_kind, OWNER, content, new_actum_id())


@pytest.fixture
def raw(postgres_url: str) -> Iterator[Admin]:
    """An autocommit connection of the test's own."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


def _version_three_schema(
    admin: Admin, schema: str, monkeypatch: pytest.MonkeyPatch, version: int = 3
) -> None:
    """The schema as chronica-postgres created it before migration ``version + 1`` (scripts as written)."""
    with monkeypatch.context() as patch:
        patch.setattr(schema_module, "MIGRATIONS", MIGRATIONS[:version])
        script = Statements(schema).migrate
    admin.execute(script)
    admin.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))


def test_a_version_three_schema_migrates_keeping_its_acta_readable_as_before(
    postgres_url: str, fresh_schema: str, raw: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    _version_three_schema(raw, fresh_schema, monkeypatch)
    assert raw.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone() == (3,)
    chronicum_id = new_chronicum_id()
    ids = [new_actum_id() for _ in range(3)]
    raw.execute(
        "INSERT INTO chronica (id, owner_id, started_at, last_actum_at, last_seq)"
        " VALUES (%s, %s, now() - interval '2 days', now() - interval '1 day', 3)",
        (chronicum_id, OWNER),
    )
    for seq, (actum_id, kind, content, content_bytes, key) in enumerate(
        [
            (ids[0], "message", "hello", None, None),
            (ids[1], "tool_request", None, b"nul \x00 inside", "old-key"),
            (ids[2], "tool_response", "result", None, None),
        ],
        start=1,
    ):
        raw.execute(
            "INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, content_bytes, at,"
            " idempotency_key) VALUES (%s, %s, %s, %s, 'agent', 'old', %s, %s, now() - interval '1 day', %s)",
            (chronicum_id, seq, actum_id, kind, content, content_bytes, key),
        )

    with PostgresStore(postgres_url, schema=fresh_schema, max_size=TEST_POOL_SIZE) as store:
        assert raw.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone() == (LATEST_VERSION,)
        old = store.acta(chronicum_id, ActaQuery())
        assert [(actum.id, actum.content) for actum in old] == [
            (ids[0], "hello"),
            (ids[1], "nul \x00 inside"),
            (ids[2], "result"),
        ]
        assert [(actum.native, actum.answers, actum.summarizes) for actum in old] == [(None, "", None)] * 3
        assert store.record_idempotent(message(chronicum_id, "retry"), "old-key") == old[1]
        chronicarius = Chronicarius(store)
        assert chronicarius.get_acta(OWNER, chronicum_id) == old
        layout = store.layout(chronicum_id)
        assert layout.lineage == (Segment(chronicum_id, 0, None),) and layout.summaries == ()
        located = store.locate(layout.lineage, tuple(ids))
        assert {actum_id: found.position for actum_id, found in located.items()} == {
            ids[0]: 1,
            ids[1]: 2,
            ids[2]: 3,
        }
        # the new shapes over old data: a fork, a summary, a tool response naming an old request
        fork = chronicarius.fork_chronicum(OWNER, chronicum_id, at=ids[1])
        assert chronicarius.get_acta(OWNER, fork.id) == old[:2]
        summary = replace(message(chronicum_id, "in short"), summarizes=Span(ids[0], ids[1]))
        chronicarius.record_actum(OWNER, summary)
        response = replace(message(chronicum_id, "late result", ActumKind.TOOL_RESPONSE), answers=ids[1])
        answered = chronicarius.record_actum(OWNER, response)
        window = chronicarius.get_acta(OWNER, chronicum_id, last_n=1)
        assert [actum.id for actum in window] == [ids[1], answered.id]  # the request reached back for
        # the fork's last activity is when it was forked, though its newest actum is a day old
        an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
        assert fork.last_actum_at is not None and fork.last_actum_at < an_hour_ago
        assert store.idle_chronica(an_hour_ago, OWNER, None, 10) == []
        everyone = [found.id for found in store.idle_chronica(datetime.now(UTC), None, None, 1001)]
        assert everyone.index(fork.id) < everyone.index(chronicum_id)  # forked before the last writes


def test_a_version_five_schema_rebuilds_its_idle_indexes_on_a_fork_s_fork_time(
    postgres_url: str, fresh_schema: str, raw: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    _version_three_schema(raw, fresh_schema, monkeypatch, version=5)
    indexes = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND indexname LIKE %s"
    before: dict[str, str] = dict(raw.execute(indexes, (fresh_schema, "chronica%idle")).fetchall())
    assert len(before) == 2 and all("COALESCE(last_actum_at, started_at)" in d for d in before.values())
    with PostgresStore(postgres_url, schema=fresh_schema, max_size=TEST_POOL_SIZE) as store:
        assert raw.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone() == (LATEST_VERSION,)
        after: dict[str, str] = dict(raw.execute(indexes, (fresh_schema, "chronica%idle")).fetchall())
        assert sorted(after) == ["chronica_idle", "chronica_owner_idle"]
        assert all("GREATEST(started_at, last_actum_at)" in d for d in after.values()), after
        raw.execute("SET enable_seqscan = off")
        idle = RetentionStatements(store.plans.statements).idle(owner=False, after=False)
        plan = "\n".join(row[0] for row in raw.execute(b"EXPLAIN " + idle, (datetime.now(UTC), 5)))
        assert re.search(r"Index Scan (using|on) chronica_idle ", plan), plan


def test_a_window_of_any_shape_is_one_round_trip(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    chronicarius = Chronicarius(store)
    source = new_chronicum_id()
    written = [chronicarius.record_actum(OWNER, message(source, f"m-{index}")) for index in range(30)]
    request = chronicarius.record_actum(OWNER, message(source, "call", ActumKind.TOOL_REQUEST))
    chronicarius.record_acta(OWNER, [message(source, f"n-{index}") for index in range(25)])
    chronicarius.record_actum(
        OWNER, replace(message(source, "result", ActumKind.TOOL_RESPONSE), answers=request.id)
    )
    chronicarius.record_actum(
        OWNER, replace(message(source, "in short"), summarizes=Span(written[0].id, written[9].id))
    )
    fork = chronicarius.fork_chronicum(OWNER, source)
    chronicarius.record_actum(OWNER, message(fork.id, "own"))
    shapes: list[dict[str, Any]] = [
        {"last_n": 20},
        {"last_n": 5, "actum_kinds": ("message",), "actor_kinds": ("human",)},
        {"view": "as_written"},
        {"last_n": 3, "tool_exchanges": "drop_orphans", "newest_first": True},
    ]
    executes = 0
    real_execute = psycopg.Cursor.execute

    def execute(cursor: Any, *arguments: Any, **keywords: Any) -> Any:
        nonlocal executes
        executes += 1
        return real_execute(cursor, *arguments, **keywords)

    for shape in shapes:
        for chronicum_id in (source, fork.id):
            chronicarius.get_acta(OWNER, chronicum_id, **shape)  # the layout is remembered now
            executes = 0
            with monkeypatch.context() as patch:
                patch.setattr(psycopg.Cursor, "execute", execute)
                window = chronicarius.get_acta(OWNER, chronicum_id, **shape)
            assert window, shape
            assert executes == 1, (shape, chronicum_id, executes)


def test_content_and_native_data_are_sealed_in_the_tables(
    postgres_url: str, schema: str, admin: Admin
) -> None:
    secret, native_secret = "the door code is 4711", '{"secret": "under the mat"}'
    chronicum_id = new_chronicum_id()
    with open_store(postgres_url, schema=schema, encryption_keys=MemoryKeys()) as store:
        chronicarius = Chronicarius(store)
        written = replace(message(chronicum_id, secret), native=Native("test.item", native_secret))
        chronicarius.record_actum(OWNER, written)
        chronicarius.record_acta(
            OWNER, [replace(message(chronicum_id, f"{secret} #2"), native=Native("t", native_secret))]
        )
        [read, second] = chronicarius.get_acta(OWNER, chronicum_id)
        assert (read.content, read.native) == (secret, Native("test.item", native_secret))
        assert second.native == Native("t", native_secret)
    rows = admin.execute(
        "SELECT row_to_json(acta)::text FROM acta WHERE chronicum_id = %s", (chronicum_id,)
    ).fetchall()
    assert len(rows) == 2
    for (row,) in rows:
        assert "test.item" in row or '"t"' in row  # the format stays clear
        for plain in ("door code", "4711", "under the mat", "secret"):
            assert plain not in row, row


def test_idle_chronica_are_read_from_their_index(store: PostgresStore, admin: Admin) -> None:
    statements = RetentionStatements(store.plans.statements)
    admin.execute("SET enable_seqscan = off")  # the tables are small: see that an index serves it
    # ... in the index's order (else one owner's few rows may come from the listing index and a sort)
    admin.execute("SET enable_sort = off")
    for owner, sql_text, parameters in (
        (False, statements.idle(owner=False, after=False), (datetime.now(UTC), 5)),
        (
            True,
            statements.idle(owner=True, after=True),
            (OWNER, datetime.now(UTC), datetime.now(UTC), "x", 5),
        ),
    ):
        plan = "\n".join(row[0] for row in admin.execute(b"EXPLAIN " + sql_text, parameters).fetchall())
        # On small tables the planner may serve one owner's query from either idle index: both
        # walk idle chronica only, so the cost follows what is idle, not the table's size.
        expected = "(chronica_owner_idle|chronica_idle)" if owner else "chronica_idle"
        assert re.search(rf"Index Scan (using|on) {expected} ", plan), plan  # a bitmap one on few rows
        assert "Seq Scan" not in plan, plan


def page_reads(layout: Layout, position: int, limit: int) -> WindowReads:
    """The reads of a page of ``limit`` acta after ``position``, as the rules plan one."""
    return WindowReads(
        tuple(
            RangeRead(Segment(s.chronicum_id, max(s.after, position), s.upto), None, None, limit, False, True)
            for s in layout.lineage
            if s.upto is None or s.upto > position
        )
    )


def _rows_read(admin: Admin, statement: bytes, values: tuple[Any, ...]) -> list[int]:
    """The rows each node of ``statement``'s generic plan returned, run with ``values``."""
    numbers = iter(range(1, len(values) + 1))
    prepared = re.sub(rb"%s", lambda _: b"$%d" % next(numbers), statement)
    admin.execute("SET plan_cache_mode = force_generic_plan")
    admin.execute(b"PREPARE chronica_shape AS " + prepared)
    try:
        arguments = sql.SQL(", ").join(sql.Literal(value) for value in values)
        rows = admin.execute(
            sql.SQL("EXPLAIN (ANALYZE, TIMING OFF) EXECUTE chronica_shape({})").format(arguments)
        ).fetchall()
    finally:
        admin.execute("DEALLOCATE chronica_shape")
        admin.execute("RESET plan_cache_mode")
    plan = "\n".join(str(row[0]) for row in rows)
    return [int(found) for found in re.findall(r"actual rows=(\d+)", plan)]


def test_a_fork_s_reads_stay_flat_with_its_shared_prefix(store: PostgresStore, admin: Admin) -> None:
    chronicarius = Chronicarius(store)
    source = new_chronicum_id()
    store.create(Chronicum(source, OWNER, datetime.now(UTC)))
    admin.execute(
        """
        INSERT INTO acta (chronicum_id, seq, id, kind, actor_kind, actor, content, at)
        SELECT %s, n, md5('shape' || n), 'message', 'human', 'ardian', 'actum ' || n, now()
        FROM generate_series(1, 100000) AS n
        """,
        (source,),
    )
    admin.execute("UPDATE chronica SET last_seq = 100000 WHERE id = %s", (source,))
    admin.execute("ANALYZE acta")
    fork = chronicarius.fork_chronicum(OWNER, source)
    request = chronicarius.record_actum(OWNER, message(fork.id, "call", ActumKind.TOOL_REQUEST))
    chronicarius.record_acta(OWNER, [message(fork.id, f"own {index}") for index in range(25)])
    answer = replace(message(fork.id, "result", ActumKind.TOOL_RESPONSE), answers=request.id)
    chronicarius.record_actum(OWNER, answer)
    window = chronicarius.get_acta(OWNER, fork.id, last_n=20)
    assert [actum.content for actum in window] == ["call", *(f"own {n}" for n in range(6, 25)), "result"]
    layout = store.layout(fork.id)
    history = HistoryPlans(store.plans)
    reads = (
        plan_window(layout, WindowQuery(last_n=20)),
        plan_window(layout, WindowQuery(last_n=50)),  # into the shared prefix
        page_reads(layout, 99_990, 20),
    )
    for read in reads:
        operation = history.window(fork.id, read)
        statement = next(operation)
        operation.close()
        assert isinstance(statement, Statement)
        read_rows = _rows_read(admin, statement.sql, statement.params or ())
        assert max(read_rows) <= 150, (read, read_rows)  # at most 50 a read, never the prefix
    middle = md5(b"shape50000").hexdigest()
    locating = history.locate(layout.lineage, (middle,))
    statement = next(locating)
    locating.close()
    assert isinstance(statement, Statement)
    assert max(_rows_read(admin, statement.sql, statement.params or ())) == 1
    assert store.locate(layout.lineage, (middle,))[middle].position == 50_000
