"""One asyncio store, many event loops: its connections counted where they live.

The scenario is :func:`chronica_conformance.loop_scenario.run_loop_scenario` (a fresh
interpreter under ``-X dev``, whose stderr must stay empty). The store works in a
database of the test's own, whose connections are counted on the server (MariaDB:
``information_schema.processlist`` by database; PostgreSQL: ``pg_stat_activity`` by database) or,
for SQLite, as the scenario process's open file descriptors on the database file.

On ``sqlite+aiosqlite://``, MariaDB and PostgreSQL the store is ``AsyncSQLAlchemyStore``: an
engine per loop, disposed of when the loop ends. On plain ``sqlite://`` it is
``AsyncThreadedSQLAlchemyStore``, whose connections belong to its worker threads, not to a loop:
they stay pooled from one loop to the next, and close at ``close()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from chronica_conformance.loop_scenario import run_loop_scenario
from conftest import ServerDatabases
from sqlalchemy.engine import URL

COUNTER = """
import os
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

KIND, WHERE = ARGUMENTS[0], ARGUMENTS[1]
if KIND != "file":
    admin = create_engine(ARGUMENTS[2], poolclass=NullPool)

def connections() -> int:
    if KIND == "file":  # this process's descriptors open on the database file
        found = 0
        for descriptor in os.listdir("/proc/self/fd"):
            try:
                found += os.path.realpath(f"/proc/self/fd/{descriptor}") == WHERE
            except OSError:
                pass
        return found
    query = {
        "mariadb": "SELECT COUNT(*) FROM information_schema.processlist WHERE db = :name",
        "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE datname = :name",
    }[KIND]
    with admin.connect() as connection:
        return int(connection.execute(text(query), {"name": WHERE}).scalar_one())
"""


@pytest.fixture
def own_database(dialect: str, servers: ServerDatabases | None, tmp_path: Path) -> Iterator[list[str]]:
    """The scenario's arguments after the script: its store URL and where to count connections."""
    if servers is None:
        path = (tmp_path / "loops.db").resolve()
        scheme = "sqlite+aiosqlite" if dialect == "aiosqlite" else "sqlite"
        yield [f"{scheme}:///{path}", "file", str(path)]
        return
    url: URL = servers.create()
    try:
        yield [
            url.render_as_string(hide_password=False),
            dialect,
            str(url.database),
            servers.url.render_as_string(hide_password=False),
        ]
    finally:
        servers.drop(url)


def test_each_loop_has_its_own_connections_closed_with_the_loop_and_at_close(
    dialect: str, own_database: list[str]
) -> None:
    url, *where = own_database
    threaded = dialect == "sqlite"
    counts = run_loop_scenario(url, COUNTER, *where, per_loop=not threaded)
    assert counts.store_type == ("AsyncThreadedSQLAlchemyStore" if threaded else "AsyncSQLAlchemyStore")
    assert all(count >= 1 for count in counts.during), counts
    if threaded:  # pooled for the worker threads, from one loop to the next
        assert all(count >= 1 for count in counts.after), counts
    else:
        assert counts.after == [0, 0, 0], counts  # disposed of when its loop closed
        assert all(count >= 2 for count in counts.both), counts  # an engine per loop, each connected
        assert counts.after_threads == 0, counts
    assert counts.other_loop_open >= 1, counts
    assert counts.after_close == 0, counts
    assert counts.closed_error == "sqlalchemy: async store: the store is closed"
