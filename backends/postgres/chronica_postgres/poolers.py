"""Whether a pooler stands between a connection and the server (see :mod:`chronica_core.poolers`).

One round trip: the server's ``pg_backend_pid()`` against the process id the handshake gave.
"""

from __future__ import annotations

from typing import Any

import psycopg

from chronica_core.poolers import BACKEND_PID_SQL, pooler_between

__all__ = ["found_pooler", "found_pooler_async"]


def found_pooler(connection: psycopg.Connection[Any]) -> bool:
    """Whether ``connection`` goes through a pooler. Raises what psycopg raises."""
    row = connection.execute(BACKEND_PID_SQL).fetchone()
    return pooler_between(connection.info.backend_pid, None if row is None else row[0])


async def found_pooler_async(connection: psycopg.AsyncConnection[Any]) -> bool:
    """:func:`found_pooler` on an asyncio connection. Raises what psycopg raises."""
    row = await (await connection.execute(BACKEND_PID_SQL)).fetchone()
    return pooler_between(connection.info.backend_pid, None if row is None else row[0])
