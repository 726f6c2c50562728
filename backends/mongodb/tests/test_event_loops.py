"""One asyncio store, many event loops: a client per loop, each closed with its loop.

Each scenario runs in a fresh interpreter (``python -X dev -W error::ResourceWarning``), so that
what asyncio and pymongo report when a loop or a client is left behind ("Task was destroyed but
it is pending", "Event loop is closed", "coroutine ... was never awaited", ``ResourceWarning``,
pymongo's "Unclosed AsyncMongoClient") reaches its stderr, which must hold none of it. The
mongoeco wire server's ``serverStatus`` reports one connection whatever is open, so the scenario
counts the connections at the client's end instead: this process's established TCP sockets to the
server's port (Linux's ``/proc``), and the store's open clients (one per loop using it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCENARIO_TIMEOUT_SECONDS = 120.0
"""How long a scenario may run before the case fails as hung (a guard, not a measurement)."""

LEFT_BEHIND = (
    "Task was destroyed",
    "Event loop is closed",
    "never awaited",
    "ResourceWarning",
    "Unclosed",
    "Traceback",
)
"""What asyncio, Python and pymongo print when a loop's resources are left behind."""

SCENARIO = '''
import asyncio, contextlib, os, sys, threading, time
from datetime import UTC, datetime
from urllib.parse import urlsplit
from chronica_core import Chronicum, StoreError, open_async_store

URL, DATABASE = sys.argv[1], sys.argv[2]
saying = threading.Lock()

def say(*words: object) -> None:
    """Print one line, whole, whichever thread says it."""
    with saying:
        print(*words, flush=True)
store = open_async_store(URL, database=DATABASE)
chronicum = Chronicum("loops-" + DATABASE, "ardian", datetime.now(UTC))

PORT = urlsplit(URL).port or 27017

def sockets_to_server() -> int:
    """This process's established TCP connections to the server's port (Linux: /proc)."""
    inodes = set()
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{descriptor}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in rows.readlines()[1:]:
                fields = row.split()
                remote, state, inode = fields[2], fields[3], fields[9]
                if inode in inodes and state == "01" and int(remote.rsplit(":", 1)[1], 16) == PORT:
                    count += 1
    return count

def settled() -> int:
    """The count once the sockets closed just now are gone (at most five seconds)."""
    deadline = time.monotonic() + 5
    while (count := sockets_to_server()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return count

async def turn(number: int) -> None:
    if number == 0:
        await store.create(chronicum)
    await asyncio.gather(*(store.get(chronicum.id) for _ in range(8)))
    print("during", number, len(store._clients), sockets_to_server() > 0)


for number in range(3):
    asyncio.run(turn(number))
    print("after", number, len(store._clients), settled())

barrier = threading.Barrier(2)
def in_thread() -> None:
    async def body() -> None:
        await store.get(chronicum.id)
        await asyncio.to_thread(barrier.wait)
        say("both", len(store._clients), sockets_to_server() >= 2)
        await asyncio.to_thread(barrier.wait)
    asyncio.run(body())
threads = [threading.Thread(target=in_thread) for _ in range(2)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print("after threads", len(store._clients), settled())

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
print("other loop open", len(store._clients), sockets_to_server() > 0)
asyncio.run(store.close())
print("after close", len(store._clients), settled())
closed.set()
runner.join()
try:
    asyncio.run(store.get(chronicum.id))
except StoreError as error:
    print("then", error)
'''


def test_each_loop_has_its_own_client_closed_with_the_loop_and_at_close(
    mongodb_server_url: str, database: str
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
            mongodb_server_url,
            database,
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
    assert [line for line in lines if line.startswith("during")] == [
        "during 0 1 True",
        "during 1 1 True",
        "during 2 1 True",
    ]
    assert [line for line in lines if line.startswith("after ") and line[6].isdigit()] == [
        "after 0 0 0",
        "after 1 0 0",
        "after 2 0 0",
    ]
    assert lines.count("both 2 True") == 2, lines
    assert "after threads 0 0" in lines
    assert "other loop open 1 True" in lines
    assert "after close 0 0" in lines, lines
    assert "then mongodb: async store: the store is closed" in lines
