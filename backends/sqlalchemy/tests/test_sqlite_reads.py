"""SQLite's context window, run by the standard library's driver itself (``plans.DriverWindow``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from chronica_sqlalchemy import SQLAlchemyStore
from chronica_sqlalchemy.plans import DriverWindow
from chronica_sqlalchemy.schema import UTCDateTime
from sqlalchemy.dialects import sqlite

from chronica_core import ActaQuery, ActorKind, Actum, ActumKind, Chronicum, ChronicumNotFound


def new_id(label: str = "c") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def test_windows_of_every_shape_run_on_the_driver_and_answer_as_sqlalchemy_would(tmp_path: Path) -> None:
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'reads.db'}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        for index in range(6):
            kind = ActumKind.MESSAGE if index % 2 else ActumKind.TOOL_REQUEST
            store.record(Actum(chronicum_id, kind, ActorKind.AGENT, "scribe", f"n{index}", id=new_id("a")))
        queries = [
            ActaQuery(),
            ActaQuery(last_n=2),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,)),
            ActaQuery(actum_kinds=(ActumKind.MESSAGE,), actor_kinds=(ActorKind.AGENT,), last_n=2),
        ]
        answers = [
            [(actum.content, actum.kind) for actum in store.acta(chronicum_id, query)] for query in queries
        ]
        assert answers == [
            [(f"n{index}", ActumKind.MESSAGE if index % 2 else ActumKind.TOOL_REQUEST) for index in range(6)],
            [("n4", ActumKind.TOOL_REQUEST), ("n5", ActumKind.MESSAGE)],
            [("n1", ActumKind.MESSAGE), ("n3", ActumKind.MESSAGE), ("n5", ActumKind.MESSAGE)],
            [("n3", ActumKind.MESSAGE), ("n5", ActumKind.MESSAGE)],
        ]
        assert all(isinstance(window, DriverWindow) for window in store.plans._driver_windows.values())
        assert len(store.plans._driver_windows) == 4  # one per shape read
        [newest] = store.acta(chronicum_id, ActaQuery(last_n=1))
        assert newest.at is not None and newest.at.tzinfo is UTC
        with pytest.raises(ChronicumNotFound) as missing:
            store.acta(new_id("missing"), ActaQuery(last_n=2))
        assert missing.value.chronicum_id.startswith("missing-")


def test_a_read_on_a_connection_closed_underneath_is_made_again_on_a_new_one(tmp_path: Path) -> None:
    chronicum_id = new_id()
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'closed.db'}") as store:
        store.create(Chronicum(chronicum_id, "ardian", started_at=datetime.now(UTC)))
        store.record(
            Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", "kept", id=new_id("a"))
        )
        with store.engine.connect() as connection:  # the pool's one idle connection
            driver_connection = connection.connection.driver_connection
        assert driver_connection is not None
        driver_connection.close()
        assert [actum.content for actum in store.acta(chronicum_id, ActaQuery(last_n=20))] == ["kept"]


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


@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("by_kind", [False, True])
def test_sqlite_reads_a_window_along_the_primary_key_without_sorting(
    tmp_path: Path, by_kind: bool, limited: bool
) -> None:
    with SQLAlchemyStore.open(f"sqlite:///{tmp_path / 'plan.db'}") as store:
        window = DriverWindow.compiled(store.plans.window(by_kind, False, limited), store.engine.dialect)
        assert window is not None
        values = [
            window.fixed.get(name, 20 if name == "last_n" else "message" if "kind" in name else "c")
            for name in window.names
        ]
        with store.engine.connect() as connection:
            driver_connection = connection.connection.driver_connection
            assert driver_connection is not None
            steps = [row[3] for row in driver_connection.execute(f"EXPLAIN QUERY PLAN {window.text}", values)]
    assert not [step for step in steps if "TEMP B-TREE" in step or "MATERIALIZE" in step], steps
    assert any("acta" in step and "INDEX sqlite_autoindex_acta_1" in step for step in steps), steps
