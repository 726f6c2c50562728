"""Native forms, forks, summaries, tool exchanges and retention in the raw tables, on each selected dialect.

The conformance suite checks what the capabilities promise; these check how this backend keeps
them: the migration from version 2 (acta written before read back as before), what encryption
at rest leaves in the rows, one round trip for a window on PostgreSQL, the indexes the reads use.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from chronica_sqlalchemy import SQLAlchemyStore
from chronica_sqlalchemy.engines import plan_connections
from chronica_sqlalchemy.executor import execute
from chronica_sqlalchemy.plans import Plans
from chronica_sqlalchemy.schema import ACTA_BY_ID_INDEX, IDLE_INDEX, OWNER_IDLE_INDEX, Tables
from sqlalchemy import Engine, create_engine, event, inspect, select
from test_capabilities import explained
from test_round_trips import Counter

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Native,
    Span,
    open_store,
)
from chronica_core.encryption import SEALED_PREFIX, DerivedKeys
from chronica_core.history import Layout, RangeRead, Segment, WindowQuery, WindowReads, plan_window

MOMENT = datetime(2025, 6, 7, 8, 9, 10, 111213, tzinfo=UTC)


def new_id(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


def actum(chronicum_id: str, kind: ActumKind, content: str, **fields: Any) -> Actum:
    return Actum(chronicum_id, kind, ActorKind.AGENT, "booking", content, **fields)


# --- migration from version 2 ------------------------------------------------------------------


def test_a_schema_at_version_2_migrates_and_its_acta_read_back_as_before(
    fresh_target: tuple[str, str | None],
) -> None:
    url, schema = fresh_target
    url = url.replace("+aiosqlite", "")
    engine = create_engine(url)
    try:
        old = Tables.build(schema, 2)
        assert "native_data" not in old.acta.c and "last_active" not in old.chronica.c
        execute(
            plan_connections(engine, None, made_here=False),
            Plans(Tables.build(schema), engine.dialect, schema).migrate(2),
        )
        kinds = (ActumKind.MESSAGE, ActumKind.TOOL_REQUEST, ActumKind.TOOL_RESPONSE)
        with engine.begin() as connection:
            connection.execute(
                old.chronica.insert(),
                [
                    {
                        "id": "old",
                        "owner_id": "elder",
                        "started_at": MOMENT,
                        "last_actum_at": MOMENT,
                        "last_seq": 3,
                    },
                    {
                        "id": "quiet",
                        "owner_id": "elder",
                        "started_at": MOMENT,
                        "last_actum_at": None,
                        "last_seq": 0,
                    },
                ],
            )
            connection.execute(
                old.acta.insert(),
                [
                    {
                        "chronicum_id": "old",
                        "seq": seq,
                        "id": f"old-{seq}",
                        "kind": kind.value,
                        "actor_kind": "agent",
                        "actor": "booking",
                        "content": f"kept {seq}",
                        "at": MOMENT,
                        "idempotency_key": None,
                        "batch_size": None,
                    }
                    for seq, kind in enumerate(kinds, start=1)
                ],
            )
        with SQLAlchemyStore.open(url, schema=schema) as store:
            with store.engine.connect() as connection:
                indexes = {
                    index["name"]
                    for table in ("chronica", "acta")
                    for index in inspect(connection).get_indexes(table, schema=schema)
                }
                names = set(inspect(connection).get_table_names(schema=schema))
            assert {ACTA_BY_ID_INDEX, IDLE_INDEX, OWNER_IDLE_INDEX} <= indexes
            assert {"lineages", "summaries"} <= names
            kept = store.acta("old", ActaQuery())
            assert [(a.id, a.kind, a.content, a.at, a.native, a.answers, a.summarizes) for a in kept] == [
                (f"old-{seq}", kind, f"kept {seq}", MOMENT, None, "", None)
                for seq, kind in enumerate(kinds, start=1)
            ]
            layout = store.layout("old")
            assert (layout.lineage, layout.summaries) == ((Segment("old", 0, None),), ())
            read = RangeRead(Segment("old", 0, None), None, None, 2, True, False)
            rows = store.window("old", WindowReads((read,)))
            assert (list(rows.positions), [a.id for a in rows.acta]) == ([2, 3], ["old-2", "old-3"])
            assert rows.version == layout.version
            idle = store.idle_chronica(MOMENT + timedelta(seconds=1), "elder", None, 10)
            assert [(chronicum.id, chronicum.last_actum_at) for chronicum in idle] == [
                ("old", MOMENT),
                ("quiet", None),
            ]
            rules = Chronicarius(store)
            fork = rules.fork_chronicum("elder", "old", at="old-2")
            answer = actum(fork.id, ActumKind.TOOL_RESPONSE, "new", answers="old-2")
            native = Native("tests.item", '{"n": 1}')
            answered = rules.record_actum("elder", answer)
            noted = rules.record_actum("elder", actum("old", ActumKind.MESSAGE, "noted", native=native))
            assert [a.id for a in rules.get_acta("elder", fork.id)] == ["old-1", "old-2", answered.id]
            assert rules.get_acta("elder", "old")[-1] == noted
            assert store.layout(fork.id).lineage == (Segment("old", 0, 2), Segment(fork.id, 2, None))
    finally:
        engine.dispose()


# --- encryption at rest ------------------------------------------------------------------------


def every_text(engine: Engine, tables: Tables) -> str:
    """Every value of every row of the store's tables, as one text."""
    values: list[str] = []
    with engine.connect() as connection:
        for table in (tables.chronica, tables.acta, tables.lineages, tables.summaries):
            for row in connection.execute(select(table)):
                values.extend(
                    bytes(value).decode("utf-8", "replace")
                    if isinstance(value, bytes | memoryview)
                    else str(value)
                    for value in row
                )
    return "\n".join(values)


def test_encryption_at_rest_leaves_no_content_or_native_data_in_the_rows(database_url: str) -> None:
    keys = DerivedKeys({"k1": b"m" * 32}, current="k1")
    store = open_store(database_url.replace("+aiosqlite", ""), encryption_keys=keys)
    try:
        rules = Chronicarius(store)
        chronicum_id = new_id("sealed")
        secret, hidden = f"the safe code is {new_id('code')}", new_id("under the blue vase")
        native_secret = f'{{"note": "{hidden}"}}'
        written = rules.record_actum(
            "ardian",
            actum(chronicum_id, ActumKind.MESSAGE, secret, native=Native("tests.item", native_secret)),
        )
        assert rules.get_acta("ardian", chronicum_id) == [written]
        raw = SQLAlchemyStore.open(database_url.replace("+aiosqlite", ""), auto_migrate=False)
        try:
            text = every_text(raw.engine, raw.plans.tables)
            with raw.engine.connect() as connection:
                row = connection.execute(
                    select(raw.plans.tables.acta).where(raw.plans.tables.acta.c.id == written.id)
                ).one()
        finally:
            raw.close()
        assert written.id in text
        assert secret not in text and hidden not in text
        assert row.content.startswith(SEALED_PREFIX) and row.native_data.startswith(SEALED_PREFIX)
        assert row.native_format == "tests.item"
    finally:
        store.close()


# --- one statement, and the indexes ------------------------------------------------------------


@pytest.fixture
def counted_store(shared_store: SQLAlchemyStore, database_url: str) -> Iterator[SQLAlchemyStore]:
    """A blocking store of its own (one pooled connection) on the session's migrated database."""
    store = SQLAlchemyStore.open(database_url, auto_migrate=False, pool_size=1, max_overflow=0)
    yield store
    store.close()


def shaped_history(store: SQLAlchemyStore) -> tuple[str, Layout]:
    """A fork of a chronicum with a tool exchange and a summary, its own acta after: its layout."""
    rules = Chronicarius(store)
    source = new_id("source")
    first = rules.record_actum("ardian", actum(source, ActumKind.MESSAGE, "find a table"))
    request = rules.record_actum("ardian", actum(source, ActumKind.TOOL_REQUEST, "search"))
    rules.record_actum("ardian", actum(source, ActumKind.MESSAGE, "thinking"))
    summary = actum(source, ActumKind.MESSAGE, "asked for a table", summarizes=Span(first.id, request.id))
    rules.record_actum("ardian", summary)
    fork = rules.fork_chronicum("ardian", source)
    rules.record_actum("ardian", actum(fork.id, ActumKind.TOOL_RESPONSE, "found", answers=request.id))
    rules.record_actum("ardian", actum(fork.id, ActumKind.MESSAGE, "booked"))
    return fork.id, store.layout(fork.id)


@pytest.mark.dialects("postgresql")
def test_a_window_over_a_fork_with_summaries_and_exchanges_is_one_round_trip(
    counted_store: SQLAlchemyStore,
) -> None:
    fork_id, layout = shaped_history(counted_store)
    rules = Chronicarius(counted_store)
    counter = Counter(counted_store.engine)
    with counter.counting() as window_trips:
        rows = counted_store.window(fork_id, _plan(layout, last_n=3))
    with counter.counting() as layout_trips:
        counted_store.layout(fork_id)
    assert (window_trips, layout_trips) == ([1], [1])
    assert {"found", "booked"} <= {actum.content for actum in rows.acta}
    assert [located.actum.content for located in rows.answered] == ["search"]
    window = rules.get_acta("ardian", fork_id, last_n=2)
    assert [actum.content for actum in window] == ["search", "found", "booked"]


def _plan(layout: Layout, last_n: int) -> WindowReads:
    return plan_window(layout, WindowQuery(last_n=last_n))


def test_the_reads_use_their_indexes(fresh_target: tuple[str, str | None]) -> None:
    """Among thousands of chronica and acta, retention and ``locate`` read through their indexes."""
    url, schema = fresh_target
    with SQLAlchemyStore.open(url.replace("+aiosqlite", ""), schema=schema) as store:
        tables, engine = store.plans.tables, store.engine
        later = datetime(2030, 1, 1, tzinfo=UTC)
        with engine.begin() as connection:
            for start in range(0, 4000, 1000):
                connection.execute(
                    tables.chronica.insert(),
                    [
                        {
                            "id": f"busy-{index}",
                            "owner_id": f"owner-{index % 2000}",
                            "started_at": later,
                            "last_actum_at": None,
                            "last_active": later + timedelta(seconds=index),
                            "last_seq": 0,
                        }
                        for index in range(start, start + 1000)
                    ],
                )
            connection.execute(
                tables.chronica.insert(),
                {
                    "id": "long",
                    "owner_id": "me",
                    "started_at": MOMENT,
                    "last_active": MOMENT,
                    "last_seq": 3000,
                },
            )
            for start in range(0, 3000, 1000):
                connection.execute(
                    tables.acta.insert(),
                    [
                        {
                            "chronicum_id": "long",
                            "seq": seq,
                            "id": f"long-{seq}",
                            "kind": "message",
                            "actor_kind": "human",
                            "actor": "me",
                            "content": "x",
                            "at": MOMENT,
                        }
                        for seq in range(start + 1, start + 1001)
                    ],
                )
            analyze(connection, engine, tables)
        sent: list[tuple[str, Any]] = []

        def seen(connection: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            sent.append((statement, parameters))

        reading = store.read_engine or engine
        event.listen(reading, "before_cursor_execute", seen)
        try:
            idle = store.idle_chronica(MOMENT + timedelta(days=1), None, None, 5)
            owned = store.idle_chronica(MOMENT + timedelta(days=1), "me", None, 5)
            found = store.locate((Segment("long", 0, None),), ("long-7", "long-2999"))
        finally:
            event.remove(reading, "before_cursor_execute", seen)
        assert [chronicum.id for chronicum in idle] == [chronicum.id for chronicum in owned] == ["long"]
        assert sorted(located.position for located in found.values()) == [7, 2999]
        plans = [explained(reading, statement, parameters) for statement, parameters in sent]
        assert IDLE_INDEX in plans[0], plans[0]
        assert OWNER_IDLE_INDEX in plans[1], plans[1]
        assert ACTA_BY_ID_INDEX in plans[2], plans[2]


def analyze(connection: Any, engine: Engine, tables: Tables) -> None:
    """Have the database's statistics count the rows just written."""
    if engine.dialect.name == "sqlite":
        connection.exec_driver_sql("ANALYZE")
        return
    for table in (tables.chronica, tables.acta):
        name = engine.dialect.identifier_preparer.format_table(table)
        connection.exec_driver_sql(
            f"ANALYZE {name}" if engine.dialect.name == "postgresql" else f"ANALYZE TABLE {name}"
        )


def _long_exchanges(store: SQLAlchemyStore, count: int) -> None:
    """``count`` acta of one chronicum ``long`` written straight into fresh tables, no statistics
    gathered: tool requests each answered by the next actum, and a last response answering the first."""
    tables = store.plans.tables
    rows = []
    for seq in range(1, count + 1):
        kind = ("message", "tool_request", "tool_response")[seq % 3]
        answers = f"long-{seq - 1}" if kind == "tool_response" else None
        rows.append(
            {
                "chronicum_id": "long",
                "seq": seq,
                "id": f"long-{seq}",
                "kind": kind,
                "actor_kind": "agent",
                "actor": "booking",
                "content": "x",
                "at": MOMENT,
                "answers": answers,
            }
        )
    rows[-1].update(kind="tool_response", answers="long-1")
    with store.engine.begin() as connection:
        connection.execute(
            tables.chronica.insert(),
            {"id": "long", "owner_id": "me", "started_at": MOMENT, "last_active": MOMENT, "last_seq": count},
        )
        for start in range(0, count, 1000):
            connection.execute(tables.acta.insert(), rows[start : start + 1000])


def test_a_window_looks_up_the_requests_from_the_responses_it_read(
    fresh_target: tuple[str, str | None],
) -> None:
    """Without statistics, the requests are found by id from each response read, not by a scan of
    the chronicum's acta compared with the responses."""
    url, schema = fresh_target
    with SQLAlchemyStore.open(url.replace("+aiosqlite", ""), schema=schema) as store:
        _long_exchanges(store, 10_000)
        sent: list[tuple[str, Any]] = []

        def seen(connection: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
            sent.append((statement, parameters))

        reading = store.read_engine or store.engine
        layout = store.layout("long")
        event.listen(reading, "before_cursor_execute", seen)
        try:
            rows = store.window("long", _plan(layout, last_n=20))
        finally:
            event.remove(reading, "before_cursor_execute", seen)
        assert [actum.id for actum in rows.acta] == [f"long-{seq}" for seq in range(9981, 10_001)]
        requests = {f"long-{seq - 1}" for seq in range(9981, 10_000) if seq % 3 == 2} | {"long-1"}
        assert {located.actum.id for located in rows.answered} == requests
        [(statement, parameters)] = sent
        plan = explained(reading, statement, parameters)
        assert _probed_by_answer(reading.dialect.name, plan), plan


def _probed_by_answer(dialect: str, plan: str) -> bool:
    """Whether ``plan`` finds the requests through ``acta_by_id`` on chronicum and answered id."""
    lines = plan.splitlines()
    if dialect == "sqlite":
        return f"SEARCH acta USING INDEX {ACTA_BY_ID_INDEX} (chronicum_id=? AND id=?)" in lines
    if dialect == "postgresql":  # the index's condition names the answer, no filter compares them
        compared = [line for line in lines if ".answers" in line and " = " in line]
        return bool(compared) and all("Index Cond:" in line for line in compared)
    return any(f"'key': '{ACTA_BY_ID_INDEX}'" in line and ".answers" in line for line in lines)
