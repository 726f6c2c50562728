"""What chronica-sqlalchemy logs through a whole scenario, on each dialect, and what it never shows.

Every record of the ``chronica`` loggers is captured at DEBUG while :mod:`chronica_conformance.log_secrecy`
plays every operation on a fresh database: the tables created (INFO), the store opened and closed
(DEBUG), another owner refused (INFO without ids, DEBUG with them), and in none of them the URL's
password or an actum's content.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from chronica_conformance.log_secrecy import INTRUDER, assert_records_keep_secrets, scenario_records
from chronica_conformance.secrecy import ENCODED_SECRET
from conftest import ServerDatabases


@pytest.fixture
def fresh_url(dialect: str, servers: ServerDatabases | None, tmp_path: Path) -> Iterator[str]:
    """A database no store has used yet, as a URL (PostgreSQL and SQLite: with a password in it)."""
    if servers is None:
        driver = "sqlite+aiosqlite" if dialect == "aiosqlite" else "sqlite"
        yield f"{driver}:///{tmp_path / 'logging.db'}?password={ENCODED_SECRET}"
        return
    url = servers.create()
    try:
        text = url.render_as_string(hide_password=False)
        # PostgreSQL trusts the test user whatever the password; MariaDB would refuse one
        yield f"{text}?password={ENCODED_SECRET}" if dialect == "postgresql" else text
    finally:
        servers.drop(url)


def said(records: list[logging.LogRecord], name: str, level: int) -> list[str]:
    return [record.getMessage() for record in records if record.name == name and record.levelno == level]


@pytest.mark.filterwarnings("ignore:Query string argument")  # SQLite ignores ?password=, with a warning
def test_a_whole_scenario_logs_what_it_did_and_never_a_password_content_or_id(fresh_url: str) -> None:
    records, chronicum_ids = scenario_records(fresh_url)
    assert_records_keep_secrets(records, chronicum_ids)

    info = said(records, "chronica.sqlalchemy", logging.INFO)
    assert info[0].startswith("created the tables at schema version ")
    debug = said(records, "chronica.sqlalchemy", logging.DEBUG)
    for store in ("SQLAlchemyStore", "AsyncSQLAlchemyStore"):
        kind = (
            "AsyncThreadedSQLAlchemyStore"
            if store.startswith("Async") and fresh_url.startswith("sqlite:")
            else store
        )
        assert any(line.startswith(f"opened a {kind} on ") for line in debug), debug
        assert any(line.startswith(f"closed the {kind} on ") for line in debug), debug

    refusals = said(records, "chronica.chronicarius", logging.INFO)
    assert refusals.count("refused a read: the chronicum belongs to another owner") == 3
    assert "refused a write: the chronicum belongs to another owner" in refusals
    assert "refused an erasure: the chronicum belongs to another owner" in refusals
    traced = said(records, "chronica.chronicarius", logging.DEBUG)
    assert f"refused owner {INTRUDER!r} a read of chronicum {chronicum_ids[0]!r}, another owner's" in traced
