"""SQLite writes whose statements the standard library's driver runs itself (``driver_statements``)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Generator
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import SQLAlchemyStore
from chronica_sqlalchemy.driver_statements import BULKY_BYTES, DriverStatement, sqlite_rows
from chronica_sqlalchemy.plans import RECONNECT, Step, execute_plan
from chronica_sqlalchemy.schema import Content, UTCDateTime
from chronica_sqlalchemy.sqlite_writers import writer_queue
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import DateTime, bindparam, create_engine, event, literal, select
from sqlalchemy.exc import DBAPIError

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, ChronicumNotFound, StoreError

EVERY_ACTUM = ActaQuery()


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def message(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, id=new_id("a"))


def test_a_record_runs_its_statements_on_the_driver_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "driver.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        first = store.record(message(chronicum_id, "first"))
        statements: list[str] = []
        event.listen(store.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        made: list[str] = []
        sent: list[str] = []

        def checked_out(driver_connection: sqlite3.Connection, *_: object) -> None:
            made.append("checkout")
            driver_connection.set_trace_callback(sent.append)

        event.listen(store.engine, "engine_connect", lambda connection: made.append("Connection"))
        event.listen(store.engine, "checkout", checked_out)
        recorded = [store.record(message(chronicum_id, f"n{index}")) for index in range(5)]
        assert statements == []  # none through SQLAlchemy's execution
        assert made == ["checkout"] * 5  # the pool's own connection, no SQLAlchemy Connection around it
        assert [statement.split()[0] for statement in sent] == ["BEGIN", "UPDATE", "INSERT", "COMMIT"] * 5
        assert [actum.content for actum in store.acta(chronicum_id, EVERY_ACTUM)] == [
            "first",
            *(f"n{index}" for index in range(5)),
        ]
        assert all(actum.at is not None and actum.at.tzinfo is UTC for actum in recorded)
        stored = store.acta(chronicum_id, EVERY_ACTUM)
        assert [actum.at for actum in stored] == [first.at, *(actum.at for actum in recorded)]
        assert store.get(chronicum_id).last_actum_at == recorded[-1].at
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT seq FROM acta ORDER BY seq").fetchall() == [(n,) for n in range(1, 7)]
        assert raw.execute("SELECT last_seq FROM chronica").fetchall() == [(6,)]
    raw.close()


def test_a_refused_record_leaves_no_write_transaction_open(tmp_path: Path) -> None:
    path = tmp_path / "refused.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        store.record(message(chronicum_id, "first"))
        with pytest.raises(ChronicumNotFound):
            store.record(message(new_id("missing"), "nowhere"))
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # at once: the pooled connection holds no write lock
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert [actum.content for actum in store.acta(chronicum_id, EVERY_ACTUM)] == ["first"]


def _write_lock_is_free(path: Path) -> bool:
    """Whether another connection takes the file's write lock at once (nobody holds it)."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


def test_a_record_on_a_connection_closed_underneath_fails_as_a_store_error_and_the_next_one_lands(
    tmp_path: Path,
) -> None:
    path = tmp_path / "closed.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}", busy_timeout="1") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        store.record(message(chronicum_id, "kept"))
        with store.engine.connect() as connection:  # the pool's one idle connection
            driver_connection = connection.connection.driver_connection
        assert driver_connection is not None
        driver_connection.close()
        with pytest.raises(StoreError) as failed:
            store.record(message(chronicum_id, "lost"))
        assert failed.value.where == "sqlalchemy: record actum"
        assert "Cannot operate on a closed database" in failed.value.detail
        queue = writer_queue(store.engine)
        assert queue is not None and not queue.lock.locked()  # the turn was given back
        assert store.record(message(chronicum_id, "landed")).content == "landed"
        assert [actum.content for actum in store.acta(chronicum_id, EVERY_ACTUM)] == ["kept", "landed"]
    assert _write_lock_is_free(path)


def test_a_plan_that_takes_a_new_connection_rolls_back_what_the_driver_began_on_the_old(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reconnect.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))

        def plan() -> Generator[Step, Any, bool]:
            yield Step("begin", (), write=True)  # the driver's BEGIN IMMEDIATE, on a lent connection
            yield RECONNECT
            return _write_lock_is_free(path)

        assert execute_plan(store.engine, plan())
        assert store.record(message(chronicum_id, "after")).content == "after"


def test_a_write_lock_held_by_another_process_is_the_store_error_sqlite_gives(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with SQLAlchemyStore.open(f"sqlite:///{path}", busy_timeout="0", auto_migrate="false") as store:
            with pytest.raises(StoreError) as refused:
                store.record(message(chronicum_id, "locked out"))
            assert refused.value.where == "sqlalchemy: record actum"
            assert refused.value.detail == "OperationalError: database is locked"
            assert isinstance(refused.value.__cause__, DBAPIError)
            blocker.execute("ROLLBACK")
            assert store.record(message(chronicum_id, "let in")).content == "let in"
    finally:
        blocker.close()


def test_a_driver_statement_binds_as_sqlalchemy_would() -> None:
    dialect = create_engine("sqlite://").dialect
    at = bindparam("at", type_=UTCDateTime())
    statement = DriverStatement.compiled(select(at, bindparam("name")), dialect)
    assert statement is not None
    assert statement.positional
    assert statement.names == ("at", "name")
    moment = datetime(2026, 12, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert statement.values({"at": moment, "name": "ardian"}) == ["2026-12-02 03:04:05.678901", "ardian"]
    with sqlite3.connect(":memory:") as connection:
        rows = sqlite_rows(connection, statement, {"at": moment, "name": "x"})
        assert rows == [("2026-12-02 03:04:05.678901", "x")]
        broken = DriverStatement("SELECT * FROM nowhere", (), (), dialect)
        with pytest.raises(DBAPIError) as failure:
            sqlite_rows(connection, broken, {})
        assert isinstance(failure.value.orig, sqlite3.OperationalError)
        assert failure.value.statement == "SELECT * FROM nowhere"
    connection.close()


_OFFSETS: st.SearchStrategy[tzinfo] = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
_EARLIEST, _LATEST = datetime(2, 1, 1), datetime(9998, 12, 30)
_MOMENTS = st.datetimes(_EARLIEST, _LATEST) | st.datetimes(_EARLIEST, _LATEST, timezones=_OFFSETS)


@given(_MOMENTS)
def test_a_moment_is_bound_on_sqlite_as_the_text_sqlalchemy_stores(moment: datetime) -> None:
    dialect = create_engine("sqlite://").dialect
    column_type = UTCDateTime()
    ours = column_type.dialect_impl(dialect).bind_processor(dialect)
    sqlalchemy_datetime = DateTime().dialect_impl(dialect).bind_processor(dialect)
    assert ours is not None and sqlalchemy_datetime is not None
    as_sqlalchemy_stores = sqlalchemy_datetime(column_type.process_bind_param(moment, dialect))
    assert ours(moment) == as_sqlalchemy_stores
    assert ours(None) is None


def test_a_driver_statement_sends_the_values_it_fixes_and_refuses_values_computed_when_it_runs() -> None:
    dialect = create_engine("sqlite://").dialect
    statement = DriverStatement.compiled(select(literal("fixed"), bindparam("name")), dialect)
    assert statement is not None
    assert statement.fixed == {"param_1": "fixed"}
    assert statement.values({"name": "x"}) == ["fixed", "x"]
    assert statement.values({"name": "x", "param_1": "given"}) == ["given", "x"]
    with sqlite3.connect(":memory:") as connection:
        assert sqlite_rows(connection, statement, {"name": "x"}) == [("fixed", "x")]
    connection.close()
    assert DriverStatement.compiled(select(bindparam("later", callable_=lambda: 1)), dialect) is None
    assert DriverStatement.compiled(select(bindparam("many", expanding=True)), dialect) is None
    assert DriverStatement.compiled(select(literal("inline", literal_execute=True)), dialect) is None


def test_a_driver_statement_for_psycopg_is_sent_by_name() -> None:
    dialect = create_engine("postgresql+psycopg://").dialect
    content = bindparam("content", type_=Content())
    statement = DriverStatement.compiled(select(content, bindparam("name"), literal("channel")), dialect)
    assert statement is not None
    assert not statement.positional
    assert "%(content)s" in statement.text and "%(name)s" in statement.text
    values = statement.values({"content": "é", "name": "x"})
    assert isinstance(values, dict)
    assert sorted(values) == ["content", "name", "param_1"]
    assert (values["name"], values["param_1"]) == ("x", "channel")
    assert values["content"].obj == "é".encode()  # psycopg's Binary, as SQLAlchemy's processor makes it


def test_a_psycopg_driver_statement_without_processors_sends_its_parameters_as_given() -> None:
    """Nothing to add or process (a context window's parameters): the dict goes to psycopg uncopied."""
    dialect = create_engine("postgresql+psycopg://").dialect
    statement = DriverStatement.compiled(select(bindparam("chronicum_id"), bindparam("last_n")), dialect)
    assert statement is not None
    parameters = {"chronicum_id": "c-1", "last_n": 20}
    assert statement.values(parameters) is parameters
    assert not statement.bulky(parameters)


def test_a_psycopg_driver_statement_is_bulky_when_its_processed_content_is_over_the_limit() -> None:
    dialect = create_engine("postgresql+psycopg://").dialect
    content = bindparam("content", type_=Content())
    statement = DriverStatement.compiled(select(content, bindparam("name")), dialect)
    assert statement is not None
    largest = {"content": "x" * BULKY_BYTES, "name": "y" * (2 * BULKY_BYTES)}
    processed = statement.values(largest)
    assert processed is not largest and largest["content"] == "x" * BULKY_BYTES  # the caller's dict unchanged
    assert not statement.bulky(processed)  # text values are bounded by their columns: not counted
    assert statement.bulky(statement.values({"content": "é" * (BULKY_BYTES // 2 + 1), "name": "y"}))
