"""One asyncio store, many event loops: its pools' connections counted on the server.

Each scenario runs in a fresh interpreter (``python -X dev -W error::ResourceWarning``), so that
what asyncio and psycopg report when a loop or a connection is left behind ("Task was destroyed
but it is pending", "Event loop is closed", "coroutine ... was never awaited", ``ResourceWarning``)
reaches its stderr, which must hold none of it. The store's URL carries an ``application_name``
of the test's own, by which ``pg_stat_activity`` counts the store's connections; a count that
must be zero is read until it is (for at most five seconds): the server ends a session a moment
after its client closed it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from urllib.parse import quote

import psycopg

SCENARIO_TIMEOUT_SECONDS = 120.0
"""How long a scenario may run before the case fails as hung (a guard, not a measurement)."""

LEFT_BEHIND = ("Task was destroyed", "Event loop is closed", "never awaited", "ResourceWarning", "Traceback")
"""What asyncio, Python and the drivers print when a loop's resources are left behind."""

SCENARIO = '''
import asyncio, sys, threading
import psycopg
from chronica_core import ActaQuery, Chronicum, StoreError, open_async_store
from datetime import UTC, datetime

URL, ADMIN_URL, NAME = sys.argv[1], sys.argv[2], sys.argv[3]
saying = threading.Lock()

def say(*words: object) -> None:
    """Print one line, whole, whichever thread says it."""
    with saying:
        print(*words, flush=True)

def connections() -> int:
    with psycopg.connect(ADMIN_URL) as admin:
        return admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (NAME,)
        ).fetchone()[0]

def settled() -> int:
    """The count once the server has ended the sessions closed just now (it takes a moment), or
    what is left after five seconds."""
    import time
    deadline = time.monotonic() + 5
    while (count := connections()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return count

store = open_async_store(URL, min_size=2)
chronicum = Chronicum("loops-" + NAME, "ardian", datetime.now(UTC))

async def turn(number: int) -> tuple[int, int]:
    if number == 0:
        await store.create(chronicum)
    await asyncio.gather(*(store.get(chronicum.id) for _ in range(8)))
    return number, await asyncio.to_thread(connections)

for number in range(3):
    print("during", *asyncio.run(turn(number)))
    print("after", number, settled())

barrier = threading.Barrier(2)
def in_thread(number: int) -> None:
    async def body() -> None:
        await store.get(chronicum.id)
        await asyncio.to_thread(barrier.wait)
        say("both", await asyncio.to_thread(connections))
        await asyncio.to_thread(barrier.wait)
    asyncio.run(body())
threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(2)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print("after threads", settled())

closed = threading.Event()
used = threading.Event()
def still_running() -> None:
    async def body() -> None:
        await store.get(chronicum.id)
        used.set()
        await asyncio.to_thread(closed.wait)
    asyncio.run(body())
runner = threading.Thread(target=still_running)
runner.start()
used.wait()
print("other loop open", connections())
asyncio.run(store.close())
print("after close", settled())
closed.set()
runner.join()
try:
    asyncio.run(store.get(chronicum.id))
except StoreError as error:
    print("then", error)
'''


def test_each_loop_has_its_own_pool_closed_with_the_loop_and_at_close(postgres_url: str, schema: str) -> None:
    name = f"chronica-loops-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{separator}application_name={quote(name)}&schema={quote(schema)}"
    finished = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error::ResourceWarning",
            "-c",
            textwrap.dedent(SCENARIO),
            url,
            postgres_url,
            name,
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
    during = [int(line.split()[2]) for line in lines if line.startswith("during")]
    assert len(during) == 3 and all(count >= 2 for count in during), lines  # min_size 2, in each loop
    assert [line for line in lines if line.startswith("after ") and line[6].isdigit()] == [
        "after 0 0",
        "after 1 0",
        "after 2 0",
    ]
    both = [int(line.split()[1]) for line in lines if line.startswith("both")]
    assert len(both) == 2 and all(count >= 4 for count in both), lines  # two pools of at least 2
    assert "after threads 0" in lines
    assert any(line.startswith("other loop open") and int(line.split()[3]) >= 2 for line in lines), lines
    assert "after close 0" in lines, lines  # the other loop's pool closed in that loop
    assert "then postgres: async store: the store is closed" in lines
    with psycopg.connect(postgres_url) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row == (0,)
