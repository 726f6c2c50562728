"""One asyncio store through many event loops, in a fresh interpreter, counting its connections.

A backend's own tests call :func:`run_loop_scenario` with a piece of Python that counts the
store's connections where they live (its server's session list, the process's sockets or
files). The scenario runs under ``python -X dev -W error::ResourceWarning``, so that what asyncio
and the drivers report when a loop or a connection is left behind ("Task was destroyed but it is
pending", "Event loop is closed", "coroutine ... was never awaited", ``ResourceWarning``) reaches
its stderr, which must stay empty (asyncio's reports of a slow step, which measure the machine's
load, are left out). It opens one store with ``open_async_store(url)`` and:

1. uses it in three ``asyncio.run()`` in a row (eight concurrent reads each), counting during
   each loop and after it;
2. uses it in two threads' loops at once, counting while both hold it;
3. uses it in a thread's loop that keeps running, and in a loop left open but idle between two
   ``run_until_complete`` calls (as the OpenAI Agents SDK's ``Runner.run_sync`` leaves its
   loop), while the main thread calls ``close()`` in a loop of its own, counting before and
   after; then closes the idle loop;
4. calls it once more from a new loop, which must raise ``StoreError`` ("the store is closed").

A count that must come to zero is read until it does, for at most five seconds (a server ends a
session a moment after its client closed it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass

__all__ = ["LoopCounts", "run_loop_scenario"]

SCENARIO_TIMEOUT_SECONDS = 180.0
"""How long the scenario may run before it fails as hung (a guard, not a measurement)."""

_SCENARIO = '''
import asyncio, gc, logging, sys, threading, time
from datetime import UTC, datetime
from chronica_core import Chronicum, StoreError, open_async_store

# asyncio's debug mode also reports a step that held the loop over 0.1 s: the machine's load,
# not a loop or connection left behind
logging.getLogger("asyncio").addFilter(lambda record: not record.getMessage().startswith("Executing <"))
# psycopg's word when a loop's shutdown cancels a pool's task in the middle of a statement (a new
# connection being set up, which a loaded machine makes slower) and it closes that connection:
# nothing is left open, which the counts below check
logging.getLogger("psycopg").addFilter(
    lambda record: not record.getMessage().startswith("query cancellation interrupted")
)

URL, PER_LOOP, ARGUMENTS = sys.argv[1], sys.argv[2] == "per-loop", sys.argv[3:]
saying = threading.Lock()

def say(*words: object) -> None:
    """Print one line, whole, whichever thread says it."""
    with saying:
        print(*words, flush=True)

COUNTER

def settled() -> int:
    """The count, read until it is zero for at most five seconds."""
    deadline = time.monotonic() + 5
    while (count := connections()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return count

def after() -> int:
    return settled() if PER_LOOP else connections()

store = open_async_store(URL)
say("store", type(store).__name__)
chronicum = Chronicum("loops-chronicum", "ardian", datetime.now(UTC))

async def turn(number: int) -> None:
    if number == 0:
        await store.create(chronicum)
    await asyncio.gather(*(store.get(chronicum.id) for _ in range(8)))
    say("during", await asyncio.to_thread(connections))

for number in range(3):
    asyncio.run(turn(number))
    say("after", after())

barrier = threading.Barrier(2)
def in_thread() -> None:
    async def body() -> None:
        await store.get(chronicum.id)
        await asyncio.to_thread(barrier.wait)
        say("both", await asyncio.to_thread(connections))
        await asyncio.to_thread(barrier.wait)
    asyncio.run(body())
threads = [threading.Thread(target=in_thread) for _ in range(2)]
for thread in threads: thread.start()
for thread in threads: thread.join()
say("after-threads", after())

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
idle = asyncio.new_event_loop()  # left open between two runs, as Runner.run_sync leaves its loop
idle.run_until_complete(store.get(chronicum.id))
say("other-loop-open", connections())
asyncio.run(store.close())
say("after-close", settled())
closed.set()
runner.join()
idle.close()
gc.collect()  # what the idle loop's driver left pending would be reported now
try:
    asyncio.run(store.get(chronicum.id))
except StoreError as error:
    say("then", error)
'''


@dataclass(frozen=True, slots=True)
class LoopCounts:
    """What :func:`run_loop_scenario` counted, in the scenario's order.

    Attributes:
        store_type: the class name of the store ``open_async_store`` gave.
        during: the count inside each of the three loops in a row.
        after: the count after each of them (read until zero for a per-loop store).
        both: the count each of the two threads saw while both loops held the store.
        after_threads: the count once both threads' loops ended.
        other_loop_open: the count while another thread's loop and an idle loop held the store,
            before ``close()``.
        after_close: the count after ``close()`` (read until zero).
        closed_error: the message of the ``StoreError`` a new loop got after ``close()`` (empty:
            none raised).
    """

    store_type: str
    during: list[int]
    after: list[int]
    both: list[int]
    after_threads: int
    other_loop_open: int
    after_close: int
    closed_error: str


def run_loop_scenario(url: str, counter: str, *arguments: str, per_loop: bool = True) -> LoopCounts:
    """Run the scenario of the module's text on ``url`` in a fresh interpreter; return its counts.

    Args:
        url: the store URL (``open_async_store(url)``).
        counter: Python source defining ``connections() -> int``, the store's connections now; it
            may read ``ARGUMENTS`` (``arguments``, as strings) and import what it needs.
        arguments: handed to ``counter`` as ``ARGUMENTS``.
        per_loop: whether the store's connections end with each loop (then the counts after a
            loop are read until zero); ``False`` for a store whose connections outlive a loop.

    Returns:
        The counts and the closed store's message.

    Raises:
        AssertionError: the scenario failed (its stderr in the message) or wrote anything to
            stderr.
        subprocess.TimeoutExpired: it ran longer than :data:`SCENARIO_TIMEOUT_SECONDS`.
    """
    script = textwrap.dedent(_SCENARIO).replace("COUNTER", textwrap.dedent(counter))
    finished = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error::ResourceWarning",
            "-c",
            script,
            url,
            "per-loop" if per_loop else "pooled",
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT_SECONDS,
        check=False,
    )
    assert finished.returncode == 0, f"the scenario failed:\n{finished.stderr}"
    assert finished.stderr == "", f"the scenario wrote to stderr:\n{finished.stderr}"
    said: dict[str, list[str]] = {}
    for line in finished.stdout.splitlines():
        word, _, rest = line.partition(" ")
        said.setdefault(word, []).append(rest)
    return LoopCounts(
        store_type=said["store"][0],
        during=[int(count) for count in said["during"]],
        after=[int(count) for count in said["after"]],
        both=[int(count) for count in said["both"]],
        after_threads=int(said["after-threads"][0]),
        other_loop_open=int(said["other-loop-open"][0]),
        after_close=int(said["after-close"][0]),
        closed_error=said.get("then", [""])[0],
    )
