"""SQLite specifics: an append's one ``BEGIN IMMEDIATE`` transaction, failures that leave no lock,
windows read along the primary key, moments stored and read as UTC text, and a file that cannot
be opened named in the error."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

import pytest
from chronica_sqlalchemy import SQLAlchemyStore
from chronica_sqlalchemy.schema import UTCDateTime
from chronica_sqlalchemy.sqlite_writers import writer_queue
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import DateTime, create_engine, event
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import DBAPIError

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    Chronicum,
    ChronicumNotFound,
    StoreError,
    open_store,
)

EVERY_ACTUM = ActaQuery()


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def message(chronicum_id: str, content: str, kind: ActumKind = ActumKind.MESSAGE) -> Actum:
    return Actum(chronicum_id, kind, ActorKind.AGENT, "scribe", content, id=new_id("a"))


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


def test_a_record_is_one_immediate_transaction_of_two_statements(tmp_path: Path) -> None:
    path = tmp_path / "record.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        first = store.record(message(chronicum_id, "first"))
        sent: list[str] = []

        def checked_out(driver_connection: sqlite3.Connection, *_: object) -> None:
            driver_connection.set_trace_callback(sent.append)

        event.listen(store.engine, "checkout", checked_out)
        recorded = [store.record(message(chronicum_id, f"n{index}")) for index in range(5)]
        assert [statement.split()[:2] for statement in sent] == [
            ["BEGIN", "IMMEDIATE"],
            ["UPDATE", "chronica"],
            ["INSERT", "INTO"],
            ["COMMIT"],
        ] * 5
        stored = store.acta(chronicum_id, EVERY_ACTUM)
        assert [actum.content for actum in stored] == ["first", *(f"n{index}" for index in range(5))]
        assert [actum.at for actum in stored] == [first.at, *(actum.at for actum in recorded)]
        assert all(actum.at is not None and actum.at.tzinfo is UTC for actum in recorded)
        assert store.get(chronicum_id).last_actum_at == recorded[-1].at
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT seq FROM acta ORDER BY seq").fetchall() == [(n,) for n in range(1, 7)]
    raw.close()


def test_a_refused_record_leaves_no_write_transaction_open(tmp_path: Path) -> None:
    path = tmp_path / "refused.db"
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{path}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        store.record(message(chronicum_id, "first"))
        with pytest.raises(ChronicumNotFound):
            store.record(message(new_id("missing"), "nowhere"))
        assert _write_lock_is_free(path)
        assert [actum.content for actum in store.acta(chronicum_id, EVERY_ACTUM)] == ["first"]


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


def test_a_read_on_a_connection_closed_underneath_is_made_again_on_a_new_one(tmp_path: Path) -> None:
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'closed.db'}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        store.record(message(chronicum_id, "kept"))
        with store.engine.connect() as connection:  # the pool's one idle connection
            driver_connection = connection.connection.driver_connection
        assert driver_connection is not None
        driver_connection.close()
        assert [actum.content for actum in store.acta(chronicum_id, ActaQuery(last_n=20))] == ["kept"]


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


@pytest.mark.parametrize("opener", ["open_store", "SQLAlchemyStore"])
def test_a_file_in_a_folder_that_does_not_exist_is_named_in_the_error(tmp_path: Path, opener: str) -> None:
    path = tmp_path / "nowhere" / "chronica.db"
    url = f"sqlite:///{path}"
    with pytest.raises(StoreError) as refused:
        open_store(url) if opener == "open_store" else SQLAlchemyStore.open(url)
    assert refused.value.where == "sqlalchemy: connect"
    assert refused.value.detail == (
        f"OperationalError: unable to open database file (the file {path}: "
        f"its folder {path.parent} does not exist)"
    )
    assert not path.parent.exists()


def test_windows_of_every_shape_answer_oldest_first(tmp_path: Path) -> None:
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'reads.db'}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        for index in range(6):
            store.record(
                message(chronicum_id, f"n{index}", ActumKind.MESSAGE if index % 2 else ActumKind.THOUGHT)
            )
        queries = [
            ActaQuery(),
            ActaQuery(last_n=2),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,)),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,), actor_kinds=(ActorKind.AGENT,), last_n=2),
        ]
        answers = [[actum.content for actum in store.acta(chronicum_id, query)] for query in queries]
        assert answers == [
            [f"n{index}" for index in range(6)],
            ["n4", "n5"],
            ["n1", "n3", "n5"],
            ["n3", "n5"],
        ]
        with pytest.raises(ChronicumNotFound):
            store.acta(new_id("missing"), ActaQuery(last_n=2))


@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("by_kind", [False, True])
def test_sqlite_reads_a_window_along_the_primary_key_without_sorting(
    tmp_path: Path, by_kind: bool, limited: bool
) -> None:
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'plan.db'}") as store:
        query = ActaQuery(actum_kinds=(ActumKind.MESSAGE,) if by_kind else None, last_n=20 if limited else 0)
        statement, parameters = store.plans.window_for("c", query)
        bound: Any = statement.params(parameters)  # type: ignore[attr-defined]
        compiled = bound.compile(dialect=store.engine.dialect, compile_kwargs={"literal_binds": True})
        with store.engine.connect() as connection:
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").all()
    steps = [str(row[3]) for row in rows]
    assert not [step for step in steps if "TEMP B-TREE" in step or "MATERIALIZE" in step], steps
    assert any("acta" in step and "INDEX sqlite_autoindex_acta_1" in step for step in steps), steps


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ("2026-12-01 23:17:50.123456", datetime(2026, 12, 1, 23, 17, 50, 123456, tzinfo=UTC)),
        ("2026-12-01 23:17:50", datetime(2026, 12, 1, 23, 17, 50, tzinfo=UTC)),
        ("2026-12-01T23:17:50+02:00", datetime(2026, 12, 1, 21, 17, 50, tzinfo=UTC)),
        ("2026-12-01T21:17:50Z", datetime(2026, 12, 1, 21, 17, 50, tzinfo=UTC)),
        (None, None),
    ],
)
def test_stored_times_read_as_utc_with_or_without_a_zone_of_their_own(
    stored: str | None, read: datetime | None
) -> None:
    parse = UTCDateTime().result_processor(sqlite.dialect(), None)
    assert parse is not None
    parsed = parse(stored)
    assert parsed == read
    assert parsed is None or parsed.tzinfo is UTC


_OFFSETS: st.SearchStrategy[tzinfo] = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
_EARLIEST, _LATEST = datetime(2, 1, 1), datetime(9998, 12, 30)
_MOMENTS = st.datetimes(_EARLIEST, _LATEST) | st.datetimes(_EARLIEST, _LATEST, timezones=_OFFSETS)


@given(_MOMENTS)
def test_a_moment_is_bound_on_sqlite_as_the_text_sqlalchemy_stores(moment: datetime) -> None:
    dialect: Any = create_engine("sqlite://").dialect
    column_type = UTCDateTime()
    ours = column_type.dialect_impl(dialect).bind_processor(dialect)
    sqlalchemy_datetime = DateTime().dialect_impl(dialect).bind_processor(dialect)
    assert ours is not None and sqlalchemy_datetime is not None
    assert ours(moment) == sqlalchemy_datetime(column_type.process_bind_param(moment, dialect))
    assert ours(None) is None
