"""What chronica-sqlalchemy logs through a whole scenario, on each dialect, and what it never shows.

Every record of the ``chronica`` loggers is captured at DEBUG while :mod:`chronica_conformance.log_secrecy`
plays every operation on a fresh database: the tables created (INFO), the store opened and closed
(DEBUG), another owner refused (INFO without ids, DEBUG with them), and in none of them the URL's
password or an actum's content.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from chronica_conformance.log_secrecy import INTRUDER, assert_records_keep_secrets, scenario_records
from chronica_conformance.secrecy import ENCODED_SECRET
from chronica_sqlalchemy import SQLAlchemyStore, open_async_sqlalchemy_store
from conftest import ServerDatabases

from chronica_core import ActorKind, Actum, ActumKind, AsyncChronicarius, Chronicarius


@pytest.fixture
def fresh_url(dialect: str, servers: ServerDatabases | None, tmp_path: Path) -> Iterator[str]:
    """A database no store has used yet, as a URL (PostgreSQL: with a password in it; a SQLite URL
    takes none, a ``?password=`` is refused)."""
    if servers is None:
        driver = "sqlite+aiosqlite" if dialect == "aiosqlite" else "sqlite"
        yield f"{driver}:///{tmp_path / 'logging.db'}"
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


def test_echo_logs_every_statement_an_append_and_a_read_send(
    shared_store: SQLAlchemyStore, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``echo`` shows the statements the driver runs by itself too (SQLite's and psycopg's hot paths).

    Blocking and asyncio: an append's statements (its counter move and its insert, or the one
    statement doing both) and the context window's ``SELECT``, each with its values.
    """
    chronicum_id = f"echo-{uuid.uuid4().hex}"
    blocking = SQLAlchemyStore.open(database_url, auto_migrate=False, echo=True)
    asynchronous = open_async_sqlalchemy_store(database_url, auto_migrate=False, echo=True)

    async def asyncio_calls() -> None:
        await AsyncChronicarius(asynchronous).record_actum("ardian", said_by_ardian(chronicum_id, "async"))
        await AsyncChronicarius(asynchronous).get_acta("ardian", chronicum_id, last_n=20)
        await asynchronous.close()

    try:
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
            chronicarius = Chronicarius(blocking)
            chronicarius.record_actum("ardian", said_by_ardian(chronicum_id, "blocking"))
            caplog.clear()
            chronicarius.record_actum("ardian", said_by_ardian(chronicum_id, "again"))
            chronicarius.get_acta("ardian", chronicum_id, last_n=20)
            blocking_lines = [record.getMessage() for record in caplog.records]
            caplog.clear()
            asyncio.run(asyncio_calls())
            asyncio_lines = [record.getMessage() for record in caplog.records]
    finally:
        blocking.close()
    for lines in (blocking_lines, asyncio_lines):
        statements = " ".join(lines)
        assert "INSERT INTO" in statements, lines
        selects = [line for line in lines if line.lstrip("( ").startswith(("SELECT", "WITH"))]
        windows = [line for line in selects if "acta" in line]
        assert windows, lines
        assert any(chronicum_id in line for line in lines), lines  # the values, not only the text


def said_by_ardian(chronicum_id: str, content: str) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content)
