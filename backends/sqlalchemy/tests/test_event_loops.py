"""One asyncio store, many event loops: its connections counted where they live.

Each scenario runs in a fresh interpreter (``python -X dev -W error::ResourceWarning``), so that
what asyncio and the drivers report when a loop or a connection is left behind ("Task was
destroyed but it is pending", "Event loop is closed", "coroutine ... was never awaited",
``ResourceWarning``) reaches its stderr, which must hold none of it. The store works in a
database of the test's own, whose connections are counted on the server (MariaDB:
``information_schema.processlist`` by database; PostgreSQL: ``pg_stat_activity`` by database) or,
for SQLite, as this process's open file descriptors on the database file. A count that must be
zero is read until it is, for at most five seconds: a server ends a session a moment after its
client closed it.

On ``sqlite+aiosqlite://``, MariaDB and PostgreSQL the store is ``AsyncSQLAlchemyStore``: an
engine per loop, disposed of when the loop ends. On plain ``sqlite://`` it is
``AsyncThreadedSQLAlchemyStore``, whose connections belong to its worker threads, not to a loop:
they stay pooled from one loop to the next, and close at ``close()``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ServerDatabases
from sqlalchemy.engine import URL

SCENARIO_TIMEOUT_SECONDS = 180.0
"""How long a scenario may run before the case fails as hung (a guard, not a measurement)."""

LEFT_BEHIND = ("Task was destroyed", "Event loop is closed", "never awaited", "ResourceWarning", "Traceback")
"""What asyncio, Python and the drivers print when a loop's resources are left behind."""

SCENARIO = '''
import asyncio, os, sys, threading, time
from datetime import UTC, datetime
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool
from chronica_core import Chronicum, StoreError, open_async_store

URL, KIND, WHERE = sys.argv[1], sys.argv[2], sys.argv[3]
saying = threading.Lock()

def say(*words: object) -> None:
    """Print one line, whole, whichever thread says it."""
    with saying:
        print(*words, flush=True)

if KIND != "file":
    admin = create_engine(sys.argv[4], poolclass=NullPool)

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

def settled() -> int:
    deadline = time.monotonic() + 5
    while (count := connections()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return count

store = open_async_store(URL)
say("store", type(store).__name__)
per_loop = type(store).__name__ != "AsyncThreadedSQLAlchemyStore"  # else pooled across loops
chronicum = Chronicum("loops-chronicum", "ardian", datetime.now(UTC))

async def turn(number: int) -> None:
    if number == 0:
        await store.create(chronicum)
    await asyncio.gather(*(store.get(chronicum.id) for _ in range(8)))
    say("during", number, await asyncio.to_thread(connections) > 0)

for number in range(3):
    asyncio.run(turn(number))
    say("after", number, settled() if per_loop else connections())

barrier = threading.Barrier(2)
def in_thread() -> None:
    async def body() -> None:
        await store.get(chronicum.id)
        await asyncio.to_thread(barrier.wait)
        say("both", await asyncio.to_thread(connections) >= 2)
        await asyncio.to_thread(barrier.wait)
    asyncio.run(body())
threads = [threading.Thread(target=in_thread) for _ in range(2)]
for thread in threads: thread.start()
for thread in threads: thread.join()
say("after threads", settled() if per_loop else connections())

closed, used = threading.Event(), threading.Event()
def still_running() -> None:
    async def body() -> None:
        await store.get(chronicum.id)
        used.set()
        await asyncio.to_thread(closed.wait)
    asyncio.run(body())
runner = threading.Thread(target=still_running)
runner.start()
used.wait()
say("other loop open", connections() > 0)
asyncio.run(store.close())
say("after close", settled())
closed.set()
runner.join()
try:
    asyncio.run(store.get(chronicum.id))
except StoreError as error:
    say("then", error)
'''


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
    finished = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error::ResourceWarning",
            "-c",
            textwrap.dedent(SCENARIO),
            *own_database,
        ],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_SECONDS,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    left_behind = [line for line in finished.stderr.splitlines() if any(mark in line for mark in LEFT_BEHIND)]
    assert not left_behind, finished.stderr
    assert finished.stderr == ""  # nor any other warning or log line
    lines = finished.stdout.splitlines()
    threaded = dialect == "sqlite"
    assert lines[0] == ("store AsyncThreadedSQLAlchemyStore" if threaded else "store AsyncSQLAlchemyStore")
    assert [line for line in lines if line.startswith("during")] == [
        "during 0 True",
        "during 1 True",
        "during 2 True",
    ], lines
    after_loops = [line for line in lines if line.startswith("after ") and line[6].isdigit()]
    if threaded:  # pooled for the worker threads, from one loop to the next
        assert all(int(line.split()[2]) > 0 for line in after_loops), lines
    else:
        assert after_loops == ["after 0 0", "after 1 0", "after 2 0"], lines
        assert lines.count("both True") == 2, lines  # an engine per loop, each connected
        assert "after threads 0" in lines, lines
    assert "other loop open True" in lines, lines
    assert "after close 0" in lines, lines
    assert "then sqlalchemy: async store: the store is closed" in lines, lines
