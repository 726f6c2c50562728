"""chronica-postgres on hash-partitioned tables: the DDL of the docs' "Scaling out" page, run as written.

The page's ``sql`` block creates ``chronica`` and ``acta`` partitioned by chronicum id (four
partitions each) and records the migrations as applied. These tests run that block in a fresh
schema, then the backend on it: every operation works, racing keyed writes are told apart by the
constraint names of the partitions (``acta_idempotency_key_p0``, ...), and the single-statement
append touches one partition of each table, also as a prepared statement's generic plan.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from chronica_postgres import PostgresStore
from chronica_postgres.plans import record_parameters
from chronica_postgres.schema import LATEST_VERSION, Statements

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicarius,
    Chronicum,
    ChronicumNotFound,
    new_actum_id,
    new_chronicum_id,
)

PAGE = Path(__file__).resolve().parents[3] / "docs" / "how-to" / "scaling-out.md"


def partitioned_ddl(schema: str) -> str:
    """The page's partitioning DDL, with ``schema`` in place of the schema ``chronica``."""
    blocks = re.findall(r"^```sql\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    ddl = next(block for block in blocks if block.startswith("CREATE SCHEMA chronica;"))
    assert re.fullmatch(r"[a-z0-9_]+", schema)
    return re.sub(r"\bchronica\.", f"{schema}.", ddl).replace(
        "CREATE SCHEMA chronica;", f"CREATE SCHEMA {schema};"
    )


@pytest.fixture
def partitioned(postgres_url: str, fresh_schema: str) -> str:
    """A fresh schema holding the page's partitioned tables; dropped after the test."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(partitioned_ddl(fresh_schema).encode())
        kinds = connection.execute(
            "SELECT relname, relkind FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace"
            " WHERE nspname = %s AND relname IN ('chronica', 'acta') ORDER BY relname",
            (fresh_schema,),
        ).fetchall()
    assert kinds == [("acta", "p"), ("chronica", "p")]  # partitioned tables
    return fresh_schema


def said(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)


def test_every_operation_works_on_the_partitioned_tables(postgres_url: str, partitioned: str) -> None:
    with PostgresStore(postgres_url, schema=partitioned) as store:
        assert store.migrate() == LATEST_VERSION  # the later migrations ran on the partitioned tables
        chronicarius = Chronicarius(store)
        dinner, lunch = new_chronicum_id(), new_chronicum_id()
        first = chronicarius.record_actum("ardian", said(dinner, "a table?"), idempotency_key="k-1")
        assert chronicarius.record_actum("ardian", said(dinner, "again"), idempotency_key="k-1") == first
        batch = chronicarius.record_acta(
            "ardian", [said(dinner, "b"), said(dinner, "c")], idempotency_key="k-2"
        )
        assert chronicarius.record_acta("ardian", [said(dinner, "x")], idempotency_key="k-2") == batch
        chronicarius.record_actum("ardian", said(lunch, "lunch?"))
        window = chronicarius.get_acta("ardian", dinner, actum_kinds=[ActumKind.MESSAGE], last_n=2)
        assert [actum.content for actum in window] == ["b", "c"]
        assert {chronicum.id for chronicum in chronicarius.list_chronica("ardian").chronica} == {
            dinner,
            lunch,
        }
        with pytest.raises(ChronicumNotFound):
            chronicarius.record_actum("rafa", said(dinner, "mine?"))
        fork = chronicarius.fork_chronicum("ardian", dinner, at=batch[0].id)  # its rows in other partitions
        chronicarius.record_actum("ardian", said(fork.id, "d"))
        assert [actum.content for actum in chronicarius.get_acta("ardian", fork.id)] == ["a table?", "b", "d"]
        assert chronicarius.erase_chronicum("ardian", dinner) == 3 + 1  # with its fork
        with pytest.raises(ChronicumNotFound):
            chronicarius.get_acta("ardian", dinner)
        chronicarius.record_actum("ardian", said(dinner, "starting over"))  # reopened for its owner
        assert [actum.content for actum in store.acta(dinner, ActaQuery())] == ["starting over"]


def test_racing_keyed_writes_store_one_actum_on_the_partitioned_tables(
    postgres_url: str, partitioned: str
) -> None:
    with PostgresStore(postgres_url, schema=partitioned, max_size=8) as store:
        chronicum_id = new_chronicum_id()
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
        start = threading.Barrier(8)
        keyed: list[Actum] = []
        batches: list[list[Actum]] = []
        failures: list[BaseException] = []

        def message(position: int) -> Actum:
            return Actum(
                chronicum_id, ActumKind.MESSAGE, ActorKind.AGENT, "booking", f"{position}", new_actum_id()
            )

        def write(position: int) -> None:
            start.wait()
            try:
                keyed.append(store.record_idempotent(message(position), "booking-reply-1"))
                batches.append(store.record_many([message(position), message(position)], "booking-batch-1"))
            except BaseException as error:  # noqa: BLE001 - reported below
                failures.append(error)

        threads = [threading.Thread(target=write, args=(position,)) for position in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert len(keyed) == 8 and all(actum == keyed[0] for actum in keyed)  # stored once, returned to all
        assert len(batches) == 8 and all(batch == batches[0] for batch in batches)
        assert store.acta(chronicum_id, ActaQuery()) == [keyed[0], *batches[0]]


def test_the_single_statement_append_touches_one_partition_of_each_table(
    postgres_url: str, partitioned: str
) -> None:
    with PostgresStore(postgres_url, schema=partitioned) as store:
        chronicum_id = new_chronicum_id()
        store.create(Chronicum(chronicum_id, "ardian", datetime.now(UTC)))
    # psycopg's placeholders as PostgreSQL's: PREPARE, then EXPLAIN EXECUTE its generic plan
    statement = Statements(partitioned).record.decode()
    pieces = statement.split("%s")
    numbered = pieces[0] + "".join(f"${place}{piece}" for place, piece in enumerate(pieces[1:], 1))
    parameters = record_parameters(
        Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "hi", new_actum_id()), None
    )
    with psycopg.connect(postgres_url) as connection:
        connection.execute("SET plan_cache_mode = force_generic_plan")
        connection.execute(f"PREPARE append_actum AS {numbered}")
        cursor = psycopg.ClientCursor(connection)
        slots = ", ".join(["%s"] * len(parameters))
        cursor.execute(
            f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE append_actum({slots})", parameters
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        connection.rollback()
    assert len(re.findall(r"Scan using \w+ on chronica_p\d", plan)) == 1, plan  # one partition read
    assert "Subplans Removed: 3" in plan, plan  # the other three pruned as the plan starts
    # the actum is routed to the one partition of acta its chronicum id hashes to
    assert (
        len(re.findall(r"Trigger for constraint acta_chronicum_id_fkey on acta_p\d: calls=1", plan)) == 1
    ), plan
