"""Instructions per call of one last-20 read, for ``valgrind --tool=callgrind``.

Run, from the repository's root::

    valgrind --tool=callgrind --dump-before=os_getppid --callgrind-out-file=cg.%p python
        backends/postgres/benchmarks/instructions_per_call.py URL COLUMN CALLS

(one command line).

In a scratch schema it writes 60 acta of the dinner story into one chronicum, makes 50 untimed
reads, calls ``os.getppid()``, makes ``CALLS`` reads, calls ``os.getppid()`` again and drops the
schema. With ``--dump-before=os_getppid`` callgrind writes the counted calls' instructions to a
file of their own (``cg.PID.2``); over ``CALLS`` that is the instructions per call. Without
valgrind it prints the client CPU (``time.process_time``) and wall time per call of the counted
calls, with the load average.

``COLUMN`` is what a read is:

- ``floor``: the harness's floor (``benchmarks/baselines/postgres.py``): a prepared ``SELECT`` of
  the newest 20 messages on a kept autocommit connection, rows as plain tuples;
- ``store``: the store's own window, ``PostgresStore.acta`` (no owner, no rules);
- ``chronicarius``: ``Chronicarius.get_acta(owner, id, last_n=20, actum_kinds=[message])``;
- ``async-floor``, ``async-store``, ``async-chronicarius``: the same on the asyncio flavours
  (``psycopg.AsyncConnection``, ``AsyncPostgresStore``, ``AsyncChronicarius``), in one
  ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import psycopg
from chronica_postgres import AsyncPostgresStore, PostgresStore
from psycopg import sql

from chronica_core import ActaQuery, ActumKind, AsyncChronicarius, Chronicarius
from chronica_core.story import DINNER_STORY

OWNER = "ardian"
WARM = 50
SIZE = 60
LAST_N = 20

_FLOOR_WINDOW = (
    "SELECT seq, id, kind, actor_kind, actor, content, content_bytes, at FROM {acta}"
    " WHERE chronicum_id = %s AND kind = 'message' ORDER BY seq DESC LIMIT 20"
)


def _counted(calls: int, read: Callable[[], object]) -> None:
    for _ in range(WARM):
        read()
    os.getppid()  # callgrind dumps before this call and the next: the counted calls alone
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        read()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    os.getppid()
    _print(calls, wall, cpu)


async def _counted_async(calls: int, read: Callable[[], Awaitable[object]]) -> None:
    for _ in range(WARM):
        await read()
    os.getppid()
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await read()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    os.getppid()
    _print(calls, wall, cpu)


def _print(calls: int, wall: float, cpu: float) -> None:
    wall_us, cpu_us = wall / calls * 1e6, cpu / calls * 1e6
    print(f"{calls} calls: {wall_us:.1f} us wall, {cpu_us:.1f} us CPU a call (load {os.getloadavg()[0]:.2f})")


def _floor(url: str, schema: str, chronicum_id: str, calls: int) -> None:
    window = sql.SQL(_FLOOR_WINDOW).format(acta=sql.Identifier(schema, "acta")).as_bytes(None)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET TIME ZONE 'UTC'")

        def read() -> list[Any]:
            rows = connection.execute(window, (chronicum_id,), prepare=True).fetchall()
            rows.reverse()
            return rows

        _counted(calls, read)


async def _async_floor(url: str, schema: str, chronicum_id: str, calls: int) -> None:
    window = sql.SQL(_FLOOR_WINDOW).format(acta=sql.Identifier(schema, "acta")).as_bytes(None)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        await connection.execute("SET TIME ZONE 'UTC'")

        async def read() -> list[Any]:
            cursor = await connection.execute(window, (chronicum_id,), prepare=True)
            rows = await cursor.fetchall()
            rows.reverse()
            return rows

        await _counted_async(calls, read)


async def _async_store(url: str, schema: str, chronicum_id: str, calls: int, through_rules: bool) -> None:
    store = AsyncPostgresStore(url, schema=schema, max_size=2)
    try:
        if through_rules:
            chronicarius = AsyncChronicarius(store)

            async def read() -> object:
                return await chronicarius.get_acta(
                    OWNER, chronicum_id, last_n=LAST_N, actum_kinds=[ActumKind.MESSAGE]
                )

        else:
            query = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=LAST_N)

            async def read() -> object:
                return await store.acta(chronicum_id, query)

        await _counted_async(calls, read)
    finally:
        await store.close()


def main() -> None:
    """Fill one chronicum, count the reads of ``COLUMN``, drop the scratch schema."""
    url, column, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    schema = f"instructions_{uuid.uuid4().hex[:8]}"
    chronicum_id = f"window-{uuid.uuid4().hex}"
    store = PostgresStore(url, schema=schema, max_size=2)
    try:
        chronicarius = Chronicarius(store)
        story = [DINNER_STORY[index % len(DINNER_STORY)] for index in range(SIZE)]
        chronicarius.record_acta(OWNER, [replace(actum, chronicum_id=chronicum_id) for actum in story])
        window = chronicarius.get_acta(OWNER, chronicum_id, last_n=LAST_N, actum_kinds=[ActumKind.MESSAGE])
        assert len(window) == LAST_N, len(window)
        if column == "floor":
            _floor(url, schema, chronicum_id, calls)
        elif column == "store":
            query = ActaQuery(actum_kinds=(ActumKind.MESSAGE,), last_n=LAST_N)
            _counted(calls, lambda: store.acta(chronicum_id, query))
        elif column == "chronicarius":
            _counted(
                calls,
                lambda: chronicarius.get_acta(
                    OWNER, chronicum_id, last_n=LAST_N, actum_kinds=[ActumKind.MESSAGE]
                ),
            )
        elif column == "async-floor":
            asyncio.run(_async_floor(url, schema, chronicum_id, calls))
        elif column in ("async-store", "async-chronicarius"):
            asyncio.run(_async_store(url, schema, chronicum_id, calls, column == "async-chronicarius"))
        else:
            raise SystemExit(f"unknown column {column!r}")
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        store.close()


if __name__ == "__main__":
    main()
